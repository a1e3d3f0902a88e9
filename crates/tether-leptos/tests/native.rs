//! What can be checked without a browser: hooks fail loudly outside the provider, and schemas
//! derived from Rust argument types are accepted by the browser's compact validator.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tether_core::validate::{CompactValidator, CompiledSchema, NativeRegex, Validator, apply_defaults};
use tether_leptos::{OUTSIDE_PROVIDER, ToolDef, schema_of, use_agent_tool};

#[test]
#[should_panic(expected = "must be called inside <AgentProvider")]
fn a_hook_outside_the_provider_panics_with_a_clear_message() {
    assert!(OUTSIDE_PROVIDER.contains("<AgentProvider"));
    use_agent_tool(ToolDef::new("orphan", "Registered outside any provider."), |_| async { Ok(Value::Null) });
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
