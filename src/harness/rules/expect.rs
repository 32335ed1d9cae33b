//! The expectations file of a release gate (`--expect FILE`): cases whose outcome a team already
//! knows (a failure not fixed yet, a transition its target cannot simulate), each with a reason
//! and an optional expiry. An expected outcome no longer decides the exit code; the gate fails
//! only on deviations: a new failure, an expectation that no longer holds (stale: remove its
//! line), or one past its expiry date (renew or remove it). `--write-expectations FILE` writes
//! the file from a run.
//!
//! ```toml
//! [[expect]]
//! case = "lifecycle.mfa-path"
//! outcome = "ignored"          # failed, ignored or error
//! reason = "staging cannot simulate MFA (TICKET-12)"
//! expires = 2027-03-31         # optional
//! ```

use crate::harness::vocab::catalogue;
use crate::harness::vocab::errors::ExpectError;
use crate::harness::vocab::outcome::{CaseResult, Outcome};
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// An outcome a case may be expected to have; passing is what every case is expected to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    Failed,
    Ignored,
    Error,
}

impl Expected {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::Ignored => "ignored",
            Self::Error => "error",
        }
    }

    fn of(outcome: &Outcome) -> Option<Self> {
        match outcome {
            Outcome::Passed => None,
            Outcome::Failed(_) => Some(Self::Failed),
            Outcome::Ignored { .. } => Some(Self::Ignored),
            Outcome::Error { .. } => Some(Self::Error),
        }
    }
}

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    pub case: String,
    pub outcome: Expected,
    pub reason: String,
    /// The last day the expectation holds; a TOML date (`2027-03-31`) or that as a string.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "date")]
    pub expires: Option<NaiveDate>,
}

#[derive(Deserialize, Serialize)]
struct File {
    #[serde(default)]
    expect: Vec<Expectation>,
}

/// The expectations of a run, read from one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectations {
    /// The file, as given (for messages).
    pub file: String,
    /// The day expiry is judged on (`today()` when read).
    pub today: NaiveDate,
    by_case: BTreeMap<String, Expectation>,
}

/// How a case's outcome stands against its expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The outcome is the one expected, before any expiry: it does not decide the exit code.
    Held,
    /// The outcome is not the one expected: the line is stale.
    NoLongerHolds,
    /// The expiry date has passed: the case counts as if the line were absent, and the line
    /// must be renewed or removed.
    Expired,
}

impl Standing {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::NoLongerHolds => "no-longer-holds",
            Self::Expired => "expired",
        }
    }
}

impl Expectations {
    /// Reads and checks the file: valid TOML of `[[expect]]` tables, each naming a case of the
    /// catalogue at most once, with a non-empty reason. An error is a setup problem (exit 2).
    pub fn load(path: &Path) -> Result<Self, ExpectError> {
        let file = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&file, &text),
            Err(source) => Err(ExpectError::Unreadable { file, source }),
        }
    }

    /// The expectations `text` states; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ExpectError> {
        let at = || file.to_string();
        let parsed: File =
            toml::from_str(text).map_err(|e| ExpectError::Invalid { file: at(), message: e.message().to_string() })?;
        let mut by_case = BTreeMap::new();
        for line in parsed.expect {
            let selection = catalogue::Selection { ids: vec![line.case.clone()], ..Default::default() };
            catalogue::check_selection(&selection).map_err(|source| ExpectError::UnknownCase { file: at(), source })?;
            if catalogue::find(&line.case).is_none() {
                return Err(ExpectError::NotACaseId { file: at(), case: line.case });
            }
            if line.reason.trim().is_empty() {
                return Err(ExpectError::NoReason { file: at(), case: line.case });
            }
            if by_case.contains_key(&line.case) {
                return Err(ExpectError::ListedTwice { file: at(), case: line.case });
            }
            by_case.insert(line.case.clone(), line);
        }
        Ok(Self { file: file.to_string(), today: today(), by_case })
    }

    pub fn get(&self, case: &str) -> Option<&Expectation> {
        self.by_case.get(case)
    }

    /// How `result` stands, if its case has a line.
    pub fn standing(&self, result: &CaseResult) -> Option<Standing> {
        let line = self.get(&result.case.id)?;
        Some(if line.expires.is_some_and(|last| self.today > last) {
            Standing::Expired
        } else if Expected::of(&result.outcome) == Some(line.outcome) {
            Standing::Held
        } else {
            Standing::NoLongerHolds
        })
    }

    /// Lines naming cases this run did not select: neither held nor deviating.
    pub fn not_run<'a>(&'a self, results: &[CaseResult]) -> Vec<&'a str> {
        self.by_case.keys().filter(|id| !results.iter().any(|r| &r.case.id == *id)).map(String::as_str).collect()
    }
}

