//! Compiling a schema into the compact validator's flat node list: every keyword checked, `$ref`s
//! resolved to node indices, loops that never descend into the instance refused.

use serde_json::{Map, Number, Value};
use tether_protocol::Quoted;

use super::{ANNOTATIONS, COMPACT_KEYWORDS, CompactSchema, MAX_SCHEMA_DEPTH, Node, RegexEngine, types};
use crate::CoreError;
use crate::json::{escape_pointer_token, is_integer, resolve_pointer};

struct Compiler<'a, R: RegexEngine> {
    root: &'a Value,
    engine: &'a R,
    nodes: Vec<Node<R::Regex>>,
    /// Node index by JSON pointer, as a JSON object of numbers: the map code the validator
    /// already carries, where a second map type would add its own code to the browser module.
    by_pointer: Map<String, Value>,
}

/// Compiles `schema` into a [`CompactSchema`], refusing unknown keywords, bad values and
/// `$ref` loops that never descend into the instance.
pub(super) fn compile<R: RegexEngine>(engine: &R, schema: &Value) -> Result<CompactSchema<R::Regex>, CoreError> {
    let mut compiler = Compiler { root: schema, engine, nodes: Vec::new(), by_pointer: Map::new() };
    compiler.compile(schema, "", 0)?;
    let compiled = CompactSchema { nodes: compiler.nodes };
    compiled.refuse_loops()?;
    Ok(compiled)
}

fn invalid(path: &str, reason: impl Into<String>) -> CoreError {
    CoreError::InvalidSchema { path: path.to_string(), reason: reason.into() }
}

/// An invalid-schema error about `keyword` of the schema at `pointer`.
fn keyword_error(pointer: &str, keyword: &str, reason: impl Into<String>) -> CoreError {
    CoreError::InvalidSchema { path: child_pointer(pointer, keyword), reason: reason.into() }
}

fn child_pointer(parent: &str, token: &str) -> String {
    let mut pointer = parent.to_string();
    pointer.push('/');
    escape_pointer_token(token, &mut pointer);
    pointer
}

