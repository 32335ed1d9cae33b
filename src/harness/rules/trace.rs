//! What a run did, in time, for the HTML report (`--report-html`): per connection, the driver
//! calls, the reads and the deliveries on one time axis, whose client each was; and the
//! exchanges and deliveries the failures rest on, with an excerpt of what the target sent.
//! Pure data, bounded (a hostile target sends huge bodies and floods deliveries): every text
//! is cut at [`MAX_TEXT`], and every list capped; what was left out is counted. Filled at the
//! end of a run (`recording`); texts are redacted when kept, and again when rendered.

use std::collections::BTreeMap;
use std::time::Duration;

/// Most characters of a body or a URL kept.
pub(crate) const MAX_TEXT: usize = 2048;
/// Most connections drawn, those the failures name first.
pub(crate) const MAX_CONNECTIONS: usize = 24;
/// Most items of one connection's timeline (the failures' evidence first).
pub(crate) const MAX_ITEMS: usize = 120;
/// Most exchanges, and most deliveries, kept as evidence.
pub(crate) const MAX_EVIDENCE: usize = 200;

/// Whose an item is: the client under test (`--api-key`), or the second client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Client {
    #[default]
    First,
    Second,
}

impl Client {
    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::First => "client under test",
            Self::Second => "second client",
        }
    }
}

/// What an item of a timeline is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A driver call (`connect`, `update_account`, …).
    Call,
    /// A request to the target's API and its answer.
    Read,
    /// A webhook delivery the receiver got.
    Delivery,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Call => "driver call",
            Self::Read => "request",
            Self::Delivery => "delivery",
        }
    }
}

/// One thing that happened to a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub kind: Kind,
    pub client: Client,
    /// Since the run started; `until` is when it ended (a request's answer, a call's exit).
    pub at: Duration,
    pub until: Duration,
    /// `GET /v1/connections/conn_1/accounts → 200`, `connect: exit 0`,
    /// `connection.connected(prev=verifying)`.
    pub label: String,
    /// The answer-log `seq` of a read, the receiver's `seq` of a delivery: how the failures'
    /// evidence names it.
    pub answer: Option<u64>,
    pub delivery: Option<u64>,
}

/// One connection's timeline, in the order things started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Connection {
    pub id: String,
    /// Whose key created it, when the run saw its creation.
    pub owner: Option<Client>,
    pub items: Vec<Item>,
    /// Items not kept (`MAX_ITEMS`).
    pub left_out: usize,
}

/// A request and its answer, as a failure's evidence shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exchange {
    pub method: String,
    pub url: String,
    /// The request headers sent (the key as `Bearer [redacted]`).
    pub headers: Vec<(String, String)>,
    /// 0 when no answer came.
    pub status: u16,
    pub content_type: Option<String>,
    /// The start of the body, when the run kept one.
    pub body: Option<String>,
    pub client: Client,
    pub at: Duration,
    pub took: Duration,
}

/// A delivery, as a failure's evidence shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Posted {
    pub label: String,
    /// Whose address it was posted to.
    pub to: Client,
    pub at: Duration,
    /// The body as JSON text, its start.
    pub body: String,
}

/// What a run did, in time (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub connections: Vec<Connection>,
    /// Connections not drawn (`MAX_CONNECTIONS`).
    pub connections_left_out: usize,
    /// The failures' exchanges, by answer-log `seq`.
    pub exchanges: BTreeMap<u64, Exchange>,
    /// The failures' deliveries, by receiver `seq`.
    pub deliveries: BTreeMap<u64, Posted>,
}

impl Trace {
    /// Whether it holds nothing (a capture check, a run that could not start).
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty() && self.exchanges.is_empty() && self.deliveries.is_empty()
    }

    /// When its last item ended: the span of the time axis.
    pub fn span(&self) -> Duration {
        self.connections.iter().flat_map(|c| &c.items).map(|i| i.until.max(i.at)).max().unwrap_or_default()
    }
}
