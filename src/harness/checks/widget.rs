//! §1 The widget script served at `/widget/<service>-connect.js`.

use crate::harness::fixtures::context::RunContext;
use crate::harness::transport::browser;
use crate::harness::transport::elsewhere::Opened;
use crate::harness::transport::http::Exchange;
use crate::harness::transport::probe::{Probe, Received};
use crate::harness::vocab::kind::WidgetKind as W;
use crate::harness::vocab::outcome::{ensure_found, Failure, IgnoreCause, Problem, Problems, Stop};
use crate::harness::vocab::redact;
use std::sync::Arc;

super::cases! {
    SERVED = "widget.served" => served;
    DEFINES_OPEN = "widget.defines-open" => defines_open;
    NO_API_KEY = "widget.no-api-key" => no_api_key;
    TOKEN_NO_KEY = "widget.token-no-key" => token_no_key;
    NO_KEY_DERIVATIVE = "widget.no-key-derivative" => no_key_derivative;
    SCRIPT_RUNS = "widget.script-runs" => script_runs;
    GLOBAL_OPEN = "widget.global-open" => global_open;
    OPEN_ACCEPTS_TOKEN = "widget.open-accepts-token" => open_accepts_token;
    FRONTEND_NO_KEY = "widget.frontend-no-key" => frontend_no_key;
    LOADS_CROSS_ORIGIN = "widget.loads-cross-origin" => loads_cross_origin;
    OPENS_CROSS_ORIGIN = "widget.opens-cross-origin" => opens_cross_origin;
}

/// The JavaScript MIME type essences browsers accept (WHATWG MIME Sniffing, RFC 9239).
const JS_TYPES: [&str; 16] = [
    "application/ecmascript",
    "application/javascript",
    "application/x-ecmascript",
    "application/x-javascript",
    "text/ecmascript",
    "text/javascript",
    "text/javascript1.0",
    "text/javascript1.1",
    "text/javascript1.2",
    "text/javascript1.3",
    "text/javascript1.4",
    "text/javascript1.5",
    "text/jscript",
    "text/livescript",
    "text/x-ecmascript",
    "text/x-javascript",
];

async fn fetch(ctx: &RunContext) -> Result<Exchange, Stop> {
    let service = ctx.service.as_deref().ok_or_else(|| Stop::ignore("needs the service name (--service)"))?;
    // A browser loads the script: no API key (§5.2 keeps keys out of frontends), `Accept: */*`,
    // redirects followed.
    let exchange = ctx.api.fetch_asset(&["widget", &format!("{service}-connect.js")]).await?;
    let why = causes(service, exchange.status);
    exchange.ensure_found(W::NotServed, exchange.is_success(), || {
        format!("expected 2xx, got {}{why}", exchange.summary())
    })?;
    Ok(exchange)
}

/// What a refusal or an absence of the widget script may mean: a wrong `--service` (the path
/// asked for is not the script's) and the target's fault look alike from outside, so both are
/// named (a target that answers 401 to any path it does not know refuses a mistyped name too).
/// Empty for any other status.
fn causes(service: &str, status: u16) -> String {
    let path = format!("/widget/{service}-connect.js");
    match status {
        // §1 item 2, §5.2: the client's frontend loads it, and holds no key.
        401 | 403 => format!(
            ": either --service {service:?} (BANKCONF_SERVICE) is wrong and {path} is not the widget script (a \
             target may refuse any path it does not know), or the widget script is behind authentication, which \
             it must not be: the client's frontend loads the script with no API key (§1 item 2, §5.2)"
        ),
        404 | 410 => format!(
            ": either --service {service:?} (BANKCONF_SERVICE) is wrong and {path} is not the widget script, or \
             the target serves no widget script at /widget/<service>-connect.js (§1)"
        ),
        _ => String::new(),
    }
}

