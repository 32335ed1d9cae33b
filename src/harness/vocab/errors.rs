//! The harness's errors, one type per thing that fails, each variant one mistake: typed until
//! an edge renders them (a report, stderr, an outcome's message). Their texts are what users
//! read and tests match, so each variant's `Display` is its whole sentence.
//!
//! [`SetupError`] is everything that stops a run before it starts (exit 2); the other types are
//! failures of one step that the run survives or turns into an outcome.

use crate::harness::vocab::redact::Redactor;
use std::net::SocketAddr;
use std::time::Duration;
use thiserror::Error;

/// Why a run could not start: the setup's problem, never the target's (exit 2). The first group
/// needs only the flags (`RunConfig::validate`); the others are found while the session starts,
/// by the preflight against the target, or when a report file is checked. Its `Display` is the
/// whole sentence a person reads.
///
/// ```
/// let runtime = tokio::runtime::Runtime::new().unwrap();
/// let report = runtime.block_on(bankconf::Conformance::new("ftp://example.com").api_key("k").run());
/// assert!(matches!(report.setup_error, Some(bankconf::SetupError::BadBaseUrl { .. })));
/// assert_eq!(report.exit_code(), bankconf::EXIT_NOT_RUN);
/// ```
#[derive(Debug, Error)]
pub enum SetupError {
    /// Flags that describe a target, without `--base-url`: the sandbox would be judged instead.
    #[error(
        "{} given without --base-url (BANKCONF_BASE_URL): these describe a target, and without one the \
         embedded sandbox would be tested instead",
        .flags.join(", ")
    )]
    TargetFlagsWithoutBaseUrl { flags: Vec<&'static str> },
    /// More than one of `--driver`, `--driver-url` and a driver given in code.
    #[error("give one driver: --driver (a command), --driver-url (an HTTP endpoint) or one in code")]
    SeveralDrivers,
    /// `--second-api-key` equal to `--api-key`: isolation would be judged within one client.
    #[error("--second-api-key is the same key as --api-key: the isolation cases need the key of another client")]
    SameKeyTwice,
    /// `--base-url` without a key (or with an empty one).
    #[error("--api-key (BANKCONF_API_KEY) is required with --base-url")]
    MissingApiKey,
    /// The embedded sandbox's own flags, given for a target.
    #[error(
        "--sandbox-mutant, --sandbox-variant and the --sandbox-* conditions apply to the embedded sandbox, not to \
         --base-url"
    )]
    SandboxFlagsWithBaseUrl,
    /// `--base-url` that is no http(s) URL.
    #[error("base URL {url:?}: {problem}")]
    BadBaseUrl {
        url: String,
        #[source]
        problem: UrlProblem,
    },
    /// `--driver-url` that is no http(s) URL with a host.
    #[error("--driver-url must be an http(s) URL, got {url:?}")]
    BadDriverUrl { url: String },
    /// Case ids, prefixes or sections that name no case.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The `--expect` file cannot be read, or is not a valid expectations file.
    #[error(transparent)]
    Expectations(#[from] ExpectError),
    /// A report file (`--report-*`, `--write-expectations`) cannot be written.
    #[error(transparent)]
    ReportUnwritable(#[from] ReportWriteError),
    /// The embedded sandbox did not start.
    #[error("the run could not start: embedded sandbox: {0}")]
    SandboxStart(String),
    /// The HTTP client of the target could not be built.
    #[error("the run could not start: {0}")]
    HttpClient(String),
    /// Nothing answers HTTP at `--base-url`.
    #[error("the run could not start: target unreachable: no answer at {base_url}: {cause}")]
    TargetUnreachable { base_url: String, cause: String },
    /// The HTTP client of `--driver-url` could not be built.
    #[error("the run could not start: --driver-url: {0}")]
    DriverClient(String),
    /// The webhook receiver did not start (its address taken, say).
    #[error("the run could not start: {0}")]
    ReceiverStart(String),
    /// The driver broke on `register_webhook` (not "unsupported", which only ignores the event
    /// cases); `hint` names the driver to look at.
    #[error("preflight: the driver failed on register_webhook ({hint}): {message}")]
    DriverRegisterFailed { hint: &'static str, message: String },
    /// The target answered 401 or 403 to a key's `POST /v1/connections`; `body` is the start of
    /// its body (redacted, escaped), which often says which of the two it was, and `other` what
    /// the run's other key got (empty with one key; the other key accepted says the target
    /// takes keys, so this one is most likely wrong). A wrong key and a target that refuses the keys it
    /// issued look alike from here: both are named. No case can be judged through a key the
    /// target refuses, so the run does not start (exit 2) whichever it is.
    #[error(
        "preflight: the target refuses {flag}: {request} answered {status} ({body}){other}. Either the key is wrong: \
         check the key (and that it belongs to this target: not another environment's, not revoked), or a gateway \
         in front of the target wants a header (--header 'Name: value'); or the target refuses a key it issued, \
         which breaks §5 item 1. No case is judged through a refused key"
    )]
    KeyRefused { flag: &'static str, request: String, status: u16, body: String, other: &'static str },
    /// `--connection-id`'s accounts could not be read at all (no answer, an unreadable one).
    #[error("preflight: {reason}")]
    ConnectionIdUnanswered { reason: String },
    /// `--connection-id`'s accounts were refused: not a CONNECTED connection of this client.
    #[error(
        "preflight: --connection-id {id}: {request} answered {status}; give a CONNECTED connection of the \
         --api-key's client"
    )]
    ConnectionIdRefused { id: String, request: String, status: u16 },
    /// The driver broke on `connect`: every case after it would break with it.
    #[error("preflight: the driver failed on connect (is the driver right?): {message}")]
    DriverConnectFailed { message: String },
    /// `--ca-cert` that cannot be read, or holds no PEM certificate.
    #[error("--ca-cert {}: {problem}", .file.display())]
    CaCert { file: std::path::PathBuf, problem: String },
    /// A `--header` that is not `Name: value` (its value is never quoted: a secret).
    #[error("--header #{position}: {problem} (expected 'Name: value')")]
    BadHeader { position: usize, problem: &'static str },
}

