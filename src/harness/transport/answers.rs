//! The run's answer log: every exchange with the target's API as sent and answered, kept
//! (within a budget) as the evidence the response checks judge and the reports cite. The client
//! that fills it is [`crate::harness::transport::http`].

use crate::harness::rules::http::Coding;
use crate::harness::rules::invariants::Client;
use crate::harness::vocab::key_variant::KeyEdit;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Which credentials a request carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `Bearer <key of the client under test>`.
    Primary,
    /// `Bearer <key of the second client>`.
    Second,
    /// No `Authorization` header.
    Missing,
    /// This exact header value.
    Header(String),
    /// `Bearer <the primary key, edited>`: a key the service never issued, as secret as the key
    /// (its reproduction is a shell expression over `$BANKCONF_API_KEY`, never the key).
    NearKey(KeyEdit),
}

/// A request as sent, without its secrets: enough to replay it with `curl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    pub method: String,
    pub url: String,
    pub auth: Auth,
    /// `GET /v1/accounts/acc_1/transactions?limit=3`, as failure messages name it.
    pub request: String,
}

impl Sent {
    /// A `curl` command that replays the request, keys written as environment variables;
    /// `reach` holds the options that reach the target as the run did (TLS, gateway headers:
    /// [`crate::harness::transport::reach::curl_words`]), put before the URL.
    pub(crate) fn curl(&self, reach: &str) -> String {
        let auth = match &self.auth {
            Auth::Primary => " -H \"Authorization: Bearer $BANKCONF_API_KEY\"".to_string(),
            Auth::Second => " -H \"Authorization: Bearer $BANKCONF_SECOND_API_KEY\"".to_string(),
            Auth::Missing => String::new(),
            Auth::Header(h) => format!(" -H {}", shlex::try_quote(&format!("Authorization: {h}")).unwrap_or_default()),
            // The near miss made again from the key's variable: pasted, it sends what was sent.
            Auth::NearKey(edit) => format!(" -H \"Authorization: Bearer {}\"", edit.shell()),
        };
        let body = if self.method == "POST" { " -H 'Content-Type: application/json'" } else { "" };
        format!("curl -sS -i -X {}{auth}{body}{reach} '{}'", self.method, self.url.replace('\'', "%27"))
    }
}

/// One exchange with the target's API, as the client recorded it: what the response checks
/// judge after the run's flows (`checks`), and where a failure finds its evidence.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Order of recording, run-wide.
    pub seq: u64,
    pub sent: Sent,
    /// The path below the base URL, segment by segment (`["v1", "accounts", "acc_1"]`).
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
    /// 0 when no answer came (transport trouble).
    pub status: u16,
    /// The body of a 2xx answer, kept within the log's budget; `None` otherwise.
    pub body: Option<String>,
    /// The answer's `Content-Type`, and the start of any other answer's body ([`EXCERPT`]
    /// characters): what the HTML report shows of a failure's evidence.
    pub content_type: Option<String>,
    pub excerpt: Option<String>,
    /// When it was sent, and when its answer came (or the tries ended): reads are ordered
    /// against each other and against the deliveries by these (`checks::state`).
    pub sent_at: Instant,
    pub answered_at: Instant,
    /// The id of its entry in the HAR (`_id`), when one is recorded.
    pub har: Option<u64>,
    /// Its `Content-Encoding`, and what decoding it gave (the rules over the record judge it).
    pub coding: Coding,
    /// The clients whose API key the answer carried (headers or body, before redaction), other
    /// than the one the request itself sent ([`crate::harness::rules::secrets::revealed`]).
    pub revealed: Vec<Client>,
    /// The clients whose widget token (§2.1: of a connection their key created) the answer
    /// carried, though the request was not sent with that client's key.
    pub tokens: Vec<Client>,
}

impl Answer {
    /// The `limit` asked for, when it is a positive page size (other values are bad input).
    pub(crate) fn limit(&self) -> Option<u64> {
        self.query.iter().find(|(k, _)| k == "limit").and_then(|(_, v)| v.parse::<u64>().ok()).filter(|l| *l > 0)
    }

    /// Whose key it carried, for messages: empty for the client under test.
    pub(crate) fn whose(&self) -> &'static str {
        match self.sent.auth {
            Auth::Primary => "",
            Auth::Second => " (read with the second client's key)",
            Auth::Missing => " (sent without a key)",
            Auth::Header(_) => " (sent with a malformed or unknown key)",
            Auth::NearKey(_) => " (sent with a near miss of the API key)",
        }
    }
}

/// Every exchange of the run, in order (bounded: bodies are kept up to `MAX_KEPT` bytes, and
/// what is not kept is counted, so that the report can say what went unjudged).
#[derive(Default)]
pub(crate) struct AnswerLog {
    inner: Mutex<LogInner>,
}

