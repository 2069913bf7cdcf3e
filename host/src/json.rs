//! Strict JSON parsing of tool-call input.
//!
//! `serde_json::from_str` already rejects trailing data, lone surrogates, non-finite numbers and nesting
//! deeper than 128, but it keeps the last of duplicate keys. A model that emits `{"path":"a","path":"b"}`
//! means two things at once, and whoever reads the input next (a schema validator, a tool in another
//! language) may pick the other one, so duplicates are an error here.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a text is not one strict JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StrictJsonError(String);

/// Parses `text` as exactly one JSON value: the whole buffer, no trailing data, no duplicate keys.
pub fn parse_strict(text: &str) -> Result<Value, StrictJsonError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = StrictValue
        .deserialize(&mut deserializer)
        .map_err(|e| StrictJsonError(e.to_string()))?;
    deserializer
        .end()
        .map_err(|e| StrictJsonError(e.to_string()))?;
    Ok(value)
}

/// A `DeserializeSeed` building a `serde_json::Value` that refuses duplicate object keys.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
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

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_one_whole_value() {
        let v = parse_strict(r#" {"path": "notes.txt", "n": [1, -2, 3.5, true, null]} "#).unwrap();
        assert_eq!(v["path"], "notes.txt");
        assert_eq!(v["n"][2], 3.5);
    }

    #[test]
    fn rejects_what_a_lenient_parser_would_take() {
        for bad in [
            r#"{"path":"a","path":"b"}"#,
            r#"{"a":{"x":1,"x":2}}"#,
            r#"{"path":"notes.txt"} {"path":"x"}"#,
            r#"{"path":"notes.txt"}x"#,
            r#"{"path":"notes.txt","content":"Fil"#,
            r#"{"s":"\ud800"}"#,
            r#"{"n":1e400}"#,
            r#"{"a":1,}"#,
            "",
            "NaN",
        ] {
            assert!(parse_strict(bad).is_err(), "accepted {bad:?}");
        }
    }
}
