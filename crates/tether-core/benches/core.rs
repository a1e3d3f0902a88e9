//! Benchmarks of the core's hot paths: registry churn with 30 tools, and a call's
//! lookup → validate → defaults → policy with the compact and the full validator.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tether_core::validate::{CompactValidator, FullValidator, NativeRegex, Validator};
use tether_core::{CallRequest, Executor, OwnerId, Risk, Step, ToolDef, ToolRegistry};

fn typical_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "productId": {"type": "string", "pattern": "^[a-z]+-[a-z]+$"},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 99, "default": 1},
            "gift": {"type": "boolean", "default": false},
            "note": {"type": "string", "maxLength": 200}
        },
        "required": ["productId"],
        "additionalProperties": false
    })
}

fn tools() -> Vec<ToolDef> {
    (0..30).map(|n| ToolDef::new(format!("tool_{n}"), "A typical tool.").parameters(typical_schema())).collect()
}

fn registry_churn(c: &mut Criterion) {
    let defs = tools();
    c.bench_function("registry: register 30 + flush + unregister_owner + flush (compact)", |b| {
        b.iter(|| {
            let mut registry = ToolRegistry::new(CompactValidator::new(NativeRegex));
            for (n, def) in defs.iter().enumerate() {
                registry.register(OwnerId(n as u64 % 3), def.clone(), ()).unwrap();
            }
            black_box(registry.flush());
            registry.unregister_owner(OwnerId(0));
            black_box(registry.flush());
        });
    });
}

fn call_path<V: Validator>(c: &mut Criterion, label: &str, validator: V) {
    let mut registry = ToolRegistry::new(validator);
    for (n, def) in tools().into_iter().enumerate() {
        registry.register(OwnerId(n as u64), def, ()).unwrap();
    }
    let args = json!({"productId": "mug-red", "quantity": 2, "note": "for my sister"});
    let mut executor = Executor::default();
    let mut n = 0u64;
    c.bench_function(&format!("call: lookup + validate + defaults + policy, 30 tools ({label})"), |b| {
        b.iter(|| {
            n += 1;
            let request = CallRequest {
                call_id: n.to_string(),
                tool: "tool_29".into(),
                args: args.clone(),
                server_risk: Risk::None,
            };
            let step = executor.start(request, &registry, 0);
            assert!(matches!(step, Some(Step::Run { .. })));
            black_box(executor.handler_done(&n.to_string(), Ok(Value::Null)));
        });
    });
}

fn call_paths(c: &mut Criterion) {
    call_path(c, "compact", CompactValidator::new(NativeRegex));
    call_path(c, "jsonschema", FullValidator);
}

criterion_group!(benches, registry_churn, call_paths);
criterion_main!(benches);
