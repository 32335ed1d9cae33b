//! How the state model reads a JSON value: two readings are the same by value, not by how
//! they are written (numbers by value, object keys in any order).

use serde_json::Value;

/// A hash of a JSON value as read: numbers by value, object keys in any order (see [`same`]).
pub(super) fn fingerprint(v: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    fn feed(v: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        match v {
            Value::Number(n) => n.as_f64().map(f64::to_bits).hash(h),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for k in keys {
                    k.hash(h);
                    feed(&map[k], h);
                }
            }
            Value::Array(items) => {
                items.len().hash(h);
                items.iter().for_each(|i| feed(i, h));
            }
            other => other.to_string().hash(h),
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    feed(v, &mut h);
    h.finish()
}

/// Two JSON values are the same reading: numbers by value (`5` and `5.0`), the rest as written.
pub(super) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