async fn served(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    let media =
        exchange.content_type.as_deref().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if JS_TYPES.contains(&media.as_str()) {
        return Ok(());
    }
    let given = format!("{:?}", exchange.content_type.as_deref().unwrap_or("none"));
    let detail = format!("expected a JavaScript content type, got {given}");
    Err(exchange.fails(Problem::found(W::MediaType, [], detail).expecting("a JavaScript content type", given)))
}

/// Advisory fallback for runs without a browser: §1 says the global's `open` takes the token,
/// and without running the script we can only look for the name. With a browser,
/// `widget.global-open` judges this for real and this note repeats its verdict.
async fn defines_open(ctx: Arc<RunContext>) -> Result<(), Stop> {
    if !ctx.plan.skip_browser && browser::find(ctx.plan.browser.as_deref()).is_some() {
        return global_open(ctx).await;
    }
    let exchange = fetch(&ctx).await?;
    exchange.ensure_found(W::NoOpen, exchange.body.contains("open"), || {
        format!("the script never mentions `open` ({})", browser::INSTALL_HINT)
    })
}

/// What the browser saw running the script, once per run: a fresh connection's widget token
/// and id (§4.1) are handed to `open`; the API key never reaches the page.
async fn probe(ctx: &RunContext) -> Result<Probe, Stop> {
    ctx.widget_probe
        .get_or_init(|| async {
            let service = ctx.service.as_deref().ok_or_else(|| Stop::ignore("needs the service name (--service)"))?;
            let session = ctx.browser.get(ctx.plan.browser.as_deref()).await?;
            let src = ctx.api.url(&["widget", &format!("{service}-connect.js")], &[]).to_string();
            let created = ctx.create_connection().await?;
            let credentials = created.widget_token.as_deref().map(|t| (t, created.connection_id.as_str()));
            session.probe(&src, credentials, &ctx.browser.headers).await
        })
        .await
        .clone()
}

/// §1 item 2, §5.2, §5.3: the client's frontend is a page of its own origin, holding no key,
/// that loads the script with a plain `<script src>`. Such a page (another origin than the
/// service's, no credentials) must be able to load it: judged only once the page of the
/// script's own origin loaded it (`widget.script-runs`), so that a failed load is the origin's.
async fn loads_cross_origin(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let probe = probe(&ctx).await?;
    if probe.load_failed {
        return Err(Stop::ignore("the script did not load even from its own origin (judged by widget.script-runs)"));
    }
    let session = ctx.browser.get(ctx.plan.browser.as_deref()).await?;
    let url = script_url(&ctx);
    let loaded = session.loads_elsewhere(&url, &ctx.browser.headers).await?;
    ensure_found(W::LoadsCrossOrigin, loaded, || {
        format!(
            "{url}: a page of another origin (a client's frontend, holding no key) could not load the script, which \
             its own origin loads (a Cross-Origin-Resource-Policy or similar refusal)"
        )
    })
}

/// §1 item 2: the client's frontend, a page of its own origin, opens the widget, and the user
/// authenticates there; a widget whose own requests the browser refuses for CORS in such a page
/// cannot work for any client. Judged only once `open` was called with success from the
/// script's own origin (`widget.open-accepts-token`), with a fresh connection's token (§4.1), so
/// that every request is the widget's happy path. With `--header` values, a refusal may be the
/// gateway's (a CORS preflight never carries them): not judged, naming both causes.
async fn opens_cross_origin(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let url = script_url(&ctx);
    // Beside the probe, not after it: a widget that keeps asking holds each page over 10 s.
    let elsewhere = async {
        let session = ctx.browser.get(ctx.plan.browser.as_deref()).await?;
        let created = ctx.create_connection().await?;
        let Some(token) = created.widget_token.as_deref() else {
            let id = &created.connection_id;
            return Err(Stop::ignore(format!("the creation of {id} gave no widgetToken (judged by create.*)")));
        };
        session.opens_elsewhere(&url, (token, &created.connection_id), &ctx.browser.headers).await
    };
    let (probe, opened) = tokio::join!(probe(&ctx), elsewhere);
    if probe?.call.as_ref().is_none_or(|c| c.accepted.is_none()) {
        return Err(Stop::ignore(
            "`open` was not called with success from the script's own origin (see widget.open-accepts-token)",
        ));
    }
    ctx.note(
        "bounds",
        "widget.opens-cross-origin looked for the global up to 10 s after the load and watched the widget's requests up \
         to 1.5 s after `open` (0.2 s once onSuccess came), then until they settled as widget.frontend-no-key's do: a \
         refusal after that was not seen"
            .to_string(),
    );
    refused_for_cors(&url, &opened?, !ctx.browser.headers.pairs.is_empty())
}