impl<R: RegexEngine> Compiler<'_, R> {
    fn compile(&mut self, schema: &Value, pointer: &str, depth: usize) -> Result<usize, CoreError> {
        if let Some(index) = self.by_pointer.get(pointer).and_then(Value::as_u64) {
            return Ok(index as usize);
        }
        if depth > MAX_SCHEMA_DEPTH {
            return Err(invalid(pointer, format!("schema is nested deeper than {} levels", MAX_SCHEMA_DEPTH as u64)));
        }
        let index = self.nodes.len();
        self.nodes.push(Node::default());
        self.by_pointer.insert(pointer.to_string(), Value::from(index));
        let node = match schema {
            Value::Bool(always) => Node { always: Some(*always), ..Node::default() },
            Value::Object(map) => self.compile_object(map, pointer, depth)?,
            _ => return Err(invalid(pointer, "a schema must be an object or a boolean")),
        };
        self.nodes[index] = node;
        Ok(index)
    }

    fn subschema(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        pointer: &str,
        depth: usize,
    ) -> Result<Option<usize>, CoreError> {
        match map.get(key) {
            Some(schema) => Ok(Some(self.compile(schema, &child_pointer(pointer, key), depth + 1)?)),
            None => Ok(None),
        }
    }

    fn schema_list(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        pointer: &str,
        depth: usize,
    ) -> Result<Vec<usize>, CoreError> {
        let Some(value) = map.get(key) else { return Ok(Vec::new()) };
        let list_pointer = child_pointer(pointer, key);
        let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
            return Err(invalid(&list_pointer, format!("{key} must be a non-empty array of schemas")));
        };
        let mut indices = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            indices.push(self.compile(item, &child_pointer(&list_pointer, &(n as u64).to_string()), depth + 1)?);
        }
        Ok(indices)
    }

    fn schema_map(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        pointer: &str,
        depth: usize,
    ) -> Result<Vec<(String, usize)>, CoreError> {
        let Some(value) = map.get(key) else { return Ok(Vec::new()) };
        let map_pointer = child_pointer(pointer, key);
        let Some(entries) = value.as_object() else {
            return Err(invalid(&map_pointer, format!("{key} must be an object of schemas")));
        };
        let mut compiled = Vec::with_capacity(entries.len());
        for (name, schema) in entries {
            compiled.push((name.clone(), self.compile(schema, &child_pointer(&map_pointer, name), depth + 1)?));
        }
        Ok(compiled)
    }

    fn compile_object(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) -> Result<Node<R::Regex>, CoreError> {
        for keyword in map.keys() {
            let known = COMPACT_KEYWORDS.contains(&keyword.as_str()) || ANNOTATIONS.contains(&keyword.as_str());
            let root_id = keyword == "$id" && pointer.is_empty();
            if !known && !root_id {
                return Err(CoreError::UnsupportedKeyword { keyword: keyword.clone(), path: pointer.to_string() });
            }
        }
        if let Some(dialect) = map.get("$schema") {
            let dialect = dialect.as_str().unwrap_or_default();
            if dialect.trim_end_matches('#') != "https://json-schema.org/draft/2020-12/schema" {
                return Err(keyword_error(
                    pointer,
                    "$schema",
                    format!("only JSON Schema 2020-12 is supported, not {}", Quoted(dialect)),
                ));
            }
        }
        let number = |key: &str| -> Result<Option<Number>, CoreError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::Number(number)) => Ok(Some(number.clone())),
                Some(_) => Err(keyword_error(pointer, key, format!("{key} must be a number"))),
            }
        };
        let count = |key: &str| -> Result<Option<u64>, CoreError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::Number(number)) if is_integer(number) && number.as_f64().is_some_and(|f| f >= 0.0) => {
                    Ok(Some(number.as_u64().unwrap_or_else(|| number.as_f64().unwrap_or(0.0) as u64)))
                }
                Some(_) => Err(keyword_error(pointer, key, format!("{key} must be a non-negative integer"))),
            }
        };

        let mut node = Node {
            minimum: number("minimum")?,
            maximum: number("maximum")?,
            exclusive_minimum: number("exclusiveMinimum")?,
            exclusive_maximum: number("exclusiveMaximum")?,
            multiple_of: number("multipleOf")?,
            min_length: count("minLength")?,
            max_length: count("maxLength")?,
            min_items: count("minItems")?,
            max_items: count("maxItems")?,
            constant: map.get("const").cloned(),
            ..Node::default()
        };
        if node.multiple_of.as_ref().is_some_and(|m| m.as_f64().is_none_or(|f| f <= 0.0)) {
            return Err(keyword_error(pointer, "multipleOf", "multipleOf must be greater than 0"));
        }
        if let Some(value) = map.get("type") {
            node.types = parse_types(value)
                .ok_or_else(|| keyword_error(pointer, "type", "type must be a type name or an array of type names"))?;
        }
        if let Some(value) = map.get("enum") {
            let values = value.as_array().ok_or_else(|| keyword_error(pointer, "enum", "enum must be an array"))?;
            node.enumeration = Some(values.clone());
        }
        if let Some(value) = map.get("required") {
            let names = value
                .as_array()
                .and_then(|names| names.iter().map(|name| name.as_str().map(String::from)).collect::<Option<Vec<_>>>())
                .ok_or_else(|| keyword_error(pointer, "required", "required must be an array of strings"))?;
            if names.iter().enumerate().any(|(n, name)| names[..n].contains(name)) {
                return Err(keyword_error(pointer, "required", "required must not list a name twice"));
            }
            node.required = names;
        }
        if let Some(value) = map.get("pattern") {
            let pattern_pointer = child_pointer(pointer, "pattern");
            let source = value.as_str().ok_or_else(|| invalid(&pattern_pointer, "pattern must be a string"))?;
            let regex = self.engine.compile(source).map_err(|error| {
                invalid(&pattern_pointer, format!("pattern {} does not compile: {error}", Quoted(source)))
            })?;
            node.pattern = Some((source.to_string(), regex));
        }
        if let Some(value) = map.get("uniqueItems") {
            node.unique_items = value
                .as_bool()
                .ok_or_else(|| keyword_error(pointer, "uniqueItems", "uniqueItems must be a boolean"))?;
        }
        if let Some(value) = map.get("$ref") {
            let ref_pointer = child_pointer(pointer, "$ref");
            let reference = value.as_str().ok_or_else(|| invalid(&ref_pointer, "$ref must be a string"))?;
            let target_pointer = local_pointer(reference).ok_or_else(|| {
                invalid(
                    &ref_pointer,
                    format!("$ref {} is not a local reference (\"#\" or \"#/...\")", Quoted(reference)),
                )
            })?;
            let target = resolve_pointer(self.root, &target_pointer)
                .ok_or_else(|| invalid(&ref_pointer, format!("$ref {} points at nothing", Quoted(reference))))?;
            node.reference = Some(self.compile(target, &target_pointer, depth + 1)?);
        }
        // Definitions are compiled even when nothing refers to them, so that an unsupported
        // keyword anywhere in the schema is refused.
        self.schema_map(map, "$defs", pointer, depth)?;
        self.schema_map(map, "definitions", pointer, depth)?;
        node.properties = self.schema_map(map, "properties", pointer, depth)?;
        node.additional_properties = self.subschema(map, "additionalProperties", pointer, depth)?;
        node.prefix_items = self.schema_list(map, "prefixItems", pointer, depth)?;
        node.items = self.subschema(map, "items", pointer, depth)?;
        node.all_of = self.schema_list(map, "allOf", pointer, depth)?;
        node.any_of = self.schema_list(map, "anyOf", pointer, depth)?;
        node.one_of = self.schema_list(map, "oneOf", pointer, depth)?;
        node.not = self.subschema(map, "not", pointer, depth)?;
        Ok(node)
    }
}

