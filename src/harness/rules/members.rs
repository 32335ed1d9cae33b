//! Names repeated in one JSON object (RFC 8259 §4): the names of an object SHOULD be unique, and
//! a reader of one that repeats a name keeps either value at will. A repeat with the same value
//! is the recommendation only, and not judged; a repeat with another value leaves the object
//! saying two things of one field (two `balance`s of one account, §2.2), which no client can
//! read as the spec's one value (the ruling "One value per name", docs/checks.md).

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// The first name an object of a JSON text repeats with another value, if any: what was
/// received, read before any parser keeps one of the two.
pub(crate) fn repeated_differently(text: &str) -> Option<String> {
    let mut found = None;
    let mut reader = serde_json::Deserializer::from_str(text);
    Scan(&mut found).deserialize(&mut reader).ok()?;
    found
}

/// Reads a value as `serde_json::Value` does, noting in `.0` the first name an object repeats
/// with a value unlike its first.
struct Scan<'a>(&'a mut Option<String>);

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Scan(&mut *self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value_seed(Scan(&mut *self.0))?;
            if members.get(&name).is_some_and(|first| *first != value) && self.0.is_none() {
                *self.0 = Some(name.clone());
            }
            members.entry(name).or_insert(value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_repeated_with_another_value_is_found_and_only_that() {
        let two = r#"[{"id":"acc_1","balance":10.5,"name":"A","balance":12.25}]"#;
        assert_eq!(repeated_differently(two), Some("balance".to_string()));
        assert_eq!(repeated_differently(r#"{"a":{"b":1,"b":1},"c":[1,2]}"#), None, "the same value twice");
        assert_eq!(repeated_differently(r#"{"a":{"b":{"x":1},"b":{"x":2}}}"#), Some("b".to_string()));
        assert_eq!(repeated_differently(r#"{"a":1,"b":2}"#), None);
        assert_eq!(repeated_differently("not json"), None);
    }
}
