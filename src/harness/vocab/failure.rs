//! How the target broke a case's rule, as a value every report renders itself: each
//! [`Problem`] with the request that shows it, what is wrong, what was expected against what
//! was received, and the [`Evidence`] it rests on by reference. No message joins them.

use super::kind::Kind;
use std::fmt;

/// What a failure rests on, by reference: the run's requests (`http::Answer::seq`, the
/// answer log's order), webhook deliveries (`delivery::Delivery::seq`, the receiver's) and what
/// the widget's page received (`probe::Probe::received`'s order), the one that shows it first. The reports render the curl, the offline replay and the HAR
/// link from these, never from the message's words.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Evidence {
    pub answers: Vec<u64>,
    pub deliveries: Vec<u64>,
    /// Items the widget's page received (their text is only ever searched, never shown: the
    /// reports name where each came from).
    pub received: Vec<u64>,
}

impl Evidence {
    /// Whether it names nothing (a rule about an absence, or a flow that read nothing).
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty() && self.deliveries.is_empty() && self.received.is_empty()
    }

    /// `other`'s references after this one's, each once.
    pub(crate) fn extend(&mut self, other: &Evidence) {
        let pairs = [
            (&mut self.answers, &other.answers),
            (&mut self.deliveries, &other.deliveries),
            (&mut self.received, &other.received),
        ];
        for (mine, theirs) in pairs {
            for seq in theirs {
                if !mine.contains(seq) {
                    mine.push(*seq);
                }
            }
        }
    }
}

/// What a rule expected and what the target did instead.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Contrast {
    /// `2xx`, `a refusal (any non-2xx)`.
    pub expected: String,
    /// `status 500: {…}`.
    pub actual: String,
}

/// One violation a finding shows, as a value the reports render: the request whose answer shows
/// it (when the finding names one), what is wrong, and what it rests on. A report never takes a
/// message apart to find these: target text may hold any `; `, `|` or newline.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Problem {
    /// `GET /v1/accounts/acc_1`, when one request's answer shows the problem.
    pub request: Option<String>,
    /// What is wrong, without the request.
    pub detail: String,
    /// What the rule expected and what came instead, when the finding states them apart.
    pub contrast: Option<Box<Contrast>>,
    /// The requests and deliveries it rests on.
    pub evidence: Evidence,
    /// Whether its one answer shows it by itself: the rule judged that answer alone, so
    /// sending its request again reproduces it. Not a problem that compares reads, or a read
    /// with an event or an absence.
    pub alone: bool,
    /// The case that owns the rule it breaks, when another case's random exploration found it
    /// (`lifecycle.random-sequences`): it is reported there (one judge per rule).
    pub owner: Option<&'static str>,
    /// How many more times the same problem (same request, detail and contrast) was found:
    /// counted once, `×N` in every report, its evidence kept whole (issue 74: counts are of
    /// distinct problems).
    pub repeats: u32,
    /// What rule it breaks, as a value, when its rule says ([`Kind`]; issue 74).
    pub kind: Option<Kind>,
    /// The ids of the objects it is about (a connection, account, transaction), when its rule
    /// names them.
    pub about: Vec<String>,
}

impl Problem {
    /// A finding of `kind` about the objects `about`, said as `detail`: the sentence made once
    /// from the values it compared, which every report renders.
    pub(crate) fn found(kind: impl Into<Kind>, about: impl IntoIterator<Item = String>, detail: String) -> Self {
        Self { kind: Some(kind.into()), about: about.into_iter().collect(), detail, ..Self::default() }
    }

    /// The same finding with what its rule expected and what came instead (`expected` and
    /// `received` in the JSON report).
    pub(crate) fn expecting(mut self, expected: impl Into<String>, actual: impl Into<String>) -> Self {
        self.contrast = Some(Box::new(Contrast { expected: expected.into(), actual: actual.into() }));
        self
    }

    /// `GET /v1/…: detail`, or the detail alone, with `(×N)` when it was found N times.
    pub fn text(&self) -> String {
        let times = if self.repeats > 0 { format!(" (×{})", self.repeats + 1) } else { String::new() };
        match &self.request {
            Some(request) => format!("{request}: {}{times}", self.detail),
            None => format!("{}{times}", self.detail),
        }
    }

    /// Whether it says what `other` says (the same request, detail and contrast).
    fn same_as(&self, other: &Problem) -> bool {
        self.request == other.request && self.detail == other.detail && self.contrast == other.contrast
    }
}

/// `problems` with each repeat folded into its first ([`Problem::repeats`]), in order.
pub(crate) fn distinct(problems: Vec<Problem>) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::with_capacity(problems.len());
    for p in problems {
        match out.iter_mut().find(|q| q.same_as(&p)) {
            Some(q) => {
                q.repeats += 1 + p.repeats;
                q.evidence.extend(&p.evidence);
            }
            None => out.push(p),
        }
    }
    out
}