impl SetupError {
    /// The text of an error of another library and of its sources, for the variants that wrap
    /// one: a public error holds no foreign type.
    pub(crate) fn cause(error: &(dyn std::error::Error + 'static)) -> String {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(e) = source {
            let more = e.to_string();
            if !text.contains(&more) {
                text.push_str(": ");
                text.push_str(&more);
            }
            source = e.source();
        }
        text
    }

    /// The same error with every text it carries passed through `redactor`. A setup error may
    /// quote a driver, a target or a flag that echoed a key, and it is written to every report
    /// of a run that never got its own redactor.
    pub(crate) fn redacted(self, redactor: &Redactor) -> Self {
        let r = |text: String| redactor.redact(&text);
        match self {
            Self::BadBaseUrl { url, problem } => Self::BadBaseUrl { url: r(url), problem },
            Self::BadDriverUrl { url } => Self::BadDriverUrl { url: r(url) },
            Self::SandboxStart(cause) => Self::SandboxStart(r(cause)),
            Self::HttpClient(cause) => Self::HttpClient(r(cause)),
            Self::TargetUnreachable { base_url, cause } => {
                Self::TargetUnreachable { base_url: r(base_url), cause: r(cause) }
            }
            Self::DriverClient(cause) => Self::DriverClient(r(cause)),
            Self::ReceiverStart(cause) => Self::ReceiverStart(r(cause)),
            Self::DriverRegisterFailed { hint, message } => Self::DriverRegisterFailed { hint, message: r(message) },
            Self::KeyRefused { flag, request, status, body, other } => {
                Self::KeyRefused { flag, request: r(request), status, body: r(body), other }
            }
            Self::ConnectionIdUnanswered { reason } => Self::ConnectionIdUnanswered { reason: r(reason) },
            Self::ConnectionIdRefused { id, request, status } => {
                Self::ConnectionIdRefused { id: r(id), request: r(request), status }
            }
            Self::DriverConnectFailed { message } => Self::DriverConnectFailed { message: r(message) },
            Self::CaCert { file, problem } => Self::CaCert { file, problem: r(problem) },
            // The flags' own mistakes, the selection and the files name no secret the run knows
            // of, but an expectations file or a report path could quote anything: their text is
            // kept whole and redacted again wherever it is rendered.
            other @ (Self::TargetFlagsWithoutBaseUrl { .. }
            | Self::SeveralDrivers
            | Self::SameKeyTwice
            | Self::MissingApiKey
            | Self::SandboxFlagsWithBaseUrl
            | Self::Selection(_)
            | Self::Expectations(_)
            | Self::ReportUnwritable(_)
            | Self::BadHeader { .. }) => other,
        }
    }
}