/// [`opens_cross_origin`]'s verdict on what the page of another origin saw: a refusal for CORS
/// fails, whether or not `open` was reached (the global may wait on a refused request); with
/// `headers` (`--header` values) it is not judged, naming both causes. Else, where `open` was not
/// called or the bounds cut what came after it, not judged, saying so.
fn refused_for_cors(url: &str, opened: &Opened, headers: bool) -> Result<(), Stop> {
    let blocked: Vec<String> = opened.blocked.iter().map(|b| printable(b)).collect();
    let (n, list) = (blocked.len(), blocked.join("; "));
    if n > 0 && headers {
        return Err(Stop::ignore(format!(
            "the browser refused {n} of the widget's requests for CORS in a page of another origin: {list}; with \
             --header values, either the target sends no CORS answer or the gateway refused a preflight (it never \
             carries them)"
        )));
    }
    if n > 0 {
        let reached = if opened.called { " and called `open`" } else { "" };
        return Err(Stop::found(
            W::OpensCrossOrigin,
            format!(
            "{url}: in a page of another origin (a client's frontend) that loaded the script{reached}, the browser \
             refused {n} of the widget's requests for CORS, so it cannot work in any client's page: {list}"
        ),
        ));
    }
    if !opened.asked_page_origin.is_empty() {
        let asked: Vec<String> = opened.asked_page_origin.iter().map(|a| printable(a)).collect();
        return Err(Stop::found(
            W::OpensCrossOrigin,
            format!(
            "{url}: in a page of another origin (a client's frontend, which serves its page only), the widget asked \
             the page's own origin for {}: a URL resolved against the client's page, not the service (§1 item 2: the \
             widget is hosted by the service), so it works only on the service's own origin",
            asked.join("; ")
        ),
        ));
    }
    if !opened.called {
        let what = if opened.found { "could not call `open`" } else { "found no global with `open` within 10 s" };
        return Err(Stop::ignore(format!(
            "{url}: a page of another origin {what}, and no request was refused for CORS (widget.loads-cross-origin \
             judges the load)"
        )));
    }
    if !opened.cut.is_empty() {
        let cut: Vec<String> = opened.cut.iter().map(|c| printable(c)).collect();
        return Err(Stop::Ignore(
            IgnoreCause::Bound,
            format!(
                "no request of the widget was refused for CORS within the bounds, but they left out: {}",
                cut.join("; ")
            ),
        ));
    }
    Ok(())
}

/// The script's URL, for messages.
fn script_url(ctx: &RunContext) -> String {
    ctx.api.url(&["widget", &format!("{}-connect.js", ctx.service.as_deref().unwrap_or(""))], &[]).to_string()
}

/// §1 step 2: the frontend loads the script; it must load and run without an uncaught error.
async fn script_runs(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let probe = probe(&ctx).await?;
    let url = script_url(&ctx);
    if probe.load_failed {
        return Err(Stop::found(
            W::ScriptRuns,
            format!("{url}: the browser could not load the script{}", both_answers(&ctx, &probe).await),
        ));
    }
    ensure_found(W::ScriptRuns, probe.errors.is_empty(), || {
        format!("{url}: running the script threw in the browser: {}", printable(&probe.errors.join(" | ")))
    })
}

