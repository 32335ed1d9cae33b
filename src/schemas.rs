//! JSON Schemas derived from the spec (`schemas/`), embedded in the binary and compiled once.
//!
//! The rulings behind the schemas are written down in `schemas/README.md`. Every schema has an
//! `$id` under `https://bankconf.dev/schemas/`; cross-file `$ref`s are resolved from the
//! embedded copies, never from the network.

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use std::fmt;
use std::sync::{LazyLock, OnceLock};

/// One schema per payload the spec shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schema {
    /// §2.1, §4.1: the connection-creation response.
    ConnectionCreated,
    /// §2.2: one account.
    Account,
    /// §4.2: the accounts array.
    Accounts,
    /// §2.3: one transaction.
    Transaction,
    /// §4.3: a transactions page.
    TransactionsPage,
    /// §6: a webhook delivery (envelope form or the short `connection.connected` form).
    WebhookEvent,
    /// Not a payload of the service: bankconf's own `--report-json` output.
    Report,
}

/// Base of every schema `$id`.
pub const ID_BASE: &str = "https://bankconf.dev/schemas/";

/// Longest `Violation::message`, in characters (the harness prints it in CI logs).
pub const MAX_MESSAGE_CHARS: usize = 200;

/// Instances whose compact JSON is longer than this are not quoted in messages.
const MAX_QUOTED_INSTANCE_CHARS: usize = 60;

impl Schema {
    /// The payloads of the service (§4, §6); every schema but the report.
    pub const PAYLOADS: [Schema; 6] = [
        Self::ConnectionCreated,
        Self::Account,
        Self::Accounts,
        Self::Transaction,
        Self::TransactionsPage,
        Self::WebhookEvent,
    ];

    /// Every schema file: the payloads of [`Schema::PAYLOADS`] and the report of the harness.
    pub const ALL: [Schema; 7] = {
        let mut every = [Self::Report; 7];
        let mut i = 0;
        while i < Self::PAYLOADS.len() {
            every[i] = Self::PAYLOADS[i];
            i += 1;
        }
        every
    };

    /// File name under `schemas/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::ConnectionCreated => "connection-created.json",
            Self::Account => "account.json",
            Self::Accounts => "accounts.json",
            Self::Transaction => "transaction.json",
            Self::TransactionsPage => "transactions-page.json",
            Self::WebhookEvent => "webhook-event.json",
            Self::Report => "report.json",
        }
    }

    /// The embedded JSON text of the schema file.
    pub fn source(self) -> &'static str {
        match self {
            Self::ConnectionCreated => include_str!("../schemas/connection-created.json"),
            Self::Account => include_str!("../schemas/account.json"),
            Self::Accounts => include_str!("../schemas/accounts.json"),
            Self::Transaction => include_str!("../schemas/transaction.json"),
            Self::TransactionsPage => include_str!("../schemas/transactions-page.json"),
            Self::WebhookEvent => include_str!("../schemas/webhook-event.json"),
            Self::Report => include_str!("../schemas/report.json"),
        }
    }

    /// The parsed schema document.
    pub fn document(self) -> &'static Value {
        &DOCUMENTS[self.index()]
    }

    /// The schema's `$id`.
    pub fn id(self) -> String {
        format!("{ID_BASE}{}", self.file_name())
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|s| *s == self).expect("every schema is in ALL")
    }

    fn from_id(id: &str) -> Option<Self> {
        let name = id.strip_prefix(ID_BASE).unwrap_or(id);
        Self::ALL.into_iter().find(|s| s.file_name() == name)
    }
}

static DOCUMENTS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    Schema::ALL
        .iter()
        .map(|s| {
            serde_json::from_str(s.source()).unwrap_or_else(|e| panic!("schemas/{} is not JSON: {e}", s.file_name()))
        })
        .collect()
});

/// Each compiled on its first use: a run never validates a report, so it never pays for
/// compiling `report.json` (compiling is most of a short run's start in a debug build).
static VALIDATORS: [OnceLock<jsonschema::Validator>; Schema::ALL.len()] =
    [const { OnceLock::new() }; Schema::ALL.len()];

/// The compiled validator of `schema`.
fn validator(schema: Schema) -> &'static jsonschema::Validator {
    VALIDATORS[schema.index()].get_or_init(|| compile(schema).unwrap_or_else(|e| panic!("{e}")))
}

/// Compiles one schema with draft 2020-12, format assertion on, and every other embedded
/// schema registered under its `$id` (so `$ref` never leaves the process).
fn compile(schema: Schema) -> Result<jsonschema::Validator, String> {
    let mut options = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .should_ignore_unknown_formats(false)
        // "ISO 8601 UTC timestamp" (§2.2, §2.3, §6): basic or extended, not only RFC 3339's profile.
        // ISO 8601 joins date and time with `T` (chrono's RFC 3339 reader also takes a space).
        .with_format("date-time", |s: &str| {
            let extended = crate::spec::extended_timestamp(s);
            matches!(extended.as_bytes().get(10), Some(b'T' | b't'))
                && chrono::DateTime::parse_from_rfc3339(&extended).is_ok()
        });
    for other in Schema::ALL.into_iter().filter(|o| *o != schema) {
        let resource = jsonschema::Resource::from_contents(other.document().clone())
            .map_err(|e| format!("schemas/{}: {e}", other.file_name()))?;
        options = options.with_resource(other.id(), resource);
    }
    options.build(schema.document()).map_err(|e| format!("schemas/{} does not compile: {e}", schema.file_name()))
}