/// Why a URL is no http(s) URL.
#[derive(Debug, Error)]
pub enum UrlProblem {
    /// The URL parser's words (its error type is another crate's: a public error holds none).
    #[error("{0}")]
    Unparsable(String),
    #[error("only http and https are supported")]
    NotHttp,
}

/// A selection (case ids, id prefixes, `--section`) that names no case of `bankconf run`; each
/// with the nearest thing it may have meant.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SelectionError {
    /// An id or id prefix that no case has.
    #[error("no case {wanted:?}; did you mean {nearest:?}? (`bankconf run --list` lists them)")]
    UnknownCase { wanted: String, nearest: String },
    /// A section of the spec that no case of `bankconf run` checks.
    #[error(
        "--section {wanted}: no case of `bankconf run` checks {section} ({title}); did you mean §{nearest}? \
         (`bankconf run --list` shows each case's section)"
    )]
    UncheckedSection { wanted: String, section: &'static str, title: &'static str, nearest: String },
    /// A section the spec does not have.
    #[error(
        "--section {wanted}: no section §{bare} in the spec; did you mean §{nearest}? (`bankconf run --list` shows \
         each case's section)"
    )]
    UnknownSection { wanted: String, bare: String, nearest: String },
    /// Ids, sections and levels that each name cases, but no case together.
    #[error(
        "the selection names no case: no case has all of the ids, sections and levels given (`bankconf run --list` \
         lists them)"
    )]
    NoCase,
}

/// An `--expect` file that cannot be used; each names the file as given.
#[derive(Debug, Error)]
pub enum ExpectError {
    #[error("--expect {file}: {source}")]
    Unreadable { file: String, source: std::io::Error },
    /// Not TOML, or not `[[expect]]` tables of the expected fields.
    #[error("--expect {file}: {message}")]
    Invalid { file: String, message: String },
    /// A line naming no case, with a "did you mean".
    #[error("--expect {file}: {source}")]
    UnknownCase { file: String, source: SelectionError },
    /// A line naming an id prefix: an expectation holds for one case.
    #[error("--expect {file}: `{case}` is not a case id (an id prefix is not allowed here)")]
    NotACaseId { file: String, case: String },
    #[error("--expect {file}: {case}: give a reason")]
    NoReason { file: String, case: String },
    #[error("--expect {file}: {case} is listed twice")]
    ListedTwice { file: String, case: String },
}

