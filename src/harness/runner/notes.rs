//! The run's closing notes that count what it received.

/// `webhook deliveries: 12 received: 6 events, 4 copies …, 2 not events …` when any delivery
/// was a copy of an event already received (§6.3 leaves retries open: each event is judged
/// once) or no event at all (judged by `events.deliveries-are-events`), or was refused unread
/// for its size. Only a delivery of the same event id and content is a copy.
pub(super) fn deliveries(deliveries: &[crate::harness::rules::delivery::Delivery], refused: u64) -> Option<String> {
    let (events, others): (Vec<_>, Vec<_>) = deliveries.iter().cloned().partition(|d| d.is_event());
    let unique = crate::harness::rules::delivery::unique(&events).len();
    let copies = events.len() - unique;
    if copies == 0 && others.is_empty() && refused == 0 {
        return None;
    }
    let mut parts = vec![format!("{unique} {}", plural(unique, "event", "events"))];
    if copies > 0 {
        parts.push(format!(
            "{copies} {} of an event already received (a retry or a duplicate, which §6.3 leaves open; each event \
             judged once)",
            plural(copies, "copy", "copies")
        ));
    }
    if !others.is_empty() {
        parts.push(format!(
            "{} not {} (§6.1; judged by events.deliveries-are-events)",
            others.len(),
            plural(others.len(), "an event", "events")
        ));
    }
    if refused > 0 {
        parts.push(format!(
            "{refused} refused unread for {} size, and not judged",
            plural(refused as usize, "its", "their")
        ));
    }
    Some(format!("webhook deliveries: {} received: {}", deliveries.len() as u64 + refused, parts.join("; ")))
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
