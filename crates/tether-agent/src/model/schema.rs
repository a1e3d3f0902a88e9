//! Tool schemas as providers need them: normalised (local `$ref`s inlined, bookkeeping keywords
//! removed), the schema of a constrained turn (one alternative per tool and one for the final
//! answer), and the compact signatures that list tools in a prompt.

use serde_json::{Map, Value, json};
use tether_protocol::ToolSpec;

/// How deep a `$ref` is followed into itself before the rest is left open (`{}`).
const MAX_REF_DEPTH: usize = 3;

/// Keywords that only name or document a schema, removed before it is sent.
const BOOKKEEPING: [&str; 7] = ["$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "$dynamicAnchor"];

/// Keywords that a grammar-constrained decoder can use. Everything else (patterns, formats,
/// conditionals, …) is left to Tether's own validation of the call, which still runs.
const GRAMMAR_KEYWORDS: [&str; 17] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "anyOf",
    "oneOf",
    "allOf",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
];

/// A tool's argument schema as providers accept it: local `$ref`s (`#`, `#/$defs/…`,
/// `#/definitions/…`, any JSON pointer) inlined, recursion cut after a few levels, remote refs
/// left open, bookkeeping keywords removed, and an object schema when there was none.
pub fn normalize_schema(schema: &Value) -> Value {
    let Value::Object(_) = schema else { return json!({"type": "object", "properties": {}}) };
    let mut out = inline(schema, schema, 0);
    if let Value::Object(object) = &mut out {
        if !object.contains_key("type") && !object.contains_key("anyOf") && !object.contains_key("oneOf") {
            object.insert("type".into(), json!("object"));
        }
        if object.get("type") == Some(&json!("object")) && !object.contains_key("properties") {
            object.insert("properties".into(), json!({}));
        }
    }
    out
}

fn inline(node: &Value, root: &Value, depth: usize) -> Value {
    match node {
        Value::Object(object) => {
            if let Some(Value::String(reference)) = object.get("$ref") {
                let target = (depth < MAX_REF_DEPTH).then(|| resolve(reference, root)).flatten();
                let Some(target) = target else { return json!({}) };
                let mut merged = match inline(target, root, depth + 1) {
                    Value::Object(merged) => merged,
                    other => return other,
                };
                for (key, value) in object {
                    if key != "$ref" && !BOOKKEEPING.contains(&key.as_str()) && !merged.contains_key(key) {
                        merged.insert(key.clone(), inline(value, root, depth));
                    }
                }
                return Value::Object(merged);
            }
            let mut out = Map::with_capacity(object.len());
            for (key, value) in object {
                if BOOKKEEPING.contains(&key.as_str()) {
                    continue;
                }
                // Property names are not schemas, their values are.
                let value = if key == "properties" || key == "patternProperties" {
                    match value {
                        Value::Object(props) => {
                            Value::Object(props.iter().map(|(k, v)| (k.clone(), inline(v, root, depth))).collect())
                        }
                        other => other.clone(),
                    }
                } else {
                    inline(value, root, depth)
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|item| inline(item, root, depth)).collect()),
        other => other.clone(),
    }
}

/// Resolves a local reference (`#` or `#/a/b`) in `root`.
fn resolve<'a>(reference: &str, root: &'a Value) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    // A fragment is percent-encoded (RFC 3986): `#/$defs/My%20Type` names `My Type`.
    let decoded = percent_encoding::percent_decode_str(pointer).decode_utf8().ok()?;
    root.pointer(&decoded)
}

/// The part of a (normalised) schema a grammar-constrained decoder uses.
pub fn grammar_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(object) => {
            let mut out = Map::new();
            for (key, value) in object {
                let key = if key == "oneOf" { "anyOf" } else { key.as_str() };
                if GRAMMAR_KEYWORDS.contains(&key) {
                    let value = match key {
                        "properties" => match value {
                            Value::Object(props) => {
                                Value::Object(props.iter().map(|(k, v)| (k.clone(), grammar_schema(v))).collect())
                            }
                            other => other.clone(),
                        },
                        "items" | "additionalProperties" | "anyOf" | "allOf" | "prefixItems" => grammar_schema(value),
                        _ => value.clone(),
                    };
                    out.insert(key.to_string(), value);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(grammar_schema).collect()),
        other => other.clone(),
    }
}

