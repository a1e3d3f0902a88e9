//! The arguments of a tool call that the model is still writing, read from the incomplete JSON
//! so far with `jiter`'s partial mode (pydantic's parser, the one its streaming validation uses):
//! an unfinished string is kept as far as it goes, an unfinished value or key is left out.

use jiter::{JsonValue, PartialMode};
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
    fn what_is_not_an_object_gives_nothing() {
        assert_eq!(partial_object(""), None);
        assert_eq!(partial_object("[1, 2"), None);
        assert_eq!(partial_object("\"text"), None);
        assert_eq!(partial_object("not json"), None);
        assert_eq!(partial_value("[1, 2"), Some(json!([1, 2])));
    }
}
