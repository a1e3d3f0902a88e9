//! The compact validator against `jsonschema` and the official JSON Schema Test Suite.
//!
//! For every suite case whose schema the compact validator accepts, both validators must give
//! the suite's expected answer; a schema that uses other keywords must be refused, never
//! validated wrongly. Generated schemas and instances must get the same answer from both.

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Value, json};
use tether_core::CoreError;
use tether_core::validate::{
    COMPACT_KEYWORDS, CompactValidator, CompiledSchema, FullValidator, NativeRegex, Validator,
};

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-schema-test-suite/draft2020-12")
}

#[test]
fn compact_and_full_agree_with_the_official_suite() {
    let compact = CompactValidator::new(NativeRegex);
    let mut groups_checked = 0;
    let mut cases_checked = 0;
    let mut refused = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(suite_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for file in files {
        let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let file_name = file.file_name().unwrap().to_string_lossy().to_string();
        for group in groups {
            let schema = &group["schema"];
            let description = group["description"].as_str().unwrap_or_default();
            let compiled = match compact.compile(schema) {
                Ok(compiled) => compiled,
                Err(error @ (CoreError::UnsupportedKeyword { .. } | CoreError::InvalidSchema { .. })) => {
                    refused.push(format!("{file_name}: {description}: {error}"));
                    continue;
                }
                Err(other) => panic!("{file_name}: {description}: unexpected error {other}"),
            };
            let full = FullValidator.compile(schema).unwrap_or_else(|e| {
                panic!("{file_name}: {description}: jsonschema refused a schema compact accepts: {e}")
            });
            groups_checked += 1;
            for case in group["tests"].as_array().unwrap() {
                let data = &case["data"];
                let expected = case["valid"].as_bool().unwrap();
                let case_name = format!("{file_name}: {description}: {}", case["description"]);
                assert_eq!(compiled.is_valid(data), expected, "compact is_valid, {case_name}");
                assert_eq!(compiled.errors(data).is_empty(), expected, "compact errors, {case_name}");
                assert_eq!(full.is_valid(data), expected, "jsonschema, {case_name}");
                cases_checked += 1;
            }
        }
    }
    // Every keyword of the compact subset has its own suite file; make sure they were run.
    for reason in &refused {
        eprintln!("refused: {reason}");
    }
    assert!(groups_checked >= 180, "only {groups_checked} suite groups were checked");
    assert!(cases_checked >= 600, "only {cases_checked} suite cases were checked");
    // Refusals are expected only for keywords outside the subset and for remote references.
    for reason in &refused {
        assert!(
            reason.contains("is not supported")
                || reason.contains("not a local reference")
                || reason.contains("points at nothing")
                || reason.contains("$id")
                || reason.contains("only JSON Schema 2020-12"),
            "unexpected refusal: {reason}"
        );
    }
    eprintln!("{groups_checked} groups / {cases_checked} cases agreed; {} groups refused", refused.len());
}

#[test]
fn an_empty_enum_says_that_nothing_is_allowed_in_both() {
    // A list the page shares that is empty now (`z.enum([])`): the message says so, in full.
    let schema = json!({"type": "object", "properties": {"title": {"enum": []}}, "required": ["title"]});
    let instance = json!({"title": "delete ghost"});
    let compact = CompactValidator::new(NativeRegex).compile(&schema).unwrap();
    let full = FullValidator.compile(&schema).unwrap();
    for errors in [compact.errors(&instance), full.errors(&instance)] {
        assert_eq!(
            tether_core::validate::format_validation_errors("note_delete", &errors),
            "Validation args \"note_delete\": /title: \"delete ghost\" is not allowed: no value is allowed now (the \
             list of allowed values is empty)"
        );
    }
}

#[test]
fn keyword_files_of_the_subset_are_accepted() {
    // A refusal in these files would hide a gap in the compact validator behind "skipped".
    let compact = CompactValidator::new(NativeRegex);
    let mut checked = 0;
    for keyword in COMPACT_KEYWORDS {
        let path = suite_dir().join(format!("{}.json", keyword.trim_start_matches('$')));
        // `description` and `title` have no suite file; `defs.json` only tests the meta-schema (remote).
        if !path.exists() || *keyword == "$defs" {
            continue;
        }
        let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let accepted = groups.iter().filter(|group| compact.compile(&group["schema"]).is_ok()).count();
        assert!(accepted * 2 >= groups.len(), "{keyword}: only {accepted} of {} groups compiled", groups.len());
        checked += 1;
    }
    assert!(checked >= 24, "only {checked} keyword files were found");
}

fn leaf_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-20i64..20).prop_map(Value::from),
        prop::sample::select(vec![0.5, 1.0, 2.5, -3.0, 0.1, 19.99]).prop_map(Value::from),
        prop::sample::select(vec!["", "a", "ab", "abc", "mug-red", "é", "Mug"]).prop_map(Value::from),
    ]
}