fn parse_types(value: &Value) -> Option<u8> {
    let flag =
        |name: &Value| types::NAMES.iter().find(|(known, _)| name.as_str() == Some(known)).map(|(_, flag)| *flag);
    match value {
        Value::String(_) => flag(value),
        // The meta-schema asks for a non-empty array without repeats.
        Value::Array(names) if !names.is_empty() => names.iter().try_fold(0, |flags, name| {
            let bit = flag(name)?;
            (flags & bit == 0).then_some(flags | bit)
        }),
        _ => None,
    }
}

/// Turns a local `$ref` (`#`, `#/$defs/a%20b`) into a JSON Pointer (``, `/$defs/a b`).
fn local_pointer(reference: &str) -> Option<String> {
    let fragment = reference.strip_prefix('#')?;
    if !fragment.is_empty() && !fragment.starts_with('/') {
        return None;
    }
    let bytes = fragment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

impl<X> CompactSchema<X> {
    /// Refuses schemas whose `$ref`s (or combinators) lead back to themselves without
    /// descending into the instance: validating them would never end.
    fn refuse_loops(&self) -> Result<(), CoreError> {
        // 0 = not visited, 1 = on the current path, 2 = done.
        let mut state = vec![0u8; self.nodes.len()];
        for start in 0..self.nodes.len() {
            if state[start] != 0 {
                continue;
            }
            let mut stack = vec![(start, self.nodes[start].in_place_children().collect::<Vec<_>>())];
            state[start] = 1;
            while let Some((node, children)) = stack.last_mut() {
                match children.pop() {
                    Some(child) if state[child] == 1 => {
                        return Err(invalid(
                            "",
                            "a $ref cycle never descends into the instance (validation would never end)",
                        ));
                    }
                    Some(child) if state[child] == 0 => {
                        state[child] = 1;
                        let grandchildren = self.nodes[child].in_place_children().collect();
                        stack.push((child, grandchildren));
                    }
                    Some(_) => {}
                    None => {
                        state[*node] = 2;
                        stack.pop();
                    }
                }
            }
        }
        Ok(())
    }
}
