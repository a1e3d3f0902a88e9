//! TypeScript types for the run events, generated from `protocol.schema.json`: the React
//! package reads run events through them (`www/packages/react/src/protocol.ts`), so a change of
//! the wire is a type error there, not a silent `undefined`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::Value;

/// Where the generated file goes.
pub(crate) const OUTPUT: &str = "www/packages/react/src/protocol.ts";

/// The file's text for `schema` (the protocol's JSON Schema).
pub(crate) fn run_event_types(schema: &Value) -> String {
    let defs = &schema["$defs"];
    let version = schema["x-protocol-version"].as_u64().unwrap_or_default();
    let mut out = format!(
        "// Generated from crates/tether-protocol/protocol.schema.json (protocol {version}) by `cargo xtask\n\
         // protocol-schema`; xtask's tidy test checks it is up to date. Do not edit.\n\n"
    );
    // The definitions the run events reach, in the schema's order.
    let mut needed = BTreeSet::new();
    collect(&defs["RunEvent"], defs, &mut needed);
    let names: Vec<&String> = defs.as_object().map(|d| d.keys().collect()).unwrap_or_default();
    for name in names.into_iter().filter(|name| needed.contains(*name)) {
        definition(&mut out, name, &defs[name.as_str()]);
    }
    doc(&mut out, "", &defs["RunEvent"]);
    out.push_str("export type RunEvent =\n");
    let variants = defs["RunEvent"]["oneOf"].as_array().cloned().unwrap_or_default();
    for (n, variant) in variants.iter().enumerate() {
        let kind = variant["properties"]["kind"]["const"].as_str().unwrap_or_default();
        let _ = write!(out, "  | ({{ kind: \"{kind}\" }} & {})", ref_name(&variant["$ref"]));
        out.push_str(if n + 1 == variants.len() { ";\n" } else { "\n" });
    }
    out
}

fn ref_name(reference: &Value) -> &str {
    reference.as_str().and_then(|r| r.rsplit('/').next()).unwrap_or("unknown")
}

/// Every definition `value` refers to, and theirs.
fn collect(value: &Value, defs: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            if let Some(reference) = object.get("$ref") {
                let name = ref_name(reference).to_string();
                if out.insert(name.clone()) {
                    collect(&defs[name.as_str()], defs, out);
                }
            }
            object.values().for_each(|v| collect(v, defs, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, defs, out)),
        _ => {}
    }
}

/// A `/** … */` line from the schema's description, indented by `indent`.
fn doc(out: &mut String, indent: &str, value: &Value) {
    if let Some(text) = value["description"].as_str() {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ").replace("*/", "*\\/");
        let _ = writeln!(out, "{indent}/** {text} */");
    }
}

fn definition(out: &mut String, name: &str, def: &Value) {
    doc(out, "", def);
    if let Some(values) = def["oneOf"].as_array().filter(|v| v.iter().all(|v| v.get("const").is_some())) {
        let names: Vec<String> = values.iter().map(|v| v["const"].to_string()).collect();
        let _ = writeln!(out, "export type {name} = {};\n", names.join(" | "));
        return;
    }
    if let Some(values) = def["enum"].as_array() {
        let names: Vec<String> = values.iter().map(Value::to_string).collect();
        let _ = writeln!(out, "export type {name} = {};\n", names.join(" | "));
        return;
    }
    let _ = writeln!(out, "export interface {name} {{");
    let required: Vec<&str> =
        def["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    if let Some(properties) = def["properties"].as_object() {
        for (field, schema) in properties {
            doc(out, "  ", schema);
            let optional = if required.contains(&field.as_str()) { "" } else { "?" };
            let _ = writeln!(out, "  {field}{optional}: {};", ts_type(schema));
        }
    }
    out.push_str("}\n\n");
}

/// The TypeScript type of a property's schema.
fn ts_type(schema: &Value) -> String {
    if let Some(reference) = schema.get("$ref") {
        return ref_name(reference).to_string();
    }
    let one = |name: &str| match name {
        "string" => "string".to_string(),
        "integer" | "number" => "number".to_string(),
        "boolean" => "boolean".to_string(),
        "null" => "null".to_string(),
        "array" => format!("{}[]", schema.get("items").map_or("unknown".into(), ts_type)),
        "object" => "Record<string, unknown>".to_string(),
        _ => "unknown".to_string(),
    };
    match &schema["type"] {
        Value::String(name) => one(name),
        Value::Array(names) => names.iter().filter_map(Value::as_str).map(one).collect::<Vec<_>>().join(" | "),
        _ => "unknown".to_string(),
    }
}