/// The key a constrained reply writes first: the step it takes next, the name of the tool it
/// calls or [`answer_step`]. Deciding comes before writing: measured with the 1.5B model on the
/// README's to-do requests, a reply that first names its step (`{"next": "todo_add", …}`) called
/// the tool for 8 of 8 requests where one whose alternatives began with different keys
/// (`{"name": …}` or `{"answer": …}`) answered "Item 'buy milk' added to the to-do list." to 3
/// of them without calling anything: the model's first wish is the tool's name, and a schema
/// that does not let it write the name first hands the choice to `answer`.
pub const STEP_KEY: &str = "next";

/// The step of a constrained reply that answers the user: `answer`, or `reply` when a tool is
/// named `answer` (tool names are unique, and the step must not be one of them).
pub fn answer_step<'a>(mut names: impl Iterator<Item = &'a str>) -> &'static str {
    if names.any(|name| name == "answer") { "reply" } else { "answer" }
}

/// The final-answer alternative of a constrained turn: `{"next": "answer", "answer": "…"}`.
pub fn answer_schema(step: &str) -> Value {
    json!({
        "type": "object",
        "properties": {STEP_KEY: {"type": "string", "const": step}, "answer": {"type": "string"}},
        "required": [STEP_KEY, "answer"],
        "additionalProperties": false
    })
}

/// A (grammar) schema without the limits that would make a model write a value the user did not
/// ask for: `enum` becomes the values' type, and `minimum`/`maximum` go. A grammar that allows
/// only the red mug makes a model asked for a poster add the red mug (measured on the
/// storefront's product page); without the limit it writes the poster's id, Tether's own
/// validation refuses it with the values this page allows, and the model reads why. The prompt
/// still lists the allowed values, and `const`s (which tell alternatives apart) stay.
pub fn loosen(schema: &Value) -> Value {
    match schema {
        Value::Object(object) => {
            let mut out = Map::with_capacity(object.len());
            for (key, value) in object {
                match key.as_str() {
                    "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {}
                    "enum" => {
                        if !object.contains_key("type") {
                            if let Some(kind) = value.as_array().and_then(|values| common_type(values)) {
                                out.insert("type".into(), json!(kind));
                            }
                        }
                    }
                    "properties" => {
                        let props = value
                            .as_object()
                            .map(|props| props.iter().map(|(k, v)| (k.clone(), loosen(v))).collect())
                            .unwrap_or_default();
                        out.insert(key.clone(), Value::Object(props));
                    }
                    _ => {
                        out.insert(key.clone(), loosen(value));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(loosen).collect()),
        other => other.clone(),
    }
}

/// The JSON type every value has, when they share one (integers and other numbers: `number`).
fn common_type(values: &[Value]) -> Option<&'static str> {
    let kind = |value: &Value| match value {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let first = kind(values.first()?);
    values.iter().all(|value| kind(value) == first).then_some(first)
}

/// The schema every reply of a constrained turn matches: one alternative per tool
/// (`{"next": <the tool>, "arguments": <its schema, loosened>}`), an array of 2 to `max_calls`
/// such calls when `max_calls > 1`, and the final answer (`answer`, or
/// `{"next": "answer", "answer": "…"}` when `None`).
pub fn reply_schema(tools: &[ToolSpec], answer: Option<&Value>, max_calls: usize) -> Value {
    let answer = answer.cloned().unwrap_or_else(|| answer_schema(answer_step(tools.iter().map(|t| t.name.as_str()))));
    let Some(Value::Array(mut alternatives)) = call_alternatives(tools, max_calls) else { return answer };
    alternatives.push(answer);
    json!({"anyOf": alternatives})
}

/// [`reply_schema`] without the final answer: a reply that must call a tool
/// ([`StepRule::MustCall`](super::StepRule::MustCall)). `None` when there are no tools.
pub fn call_schema(tools: &[ToolSpec], max_calls: usize) -> Option<Value> {
    call_alternatives(tools, max_calls).map(|alternatives| json!({"anyOf": alternatives}))
}

/// One alternative per tool, and the array of calls when `max_calls > 1`, as a JSON array;
/// `None` when there are no tools.
fn call_alternatives(tools: &[ToolSpec], max_calls: usize) -> Option<Value> {
    let calls: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {
                    STEP_KEY: {"type": "string", "const": tool.name},
                    "arguments": loosen(&grammar_schema(&normalize_schema(&tool.parameters)))
                },
                "required": [STEP_KEY, "arguments"],
                "additionalProperties": false
            })
        })
        .collect();
    if calls.is_empty() {
        return None;
    }
    let mut alternatives = calls.clone();
    if max_calls > 1 {
        alternatives.push(json!({"type": "array", "items": {"anyOf": calls}, "minItems": 2, "maxItems": max_calls}));
    }
    Some(Value::Array(alternatives))
}

