//! A webhook delivery as the harness keeps it, and the small helpers over a list of them.
//! Pure data: the receiver fills it, the event rules and `check-events` read it.

use serde_json::Value;

/// One POST the receiver got.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// Arrival order at the receiver (informative only: delivery order is not specified).
    pub seq: u64,
    /// The body, or `Value::Null` when it was not JSON.
    pub body: Value,
}

impl Delivery {
    /// The connection the event concerns: `data.connectionId`, or the short form's `connectionId`.
    pub fn connection_id(&self) -> Option<&str> {
        self.body.pointer("/data/connectionId").or_else(|| self.body.get("connectionId")).and_then(Value::as_str)
    }

    /// `type` of the envelope, or `event` of the short `connection.connected` form (§6.2).
    pub fn event_type(&self) -> Option<&str> {
        self.body.get("type").or_else(|| self.body.get("event")).and_then(Value::as_str)
    }

    /// Whether this is the short flat form of §6.2.
    pub fn is_short_form(&self) -> bool {
        self.body.get("event").is_some() && self.body.get("data").is_none()
    }

    /// What identifies the event across retries: the envelope `id`, or the short form's
    /// `event`+`timestamp` (which has no id).
    pub fn dedup_key(&self) -> String {
        match self.body.get("id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => format!(
                "{}@{}",
                self.event_type().unwrap_or("?"),
                self.body.get("timestamp").and_then(Value::as_str).unwrap_or("?")
            ),
        }
    }

    /// The delivery without what a re-stamped retry changes (`id`, `created_at`,
    /// `data.eventId`), when it says when the event occurred (`data.occurredAt`): equal for a
    /// retry, whatever id it was sent under. Without `occurredAt`, two events of equal content
    /// may be a real revisit of a state, so there is no such key.
    fn content_key(&self) -> Option<String> {
        let occurred = self.body.pointer("/data/occurredAt").and_then(Value::as_str).filter(|s| !s.is_empty());
        occurred?;
        let mut body = self.body.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("id");
            o.remove("created_at");
            if let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) {
                data.remove("eventId");
            }
        }
        Some(body.to_string())
    }

    /// `connection.verifying(prev=created)`, for messages.
    pub fn label(&self) -> String {
        let ty = self.event_type().unwrap_or("<no type>");
        match self.body.pointer("/data/previousStatus") {
            Some(Value::String(p)) => format!("{ty}(prev={p})"),
            Some(Value::Null) | None => ty.to_string(),
            Some(other) => format!("{ty}(prev={other})"),
        }
    }
}

/// Deliveries counted once per event: a duplicate (a retry, allowed by §6.3) has the same
/// event id and content, or (a retry re-stamped with a new id: §6.1 does not say a retry keeps
/// its id) the same content and the same `data.occurredAt`, the millisecond the event occurred
/// (§6.2). The same id with other content is another event, kept here and judged by
/// `events.unique-ids` (§6.1: the id identifies the event).
pub fn unique(deliveries: &[Delivery]) -> Vec<Delivery> {
    let mut seen = std::collections::HashSet::new();
    deliveries
        .iter()
        .filter(|d| seen.insert(d.content_key().unwrap_or_else(|| format!("{}{}", d.dedup_key(), d.body))))
        .cloned()
        .collect()
}

/// `[connection.created, connection.verifying(prev=…)]`, for messages.
pub fn labels(deliveries: &[Delivery]) -> String {
    let labels: Vec<String> = unique(deliveries).iter().map(Delivery::label).collect();
    format!("[{}]", labels.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(id: &str, occurred: &str) -> Delivery {
        let data =
            json!({"eventId": id, "type": "connection.connected", "connectionId": "conn_1", "occurredAt": occurred});
        Delivery { seq: 0, body: json!({"id": id, "type": "connection.connected", "created_at": id, "data": data}) }
    }

    #[test]
    fn a_retry_counts_once_under_its_id_or_a_new_one() {
        let first = delivery("evt_1", "2026-01-01T00:00:00.001Z");
        let restamped = delivery("evt_2", "2026-01-01T00:00:00.001Z");
        let revisit = delivery("evt_3", "2026-01-01T00:00:00.002Z");
        assert_eq!(unique(&[first.clone(), first.clone(), restamped]).len(), 1);
        assert_eq!(unique(&[first, revisit]).len(), 2, "another moment is another event");
    }
}
