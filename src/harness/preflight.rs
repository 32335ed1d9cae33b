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

use super::config::RunConfig;
use super::http::{Auth, Exchange};
use super::outcome::{ErrorSource, Stop};
use super::session::{FirstDeliveries, Session, Webhooks};
use super::steps::Created;
use crate::spec::Action;
use reqwest::Method;
use serde_json::Value;

/// What a configuration asks that makes no sense before anything runs: target settings without a
/// target, two identical keys.
pub fn validate(config: &RunConfig) -> Result<(), String> {
    if config.base_url.is_none() {
        let target_flags = [
            ("--api-key", config.api_key.is_some()),
            ("--second-api-key", config.second_api_key.is_some()),
            ("--driver", config.driver.is_some()),
            ("--driver-url", config.driver_url.is_some()),
            ("a driver given in code", config.driver_impl.is_some()),
            ("--connection-id", config.connection_id.is_some()),
            ("--service", config.service.is_some()),
            ("--webhook-public-url", config.webhook_public_url.is_some()),
        ];
        let given: Vec<&str> = target_flags.iter().filter(|(_, set)| *set).map(|(flag, _)| *flag).collect();
        if !given.is_empty() {
            return Err(format!(
                "{} given without --base-url (BANKCONF_BASE_URL): these describe a target, and without one the \
                 embedded sandbox would be tested instead",
                given.join(", ")
            ));
        }
    }
    let drivers = [config.driver.is_some(), config.driver_url.is_some(), config.driver_impl.is_some()];
    if drivers.into_iter().filter(|given| *given).count() > 1 {
        return Err("give one driver: --driver (a command), --driver-url (an HTTP endpoint) or one in code".into());
    }
    if let (Some(a), Some(b)) = (&config.api_key, &config.second_api_key) {
        if a == b {
            return Err("--second-api-key is the same key as --api-key: the isolation cases need the key of \
                        another client"
                .into());
        }
    }
    Ok(())
}

/// Checks the keys, the driver and `--connection-id` against the target, and leaves the webhook
/// path to [`listen`]. `Err`: the run must not start (exit 2).
pub async fn check(session: &mut Session) -> Result<(), String> {
    if let Webhooks::Failed(m) = &session.webhooks {
        let config = &session.config;
        let hint = match (&config.driver_impl, &config.driver_url, &config.driver) {
            (Some(_), ..) => "the driver given in code",
            (None, Some(_), _) => "is --driver-url right, and its server up?",
            (None, None, Some(_)) => "is --driver right, and executable?",
            (None, None, None) => "the embedded sandbox's driver",
        };
        return Err(format!("the driver failed on register_webhook ({hint}): {m}"));
    }
    let first = probe_key(session, Auth::Primary, "--api-key").await?;
    let second =
        if session.api.has_second_key() { probe_key(session, Auth::Second, "--second-api-key").await? } else { None };
    // A missing widget ends the widget cases only (see `runner::run_flow`), never the run.
    session.widget_missing = probe_service(session).await.err();
    if let Some(id) = session.config.connection_id.clone() {
        let exchange =
            session.api.get(&["v1", "connections", &id, "accounts"], &[]).await.map_err(|e| e.to_string())?;
        if !exchange.is_success() {
            return Err(format!(
                "--connection-id {id}: {} answered {}; give a CONNECTED connection of the --api-key's client",
                exchange.request, exchange.status
            ));
        }
    }
    // A driver that cannot connect would break the shared connection and every case after
    // it: one diagnosis here, not dozens of errors (exit 2). An id with control characters
    // cannot even be handed to a command, and that is no proof against the driver: the cases judge it.
    let clean = |c: &&Created| !c.connection_id.chars().any(char::is_control);
    if let (Some(_), Some(created)) = (&session.driver, first.as_ref().filter(clean)) {
        match session.drive(Action::Connect, created, None, None).await {
            Err(Stop::Error(ErrorSource::Driver, m)) => {
                return Err(format!("the driver failed on connect (is the driver right?): {m}"))
            }
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
            second: second.map(|s| s.connection_id),
            since,
        });
    }
    Ok(())
}

/// Awaits the preflight connections' first deliveries (run beside the cases): `Ok` with the
/// notes on them, or `Err` with the diagnosis when nothing at all reached the receiver.
pub async fn listen(session: &Session) -> Result<Vec<String>, String> {
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
    session.config.event_wait() * (super::patience::FIRST_WAIT_FACTOR + 1)
}

/// `POST /v1/connections` with one key: refused with 401/403 stops the run; a created
/// connection is returned for the webhook probe.
async fn probe_key(session: &Session, auth: Auth, flag: &str) -> Result<Option<Created>, String> {
    // A broken answer (too large, cut off) is for the cases to judge, not the setup's problem.
    let Ok(exchange) = session.api.send(Method::POST, &["v1", "connections"], &[], auth).await else {
        return Ok(None);
    };
    if matches!(exchange.status, 401 | 403) {
        return Err(format!(
            "the target refuses {flag}: {} answered {}; check the key (and that it belongs to this target)",
            exchange.request, exchange.status
        ));
    }
    if !exchange.is_success() {
        return Ok(None);
    }
    Ok(created(session, &exchange))
}

/// A `--service` given for a target must name its widget script (§1): a widget path that
/// answers non-2xx is one diagnosis naming both causes (a wrong `--service`, or no widget
/// served), which the widget cases end in; the rest of the run is judged. (The embedded sandbox
/// names its own service; a target that leaves the path unanswered is left to the cases.)
async fn probe_service(session: &Session) -> Result<(), String> {
    let (Some(service), Some(_)) = (&session.config.service, &session.config.base_url) else { return Ok(()) };
    let Ok(exchange) = session.api.fetch_asset(&["widget", &format!("{service}-connect.js")]).await else {
        return Ok(());
    };
    if exchange.is_success() {
        return Ok(());
    }
    Err(format!(
        "--service {service:?}: {} answered {}; the widget script is served at /widget/<service>-connect.js (§1): \
         either --service (BANKCONF_SERVICE) is wrong, or the target serves no widget script; the widget cases \
         are not judged, every other case is",
        exchange.request, exchange.status
    ))
}

/// The connection a successful creation names, with its widget token redacted from then on.
fn created(session: &Session, exchange: &Exchange) -> Option<Created> {
    let body: Value = serde_json::from_str(&exchange.body).ok()?;
    let widget_token = body.get("widgetToken").and_then(Value::as_str).map(str::to_string);
    if let Some(token) = &widget_token {
        session.redactor.add_token(token);
    }
    let connection_id = body.get("connectionId").and_then(Value::as_str)?.to_string();
    Some(Created { connection_id, widget_token, body })
}

fn silent_diagnosis(session: &Session) -> String {
    let url = session.receiver.as_ref().map_or("?", |r| r.url());
    // The bound address: `:0` in the configuration says nothing about where to look.
    let listening = session.receiver.as_ref().map_or(session.config.webhook_listen, |r| r.listening());
    format!(
        "no webhook delivery reached the receiver within {:?} of creating (and driving) a connection: the \
         target was given {url} (listening on {}). A target in a container or on another host needs \
         --webhook-public-url with an address it can reach, and --webhook-listen 0.0.0.0:PORT; the event \
         cases are not judged on zero deliveries",
        first_wait(session),
        listening
    )
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
    let wait = session.config.event_wait();
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
