//! The preflight: before any case runs, what the setup can get wrong is checked cheaply, so that
//! a wrong key, a broken driver, a `--connection-id` that is not CONNECTED or a receiver the
//! target cannot reach stops the run with exit 2 and one clear message, instead of dozens of
//! failures blamed on the target.
//!
//! Whether webhooks reach the receiver at all is the one check that waits (for a delivery a
//! queue may hold back): [`listen`] awaits it beside the cases, not before them, and a silence
//! turns the event cases into one diagnosis when they end.
//!
//! Status codes are not specified (§7), so only 401 and 403 are read as "this key is refused";
//! any other answer is left for the cases to judge.

use crate::harness::setup::session::{FirstDeliveries, Session, Webhooks};
use crate::harness::setup::steps::Created;
use crate::harness::transport::answers::Auth;
use crate::harness::transport::http::Exchange;
use crate::harness::vocab::errors::{SetupError, SilentReceiver, WidgetNotServed};
use crate::harness::vocab::outcome::{ErrorSource, Stop};
use crate::spec::Action;
use reqwest::Method;
use serde_json::Value;

/// Checks the keys, the driver and `--connection-id` against the target, and leaves the webhook
/// path to [`listen`]. `Err`: the run must not start (exit 2). The flags alone were checked
/// before the session started ([`RunConfig::validate`](crate::harness::setup::config::RunConfig::validate)).
pub(crate) async fn check(session: &mut Session) -> Result<(), SetupError> {
    // The keys first: a driver that registers with a wrong key fails too, and the key is
    // then the cause to name.
    let (first, second) = probe_keys(session).await?;
    if let Webhooks::Failed(m) = &session.webhooks {
        let hint = session.plan.driver.register_hint();
        return Err(SetupError::DriverRegisterFailed { hint, message: m.clone() });
    }
    // A missing widget ends the widget cases only (see `runner::run_flow`), never the run.
    session.widget_missing = probe_service(session).await.err();
    if let Some(id) = session.plan.connection_id.clone() {
        let exchange = session
            .api
            .get(&["v1", "connections", &id, "accounts"], &[])
            .await
            .map_err(|e| SetupError::ConnectionIdUnanswered { reason: e.to_string() })?;
        if !exchange.is_success() {
            return Err(SetupError::ConnectionIdRefused { id, request: exchange.request, status: exchange.status });
        }
    }
    // A driver that cannot connect would break the shared connection and every case after
    // it: one diagnosis here, not dozens of errors (exit 2). An id with control characters
    // cannot even be handed to a command, and that is no proof against the driver: the cases judge it.
    let clean = |c: &&Created| !c.connection_id.chars().any(char::is_control);
    if let (Some(_), Some(created)) = (&session.driver, first.as_ref().filter(clean)) {
        match session.drive(Action::Connect, created, None, None).await {
            Err(Stop::Error(ErrorSource::Driver, message)) => return Err(SetupError::DriverConnectFailed { message }),
            // Connected: the read-only cases' shared connection, not made a second time.
            Ok(()) => session.connected_early = Some(created.connection_id.clone()),
            Err(_) => {}
        }
    }
    if let (Webhooks::Registered, Some(created), Some(receiver)) = (&session.webhooks, &first, &session.receiver) {
        let since = std::time::Instant::now();
        // Until some delivery arrives, every wait lasts as long as this first one may.
        receiver.patience.expect_first(since + first_wait(session));
        session.first_deliveries = Some(FirstDeliveries {
            connection_id: created.connection_id.clone(),
            second: second.as_ref().map(|s| s.connection_id.clone()),
            since,
        });
    }
    session.second_early = second.map(|s| (s.connection_id, s.widget_token));
    Ok(())
}

/// Awaits the preflight connections' first deliveries (run beside the cases): `Ok` with the
/// notes on them, or `Err` with the diagnosis when nothing at all reached the receiver.
pub(crate) async fn listen(session: &Session) -> Result<Vec<String>, SilentReceiver> {
    let (Some(first), Some(receiver)) = (&session.first_deliveries, &session.receiver) else { return Ok(Vec::new()) };
    let what = format!("the first webhook delivery, for {}", first.connection_id);
    let left = (first.since + first_wait(session)).saturating_duration_since(std::time::Instant::now());
    receiver.wait_until(&what, &first.connection_id, left, |ds| !ds.is_empty()).await;
    // A delivery the receiver refused (too large) reached it all the same.
    if receiver.arrived_so_far() + receiver.refused() == 0 {
        return Err(silent_diagnosis(session));
    }
    let mut notes = vec![format!(
        "preflight: webhook deliveries reach the receiver (the first after {:.1}s)",
        first.since.elapsed().as_secs_f64()
    )];
    if let Some(second) = &first.second {
        notes.extend(same_client(session, &first.connection_id, second).await);
    }
    Ok(notes)
}

/// How long the run's first delivery is awaited: it may be late (a queue), and nothing is known
/// yet of the target's latency; it teaches the later waits that latency (see `patience`).
fn first_wait(session: &Session) -> std::time::Duration {
    session.plan.event_wait() * (crate::harness::transport::patience::FIRST_WAIT_FACTOR + 1)
}

/// A key's `POST /v1/connections` answered 401 or 403: the request, its status and the start
/// of its body.
struct Refusal {
    request: String,
    status: u16,
    body: String,
}

/// What the other key's probe says of a refused key ([`SetupError::KeyRefused`]'s `other`).
fn other_key(other: Option<&Result<Option<Created>, Refusal>>) -> &'static str {
    match other {
        None => "",
        Some(Err(_)) => "; the run's other key is refused too",
        Some(Ok(Some(_))) => {
            "; the run's other key is accepted, so the target takes keys: this one is most likely wrong"
        }
        Some(Ok(None)) => "",
    }
}