/// What the browser's request for the script got, and what bankconf's own got (both send the
/// `--header` values): where they differ, the difference is the browser's request (its
/// `User-Agent`, `Sec-Fetch-*`, `Referer`), and both answers are named.
async fn both_answers(ctx: &RunContext, probe: &Probe) -> String {
    let browser = probe.script_status.map_or("no answer".to_string(), |s| format!("status {s}"));
    let own =
        match ctx.api.fetch_asset(&["widget", &format!("{}-connect.js", ctx.service.as_deref().unwrap_or(""))]).await {
            Ok(exchange) => format!("status {}", exchange.status),
            Err(_) => "no answer".to_string(),
        };
    let headers = if ctx.browser.headers.pairs.is_empty() { "" } else { ", both with the --header values" };
    // A refused or missing script: the browser's answer names the causes it may have.
    let why = probe.script_status.map(|s| causes(ctx.service.as_deref().unwrap_or(""), s)).unwrap_or_default();
    format!(" (the browser's request got {browser}; bankconf's own request got {own}{headers}){why}")
}

/// §1 step 2: the script exposes a global object with an `open` function (any name).
async fn global_open(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let probe = probe(&ctx).await?;
    let url = script_url(&ctx);
    if probe.global.is_some() {
        return Ok(());
    }
    if probe.load_failed || !probe.errors.is_empty() {
        return Err(Stop::found(
            W::GlobalOpen,
            format!(
                "{url}: no global with an `open` function: the script did not run through (see widget.script-runs)"
            ),
        ));
    }
    if probe.added.is_empty() {
        return Err(Stop::found(
            W::GlobalOpen,
            format!("{url}: after the script ran (and 10 s more), no new global exists"),
        ));
    }
    Err(Stop::found(
        W::GlobalOpen,
        format!(
            "{url}: the script added globals, none with an `open` function: {}",
            printable(&probe.open_types.join(", "))
        ),
    ))
}

/// §1 step 2: `open` takes the widget token, the connection id and `onSuccess`. The spec
/// shows no calling form, so either `open({token, connectionId, onSuccess})` or
/// `open(token, connectionId, onSuccess)` not throwing passes. What `open` shows, what
/// `onSuccess` receives and when are not judged (§1 does not say).
async fn open_accepts_token(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let probe = probe(&ctx).await?;
    let url = script_url(&ctx);
    let Some(global) = &probe.global else {
        return Err(Stop::ignore("no global with an `open` function to call (see widget.global-open)"));
    };
    let Some(call) = &probe.call else {
        return Err(Stop::ignore("POST /v1/connections gave no widget token to call `open` with"));
    };
    ensure_found(W::OpenAcceptsToken, call.accepted.is_some(), || {
        format!(
            "{url}: {}.open threw with a fresh widget token and connection id in both forms: {}",
            printable(global),
            printable(&call.thrown.join(" | "))
        )
    })?;
    // §1 item 2: the callback receives a metadata argument (its shape is open): a call with no
    // argument at all fails. A widget that calls it only once a person signs in is not judged
    // here (the case's title says "where it calls it").
    let bare = probe.successes.iter().filter(|args| args.trim() == "[]").count();
    ensure_found(W::OpenAcceptsToken, bare == 0, || {
        format!(
            "{url}: the widget called onSuccess with no argument ({bare} of {} calls), where §1 item 2 says the \
             callback receives a metadata argument",
            probe.successes.len()
        )
    })
}

/// Page text for messages, as [`Exchange::snippet`] cleans a body: no control characters (a
/// hostile script must not drive the terminal), cut (the run redacts the message, and what the
/// cut left of a secret).
fn printable(text: &str) -> String {
    let cleaned: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    redact::shorten(&cleaned, 300)
}

/// §5.2: the key stays on the client's backend and never reaches a frontend, and the widget
/// script is frontend code. The message never shows the key.
async fn no_api_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    let mut keys = ctx.api.keys();
    exchange.ensure_found(W::KeyInScript, !keys.any(|k| exchange.body.contains(k)), || {
        "the script contains an API key of this run (§5.2: keys never reach a frontend)".to_string()
    })
}

