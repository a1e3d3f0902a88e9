//! The compact validator: the JSON Schema keywords that tool schemas use, small enough to ship
//! to the browser.
//!
//! A schema is compiled once into a flat list of nodes (one per schema object, `$ref`s are
//! indices into the list, so recursive schemas cost nothing extra). Any keyword outside
//! [`COMPACT_KEYWORDS`] and the annotation keywords is refused at compile time, naming the
//! keyword: a schema is never half-checked.

use serde_json::{Map, Number, Value};
use tether_protocol::Quoted;

use super::{CompiledSchema, ValidationError, Validator};
use crate::CoreError;
use crate::json::{
    canonical_key, compare_numbers, escape_pointer_token, is_integer, is_multiple_of, json_equal, resolve_pointer,
    short,
};

/// The keywords the compact validator implements.
pub const COMPACT_KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "prefixItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "$defs",
    "default",
    "description",
    "title",
];

/// Keywords that only annotate (2020-12 does not assert them), accepted and ignored.
/// `definitions` is the older name of `$defs`; it holds schemas that `$ref` may point at.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$comment",
    "examples",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "definitions",
];

/// Deepest schema nesting the compiler accepts.
const MAX_SCHEMA_DEPTH: usize = 64;

/// Compiles `pattern` regular expressions. The browser hands them to `RegExp`; natively the
/// `regex` crate serves ([`NativeRegex`], feature `native-regex`).
pub trait RegexEngine {
    /// A compiled regular expression.
    type Regex: CompiledRegex;

    /// Compiles an ECMA-262 pattern, or says why it cannot.
    fn compile(&self, pattern: &str) -> Result<Self::Regex, String>;
}

/// A compiled regular expression. `pattern` is not anchored: a match anywhere counts.
pub trait CompiledRegex {
    /// Whether the expression matches somewhere in `text`.
    fn is_match(&self, text: &str) -> bool;
}

/// A [`RegexEngine`] backed by the `regex` crate.
#[cfg(feature = "native-regex")]
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeRegex;

#[cfg(feature = "native-regex")]
impl RegexEngine for NativeRegex {
    type Regex = regex::Regex;

    fn compile(&self, pattern: &str) -> Result<regex::Regex, String> {
        regex::Regex::new(pattern).map_err(|error| error.to_string())
    }
}

#[cfg(feature = "native-regex")]
impl CompiledRegex for regex::Regex {
    fn is_match(&self, text: &str) -> bool {
        regex::Regex::is_match(self, text)
    }
}

/// The compact [`Validator`], generic over the regex engine used for `pattern`.
#[derive(Debug, Clone, Default)]
pub struct CompactValidator<R> {
    regex: R,
}

impl<R: RegexEngine> CompactValidator<R> {
    /// A validator that compiles `pattern` with `regex`.
    pub fn new(regex: R) -> Self {
        CompactValidator { regex }
    }
}

impl<R: RegexEngine> Validator for CompactValidator<R> {
    type Compiled = CompactSchema<R::Regex>;

    fn compile(&self, schema: &Value) -> Result<Self::Compiled, CoreError> {
        let mut compiler = Compiler { root: schema, engine: &self.regex, nodes: Vec::new(), by_pointer: Map::new() };
        compiler.compile(schema, "", 0)?;
        let compiled = CompactSchema { nodes: compiler.nodes };
        compiled.refuse_loops()?;
        Ok(compiled)
    }
}

/// Bit flags of the JSON types a `type` keyword allows.
mod types {
    pub(super) const NULL: u8 = 1;
    pub(super) const BOOLEAN: u8 = 2;
    pub(super) const OBJECT: u8 = 4;
    pub(super) const ARRAY: u8 = 8;
    pub(super) const NUMBER: u8 = 16;
    pub(super) const STRING: u8 = 32;
    pub(super) const INTEGER: u8 = 64;
    pub(super) const NAMES: [(&str, u8); 7] = [
        ("null", NULL),
        ("boolean", BOOLEAN),
        ("object", OBJECT),
        ("array", ARRAY),
        ("number", NUMBER),
        ("string", STRING),
        ("integer", INTEGER),
    ];
}

