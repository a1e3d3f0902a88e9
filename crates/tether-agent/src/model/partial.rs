//! The arguments of a tool call that the model is still writing, read from the incomplete JSON
//! so far with `jiter`'s partial mode (pydantic's parser, the one its streaming validation uses):
//! an unfinished string is kept as far as it goes, an unfinished value or key is left out.

use jiter::{Jiter, JsonValue, PartialMode};
use serde_json::{Map, Number, Value};

/// The object that `text` (the start of a JSON object) holds so far, or `None` when it is not
/// the start of an object, or cannot be read yet.
pub fn partial_object(text: &str) -> Option<Value> {
    let value = JsonValue::parse_with_config(text.trim_start().as_bytes(), false, PartialMode::TrailingStrings).ok()?;
    matches!(value, JsonValue::Object(_)).then(|| to_value(&value))
}

/// The value that `text` (the start of any JSON value) holds so far.
pub fn partial_value(text: &str) -> Option<Value> {
    let value = JsonValue::parse_with_config(text.trim_start().as_bytes(), false, PartialMode::TrailingStrings).ok()?;
    Some(to_value(&value))
}

/// The start of a JSON string body (what follows its opening quote) decoded as far as it is
/// complete, and whether its closing quote was seen: an escape cut short is left out (a
/// surrogate pair waits for its second half). Streams the answer of a constrained turn while it
/// is being written.
#[cfg_attr(not(feature = "openai"), allow(dead_code))]
pub(super) fn partial_string(body: &str) -> (String, bool) {
    let text = format!("\"{body}");
    let mut jiter = Jiter::new(text.as_bytes()).with_allow_partial_strings();
    match jiter.next_str() {
        Ok(decoded) => {
            // Closed when the string reads without partial strings allowed.
            (decoded.to_string(), Jiter::new(text.as_bytes()).next_str().is_ok())
        }
        // Cut inside an escape: what comes before it.
        Err(_) => match body.rfind('\\') {
            Some(cut) => (partial_string(&body[..cut]).0, false),
            // Not a string (a raw control character): nothing to show until the answer is whole.
            None => (String::new(), false),
        },
    }
}

fn to_value(value: &JsonValue<'_>) -> Value {
    match value {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(*b),
        JsonValue::Int(n) => Value::Number(Number::from(*n)),
        JsonValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        JsonValue::Str(s) => Value::String(s.to_string()),
        JsonValue::Array(items) => Value::Array(items.iter().map(to_value).collect()),
        JsonValue::Object(entries) => {
            // A repeated key keeps its last value, as serde_json reads it.
            let mut map = Map::new();
            for (key, item) in entries.iter() {
                map.insert(key.to_string(), to_value(item));
            }
            Value::Object(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unfinished_object_reads_as_far_as_it_goes() {
        assert_eq!(partial_object(r#"{"productId": "red-m"#), Some(json!({"productId": "red-m"})));
        assert_eq!(partial_object(r#"{"productId": "red-mug", "quan"#), Some(json!({"productId": "red-mug"})));
        assert_eq!(
            partial_object(r#"{"productId": "red-mug", "quantity": 2"#),
            Some(json!({"productId": "red-mug", "quantity": 2}))
        );
        assert_eq!(partial_object(r#"{"tags": ["a", "b"#), Some(json!({"tags": ["a", "b"]})));
        assert_eq!(partial_object(r#"{"note": "say \"hi"#), Some(json!({"note": "say \"hi"})));
        assert_eq!(partial_object("{"), Some(json!({})));
        assert_eq!(partial_object(r#"{"a": 1}"#), Some(json!({"a": 1})));
    }

    #[test]
    fn partial_strings_decode_as_far_as_they_are_complete() {
        assert_eq!(partial_string("Hello, wor"), ("Hello, wor".into(), false));
        assert_eq!(partial_string("a\\nb\" , "), ("a\nb".into(), true));
        assert_eq!(partial_string("x\\u00d"), ("x".into(), false));
        assert_eq!(partial_string("x\\u00d7\""), ("x×".into(), true));
        assert_eq!(partial_string("\\ud83d\\ude00\""), ("😀".into(), true));
        assert_eq!(partial_string("\\ud83d"), ("".into(), false));
        assert_eq!(partial_string("tail\\"), ("tail".into(), false));
        assert_eq!(partial_string("say \\\"hi"), ("say \"hi".into(), false));
        assert_eq!(partial_string(""), ("".into(), false));
    }

    #[test]
    fn what_is_not_an_object_gives_nothing() {
        assert_eq!(partial_object(""), None);
        assert_eq!(partial_object("[1, 2"), None);
        assert_eq!(partial_object("\"text"), None);
        assert_eq!(partial_object("not json"), None);
        assert_eq!(partial_value("[1, 2"), Some(json!([1, 2])));
    }
}