/// One way an instance breaks a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer into the instance, e.g. `/data/0/accountId` (empty for the root).
    pub instance_path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.instance_path.is_empty() { "/" } else { &self.instance_path };
        write!(f, "{path}: {}", self.message)
    }
}

/// [`validate`], as a message for a failure: `what` names where `instance` came from, and
/// the first three violations are shown.
pub(crate) fn check(schema: Schema, instance: &Value, what: &str) -> Result<(), String> {
    violated(schema, instance).map_err(|problem| format!("{what}: {problem}"))
}

/// [`check`] for a problem that names its request apart: `does not validate against …`.
pub(crate) fn violated(schema: Schema, instance: &Value) -> Result<(), String> {
    validate(schema, instance).map_err(|violations| {
        let first: Vec<String> = violations.iter().take(3).map(ToString::to_string).collect();
        let more = violations.len().saturating_sub(3);
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        format!("does not validate against {}: {}{more}", schema.file_name(), first.join("; "))
    })
}

/// Validates `instance` against `schema`, with format assertion on.
///
/// Each violation's message is at most [`MAX_MESSAGE_CHARS`] characters and ends with the
/// spec section(s) the broken constraint cites (from the schema's `$comment`), e.g. `[§2.2]`.
pub fn validate(schema: Schema, instance: &Value) -> Result<(), Vec<Violation>> {
    let validator = validator(schema);
    let violations: Vec<Violation> = validator
        .iter_errors(instance)
        .map(|error| {
            let quotable = compact_len(&error.instance) <= MAX_QUOTED_INSTANCE_CHARS;
            let base = match (&error.kind, quotable) {
                // The library's text ("X was expected") does not show what was found.
                (ValidationErrorKind::Constant { expected_value }, true) => {
                    format!("{} found, {expected_value} expected", error.instance)
                }
                (_, true) => error.to_string(),
                (_, false) => error.masked_with(placeholder(&error.instance)).to_string(),
            };
            let message = match sections_at(schema, error.schema_path.as_str()) {
                Some(sections) => format!("{base} [{sections}]"),
                None => base,
            };
            Violation {
                instance_path: error.instance_path.as_str().to_owned(),
                message: truncate(&message, MAX_MESSAGE_CHARS),
            }
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

fn compact_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count() + 2,
        Value::Array(_) | Value::Object(_) => serde_json::to_string(value).map_or(usize::MAX, |s| s.len()),
        other => other.to_string().len(),
    }
}

fn placeholder(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "the object",
        Value::Array(_) => "the array",
        Value::String(_) => "the (long) string",
        _ => "the value",
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max_chars - 1).collect();
    out.push('…');
    out
}

/// The section citation (`§…` before the first `:`) of the deepest schema node with a
/// `$comment` along `schema_path` (a JSON pointer into the schema, `$ref`s followed).
fn sections_at(schema: Schema, schema_path: &str) -> Option<String> {
    let mut doc = schema.document();
    let mut node = doc;
    let mut best = citation(node);
    for raw in schema_path.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        let next = if segment == "$ref" {
            node.get("$ref").and_then(Value::as_str).and_then(|target| {
                let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
                if !file.is_empty() {
                    doc = Schema::from_id(file)?.document();
                }
                doc.pointer(fragment)
            })
        } else {
            match node {
                Value::Object(map) => map.get(&segment),
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
        };
        let Some(next) = next else { break };
        node = next;
        if let Some(found) = citation(node) {
            best = Some(found);
        }
    }
    best
}

fn citation(node: &Value) -> Option<String> {
    let comment = node.get("$comment")?.as_str()?;
    let head = comment.split(':').next()?.trim();
    head.starts_with('§').then(|| head.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncate_counts_characters_not_bytes() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("••••", 3), "••…");
        assert_eq!(truncate(&"x".repeat(500), 200).chars().count(), 200);
    }

    #[test]
    fn sections_follow_refs_into_other_files() {
        assert_eq!(
            sections_at(Schema::TransactionsPage, "/properties/data/items/$ref/properties/id/pattern"),
            Some("§2, §2.3".to_owned())
        );
        assert_eq!(
            sections_at(Schema::WebhookEvent, "/else/$ref/properties/created_at/$ref/pattern"),
            Some("§6.1, §6.2".to_owned())
        );
        assert_eq!(sections_at(Schema::Account, "/required"), Some("§2.2".to_owned()));
        assert_eq!(sections_at(Schema::Account, "/no/such/place"), Some("§2.2".to_owned()));
    }

    #[test]
    fn every_schema_compiles_offline() {
        for schema in Schema::ALL {
            compile(schema).unwrap();
            assert_eq!(schema.document()["$id"], json!(schema.id()));
        }
    }
}