/// One compiled schema object. Indices point into [`CompactSchema::nodes`].
struct Node<X> {
    /// `Some` for the boolean schemas `true` and `false`.
    always: Option<bool>,
    /// Allowed types as [`types`] flags; 0 allows every type.
    types: u8,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    required: Vec<String>,
    properties: Vec<(String, usize)>,
    additional_properties: Option<usize>,
    prefix_items: Vec<usize>,
    items: Option<usize>,
    minimum: Option<Number>,
    maximum: Option<Number>,
    exclusive_minimum: Option<Number>,
    exclusive_maximum: Option<Number>,
    multiple_of: Option<Number>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<(String, X)>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    all_of: Vec<usize>,
    any_of: Vec<usize>,
    one_of: Vec<usize>,
    not: Option<usize>,
    reference: Option<usize>,
}

impl<X> Default for Node<X> {
    fn default() -> Self {
        Node {
            always: None,
            types: 0,
            enumeration: None,
            constant: None,
            required: Vec::new(),
            properties: Vec::new(),
            additional_properties: None,
            prefix_items: Vec::new(),
            items: None,
            minimum: None,
            maximum: None,
            exclusive_minimum: None,
            exclusive_maximum: None,
            multiple_of: None,
            min_length: None,
            max_length: None,
            pattern: None,
            min_items: None,
            max_items: None,
            unique_items: false,
            all_of: Vec::new(),
            any_of: Vec::new(),
            one_of: Vec::new(),
            not: None,
            reference: None,
        }
    }
}

impl<X> Node<X> {
    /// The nodes applied to the same instance as this one (not to a part of it).
    fn in_place_children(&self) -> impl Iterator<Item = usize> + '_ {
        self.reference.iter().chain(&self.all_of).chain(&self.any_of).chain(&self.one_of).chain(&self.not).copied()
    }
}

struct Compiler<'a, R: RegexEngine> {
    root: &'a Value,
    engine: &'a R,
    nodes: Vec<Node<R::Regex>>,
    /// Node index by JSON pointer, as a JSON object of numbers: the map code the validator
    /// already carries, where a second map type would add its own code to the browser module.
    by_pointer: Map<String, Value>,
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
            return Err(invalid(pointer, format!("schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")));
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
            indices.push(self.compile(item, &child_pointer(&list_pointer, &n.to_string()), depth + 1)?);
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

fn type_matches(flags: u8, value: &Value) -> bool {
    let flag = match value {
        Value::Null => types::NULL,
        Value::Bool(_) => types::BOOLEAN,
        Value::Object(_) => types::OBJECT,
        Value::Array(_) => types::ARRAY,
        Value::String(_) => types::STRING,
        Value::Number(number) if is_integer(number) => types::NUMBER | types::INTEGER,
        Value::Number(_) => types::NUMBER,
    };
    flags & flag != 0
}

fn type_list(flags: u8) -> String {
    let mut list = String::new();
    for (name, _) in types::NAMES.iter().filter(|(_, flag)| flags & flag != 0) {
        if !list.is_empty() {
            list.push_str(", ");
        }
        list.push('"');
        list.push_str(name);
        list.push('"');
    }
    list
}

/// A schema compiled by [`CompactValidator`].
pub struct CompactSchema<X> {
    nodes: Vec<Node<X>>,
}

impl<X> std::fmt::Debug for CompactSchema<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactSchema").field("nodes", &self.nodes.len()).finish()
    }
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

/// Where validation messages go: collected, or nowhere when only validity matters.
struct Report<'a> {
    errors: Option<&'a mut Vec<ValidationError>>,
}

