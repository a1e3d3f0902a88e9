//! The compact validator: the JSON Schema keywords that tool schemas use, small enough to ship
//! to the browser.
//!
//! A schema is compiled once into a flat list of nodes (one per schema object, `$ref`s are
//! indices into the list, so recursive schemas cost nothing extra). Any keyword outside
//! [`COMPACT_KEYWORDS`] and the annotation keywords is refused at compile time, naming the
//! keyword: a schema is never half-checked.

use serde_json::{Number, Value};

mod check;
mod compile;

use super::Validator;
use crate::CoreError;

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
        compile::compile(&self.regex, schema)
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

/// A schema compiled by [`CompactValidator`].
pub struct CompactSchema<X> {
    nodes: Vec<Node<X>>,
}

impl<X> std::fmt::Debug for CompactSchema<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactSchema").field("nodes", &self.nodes.len()).finish()
    }
}

#[cfg(test)]
#[allow(clippy::needless_pass_by_value)]
mod tests {
    use super::*;
    use crate::validate::CompiledSchema;
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