/// A settings file (`bankconf.toml`, `--config`) that cannot be used: `bankconf run` stops
/// before anything starts (exit 2).
#[derive(Debug, Error)]
pub enum ConfigFileError {
    #[error("cannot read the settings file {file}: {source}")]
    Read { file: String, source: std::io::Error },
    #[error("the settings file {file} is not TOML: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: unknown setting {key:?}; the settings are the long names of `bankconf run`'s flags (`bankconf run --help`){nearest}")]
    UnknownKey { file: String, key: String, nearest: String },
    #[error("{file}: {key} must be {expected}")]
    Value { file: String, key: String, expected: String },
    #[error("{file}: {key}: keys stay out of the file; name the variable that holds it instead: {key}-env = \"STAGING_KEY\"")]
    Secret { file: String, key: String },
    #[error("{file}: no profile {profile:?} (its profiles: {known})")]
    NoProfile { file: String, profile: String, known: String },
    #[error("--profile {profile} given, but there is no settings file (no ./bankconf.toml, no --config FILE)")]
    ProfileWithoutFile { profile: String },
    #[error("{file}: {key} names the variable {variable}, which is not set")]
    UnsetVariable { file: String, key: String, variable: String },
}

impl ConfigFileError {
    /// A value of the wrong kind.
    pub(crate) fn value(file: &str, key: &str, expected: &str) -> Self {
        Self::Value { file: file.into(), key: key.into(), expected: expected.into() }
    }
}

/// A report file (JSON, JUnit, Markdown, expectations, HAR) that could not be written or
/// checked, naming it.
#[derive(Debug, Error)]
#[error("cannot write {path}: {source}")]
pub struct ReportWriteError {
    pub path: String,
    pub source: std::io::Error,
}

/// A name of a flag's value that is none of its kind's (`--level`, `--sandbox-mutant`, …).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum UnknownName {
    #[error("unknown level {0:?} (one of must, security, robustness, advisory)")]
    Level(String),
    #[error("unknown mutant {0:?} (see `bankconf serve --list-mutants`)")]
    Mutant(String),
    #[error("unknown variant {0:?} (see `bankconf serve --list-variants`)")]
    Variant(String),
}

/// Why a connection's events form no chain from `connection.created` (§3.1, §6.2): a finding
/// against the target, rendered into the case's failure.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub(crate) enum ChainError {
    /// A `previousStatus` that names no state.
    #[error("{event}: previousStatus {value:?} is not a lower-case state name of §3.1")]
    UnknownPreviousStatus { event: String, value: String },
    /// A `previousStatus` that is missing or not a string.
    #[error("{event}: previousStatus must be a lower-case state name, got {got}")]
    BadPreviousStatus { event: String, got: String },
    #[error("no connection.created event: the chain has no start")]
    NoStart,
    /// Events whose `previousStatus` is the state they announce (re-entries), more of them than
    /// the run's accepted actions leading to that state: no status changed (§6: a connection
    /// event is emitted when the status changes; §3.1: it announces entering a state).
    #[error(
        "{event}: previousStatus is the state the event announces entering ({count} such event(s) re-entering \
         {state}), and the run drove {actions} accepted action(s) on this connection that lead to {state}: \
         the status did not change (§6, §3.1)"
    )]
    NoChange { event: String, count: usize, actions: usize, state: &'static str },
    /// The events admit no order that links them all.
    #[error(
        "no order of these events links each previousStatus to the state announced before it, from \
         connection.created: {events}"
    )]
    NoOrder { events: String },
}

/// Why the headless browser of the widget cases did not start: the harness's setup, not the
/// target's fault (the widget cases end in an error).
#[derive(Debug, Error)]
pub enum BrowserLaunchError {
    #[error("browser {path} did not start: {source}")]
    NotStarted { path: String, source: std::io::Error },
    /// It closed its DevTools pipe (exited, or is no browser that speaks DevTools on one).
    #[error("browser {path} exited (or closed its DevTools pipe) before it answered over DevTools")]
    ExitedEarly { path: String },
    #[error("browser {path} did not answer over its DevTools pipe within {waited:?}")]
    NoDevToolsAnswer { path: String, waited: Duration },
    #[error("browser {path}: cannot connect to DevTools: {source}")]
    DevToolsUnreachable { path: String, source: CdpError },
}

