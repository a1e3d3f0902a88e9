//! The compact validator in the wasm build, where `pattern` goes through JavaScript's `RegExp`:
//! every suite case it accepts must give the suite's answer (runs under Node).

use serde_json::{Value, json};
use tether_core::CoreError;
use tether_core::validate::{CompactValidator, CompiledSchema, Validator};
use tether_web::BrowserRegex;
use wasm_bindgen_test::wasm_bindgen_test;

macro_rules! suite {
    ($($name:literal),* $(,)?) => {
        [$(($name, include_str!(concat!("../../tether-core/tests/fixtures/json-schema-test-suite/draft2020-12/", $name, ".json")))),*]
    };
}

const FILES: [(&str, &str); 27] = suite![
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
    "ref",
    "default",
    "boolean_schema",
    "infinite-loop-detection",
];

#[wasm_bindgen_test]
fn the_suite_passes_with_javascript_regexp() {
    tether_web::install_float_printer();
    let validator = CompactValidator::new(BrowserRegex);
    let (mut groups, mut cases) = (0, 0);
    for (file, text) in FILES {
        let suite: Vec<Value> = serde_json::from_str(text).unwrap();
        for group in suite {
            let Ok(compiled) = validator.compile(&group["schema"]) else { continue };
            groups += 1;
            for case in group["tests"].as_array().unwrap() {
                let expected = case["valid"].as_bool().unwrap();
                assert_eq!(
                    compiled.is_valid(&case["data"]),
                    expected,
                    "{file}: {} / {}",
                    group["description"],
                    case["description"]
                );
                assert_eq!(compiled.errors(&case["data"]).is_empty(), expected);
                cases += 1;
            }
        }
    }
    assert!(groups >= 150 && cases >= 550, "only {groups} groups / {cases} cases ran");
}

#[wasm_bindgen_test]
fn patterns_use_unicode_regexp_semantics() {
    let validator = CompactValidator::new(BrowserRegex);
    let letters = validator.compile(&json!({"pattern": "^\\p{L}+$"})).unwrap();
    assert!(letters.is_valid(&json!("Ñandú")));
    assert!(!letters.is_valid(&json!("abc1")));
    // Not anchored: a match anywhere counts.
    let anywhere = validator.compile(&json!({"pattern": "b+"})).unwrap();
    assert!(anywhere.is_valid(&json!("abbc")));
    let message = anywhere.errors(&json!("xyz"))[0].message.clone();
    assert_eq!(message, "\"xyz\" does not match \"b+\"");
}

#[wasm_bindgen_test]
fn an_invalid_pattern_is_refused_at_compile_time_with_the_browsers_reason() {
    let error = CompactValidator::new(BrowserRegex).compile(&json!({"pattern": "(unclosed"})).unwrap_err();
    match error {
        CoreError::InvalidSchema { path, reason } => {
            assert_eq!(path, "/pattern");
            assert!(reason.contains("(unclosed"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
