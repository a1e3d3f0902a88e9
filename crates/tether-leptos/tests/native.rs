//! What can be checked without a browser: hooks fail loudly outside the provider (naming the hook
//! and where it was called), `use_agent_tool_typed::<Args>` takes the argument type alone, the
//! components' styles are the React package's, and schemas derived from Rust argument types are
//! accepted by the browser's compact validator.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tether_core::validate::{CompactValidator, CompiledSchema, NativeRegex, Validator, apply_defaults};
use tether_leptos::{
    ConnectionState, OUTSIDE_PROVIDER, STYLES, ToolDef, connection_words, schema_of, use_agent_tool,
    use_agent_tool_typed,
};

#[test]
fn a_hook_outside_the_provider_panics_naming_the_hook_and_the_call_site() {
    let line = line!() + 2;
    let panic = std::panic::catch_unwind(|| {
        use_agent_tool(ToolDef::new("orphan", "Registered outside any provider."), |_| async { Ok(Value::Null) });
    })
    .expect_err("a hook outside the provider panics");
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    assert!(message.contains(OUTSIDE_PROVIDER), "{message}");
    assert!(message.contains("use_agent_tool(\"orphan\")"), "{message}");
    assert!(message.contains(&format!("tests/native.rs:{line}")), "{message}");
}

#[test]
#[should_panic(expected = "use_agent_tool(\"cart_add\") (at crates/tether-leptos/tests/native.rs:")]
fn the_typed_hook_takes_the_argument_type_alone() {
    use_agent_tool_typed::<CartAdd>(ToolDef::new("cart_add", "Add a product."), move |args| async move {
        Ok(serde_json::json!({"added": args.product_id, "quantity": args.quantity}))
    });
}

#[test]
fn the_components_ship_the_styles_of_the_react_package() {
    let react = include_str!("../../../www/packages/react/styles.css");
    assert_eq!(STYLES, react, "crates/tether-leptos/src/styles.css and www/packages/react/styles.css differ");
    for risk in ["none", "low", "high", "critical", "blocked"] {
        assert!(STYLES.contains(&format!(".tether-risk-{risk} ")), "no style for risk {risk}");
    }
    assert!(STYLES.contains(".tether-approval-backdrop { position: fixed;"), "the approval dialog is a modal");
}

#[test]
fn the_connection_is_told_in_words() {
    let words: Vec<String> = [
        (ConnectionState::Idle, 0),
        (ConnectionState::Connecting, 0),
        (ConnectionState::Open, 0),
        (ConnectionState::Reconnecting, 3),
        (ConnectionState::Closed, 0),
    ]
    .into_iter()
    .map(|(state, attempt)| connection_words(state, attempt))
    .collect();
    assert_eq!(words, ["not connected", "connecting…", "connected", "offline, retrying (3 failed)", "disconnected"]);
}

/// How many of a product to add.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
struct CartAdd {
    /// The product.
    product_id: String,
    /// How many (1 to 10).
    #[schemars(range(min = 1, max = 10))]
    #[serde(default = "one")]
    quantity: u32,
    /// Gift wrap.
    gift: Option<bool>,
    /// Speed.
    shipping: Shipping,
}

fn one() -> u32 {
    1
}

/// Delivery speed.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Shipping {
    Standard,
    Express,
}

#[test]
fn derived_schemas_work_with_the_compact_validator() {
    let schema = schema_of::<CartAdd>();
    let compiled = CompactValidator::new(NativeRegex).compile(&schema).expect("a schemars schema compiles");
    let mut args = json!({"productId": "mug-red", "shipping": "express"});
    assert!(compiled.is_valid(&args));
    apply_defaults(&schema, &mut args);
    let typed: CartAdd = serde_json::from_value(args).unwrap();
    assert_eq!(typed, CartAdd { product_id: "mug-red".into(), quantity: 1, gift: None, shipping: Shipping::Express });
    let errors = compiled.errors(&json!({"productId": 7, "quantity": 0, "shipping": "teleport"}));
    let paths: Vec<&str> = errors.iter().map(|e| e.instance_path.as_str()).collect();
    assert!(
        paths.contains(&"/productId") && paths.contains(&"/quantity") && paths.contains(&"/shipping"),
        "{errors:?}"
    );
}