/// A DevTools call (`harness::cdp`) that gave no usable answer: the browser's or the
/// machine's problem, never the target's. A method is the protocol's name for the call
/// (`Runtime.evaluate`); texts from the browser are cut to a few hundred characters.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CdpError {
    /// The browser closed its end of the pipe (it exited or was killed), or never opened it.
    #[error("the browser closed its DevTools pipe")]
    Closed,
    #[error("{method}: no answer from the browser within {waited:?}")]
    Timeout { method: &'static str, waited: Duration },
    /// The browser answered the call with a protocol error.
    #[error("{method}: the browser answered with an error: {message}")]
    Refused { method: &'static str, message: String },
    /// The answer was longer than the client reads (it was skipped, not kept).
    #[error("{method}: the browser's answer is over {limit} bytes")]
    TooLarge { method: &'static str, limit: usize },
    /// The answer was not of the shape the protocol gives.
    #[error("{method}: the browser's answer is not of the expected shape: {reason}")]
    Odd { method: &'static str, reason: String },
    /// The evaluated script threw (or its promise was rejected).
    #[error("{method}: the page's script threw: {text}")]
    Thrown { method: &'static str, text: String },
}

/// A capture that `bankconf check-events` cannot judge (exit 2).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CaptureError {
    #[error("the capture is empty")]
    Empty,
    /// One JSON value that is neither a delivery nor an array of them.
    #[error("the capture is a JSON {kind}, not deliveries")]
    NotDeliveries { kind: &'static str },
    #[error("the capture starts with [ but is not a JSON array")]
    BrokenArray,
    #[error("the capture holds no delivery")]
    NoDelivery,
}

/// No webhook delivery reached the receiver after the preflight's first connections: the
/// setup's problem (an address the target cannot reach), which the event cases end in.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "no webhook delivery reached the receiver within {waited:?} of creating (and driving) a connection: the target \
     was given {url} (listening on {listening}). A target in a container or on another host needs \
     --webhook-public-url with an address it can reach, and --webhook-listen 0.0.0.0:PORT. The run stopped there: the \
     event cases are not judged on zero deliveries, and the cases still running were left unjudged{}",
    strays_said(.strays)
)]
pub(crate) struct SilentReceiver {
    pub waited: Duration,
    /// Deliveries that came to the port at another path than the run's address.
    pub strays: u64,
    /// The receiver's address as the target was given it.
    pub url: String,
    /// The address bound (`:0` in the configuration says nothing about where to look).
    pub listening: SocketAddr,
}

/// What a silent run says of the deliveries that came to another path than its address: two
/// causes, either of which it may be.
fn strays_said(strays: &u64) -> String {
    match strays {
        0 => String::new(),
        n => format!(
            ". {n} {} came to the listener at another path than the run's address, not judged: an earlier run's late \
             webhooks, or a proxy in front of --webhook-public-url that rewrites the path",
            if *n == 1 { "delivery" } else { "deliveries" }
        ),
    }
}

/// `--service` names no widget script the target serves (§1): the widget cases end in this,
/// every other case is judged.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "--service {service:?}: {request} answered {status}; the widget script is served at \
     /widget/<service>-connect.js (§1): either --service (BANKCONF_SERVICE) is wrong, or the target serves no \
     widget script; the widget cases are not judged, every other case is"
)]
pub(crate) struct WidgetNotServed {
    pub service: String,
    pub request: String,
    pub status: u16,
}

/// Why an absent event cannot be held against the target: no proof that deliveries still
/// arrive, so the rules that rest on the absence are not judged.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub(crate) enum DeliveriesUnproven {
    /// Nothing ever reached the receiver.
    #[error(transparent)]
    Silent(#[from] SilentReceiver),
    /// There is no receiver to hear deliveries (why, as the run's outcome says it).
    #[error("{0}")]
    NoReceiver(String),
    /// Deliveries came, then stopped: not even a fresh connection's `created_event` arrived.
    #[error(
        "not judged: no webhook delivery reached the receiver after the read that an absent event is held against, \
         not even a new connection's {created_event} (§3.2): deliveries stopped, so an absence proves nothing"
    )]
    Stopped { created_event: &'static str },
}
