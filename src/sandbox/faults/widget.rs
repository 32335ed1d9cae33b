//! The seam of the widget (§1): the script at `/widget/<service>-connect.js`, the frame page and
//! the session a widget like real ones loads from the script's origin. The route builds the
//! conforming file ([`Served`]); the fault registered here edits it (its text, its headers, its
//! refusal, its delay), each row's code the function named on it, below the rows.

use crate::sandbox::widget::{global_name, SUCCESS};
use axum::http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, SET_COOKIE};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use std::time::Duration;

/// The rows of this seam, handed to `$then` (`seam!` here, `collect!` in `faults/mod.rs`).
macro_rules! widget {
    ($then:ident $($args:tt)*) => { $then! { $($args)*
    mutants {
        #[seed]
        WidgetMissing = "widget-missing", "§1", ["widget.served"],
            "the widget script answers 404" => missing;
        WidgetTextPlain = "widget-text-plain", "§1", ["widget.served"],
            "the widget script is served as text/plain" => text_plain;
        #[seed]
        WidgetNeedsKey = "widget-needs-key", "§5", ["widget.served"],
            "the widget script answers 401 unless the request carries an API key, which no frontend holds" => needs_key;
        #[seed]
        WidgetCorpSameOrigin = "widget-corp-same-origin", "§1", ["widget.loads-cross-origin"],
            "the widget script is served with Cross-Origin-Resource-Policy: same-origin, so no client's page can load it" => corp_same_origin;
        WidgetSyntaxError = "widget-syntax-error", "§1", ["widget.script-runs", "widget.global-open"],
            "the widget script has a syntax error" => syntax_error;
        WidgetNoGlobal = "widget-no-global", "§1", ["widget.global-open"],
            "the widget script runs but defines no global" => no_global;
        WidgetOpenThrows = "widget-open-throws", "§1", ["widget.open-accepts-token"],
            "the widget's open always throws" => open_throws;
        WidgetLateOpen = "widget-late-open", "§1", ["widget.global-open"],
            "the widget script defines its global only a minute after it runs" => late_open;
        WidgetEmbedsKey = "widget-embeds-key", "§5", ["widget.no-api-key"],
            "the widget script carries a client's API key" => embeds_key;
        #[seed]
        WidgetKeyHex = "widget-key-hex", "§5", ["widget.no-key-derivative"],
            "the widget script carries a client's API key, hex-encoded" => key_hex;
        #[seed]
        KeyInSuccessMetadata = "key-in-success-metadata", "§5", ["widget.frontend-no-key"],
            "the onSuccess metadata carries a client's API key" => key_in_success_metadata;
        #[seed]
        KeyInWidgetFrame = "key-in-widget-frame", "§5", ["widget.frontend-no-key"],
            "the frame page the widget opens carries a client's API key" => key_in_frame;
        #[seed]
        KeyInWidgetCookie = "key-in-widget-cookie", "§5", ["widget.frontend-no-key"],
            "the frame page the widget opens sets a cookie holding a client's API key" => key_in_cookie;
        #[seed]
        KeyInWidgetSession = "key-in-widget-session", "§5", ["widget.frontend-no-key"],
            "the session the widget fetches carries a client's API key, hex-encoded" => key_in_session;
        #[seed]
        KeyInLateSession = "key-in-late-session", "§5", ["widget.frontend-no-key"],
            "the widget asks for its session 1.4 s after `open`, answered 0.6 s later with a client's API key, hex-encoded" => key_in_late_session;
        WidgetNoCors = "widget-no-cors", "§1", ["widget.opens-cross-origin"],
            "the widget fetches its session from the script's origin, answered with no Access-Control-Allow-Origin, so it fails in every client's page" => no_cors;
        SuccessWithoutMetadata = "success-without-metadata", "§1", ["widget.open-accepts-token"],
            "the widget calls onSuccess with no argument, keeping the metadata on its global" => success_without_metadata;
        WidgetRelativeUrl = "widget-relative-url", "§1", ["widget.opens-cross-origin"],
            "the widget fetches its session from a relative URL, which a client's page resolves against its own origin" => relative_url;
    }
    variants {
        WidgetOtherGlobal = "widget-other-global", "§1", [],
            "the widget's global is named `ConnectWidget`" => other_global;
        WidgetPositional = "widget-positional", "§1", [],
            "the widget's open takes (token, connectionId, onSuccess), and throws given one object" => positional;
        WidgetPromise = "widget-promise", "§1", [],
            "the widget's open returns a promise" => promise;
        WidgetFrame = "widget-frame", "§1", [],
            "the widget's open adds a frame page and fetches a session, then calls onSuccess with the session" => frame;
        WidgetPolls = "widget-polls", "§1", [],
            "the widget asks for its session every 300 ms after onSuccess, for as long as the page lives" => polls;
    }
    } };
}

