//! Schema `default`s, applied to validated arguments before the handler sees them.

use serde_json::Value;

use crate::json::resolve_pointer;

/// Deepest nesting of schemas (and `$ref`s) that defaults are looked for in.
const MAX_DEPTH: usize = 32;

/// Fills in missing properties that have a `default` in `schema`, in nested objects too.
///
/// Defaults are looked up through `properties`, `$ref` (local), `allOf`, `prefixItems` and
/// `items`. `anyOf`/`oneOf` are not followed: which branch applies is not known. A property that
/// is present (even `null`) is never replaced, and an inserted default gets its own nested
/// defaults. Call it on arguments that have already been validated.
pub fn apply_defaults(schema: &Value, instance: &mut Value) {
    apply(schema, schema, instance, 0);
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let reference = schema.get("$ref").and_then(Value::as_str);
    match reference.and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => resolve_pointer(root, pointer).unwrap_or(schema),
        None => schema,
    }
}

fn default_of<'a>(root: &'a Value, schema: &'a Value) -> Option<&'a Value> {
    schema.get("default").or_else(|| resolve(root, schema).get("default"))
}

fn apply(root: &Value, schema: &Value, instance: &mut Value, depth: usize) {
    if depth > MAX_DEPTH || !schema.is_object() {
        return;
    }
    if let Some(target) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        if let Some(target) = resolve_pointer(root, target) {
            apply(root, target, instance, depth + 1);
        }
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            apply(root, part, instance, depth + 1);
        }
    }
    match instance {
        Value::Object(object) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
            for (name, property_schema) in properties {
                if !object.contains_key(name) {
                    if let Some(default) = default_of(root, property_schema) {
                        object.insert(name.clone(), default.clone());
                    }
                }
                if let Some(value) = object.get_mut(name) {
                    apply(root, property_schema, value, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let prefix = schema.get("prefixItems").and_then(Value::as_array);
            let rest = schema.get("items");
            for (n, item) in items.iter_mut().enumerate() {
                let item_schema = match prefix {
                    Some(prefix) if n < prefix.len() => Some(&prefix[n]),
                    _ => rest,
                };
                if let Some(item_schema) = item_schema {
                    apply(root, item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_properties_get_their_defaults_nested_too() {
        let schema = json!({
            "type": "object",
            "properties": {
                "quantity": {"type": "integer", "default": 1},
                "shipping": {
                    "type": "object",
                    "default": {},
                    "properties": {"speed": {"default": "standard"}, "gift": {"default": false}}
                },
                "note": {"$ref": "#/$defs/note"},
                "lines": {"type": "array", "items": {"properties": {"qty": {"default": 1}}}}
            },
            "$defs": {"note": {"type": "string", "default": "none"}}
        });
        let mut args = json!({"shipping": {"gift": true}, "lines": [{}, {"qty": 3}]});
        apply_defaults(&schema, &mut args);
        assert_eq!(
            args,
            json!({
                "quantity": 1,
                "shipping": {"speed": "standard", "gift": true},
                "note": "none",
                "lines": [{"qty": 1}, {"qty": 3}]
            })
        );
        let mut empty = json!({});
        apply_defaults(&schema, &mut empty);
        assert_eq!(
            empty["shipping"],
            json!({"speed": "standard", "gift": false}),
            "an inserted default gets nested defaults"
        );
    }

    #[test]
    fn present_values_are_never_replaced() {
        let schema = json!({"properties": {"a": {"default": 1}}});
        let mut args = json!({"a": null});
        apply_defaults(&schema, &mut args);
        assert_eq!(args, json!({"a": null}));
    }

    #[test]
    fn defaults_inside_all_of_apply_but_any_of_does_not() {
        let schema = json!({
            "allOf": [{"properties": {"a": {"default": 1}}}],
            "anyOf": [{"properties": {"b": {"default": 2}}}]
        });
        let mut args = json!({});
        apply_defaults(&schema, &mut args);
        assert_eq!(args, json!({"a": 1}));
    }

    #[test]
    fn self_referencing_schemas_terminate() {
        let schema = json!({"$ref": "#", "properties": {"a": {"default": 1}}});
        let mut args = json!({});
        apply_defaults(&schema, &mut args);
        assert_eq!(args, json!({"a": 1}));
    }
}