/// How the target broke a case's rule (the section is the case's).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Failure {
    /// Each violation it shows, in order (one for most findings): no message joins them, each
    /// report renders them itself.
    pub problems: Vec<Problem>,
    /// The requests, deliveries and received items it rests on (boxed: a `Result`'s error
    /// stays small).
    pub evidence: Box<Evidence>,
    /// For a property: the smallest failing input it shrank to.
    pub shrunk_input: Option<Box<String>>,
}

impl Failure {
    /// The finding, resting on `more` too (its one problem as well).
    fn resting_on(mut self, more: Evidence) -> Self {
        self.evidence.extend(&more);
        if let [one] = self.problems.as_mut_slice() {
            one.evidence.extend(&more);
        }
        self
    }

    /// The finding, resting on the answer `seq` (none when the log did not keep it).
    pub fn on_answer(self, seq: Option<u64>) -> Self {
        self.resting_on(Evidence { answers: seq.into_iter().collect(), ..Evidence::default() })
    }

    /// The finding, shown by the answer to `request` (`GET /v1/…`): its one problem names that
    /// request apart from what is wrong, which never repeats it.
    pub fn requested(mut self, request: &str) -> Self {
        if let [one] = self.problems.as_mut_slice() {
            one.request = Some(request.to_string());
        }
        self
    }

    /// The finding `message`, shown by the answer `seq` by itself (see [`Problem::alone`]).
    pub fn shown_by(mut self, seq: Option<u64>) -> Self {
        self = self.on_answer(seq);
        if let ([one], Some(_)) = (self.problems.as_mut_slice(), seq) {
            one.alone = one.evidence.answers.len() == 1 && one.evidence.deliveries.is_empty();
        }
        self
    }

    /// The answer that shows its first problem by itself, if one does ([`Problem::alone`]).
    pub fn alone(&self) -> Option<u64> {
        let first = self.problems.first().filter(|p| p.alone && p.evidence.deliveries.is_empty())?;
        match first.evidence.answers.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// The finding, resting on the delivery `seq` too.
    pub fn on_delivery(self, seq: u64) -> Self {
        self.resting_on(Evidence { deliveries: vec![seq], ..Evidence::default() })
    }

    /// The finding, resting on the item `seq` the widget's page received.
    pub fn on_received(self, seq: u64) -> Self {
        self.resting_on(Evidence { received: vec![seq], ..Evidence::default() })
    }

    /// The finding with what was expected and what came instead, apart from its detail (on its
    /// one problem).
    pub fn expected(mut self, expected: impl Into<String>, actual: impl Into<String>) -> Self {
        if let [one] = self.problems.as_mut_slice() {
            one.contrast = Some(Box::new(Contrast { expected: expected.into(), actual: actual.into() }));
        }
        self
    }

    /// What its one problem expected and received, when it states them apart (a failure of
    /// several problems has one per problem).
    pub fn contrast(&self) -> Option<&Contrast> {
        match self.problems.as_slice() {
            [one] => one.contrast.as_deref(),
            _ => None,
        }
    }

    /// The finding, naming the case that owns the rule it breaks (see [`Problem::owner`]).
    pub fn owned_by(mut self, case: &'static str) -> Self {
        self.problems.iter_mut().for_each(|p| p.owner = Some(case));
        self
    }

    /// The case that owns the rule its first problem breaks, when another case found it.
    pub fn owner(&self) -> Option<&'static str> {
        self.problems.first().and_then(|p| p.owner)
    }

    /// The same finding in other words (`after connection.connected: …`, `… [explored
    /// sequence: …]`): each problem's detail passed through `f`, its request and evidence kept.
    pub fn reworded(mut self, f: impl Fn(&str) -> String) -> Self {
        self.problems.iter_mut().for_each(|p| p.detail = f(&p.detail));
        self
    }
}

/// One line for a log, the self-test and the generated tables (not a report: each report
/// renders the problems itself): the one problem's text, or the count and each problem.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [] => Ok(()),
            [one] => f.write_str(&one.text()),
            many => {
                write!(f, "{} problems: ", many.len())?;
                for (n, p) in many.iter().enumerate() {
                    let sep = if n == 0 { "" } else { "; " };
                    write!(f, "{sep}{}", p.text())?;
                }
                Ok(())
            }
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        let problems = vec![Problem { detail: message, ..Problem::default() }];
        Self { problems, ..Self::default() }
    }
}

impl From<Problem> for Failure {
    fn from(problem: Problem) -> Self {
        Self { problems: vec![problem], ..Self::default() }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}