impl Report<'_> {
    fn collecting(&self) -> bool {
        self.errors.is_some()
    }

    fn push(&mut self, path: &str, message: impl FnOnce() -> String) {
        if let Some(errors) = self.errors.as_deref_mut() {
            errors.push(ValidationError { instance_path: path.to_string(), message: message() });
        }
    }
}

impl<X: CompiledRegex> CompactSchema<X> {
    /// Validates `value` against node `index`. Without a collecting report it stops at the
    /// first problem.
    fn check(&self, index: usize, value: &Value, path: &mut String, report: &mut Report<'_>) -> bool {
        let node = &self.nodes[index];
        if let Some(always) = node.always {
            if !always {
                report.push(path, || format!("False schema does not allow {}", short(value)));
            }
            return always;
        }
        let mut valid = true;
        macro_rules! fail {
            ($($message:tt)*) => {{
                valid = false;
                if !report.collecting() {
                    return false;
                }
                report.push(path, || format!($($message)*));
            }};
        }

        if let Some(target) = node.reference {
            if !self.check(target, value, path, report) {
                valid = false;
                if !report.collecting() {
                    return false;
                }
            }
        }
        if node.types != 0 && !type_matches(node.types, value) {
            if node.types.count_ones() == 1 {
                fail!("{} is not of type {}", short(value), type_list(node.types));
            } else {
                fail!("{} is not of types {}", short(value), type_list(node.types));
            }
        }
        if let Some(options) = &node.enumeration {
            if !options.iter().any(|option| json_equal(option, value)) {
                fail!("{} is not one of {}", short(value), short(&Value::Array(options.clone())));
            }
        }
        if let Some(constant) = &node.constant {
            if !json_equal(constant, value) {
                fail!("{} was expected", short(constant));
            }
        }
        match value {
            Value::Object(object) => {
                for name in &node.required {
                    if !object.contains_key(name) {
                        fail!("\"{name}\" is a required property");
                    }
                }
                for (name, child) in &node.properties {
                    if let Some(property) = object.get(name) {
                        if !self.check_child(*child, property, path, name, report) {
                            valid = false;
                            if !report.collecting() {
                                return false;
                            }
                        }
                    }
                }
                if let Some(additional) = node.additional_properties {
                    let extra =
                        object.iter().filter(|(name, _)| !node.properties.iter().any(|(known, _)| known == *name));
                    if self.nodes[additional].always == Some(false) {
                        let (mut unexpected, mut count) = (String::new(), 0);
                        for (name, _) in extra {
                            if count > 0 {
                                unexpected.push_str(", ");
                            }
                            unexpected.push('\'');
                            unexpected.push_str(name);
                            unexpected.push('\'');
                            count += 1;
                        }
                        if count > 0 {
                            let verb = if count == 1 { "was" } else { "were" };
                            fail!("Additional properties are not allowed ({unexpected} {verb} unexpected)");
                        }
                    } else {
                        for (name, property) in extra {
                            if !self.check_child(additional, property, path, name, report) {
                                valid = false;
                                if !report.collecting() {
                                    return false;
                                }
                            }
                        }
                    }
                }
            }
            Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    let schema = node.prefix_items.get(n).copied().or(if n >= node.prefix_items.len() {
                        node.items
                    } else {
                        None
                    });
                    if let Some(schema) = schema {
                        if !self.check_child(schema, item, path, &n.to_string(), report) {
                            valid = false;
                            if !report.collecting() {
                                return false;
                            }
                        }
                    }
                }
                let len = items.len() as u64;
                if node.min_items.is_some_and(|min| len < min) {
                    fail!(
                        "{} has less than {} item{}",
                        short(value),
                        node.min_items.unwrap_or(0),
                        plural(node.min_items)
                    );
                }
                if node.max_items.is_some_and(|max| len > max) {
                    fail!(
                        "{} has more than {} item{}",
                        short(value),
                        node.max_items.unwrap_or(0),
                        plural(node.max_items)
                    );
                }
                if node.unique_items && !all_unique(items) {
                    fail!("{} has non-unique elements", short(value));
                }
            }
            Value::Number(number) => {
                use std::cmp::Ordering::{Greater, Less};
                let compare = |limit: &Option<Number>| limit.as_ref().and_then(|limit| compare_numbers(number, limit));
                if compare(&node.minimum) == Some(Less) {
                    fail!("{number} is less than the minimum of {}", display(&node.minimum));
                }
                if compare(&node.maximum) == Some(Greater) {
                    fail!("{number} is greater than the maximum of {}", display(&node.maximum));
                }
                if node.exclusive_minimum.is_some() && compare(&node.exclusive_minimum) != Some(Greater) {
                    fail!("{number} is less than or equal to the minimum of {}", display(&node.exclusive_minimum));
                }
                if node.exclusive_maximum.is_some() && compare(&node.exclusive_maximum) != Some(Less) {
                    fail!("{number} is greater than or equal to the maximum of {}", display(&node.exclusive_maximum));
                }
                if let Some(divisor) = &node.multiple_of {
                    if !is_multiple_of(number, divisor) {
                        fail!("{number} is not a multiple of {divisor}");
                    }
                }
            }
            Value::String(text) => {
                if node.min_length.is_some() || node.max_length.is_some() {
                    let chars = text.chars().count() as u64;
                    if node.min_length.is_some_and(|min| chars < min) {
                        fail!(
                            "{} is shorter than {} character{}",
                            short(value),
                            node.min_length.unwrap_or(0),
                            plural(node.min_length)
                        );
                    }
                    if node.max_length.is_some_and(|max| chars > max) {
                        fail!(
                            "{} is longer than {} character{}",
                            short(value),
                            node.max_length.unwrap_or(0),
                            plural(node.max_length)
                        );
                    }
                }
                if let Some((source, regex)) = &node.pattern {
                    if !regex.is_match(text) {
                        fail!("{} does not match \"{source}\"", short(value));
                    }
                }
            }
            _ => {}
        }
        for &part in &node.all_of {
            if !self.check(part, value, path, report) {
                valid = false;
                if !report.collecting() {
                    return false;
                }
            }
        }
        if !node.any_of.is_empty() && !node.any_of.iter().any(|&option| self.is_valid_at(option, value)) {
            fail!("{} is not valid under any of the schemas listed in the 'anyOf' keyword", short(value));
        }
        if !node.one_of.is_empty() {
            let matching = node.one_of.iter().filter(|&&option| self.is_valid_at(option, value)).take(2).count();
            if matching == 0 {
                fail!("{} is not valid under any of the schemas listed in the 'oneOf' keyword", short(value));
            } else if matching > 1 {
                fail!("{} is valid under more than one of the schemas listed in the 'oneOf' keyword", short(value));
            }
        }
        if let Some(negated) = node.not {
            if self.is_valid_at(negated, value) {
                fail!("{} should not be valid under the schema in 'not'", short(value));
            }
        }
        valid
    }

    fn check_child(
        &self,
        index: usize,
        value: &Value,
        path: &mut String,
        token: &str,
        report: &mut Report<'_>,
    ) -> bool {
        let len = path.len();
        path.push('/');
        escape_pointer_token(token, path);
        let valid = self.check(index, value, path, report);
        path.truncate(len);
        valid
    }

    fn is_valid_at(&self, index: usize, value: &Value) -> bool {
        self.check(index, value, &mut String::new(), &mut Report { errors: None })
    }
}

