//! How amounts and instants are written in every JSON body (§2.2, §2.3, §6.1), shared by the
//! renderers and the faults of objects.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

/// Minor units to a JSON number in the currency's amount unit (§2.2 `balance`).
pub(crate) fn amount(cents: i64) -> Value {
    json!(cents as f64 / 100.0)
}

/// RFC 3339 UTC with `Z`, whole seconds (§2.2 `createdAt`, `lastSyncedAt`; §2.3 `createdAt`).
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// RFC 3339 UTC with `Z` and milliseconds (§6.1 `created_at`, §6.2 `occurredAt`).
pub(crate) fn timestamp_millis(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A UTC timestamp rendered with a +02:00 offset (for the offset mutants).
pub(crate) fn offset_timestamp(at: DateTime<Utc>) -> String {
    let tz = chrono::FixedOffset::east_opt(2 * 3600).expect("valid offset");
    at.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::Millis, true)
}