/// Which key of this run `text` reveals ([`redact::reveals`]: the key or a piece of 8 or more
/// characters of it beyond its public prefix, plain or encoded), by its place: never the key.
fn revealed_key(ctx: &RunContext, text: &str) -> Option<&'static str> {
    let mut keys = ctx.api.keys();
    let first = keys.next().filter(|k| redact::reveals(text, k)).map(|_| "the API key");
    first.or_else(|| keys.next().filter(|k| redact::reveals(text, k)).map(|_| "the second client's API key"))
}

/// §5.2 keeps the key on the backend and §5.3 opens the widget with the widget token
/// *instead*: what creation answers (the token and the connection id go to the frontend, §1
/// step 2) carries nothing of the key, whole or in part, plain or encoded.
async fn token_no_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.created().await?;
    let mut problems = Problems::default();
    let mut found = false;
    for field in ["widgetToken", "connectionId"] {
        let value = created.body.get(field).map(ToString::to_string).unwrap_or_default();
        if let Some(key) = revealed_key(&ctx, &value) {
            found = true;
            let detail = format!(
                "POST /v1/connections: `{field}` carries {key} or a piece of it (plain or encoded); the frontend gets it (§5.2, §5.3)"
            );
            problems.add_at(created.answer, Problem::found(W::KeyInToken, [], detail));
        }
    }
    if !found {
        if let Some(key) = revealed_key(&ctx, &created.body.to_string()) {
            let detail = format!("POST /v1/connections: the answer carries {key} or a piece of it (plain or encoded)");
            problems.add_at(created.answer, Problem::found(W::KeyInToken, [], detail));
        }
    }
    problems.finish()
}

/// §5.2: the widget script is frontend code, so it carries nothing of a key: no piece of one,
/// plain or encoded. The whole key in plain text is `widget.no-api-key`'s failure, not repeated.
async fn no_key_derivative(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let exchange = fetch(&ctx).await?;
    let body = ctx.api.keys().fold(exchange.body.clone(), |body, key| body.replace(key, ""));
    exchange.ensure_found(W::KeyInScript, revealed_key(&ctx, &body).is_none(), || {
        format!(
            "the script carries a piece of {} (plain or encoded; §5.2: keys never reach a frontend)",
            revealed_key(&ctx, &body).unwrap_or("an API key")
        )
    })
}

/// §5.2: a key never reaches a frontend, and everything the widget's page receives is frontend:
/// the pages its frames load, the answers to its `fetch` and XHR calls, the `postMessage`
/// payloads and the `onSuccess` metadata (the probe keeps them bounded, and only to search them
/// here). Whole or a piece, plain or encoded; the messages name where, never what.
async fn frontend_no_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let probe = probe(&ctx).await?;
    if probe.call.as_ref().is_none_or(|c| c.accepted.is_none()) {
        return Err(Stop::ignore(
            "`open` was not called with success (see widget.open-accepts-token): nothing to judge",
        ));
    }
    // Bounds no run can say it reached or not (each depends on timing): said in every report.
    ctx.note(
        "bounds",
        "widget.frontend-no-key looked at what the widget's page received up to 1.5 s after `open` (0.2 s once \
         onSuccess came), then until its requests settled (none in flight for 0.5 s; a page that keeps asking, \
         none in flight at 10 s more or within 2 s after; still loading then: not judged) and at the browser's events \
         within 1024 unread per listener (more are dropped): what came later or past them was not looked at"
            .to_string(),
    );
    no_key_received(&probe.received(), &probe.cut, |text| revealed_key(&ctx, text))
}