/// Today's date, for expiry (UTC: the same day for every runner of a CI fleet).
pub(crate) fn today() -> NaiveDate {
    chrono::Utc::now().date_naive()
}

/// `text` without what changes from run to run against the same target, so that the same
/// failures write the same file: the random part of ids (`conn_…`), seeds, loopback ports,
/// durations and timestamps.
pub(crate) fn stable(text: &str) -> String {
    use regex::Regex;
    use std::sync::LazyLock;
    static RULES: LazyLock<Vec<(Regex, &str)>> = LazyLock::new(|| {
        [
            (r"\b(conn|acc|txn|evt|sess|cli)_[A-Za-z0-9_-]+", "${1}_…"),
            (r"\b(seed) [0-9]+", "$1 …"),
            (r"--seed [0-9]+", "--seed …"),
            (r"\b(127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0):[0-9]+", "$1:PORT"),
            // The receiver's path segment, drawn for each run (`receiver::run_segment`).
            (r"/run-[a-z0-9]{12}\b", "/run-…"),
            (r"\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})?", "…T…"),
            (r"\b[0-9]+(\.[0-9]+)?(ns|µs|ms|s)\b", "…$2"),
            (r"\b[0-9]+(\.[0-9]+)? (ms|seconds?)\b", "… $2"),
        ]
        .into_iter()
        .map(|(pattern, with)| (Regex::new(pattern).expect("a valid pattern"), with))
        .collect()
    });
    let clean: String = text.chars().filter(|c| !c.is_control() || *c == '\n').collect();
    RULES.iter().fold(clean, |text, (pattern, with)| pattern.replace_all(&text, *with).into_owned())
}

/// The file `--write-expectations` writes: one line per case of `results` that did not pass and
/// is no other's consequence, for a team to review before committing it. A consequence
/// ([`CaseResult::consequence_of`]) is not written: what it shows depends on timing while its
/// root does not, so the gate keys on the root and the same server writes the same file. A line
/// of `kept` that still holds keeps its reason and expiry; a new line takes a reason made of
/// the case's title ([`reason_of`]).
pub(crate) fn write(results: &[&CaseResult], kept: Option<&Expectations>, header: &str) -> String {
    let expect = results
        .iter()
        .filter(|r| r.consequence_of.is_none())
        .filter_map(|r| {
            let outcome = Expected::of(&r.outcome)?;
            if let Some(kept) = kept.filter(|k| k.standing(r) == Some(Standing::Held)) {
                return kept.get(&r.case.id).cloned();
            }
            Some(Expectation { case: r.case.id.clone(), outcome, reason: reason_of(r), expires: None })
        })
        .collect();
    let body = toml::to_string(&File { expect }).unwrap_or_default();
    let comments: String = header.lines().map(|l| format!("# {l}\n")).collect();
    format!("{comments}\n{body}")
}

/// The reason a new line is written with: what the case checks and how it ended, never the
/// run's message (ids, times, explored sequences and which of several problems came first vary
/// from run to run; the reports keep them). So the same outcomes write the same bytes.
fn reason_of(r: &CaseResult) -> String {
    let how = match &r.outcome {
        Outcome::Ignored { cause, .. } => format!("ignored ({})", cause.as_str()),
        Outcome::Error { source, .. } => format!("error ({})", source.as_str()),
        other => Expected::of(other).map_or("passed", Expected::as_str).to_string(),
    };
    format!("{how} in this run: {} ({}); the run's reports hold the evidence", r.case.title, r.case.section)
}