/// Both keys' probes: a refused key stops the run, naming what the other key got (accepted:
/// the target takes keys; refused too: both are wrong, or the target refuses its own keys).
async fn probe_keys(session: &Session) -> Result<(Option<Created>, Option<Created>), SetupError> {
    let first = probe_key(session, Auth::Primary).await;
    let second = match session.api.has_second_key() {
        true => Some(probe_key(session, Auth::Second).await),
        false => None,
    };
    let refused = |flag: &'static str, r: Refusal, other: &'static str| SetupError::KeyRefused {
        flag,
        request: r.request,
        status: r.status,
        body: r.body,
        other,
    };
    match (first, second) {
        (Err(r), other) => Err(refused("--api-key", r, other_key(other.as_ref()))),
        (Ok(first), Some(Err(r))) => {
            let other = other_key(Some(&Ok(first)));
            Err(refused("--second-api-key", r, other))
        }
        (Ok(first), second) => Ok((first, second.and_then(Result::ok).flatten())),
    }
}

/// `POST /v1/connections` with one key: refused with 401/403 is `Err`; a created connection is
/// returned for the webhook probe.
async fn probe_key(session: &Session, auth: Auth) -> Result<Option<Created>, Refusal> {
    // A broken answer (too large, cut off) is for the cases to judge, not the setup's problem.
    let Ok(exchange) = session.api.send(Method::POST, &["v1", "connections"], &[], auth).await else {
        return Ok(None);
    };
    if matches!(exchange.status, 401 | 403) {
        let body = refusal_body(session, &exchange.body);
        return Err(Refusal { request: exchange.request, status: exchange.status, body });
    }
    if !exchange.is_success() {
        return Ok(None);
    }
    Ok(created(session, &exchange))
}

/// Characters of a refusal's body a setup message quotes.
const REFUSAL_BODY: usize = 200;

/// The start of a refusal's body, for the setup message: redacted before it is cut, hidden
/// characters escaped, on one line; `empty body` when there is none.
fn refusal_body(session: &Session, body: &str) -> String {
    let one_line: String = body.trim().chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }).collect();
    match one_line.is_empty() {
        true => "empty body".to_string(),
        false => crate::harness::vocab::sanitize::visible(&session.redactor.cut(&one_line, REFUSAL_BODY)),
    }
}

/// A `--service` given for a target must name its widget script (§1): a widget path that
/// answers non-2xx is one diagnosis naming both causes (a wrong `--service`, or no widget
/// served), which the widget cases end in; the rest of the run is judged. (The embedded sandbox
/// names its own service; a target that leaves the path unanswered is left to the cases.)
async fn probe_service(session: &Session) -> Result<(), WidgetNotServed> {
    let (Some(service), false) = (&session.plan.service, session.plan.embedded()) else { return Ok(()) };
    let Ok(exchange) = session.api.fetch_asset(&["widget", &format!("{service}-connect.js")]).await else {
        return Ok(());
    };
    // A script refused to a caller without a key is there (and `widget.served` fails it: the
    // frontend that loads it holds no key, §5.2), not a wrong --service.
    if exchange.is_success() || matches!(exchange.status, 401 | 403) {
        return Ok(());
    }
    Err(WidgetNotServed { service: service.clone(), request: exchange.request, status: exchange.status })
}

/// The connection a successful creation names, with its widget token redacted from then on.
fn created(session: &Session, exchange: &Exchange) -> Option<Created> {
    let body: Value = serde_json::from_str(&exchange.body).ok()?;
    let widget_token = body.get("widgetToken").and_then(Value::as_str).map(str::to_string);
    if let Some(token) = &widget_token {
        session.redactor.add_token(token);
    }
    let connection_id = body.get("connectionId").and_then(Value::as_str)?.to_string();
    Some(Created { connection_id, widget_token, body, answer: None })
}

fn silent_diagnosis(session: &Session) -> SilentReceiver {
    SilentReceiver {
        waited: first_wait(session),
        strays: session.receiver.as_ref().map_or(0, |r| r.strays()),
        url: session.receiver.as_ref().map_or("?", |r| r.url()).to_string(),
        // The bound address: `:0` in the configuration says nothing about where to look.
        listening: session.receiver.as_ref().map_or(session.plan.webhook_listen, |r| r.listening()),
    }
}

/// The two keys should act for two clients: their connections' events name two `clientId`s.
/// One `clientId` for both is only a note: a misconfigured key and a target that stamps one
/// `clientId` on two clients (`events.distinct-client-ids` judges that) look alike from here.
async fn same_client(session: &Session, first: &str, second: &str) -> Option<String> {
    let receiver = session.receiver.as_ref()?;
    let client = |id: &str| {
        receiver
            .for_connection(id)
            .iter()
            .find_map(|d| d.body.pointer("/data/clientId").and_then(Value::as_str).map(str::to_string))
    };
    let wait = session.plan.event_wait();
    let what = format!("a first delivery for the second client's {second}");
    receiver.wait_until(&what, second, wait, |ds| !ds.is_empty()).await;
    match (client(first), client(second)) {
        (Some(a), Some(b)) if a == b => Some(format!(
            "preflight: the connections of both keys are announced with clientId {a}: either \
             --second-api-key acts for the same client as --api-key (give another client's key), or \
             the target stamps one clientId on two clients (§6.2)"
        )),
        (Some(_), Some(_)) => Some("preflight: the two keys act for two clients".into()),
        _ => None,
    }
}