fn plural(count: Option<u64>) -> &'static str {
    if count == Some(1) { "" } else { "s" }
}

fn display(number: &Option<Number>) -> String {
    number.as_ref().map(Number::to_string).unwrap_or_default()
}

fn all_unique(items: &[Value]) -> bool {
    // Few items: compare pairs. Many: compare canonical keys, so that a long array costs O(n).
    if items.len() <= 16 {
        return items.iter().enumerate().all(|(i, a)| items[i + 1..].iter().all(|b| !json_equal(a, b)));
    }
    // The keys go into a JSON object, used as a set: the same map code the validator already
    // carries, where a set of strings would add a hash table's worth of wasm.
    let mut seen = Map::new();
    items.iter().all(|item| {
        let mut key = String::new();
        canonical_key(item, &mut key);
        seen.insert(key, Value::Null).is_none()
    })
}

impl<X: CompiledRegex> CompiledSchema for CompactSchema<X> {
    fn errors(&self, instance: &Value) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        self.check(0, instance, &mut String::new(), &mut Report { errors: Some(&mut errors) });
        errors
    }

    fn is_valid(&self, instance: &Value) -> bool {
        self.is_valid_at(0, instance)
    }
}

#[cfg(test)]
#[allow(clippy::needless_pass_by_value)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A regex engine for unit tests: a pattern matches text that contains it literally.
    struct Literal;
    struct LiteralRegex(String);
    impl RegexEngine for Literal {
        type Regex = LiteralRegex;
        fn compile(&self, pattern: &str) -> Result<LiteralRegex, String> {
            if pattern.contains('(') { Err("unbalanced".into()) } else { Ok(LiteralRegex(pattern.into())) }
        }
    }
    impl CompiledRegex for LiteralRegex {
        fn is_match(&self, text: &str) -> bool {
            text.contains(&self.0)
        }
    }

    fn compile(schema: Value) -> Result<CompactSchema<LiteralRegex>, CoreError> {
        CompactValidator::new(Literal).compile(&schema)
    }

    fn errors(schema: Value, instance: Value) -> Vec<String> {
        compile(schema).unwrap().errors(&instance).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn unsupported_keywords_are_refused_by_name_and_place() {
        let error = compile(json!({"properties": {"a": {"patternProperties": {}}}})).unwrap_err();
        assert_eq!(
            error,
            CoreError::UnsupportedKeyword { keyword: "patternProperties".into(), path: "/properties/a".into() }
        );
        let error = compile(json!({"$defs": {"x": {"if": true}}})).unwrap_err();
        assert!(matches!(error, CoreError::UnsupportedKeyword { ref keyword, .. } if keyword == "if"));
        assert!(error.to_string().contains("\"if\""));
    }

    #[test]
    fn annotations_are_accepted() {
        compile(json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "format": "email", "examples": [1], "$id": "x"})).unwrap();
        assert!(compile(json!({"properties": {"a": {"$id": "nested"}}})).is_err());
    }

    #[test]
    fn invalid_schemas_are_refused_with_a_pointer() {
        let cases = [
            (json!({"type": "text"}), "/type"),
            (json!({"minimum": "1"}), "/minimum"),
            (json!({"minLength": -1}), "/minLength"),
            (json!({"required": [1]}), "/required"),
            (json!({"allOf": []}), "/allOf"),
            (json!({"multipleOf": 0}), "/multipleOf"),
            (json!({"properties": {"a": 3}}), "/properties/a"),
            (json!({"$ref": "#/$defs/missing"}), "/$ref"),
            (json!({"$ref": "other.json#/a"}), "/$ref"),
            (json!({"pattern": "(("}), "/pattern"),
        ];
        for (schema, path) in cases {
            match compile(schema.clone()) {
                Err(CoreError::InvalidSchema { path: got, .. }) => assert_eq!(got, path, "{schema}"),
                other => panic!("{schema}: {other:?}"),
            }
        }
    }

    #[test]
    fn reference_loops_are_refused_but_recursion_through_the_instance_is_fine() {
        assert!(
            compile(json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}))
                .is_err()
        );
        assert!(compile(json!({"anyOf": [{"$ref": "#"}]})).is_err());
        let tree =
            compile(json!({"type": "object", "properties": {"child": {"$ref": "#"}}, "additionalProperties": false}))
                .unwrap();
        assert!(tree.is_valid(&json!({"child": {"child": {}}})));
        assert!(!tree.is_valid(&json!({"child": {"oops": 1}})));
    }

    #[test]
    fn every_error_is_reported_with_its_path() {
        let schema = json!({
            "type": "object",
            "required": ["productId"],
            "properties": {
                "quantity": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
                "a/b": {"type": "string"}
            },
            "additionalProperties": false
        });
        let mut got = errors(schema, json!({"quantity": 0, "tags": ["ok", "toolong", 5], "a/b": 1, "extra": true}));
        // Property order follows the schema map's order; compare as sets.
        got.sort();
        let mut expected = vec![
            "/: \"productId\" is a required property",
            "/quantity: 0 is less than the minimum of 1",
            "/tags/1: \"toolong\" is longer than 3 characters",
            "/tags/2: 5 is not of type \"string\"",
            "/a~1b: 1 is not of type \"string\"",
            "/: Additional properties are not allowed ('extra' was unexpected)",
        ];
        expected.sort();
        assert_eq!(got, expected);
        let closed = json!({"type": ["object", "null"], "additionalProperties": false});
        assert_eq!(
            errors(closed.clone(), json!({"x": 1, "y": 2})),
            ["/: Additional properties are not allowed ('x', 'y' were unexpected)"]
        );
        assert_eq!(errors(closed, json!(7)), ["/: 7 is not of types \"null\", \"object\""]);
    }

    #[test]
    fn keywords_behave_as_specified() {
        let cases = [
            (json!({"type": ["string", "null"]}), json!(null), true),
            (json!({"type": "integer"}), json!(1.0), true),
            (json!({"type": "integer"}), json!(1.5), false),
            (json!({"enum": [1, "a"]}), json!(1.0), true),
            (json!({"enum": [1, "a"]}), json!("b"), false),
            (json!({"const": {"a": [1]}}), json!({"a": [1.0]}), true),
            (json!({"minLength": 2}), json!("é"), false),
            (json!({"maxLength": 1}), json!("é"), true),
            (json!({"pattern": "ab"}), json!("xaby"), true),
            (json!({"pattern": "ab"}), json!(7), true),
            (json!({"exclusiveMinimum": 1}), json!(1), false),
            (json!({"exclusiveMaximum": 1}), json!(0.5), true),
            (json!({"multipleOf": 0.01}), json!(19.99), true),
            (json!({"prefixItems": [{"type": "string"}], "items": false}), json!(["a"]), true),
            (json!({"prefixItems": [{"type": "string"}], "items": false}), json!(["a", 1]), false),
            (json!({"uniqueItems": true}), json!([1, 1.0]), false),
            (json!({"uniqueItems": true}), json!((0..100).collect::<Vec<_>>()), true),
            (json!({"uniqueItems": true}), json!((0..100).map(|n| n % 99).collect::<Vec<_>>()), false),
            (json!({"oneOf": [{"minimum": 1}, {"minimum": 2}]}), json!(3), false),
            (json!({"oneOf": [{"minimum": 1}, {"minimum": 2}]}), json!(1), true),
            (json!({"not": {"type": "string"}}), json!(1), true),
            (json!({"allOf": [{"minimum": 1}, {"maximum": 2}]}), json!(3), false),
            (json!({"anyOf": [{"type": "string"}, {"maximum": 2}]}), json!(3), false),
            (
                json!({"$defs": {"pos": {"minimum": 0}}, "properties": {"n": {"$ref": "#/$defs/pos"}}}),
                json!({"n": -1}),
                false,
            ),
            (json!({"$defs": {"a b": {"minimum": 0}}, "$ref": "#/$defs/a%20b"}), json!(-1), false),
            (json!(false), json!(1), false),
            (json!(true), json!(1), true),
        ];
        for (schema, instance, expected) in cases {
            let compiled = compile(schema.clone()).unwrap();
            assert_eq!(compiled.is_valid(&instance), expected, "{schema} on {instance}");
            assert_eq!(compiled.errors(&instance).is_empty(), expected, "{schema} on {instance}");
        }
    }
}