/// A tool as one line of a prompt: `name(arg: type, opt?: type = default): description`.
pub fn signature(tool: &ToolSpec) -> String {
    let schema = normalize_schema(&tool.parameters);
    let args = match schema.get("properties").and_then(Value::as_object) {
        Some(props) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            props
                .iter()
                .map(|(name, prop)| {
                    let optional = if required.contains(&name.as_str()) { "" } else { "?" };
                    format!("{name}{optional}: {}", type_of(prop, 0))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        None => String::new(),
    };
    let description = tool.description.trim();
    if description.is_empty() {
        format!("{}({args})", tool.name)
    } else {
        format!("{}({args}): {description}", tool.name)
    }
}

/// A schema as a short type: `"a"|"b"`, `integer 1..10 = 1`, `[string]`, `{x: number}`.
fn type_of(schema: &Value, depth: usize) -> String {
    let Value::Object(object) = schema else { return "any".into() };
    let mut text = if let Some(Value::Array(values)) = object.get("enum") {
        if values.is_empty() {
            // Not `any`: an empty list allows nothing (a call is refused and says so).
            "(no value allowed now)".to_string()
        } else {
            values.iter().map(Value::to_string).collect::<Vec<_>>().join("|")
        }
    } else if let Some(value) = object.get("const") {
        value.to_string()
    } else if let Some(Value::Array(options)) = object.get("anyOf").or_else(|| object.get("oneOf")) {
        options.iter().map(|o| type_of(o, depth + 1)).collect::<Vec<_>>().join(" | ")
    } else {
        let kind = match object.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
            _ if object.contains_key("properties") => "object".into(),
            _ => "any".into(),
        };
        match kind.as_str() {
            "array" => format!("[{}]", object.get("items").map_or("any".into(), |i| type_of(i, depth + 1))),
            "object" if depth < 3 => match object.get("properties").and_then(Value::as_object) {
                Some(props) if !props.is_empty() => {
                    let required: Vec<&str> = object
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let fields: Vec<String> = props
                        .iter()
                        .map(|(name, prop)| {
                            let optional = if required.contains(&name.as_str()) { "" } else { "?" };
                            format!("{name}{optional}: {}", type_of(prop, depth + 1))
                        })
                        .collect();
                    format!("{{{}}}", fields.join(", "))
                }
                _ => "object".into(),
            },
            _ => kind,
        }
    };
    match (object.get("minimum"), object.get("maximum")) {
        (Some(min), Some(max)) => text.push_str(&format!(" {min}..{max}")),
        (Some(min), None) => text.push_str(&format!(" >= {min}")),
        (None, Some(max)) => text.push_str(&format!(" <= {max}")),
        (None, None) => {}
    }
    if let Some(default) = object.get("default") {
        text.push_str(&format!(" = {default}"));
    }
    if let Some(Value::String(description)) = object.get("description") {
        let description: String = description.chars().take(100).collect();
        text.push_str(&format!(" ({})", description.trim()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec::new(name, "Does it.").with_parameters(parameters)
    }

    #[test]
    fn local_refs_are_inlined_and_recursion_is_cut() {
        let recursive = json!({"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}}});
        let out = normalize_schema(&recursive);
        assert!(!out.to_string().contains("$ref"), "{out}");
        assert_eq!(out.pointer("/properties/child/properties/name/type"), Some(&json!("string")));
        let defs = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/item", "description": "the item"}},
            "$defs": {"item": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
        });
        let out = normalize_schema(&defs);
        assert_eq!(
            out,
            json!({"type": "object", "properties": {"item": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "description": "the item"}}})
        );
        // The fragment is percent-decoded, then read as a JSON pointer (`~1` is `/`).
        let encoded = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/My%20Type"}, "b": {"$ref": "#/$defs/a~1b%25"}},
            "$defs": {"My Type": {"type": "integer"}, "a/b%": {"type": "boolean"}}
        });
        let out = normalize_schema(&encoded);
        assert_eq!(out.pointer("/properties/a/type"), Some(&json!("integer")), "{out}");
        assert_eq!(out.pointer("/properties/b/type"), Some(&json!("boolean")), "{out}");
        let remote = json!({"type": "object", "properties": {"x": {"$ref": "https://elsewhere/x.json"}}});
        assert_eq!(normalize_schema(&remote), json!({"type": "object", "properties": {"x": {}}}));
    }

    #[test]
    fn a_missing_or_bare_schema_becomes_an_object() {
        assert_eq!(normalize_schema(&Value::Null), json!({"type": "object", "properties": {}}));
        assert_eq!(normalize_schema(&json!({"type": "object"})), json!({"type": "object", "properties": {}}));
    }

    #[test]
    fn the_reply_schema_has_one_alternative_per_tool_and_the_answer() {
        let tools = [
            tool(
                "cart_add",
                json!({"type": "object", "properties": {"productId": {"enum": ["a", "b"], "pattern": "^x"}}}),
            ),
            tool("open_cart", json!({"type": "object"})),
        ];
        let schema = reply_schema(&tools, None, 1);
        let alternatives = schema["anyOf"].as_array().unwrap();
        assert_eq!(alternatives.len(), 3);
        assert_eq!(alternatives[0]["properties"]["next"]["const"], "cart_add");
        // Loosened: the grammar lets the model write what the user asked for; validation decides.
        assert_eq!(alternatives[0]["properties"]["arguments"]["properties"]["productId"], json!({"type": "string"}));
        assert_eq!(alternatives[2], answer_schema("answer"));
        let several = reply_schema(&tools, None, 3);
        assert_eq!(several["anyOf"][2]["maxItems"], 3);
        let judge = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        assert_eq!(reply_schema(&[], Some(&judge), 1), judge);
    }

    #[test]
    fn loosening_keeps_structure_and_drops_the_limits_that_force_a_value() {
        let schema = json!({
            "type": "object",
            "properties": {
                "productId": {"type": "string", "enum": ["mug-red"]},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
                "size": {"enum": ["S", "M", "L"]},
                "kind": {"const": "shirt"},
                "tags": {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 3}
            },
            "required": ["productId"]
        });
        assert_eq!(
            loosen(&schema),
            json!({
                "type": "object",
                "properties": {
                    "productId": {"type": "string"},
                    "quantity": {"type": "integer"},
                    "size": {"type": "string"},
                    "kind": {"const": "shirt"},
                    "tags": {"type": "array", "items": {"type": "number"}, "maxItems": 3}
                },
                "required": ["productId"]
            })
        );
        // An empty enum allows nothing: the grammar lets the model name a value, validation refuses it.
        assert_eq!(loosen(&json!({"type": "string", "enum": []})), json!({"type": "string"}));
    }

    #[test]
    fn the_answer_step_never_is_a_tools_name() {
        assert_eq!(answer_step(["cart_add"].into_iter()), "answer");
        let schema = reply_schema(&[tool("answer", json!({}))], None, 1);
        assert_eq!(schema["anyOf"][1]["properties"]["next"]["const"], "reply");
    }

    #[test]
    fn signatures_are_short() {
        let add = tool(
            "cart_add",
            json!({"type": "object", "properties": {"productId": {"type": "string", "enum": ["mug-red", "tee-black"]}, "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}}, "required": ["productId"]}),
        );
        assert_eq!(
            signature(&add),
            "cart_add(productId: \"mug-red\"|\"tee-black\", quantity?: integer 1..10 = 1): Does it."
        );
        assert_eq!(signature(&tool("open_cart", json!({"type": "object"}))), "open_cart(): Does it.");
        let empty = tool(
            "todo_remove",
            json!({"type": "object", "properties": {"title": {"enum": []}}, "required": ["title"]}),
        );
        assert_eq!(signature(&empty), "todo_remove(title: (no value allowed now)): Does it.");
    }
}