/// `expires` as a TOML date or a `YYYY-MM-DD` string.
mod date {
    use chrono::NaiveDate;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NaiveDate>, D::Error> {
        let Some(value) = Option::<toml::Value>::deserialize(d)? else { return Ok(None) };
        let text = match value {
            toml::Value::Datetime(dt) if dt.time.is_none() && dt.offset.is_none() => dt.to_string(),
            toml::Value::String(s) => s,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "expires: a date like 2027-03-31, not a {}",
                    other.type_str()
                )))
            }
        };
        NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("expires: a date like 2027-03-31, not {text:?}")))
    }

    pub(crate) fn serialize<S: Serializer>(date: &Option<NaiveDate>, s: S) -> Result<S::Ok, S::Error> {
        match date {
            Some(d) => s.serialize_str(&d.format("%Y-%m-%d").to_string()),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn lines_are_checked() {
        let ok = "[[expect]]\ncase = \"widget.served\"\noutcome = \"failed\"\nreason = \"r\"\nexpires = 2027-03-31\n";
        let e = Expectations::parse("f", ok).unwrap();
        assert_eq!(e.get("widget.served").unwrap().expires, Some(day("2027-03-31")));
        let quoted = ok.replace("2027-03-31", "\"2027-03-31\"");
        assert_eq!(Expectations::parse("f", &quoted).unwrap(), e);
        for (bad, why) in [
            (ok.replace("widget.served", "widget.servd"), "did you mean"),
            (ok.replace("widget.served", "widget."), "not a case id"),
            (ok.replace("\"failed\"", "\"passed\""), "unknown variant"),
            (ok.replace("reason = \"r\"", "reason = \" \""), "give a reason"),
            (format!("{ok}{ok}"), "listed twice"),
            (ok.replace("2027-03-31", "\"next week\""), "a date like"),
            (ok.replace("reason", "why"), "unknown field"),
        ] {
            let err = Expectations::parse("f", &bad).unwrap_err().to_string();
            assert!(err.starts_with("--expect f: ") && err.contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn the_example_file_parses() {
        let text = include_str!("../../../examples/expectations.toml");
        assert!(Expectations::parse("examples/expectations.toml", text).is_ok());
        let uncommented: String =
            text.lines().map(|l| l.strip_prefix("# ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
        let example = uncommented.split_once("[[expect]]").map(|(_, e)| format!("[[expect]]{e}")).unwrap();
        assert!(Expectations::parse("example", &example).unwrap().get("events.mfa-required-announced").is_some());
    }

    #[test]
    fn reasons_are_whole_and_without_run_ids() {
        let a = "GET http://127.0.0.1:41234/v1/connections/conn_01HZX9/accounts: acc_7Q has connectionId \
                 conn_01HZY0 (seed 1234567890123, waited 8.0s, 250ms, at 2026-11-23T17:27:28.123Z)";
        let given = "the target was given http://127.0.0.1:41234/webhooks/run-0a1b2c3d4e5f/second-client";
        assert_eq!(stable(given), "the target was given http://127.0.0.1:PORT/webhooks/run-…/second-client");
        let b = a.replace("41234", "5001").replace("01HZ", "99AB").replace("1234567890123", "7").replace("8.0s", "9s");
        assert_eq!(stable(a), stable(&b));
        assert_eq!(
            stable(a),
            "GET http://127.0.0.1:PORT/v1/connections/conn_…/accounts: acc_… has connectionId conn_… (seed …, \
             waited …s, …ms, at …T…)"
        );
        let long = "x ".repeat(400);
        assert_eq!(stable(&long), long, "never cut");
        assert_eq!(stable("§4.3 limit 100, 3 items, a\u{1b}[2K b"), "§4.3 limit 100, 3 items, a[2K b");
    }

    #[test]
    fn written_files_read_back() {
        let case = catalogue::find("widget.served").unwrap();
        let result = CaseResult {
            case,
            outcome: Outcome::Failed("the script answers 404\nmore".to_string().into()),
            duration: Default::default(),
            reproduction: None,
            consequence_of: None,
        };
        let text = write(&[&result], None, "written by a test");
        let e = Expectations::parse("f", &text).unwrap();
        let line = e.get("widget.served").unwrap();
        assert_eq!(line.outcome, Expected::Failed);
        assert!(line.reason.starts_with("failed in this run: "), "{}", line.reason);
        // Another message, the same outcome: the same bytes.
        let other = CaseResult { outcome: Outcome::Failed("acc_9 at 12:00".to_string().into()), ..result.clone() };
        assert_eq!(write(&[&other], None, "written by a test"), text);
        assert_eq!(e.standing(&result), Some(Standing::Held));
        let e = Expectations { today: day("2099-01-01"), ..e };
        let passed = CaseResult { outcome: Outcome::Passed, ..result.clone() };
        assert_eq!(e.standing(&passed), Some(Standing::NoLongerHolds));
        let dated = text.replace("reason =", "expires = 2098-12-31\nreason =");
        let e = Expectations { today: day("2099-01-01"), ..Expectations::parse("f", &dated).unwrap() };
        assert_eq!(e.standing(&result), Some(Standing::Expired));
    }
}