/// §5.2 over what the widget's page `received`: a key found fails; where the probe's bounds
/// left something out (`cut`) and no key was found, not judged (a key there was never looked
/// at), saying what was cut.
fn no_key_received(
    received: &[Received],
    cut: &[String],
    revealed: impl Fn(&str) -> Option<&'static str>,
) -> Result<(), Stop> {
    let mut problems = Problems::default();
    for (seq, received) in (0u64..).zip(received) {
        if let Some(key) = revealed(&received.text) {
            problems.add(
                Failure::from(Problem::found(
                    W::KeyInFrontend,
                    [],
                    format!(
                        "{}: the widget's page received {key} or a piece of it (plain or encoded) (§5.2: keys never \
                         reach a frontend)",
                        printable(&received.what)
                    ),
                ))
                .on_received(seq),
            );
        }
    }
    problems.finish()?;
    if cut.is_empty() {
        return Ok(());
    }
    let cut: Vec<String> = cut.iter().map(|c| printable(c)).collect();
    Err(Stop::Ignore(
        IgnoreCause::Bound,
        format!(
            "no key in the {} items the widget's page received within the probe's bounds, but the bounds left out \
             what a key could be in, never looked at: {}",
            received.len(),
            cut.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 51: a page that was still loading when the bounds ended leaves the case unjudged,
    /// saying so; a refusal for CORS fails even where `open` was never reached, and is not
    /// judged with `--header` values (a preflight never carries them).
    #[test]
    fn a_refused_or_missing_script_names_both_causes() {
        for status in [401, 403] {
            let why = causes("acme", status);
            assert!(why.contains("--service \"acme\"") && why.contains("/widget/acme-connect.js"), "{why}");
            assert!(why.contains("behind authentication") && why.contains("no API key"), "{why}");
        }
        let why = causes("acme", 404);
        assert!(why.contains("--service \"acme\"") && why.contains("serves no widget script"), "{why}");
        assert_eq!(causes("acme", 500), "");
    }

    #[test]
    fn a_cors_refusal_fails_and_a_cut_page_is_not_judged() {
        let refused = Opened {
            found: false,
            blocked: vec!["http://t/widget/config (MissingAllowOriginHeader)".into()],
            ..Default::default()
        };
        assert!(refused_for_cors("u", &refused, false).is_err_and(|e| e.is_fail()));
        assert!(matches!(refused_for_cors("u", &refused, true), Err(Stop::Ignore(..))));
        let cut = Opened {
            found: true,
            called: true,
            cut: vec!["1 request(s) of the page still loading".into()],
            ..Default::default()
        };
        match refused_for_cors("u", &cut, false) {
            Err(Stop::Ignore(IgnoreCause::Bound, reason)) => assert!(reason.contains("still loading")),
            other => panic!("expected ignored for a bound, got {other:?}"),
        }
        let whole = Opened { found: true, called: true, ..Default::default() };
        assert_eq!(refused_for_cors("u", &whole, false), Ok(()));
        // A request the widget sent to the client's page's own origin (a relative URL) fails too.
        let relative = Opened { asked_page_origin: vec!["POST /widget/session".into()], ..whole };
        match refused_for_cors("u", &relative, true) {
            Err(Stop::Fail(why)) => assert!(why.to_string().contains("POST /widget/session"), "{why:?}"),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    /// Issue 51: a bound of the probe that cut what the page received leaves the case
    /// unjudged, saying what was cut; a key found in what was kept still fails.
    #[test]
    fn what_the_probe_cut_is_said_never_passed() {
        let kept = [Received { what: "GET http://t/session".into(), text: "{}".into() }];
        let key = |text: &str| text.contains("key_").then_some("the API key");
        assert_eq!(no_key_received(&kept, &[], key), Ok(()));
        let cut = ["3 response(s) past the 32 kept".to_string()];
        match no_key_received(&kept, &cut, key) {
            Err(Stop::Ignore(IgnoreCause::Bound, reason)) => assert!(reason.contains("3 response(s) past the 32 kept")),
            other => panic!("expected ignored for a bound, got {other:?}"),
        }
        let leak = [Received { what: "a postMessage payload".into(), text: "key_123".into() }];
        assert!(no_key_received(&leak, &cut, key).is_err_and(|e| e.is_fail()));
    }
}
