//! The run's memory budget: whatever a target sends, a run stays within a fixed resident size
//! (docs/checks.md "Hostile targets"; `tests/hostile.rs` measures it). Each structure that holds target
//! data has its own bound, and these are the ones that are not a simple count:
//!
//! - a response body is read up to 4 MiB (`http`), and parsed only when its JSON is not
//!   [`too_dense`]: parsed JSON takes many times its text (an object costs hundreds of bytes);
//! - walks hold only ids and the fields checks read, [`MAX_HELD`] bytes for the whole run;
//! - the webhook receiver keeps deliveries up to a weight of [`MAX_HELD`] (see [`weight`]).

/// Most bytes that the run's walks, and the receiver's deliveries, hold each.
pub(crate) const MAX_HELD: usize = 32 * 1024 * 1024;
/// Most JSON objects in one parsed body.
const MAX_OBJECTS: usize = 50_000;
/// Most JSON values (of any kind) in one parsed body.
const MAX_VALUES: usize = 500_000;
/// What one parsed object and one parsed value cost, roughly (a map node, a `Value`).
const OBJECT_COST: usize = 600;
const VALUE_COST: usize = 40;

/// Upper bounds of the objects and values in JSON `text`, by counting the bytes that open them
/// (some may sit inside strings: the counts only ever overestimate).
fn counts(text: &[u8]) -> (usize, usize) {
    // memchr, built optimized, where an iterator of our own crate runs at opt-level 0: every
    // answer is counted each time the record is built (issue 72).
    let objects = memchr::memchr_iter(b'{', text).count();
    let values = objects + memchr::memchr3_iter(b'[', b',', b':', text).count() + 1;
    (objects, values)
}

/// Why `text` is too dense to parse within the budget, if it is.
pub(crate) fn too_dense(text: &[u8]) -> Option<String> {
    let (objects, values) = counts(text);
    (objects > MAX_OBJECTS || values > MAX_VALUES).then(|| {
        format!(
            "the body holds up to {objects} JSON objects and {values} values; the harness parses at most \
             {MAX_OBJECTS} objects and {MAX_VALUES} values in one body"
        )
    })
}

/// The memory parsed JSON `text` takes, roughly (an overestimate).
pub(crate) fn weight(text: &[u8]) -> usize {
    let (objects, values) = counts(text);
    text.len() + objects * OBJECT_COST + values * VALUE_COST
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_json_is_refused() {
        assert!(too_dense(br#"{"data":[{"id":"txn_1"}],"has_more":false}"#).is_none());
        assert!(too_dense("[{},".repeat(60_000).as_bytes()).is_some());
        assert!(weight(b"{}") > 600);
    }
}