widget!(seam WIDGET: WidgetFault;);

/// Which file of the widget is served.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::sandbox) enum WidgetFile {
    /// The script (§1 step 2).
    Script,
    /// The frame page a widget opens (`widget::FRAME_FILE`).
    Frame,
    /// The session it fetches (`widget::SESSION_FILE`), JSON.
    Session,
}

/// A file of the widget as the route serves it, conforming until a fault edits it.
pub(in crate::sandbox) struct Served<'a> {
    pub file: WidgetFile,
    /// `<service>`, whose global the script defines.
    pub service: &'a str,
    pub media: &'static str,
    pub body: String,
    /// Headers beside `Content-Type` (the session's CORS header).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Refused instead (401 or 404, with the sandbox's error body).
    pub refusal: Option<StatusCode>,
    /// How long the answer waits before it is sent.
    pub delay: Duration,
    /// A client's API key, looked up when a fault asks.
    pub key: &'a dyn Fn() -> String,
    /// Whether the request carries a known API key (no frontend does).
    pub holds_key: &'a dyn Fn() -> bool,
}

/// The seam's interface: an edit of the file served.
pub(in crate::sandbox) type WidgetFault = fn(&mut Served<'_>);

/// The line that builds the global's object, as the template has it.
const API: &str = r#"var api = { open: open, version: "1" };"#;

/// The script's line that sets the global.
fn global(s: &Served<'_>) -> String {
    format!("root[\"{}\"] = api;", global_name(s.service))
}

/// `text` replaced by `with` in the script (other files pass).
fn in_script(s: &mut Served<'_>, text: &str, with: &str) {
    if s.file == WidgetFile::Script {
        s.body = s.body.replace(text, with);
    }
}

fn hex(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn missing(s: &mut Served<'_>) {
    if s.file == WidgetFile::Script {
        s.refusal = Some(StatusCode::NOT_FOUND);
    }
}

fn text_plain(s: &mut Served<'_>) {
    if s.file == WidgetFile::Script {
        s.media = "text/plain";
    }
}

/// `widget-needs-key`: served only to a caller holding an API key, which no frontend does.
fn needs_key(s: &mut Served<'_>) {
    if !(s.holds_key)() {
        s.refusal = Some(StatusCode::UNAUTHORIZED);
    }
}

/// `widget-corp-same-origin`: no page of another origin (every client's frontend) may load it.
fn corp_same_origin(s: &mut Served<'_>) {
    if s.file == WidgetFile::Script {
        s.headers
            .push((HeaderName::from_static("cross-origin-resource-policy"), HeaderValue::from_static("same-origin")));
    }
}

fn syntax_error(s: &mut Served<'_>) {
    if s.file == WidgetFile::Script {
        s.body.push_str("\n});(\n");
    }
}

fn no_global(s: &mut Served<'_>) {
    let global = global(s);
    in_script(s, &global, "");
}

fn open_throws(s: &mut Served<'_>) {
    in_script(s, API, r#"var api = { open: function () { throw new Error("the widget is unavailable"); } };"#);
}

fn late_open(s: &mut Served<'_>) {
    let global = global(s);
    in_script(s, &global, &format!("setTimeout(function () {{ {global} }}, 60000);"));
}

fn embeds_key(s: &mut Served<'_>) {
    if s.file == WidgetFile::Script {
        s.body = format!("var BANKCONF_API_KEY = \"{}\";\n{}", (s.key)(), s.body);
    }
}

fn key_hex(s: &mut Served<'_>) {
    if s.file == WidgetFile::Script {
        s.body = format!("var session = \"{}\";\n{}", hex(&(s.key)()), s.body);
    }
}

/// `key-in-success-metadata`: built at run time, so that the script's text carries no piece
/// of the key.
fn key_in_success_metadata(s: &mut Served<'_>) {
    let codes: Vec<String> = (s.key)().bytes().map(|b| b.to_string()).collect();
    let leak = format!("metadata.session = String.fromCharCode({}); {SUCCESS}", codes.join(","));
    in_script(s, SUCCESS, &leak);
}

/// `widget-frame` (legal), and the base of the faults of its frame and session: a widget as real
/// ones are, whose `open` adds a frame page and fetches a session from the script's own origin,
/// then calls `onSuccess` with the session.
fn frame(s: &mut Served<'_>) {
    in_script(s, SUCCESS, FRAME_AND_SESSION);
}

const FRAME_AND_SESSION: &str = r#"var frame = document.createElement("iframe");
    frame.src = origin + "/widget/frame.html?connectionId=" + encodeURIComponent(connectionId);
    (document.body || document.documentElement).appendChild(frame);
    fetch(origin + "/widget/session?connectionId=" + encodeURIComponent(connectionId))
      .then(function (r) { return r.json(); })
      .then(function (session) { options.onSuccess(session); }, function () {});"#;

fn key_in_frame(s: &mut Served<'_>) {
    frame(s);
    if s.file == WidgetFile::Frame {
        let leak = format!("<body><script>var config = {{ apiKey: \"{}\" }};</script>", (s.key)());
        s.body = s.body.replace("<body>", &leak);
    }
}

fn key_in_cookie(s: &mut Served<'_>) {
    frame(s);
    if s.file == WidgetFile::Frame {
        if let Ok(cookie) = format!("bank_session={}; Path=/; HttpOnly", (s.key)()).parse() {
            s.headers.push((SET_COOKIE, cookie));
        }
    }
}

/// The session, with the client's key hex-encoded in its `state`.
fn session_with_key(s: &mut Served<'_>) {
    if s.file == WidgetFile::Session {
        let mut session: serde_json::Value = serde_json::from_str(&s.body).unwrap_or_default();
        session["state"] = hex(&(s.key)()).into();
        s.body = session.to_string();
    }
}

fn key_in_session(s: &mut Served<'_>) {
    frame(s);
    session_with_key(s);
}

/// `key-in-late-session`: the session asked for 1.4 s after `open` and answered 0.6 s later, as
/// a frame that loads late asks for its own: still loading when a window fixed from `open` ends.
fn key_in_late_session(s: &mut Served<'_>) {
    in_script(s, SUCCESS, LATE_SESSION);
    if s.file == WidgetFile::Session {
        s.delay = Duration::from_millis(600);
    }
    session_with_key(s);
}

const LATE_SESSION: &str = r#"setTimeout(function () {
      fetch(origin + "/widget/session?connectionId=" + encodeURIComponent(connectionId)).then(function () {}, function () {});
    }, 1400);"#;

/// `widget-no-cors`: the session says no origin may read it, so the widget fails in every
/// client's page (another origin).
fn no_cors(s: &mut Served<'_>) {
    frame(s);
    s.headers.retain(|(name, _)| name != ACCESS_CONTROL_ALLOW_ORIGIN);
}

/// `success-without-metadata`: the callback is told "done" and nothing more.
fn success_without_metadata(s: &mut Served<'_>) {
    in_script(s, SUCCESS, "api.lastResult = metadata; options.onSuccess();");
}

/// `widget-relative-url`: the session asked for at `/widget/session`, which works on the
/// service's own origin and asks a client's page's origin everywhere else.
fn relative_url(s: &mut Served<'_>) {
    in_script(s, SUCCESS, &FRAME_AND_SESSION.replace("fetch(origin + \"/widget/session", "fetch(\"/widget/session"));
}

fn other_global(s: &mut Served<'_>) {
    let global = global(s);
    in_script(s, &global, r#"root["ConnectWidget"] = api;"#);
}

fn positional(s: &mut Served<'_>) {
    in_script(
        s,
        API,
        r#"var api = { open: function (token, connectionId, onSuccess) {
    return open({ token: token, connectionId: connectionId, onSuccess: onSuccess });
  } };"#,
    );
}

fn promise(s: &mut Served<'_>) {
    in_script(s, API, r#"var api = { open: function (options) { return Promise.resolve(open(options)); } };"#);
}

/// `widget-polls` (legal): after `onSuccess`, it asks for the session every 300 ms for as long as
/// the page lives, as a widget that watches the connection's status does.
fn polls(s: &mut Served<'_>) {
    in_script(s, SUCCESS, &format!("{SUCCESS}\n    {POLL}"));
}

const POLL: &str = r#"setInterval(function () {
      fetch(origin + "/widget/session?connectionId=" + encodeURIComponent(connectionId)).then(function () {}, function () {});
    }, 300);"#;