fn instance() -> impl Strategy<Value = Value> {
    leaf_value().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(vec!["a", "b", "c", "id"]), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

fn keyword_schema() -> impl Strategy<Value = Value> {
    let types = prop::sample::select(vec!["null", "boolean", "object", "array", "number", "string", "integer"]);
    prop_oneof![
        types.clone().prop_map(|t| json!({"type": t})),
        prop::collection::vec(types, 1..3).prop_map(|t| json!({"type": t})),
        prop::collection::vec(leaf_value(), 1..4).prop_map(|values| json!({"enum": values})),
        leaf_value().prop_map(|value| json!({"const": value})),
        (-5i64..5).prop_map(|n| json!({"minimum": n})),
        (-5i64..5).prop_map(|n| json!({"maximum": n})),
        (-5i64..5).prop_map(|n| json!({"exclusiveMinimum": n})),
        prop::sample::select(vec![0.5, 1.5, 2.0]).prop_map(|n| json!({"exclusiveMaximum": n})),
        prop::sample::select(vec![0.5, 2.0, 3.0, 0.01]).prop_map(|n| json!({"multipleOf": n})),
        (0u64..4).prop_map(|n| json!({"minLength": n})),
        (0u64..4).prop_map(|n| json!({"maxLength": n})),
        prop::sample::select(vec!["^a", "b$", "^[a-z-]+$", "é"]).prop_map(|p| json!({"pattern": p})),
        (0u64..3).prop_map(|n| json!({"minItems": n})),
        (0u64..3).prop_map(|n| json!({"maxItems": n})),
        any::<bool>().prop_map(|u| json!({"uniqueItems": u})),
        prop::collection::vec(prop::sample::select(vec!["a", "b", "id"]), 0..3).prop_map(|r| json!({"required": r})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    keyword_schema().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::btree_map(prop::sample::select(vec!["a", "b", "id"]), inner.clone(), 1..3)
                .prop_map(|props| json!({"type": "object", "properties": props})),
            (inner.clone(), any::<bool>())
                .prop_map(|(s, closed)| json!({"properties": {"a": s}, "additionalProperties": !closed})),
            inner.clone().prop_map(|s| json!({"additionalProperties": s})),
            inner.clone().prop_map(|s| json!({"items": s})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"prefixItems": [a], "items": b})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|all| json!({"allOf": all})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|any| json!({"anyOf": any})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|one| json!({"oneOf": one})),
            inner.clone().prop_map(|s| json!({"not": s})),
            inner.prop_map(|s| json!({"properties": {"a": s, "b": {"$ref": "#/$defs/d"}}})),
        ]
    })
}

/// A schema with a root `$defs` entry that nested `$ref`s point at.
fn rooted_schema() -> impl Strategy<Value = Value> {
    (schema(), keyword_schema()).prop_map(|(body, definition)| json!({"$defs": {"d": definition}, "allOf": [body]}))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn generated_schemas_get_the_same_answer_from_both(schema in rooted_schema(), instances in prop::collection::vec(instance(), 1..6)) {
        let (compact, full) = match (CompactValidator::new(NativeRegex).compile(&schema), FullValidator.compile(&schema)) {
            (Ok(compact), Ok(full)) => (compact, full),
            (Err(_), Err(_)) => return Ok(()),
            (compact, full) => {
                return Err(TestCaseError::fail(format!("{schema}: compact {:?} but jsonschema {:?}", compact.err(), full.err())));
            }
        };
        for instance in instances {
            let expected = full.is_valid(&instance);
            prop_assert_eq!(compact.is_valid(&instance), expected, "{} on {}", schema, instance);
            prop_assert_eq!(compact.errors(&instance).is_empty(), expected, "{} on {}", schema, instance);
        }
    }
}