#[derive(Default)]
struct LogInner {
    answers: Vec<Arc<Answer>>,
    bytes: usize,
    unkept: usize,
    /// The method and path of each 2xx answer whose body was not kept (at most [`MAX_CUT`]),
    /// and whether more were.
    cut: Vec<(String, Vec<String>)>,
    cut_more: bool,
}

/// Most paths of unkept 2xx bodies the log names (past it, every endpoint counts as cut).
const MAX_CUT: usize = 256;

/// Most bytes of bodies and URLs the answer log keeps (a full sandbox run keeps about 3 MB).
const MAX_KEPT: usize = 48 * 1024 * 1024;

/// Most characters of a non-2xx answer's body kept ([`Answer::excerpt`]).
pub(crate) const EXCERPT: usize = 2048;

impl AnswerLog {
    /// Keeps `answer`; its `seq`, unless the budget is spent (the client, [`crate::harness::transport::http`], is
    /// the one writer).
    pub(crate) fn push(&self, mut answer: Answer) -> Option<u64> {
        let mut log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let weight = answer.sent.url.len()
            + answer.sent.request.len()
            + answer.excerpt.as_ref().map_or(0, String::len)
            + answer.content_type.as_ref().map_or(0, String::len);
        let body = answer.body.as_ref().map_or(0, String::len);
        let cut = |log: &mut LogInner, answer: &Answer| {
            log.unkept += 1;
            if !(200..300).contains(&answer.status) {
                return;
            }
            match log.cut.len() < MAX_CUT {
                true => log.cut.push((answer.sent.method.clone(), answer.segments.clone())),
                false => log.cut_more = true,
            }
        };
        if log.bytes + weight > MAX_KEPT {
            cut(&mut log, &answer);
            return None;
        }
        if log.bytes + weight + body > MAX_KEPT {
            answer.body = None;
            cut(&mut log, &answer);
        }
        log.bytes += weight + answer.body.as_ref().map_or(0, String::len);
        let seq = log.answers.len() as u64;
        answer.seq = seq;
        log.answers.push(Arc::new(answer));
        Some(seq)
    }

    /// The latest answer to a request of the path `segments` (any method, query or key): the
    /// evidence of a finding about a read made through a helper that keeps only its data.
    pub(crate) fn latest(&self, segments: &[&str]) -> Option<u64> {
        let log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        log.answers
            .iter()
            .rev()
            .find(|a| a.segments.iter().map(String::as_str).eq(segments.iter().copied()))
            .map(|a| a.seq)
    }

    /// The answer `seq` (a failure's evidence).
    pub(crate) fn get(&self, seq: u64) -> Option<Arc<Answer>> {
        let log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        usize::try_from(seq).ok().and_then(|i| log.answers.get(i)).cloned()
    }

    /// Every exchange recorded so far, in order.
    pub(crate) fn all(&self) -> Vec<Arc<Answer>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).answers.clone()
    }

    /// The method and path of the 2xx answers whose body the log's budget left out, and whether
    /// more were than it names: the response rules of their endpoints did not see them.
    pub(crate) fn cut(&self) -> (Vec<(String, Vec<String>)>, bool) {
        let log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (log.cut.clone(), log.cut_more)
    }

    /// How many answers were not kept whole (the log's budget): their rules went unjudged.
    pub(crate) fn unkept(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).unkept
    }

    /// The connections this run created (its 2xx answers to `POST /v1/connections` that name
    /// one, §4.1), in the order they were created.
    pub(crate) fn created_connections(&self) -> Vec<String> {
        self.creations().into_iter().map(|(id, _)| id).collect()
    }

    /// [`Self::created_connections`], each with the credentials that created it (its owner's).
    pub(crate) fn creations(&self) -> Vec<(String, Auth)> {
        self.created().into_iter().map(|c| (c.id, c.auth)).collect()
    }

    /// [`Self::creations`], each with the answer that named it.
    pub(crate) fn created(&self) -> Vec<Creation> {
        let all = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        all.answers
            .iter()
            .filter(|a| {
                a.sent.method == "POST" && a.segments == ["v1", "connections"] && (200..300).contains(&a.status)
            })
            .filter_map(|a| {
                let body: serde_json::Value = serde_json::from_str(a.body.as_deref()?).ok()?;
                let id = body.get("connectionId")?.as_str()?.to_string();
                Some(Creation { id, auth: a.sent.auth.clone(), seq: a.seq, answered_at: a.answered_at })
            })
            .collect()
    }
}

/// One connection the run created: its id, the credentials that created it, and the answer.
#[derive(Clone, Debug)]
pub(crate) struct Creation {
    pub id: String,
    pub auth: Auth,
    pub seq: u64,
    pub answered_at: Instant,
}