#[test]
fn the_approval_dialog_lists_arguments_field_by_field() {
    use tether_leptos::components::args_summary;
    let pair = |name: &str, value: &str| (name.to_string(), value.to_string());
    let rows = args_summary(&json!({"productId": "mug-red", "quantity": 2, "note": {"gift": true}}));
    for expected in [pair("productId", "mug-red"), pair("quantity", "2"), pair("note", r#"{"gift":true}"#)] {
        assert!(rows.contains(&expected), "{rows:?}");
    }
    assert_eq!(rows.len(), 3);
    assert_eq!(args_summary(&json!(["a", 1])), vec![pair("", r#"["a",1]"#)]);
    assert_eq!(args_summary(&json!("plain")), vec![pair("", "plain")]);
}

/// A colour, each with a doc comment (schemars writes `oneOf` of `const`s behind a `$ref`).
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Colour {
    /// Yellow paper.
    Yellow,
    /// Pink paper.
    Pink,
}

/// A note with a colour, an optional one, and free text.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct NoteAdd {
    text: String,
    colour: Colour,
    border: Option<Colour>,
    shipping: Shipping,
}

#[test]
fn the_approval_dialog_offers_the_values_a_derived_enum_allows() {
    use tether_leptos::allowed_values;
    let schema = schema_of::<NoteAdd>();
    assert!(schema.to_string().contains("$ref"), "the enum is behind a $ref: {schema}");
    let colours = Some(vec![json!("yellow"), json!("pink")]);
    assert_eq!(allowed_values(&schema, "colour"), colours);
    // `Option<Colour>`: the same values (null is no choice to offer).
    assert_eq!(allowed_values(&schema, "border"), colours);
    assert_eq!(allowed_values(&schema, "shipping"), Some(vec![json!("standard"), json!("express")]));
    assert_eq!(allowed_values(&schema, "text"), None);
    assert_eq!(allowed_values(&schema, "absent"), None);
    // An enum of the page's state, emptied: nothing to choose (the dialog keeps a text box).
    assert_eq!(allowed_values(&json!({"properties": {"title": {"enum": []}}}), "title"), Some(vec![]));
    // A `$ref` that points nowhere, or into itself, lists nothing.
    assert_eq!(allowed_values(&json!({"properties": {"x": {"$ref": "#/$defs/missing"}}}), "x"), None);
    assert_eq!(
        allowed_values(
            &json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
            "x"
        ),
        None
    );
}

#[test]
fn a_tool_call_in_the_chat_says_its_status_in_the_same_words_as_in_react() {
    use tether_leptos::ToolCallStatus::*;
    let react = include_str!("../../../www/packages/react/src/components.tsx");
    for status in [Streaming, Approval, Running, Done, Failed, Refused, Cancelled] {
        let entry = format!("  {}: \"{}\",", status.as_str(), status.words());
        assert!(react.contains(&entry), "www/packages/react/src/components.tsx has no {entry:?}");
    }
}

#[test]
fn edited_arguments_keep_strings_as_typed_and_read_numbers_and_booleans() {
    let args = json!({"id": "7", "n": 2, "x": 0.5, "flag": true, "on": false});
    let edits = [("id", "8"), ("n", "3"), ("x", "2.5"), ("flag", "nope"), ("on", "true")]
        .map(|(k, v)| (k.to_string(), v.to_string()));
    assert_eq!(
        tether_leptos::components::edited_args(&args, &edits),
        json!({"id": "8", "n": 3, "x": 2.5, "flag": "nope", "on": true})
    );
}

#[test]
fn pairing_codes_are_written_as_the_react_package_writes_them() {
    use tether_leptos::components::pairing_code_from;
    // The same bytes give the same 26 characters as `@tether/react/mcp`'s `pairingCode`
    // (test/mcp.test.tsx checks these two vectors there).
    assert_eq!(pairing_code_from([0xff; 16]), "zzzzzzzzzzzzzzzzzzzzzzzzzw");
    assert_eq!(pairing_code_from(std::array::from_fn(|i| (i * 17) as u8)), "008j4ct4ank7f24snaxwsqfezw");
    assert_eq!(pairing_code_from([0; 16]), "0".repeat(26));
}

#[test]
fn webmcp_hints_and_results_are_the_react_packages() {
    use tether_leptos::Risk;
    use tether_leptos::webmcp::{webmcp_annotations, webmcp_result};
    use tether_web::ResultStatus;
    // The same as `@tether/react/webmcp` (test/webmcp.test.tsx checks these there).
    assert_eq!(webmcp_annotations(Risk::None), json!({ "readOnlyHint": true }));
    assert_eq!(webmcp_annotations(Risk::Low), json!({ "readOnlyHint": false }));
    assert_eq!(webmcp_annotations(Risk::Critical), json!({ "readOnlyHint": false, "destructiveHint": true }));
    assert_eq!(
        webmcp_result(ResultStatus::Ok, &json!("done")),
        json!({ "content": [{ "type": "text", "text": "done" }] })
    );
    assert_eq!(
        webmcp_result(ResultStatus::InvalidArgs, &json!({ "n": 1 })),
        json!({ "content": [{ "type": "text", "text": "{\"n\":1}" }], "isError": true })
    );
}
