//! Benchmarks of the core's hot paths: registry churn with 30 tools; validation by itself and a
//! call's whole path (lookup → validate → defaults → policy) with the compact and the full
//! validator; and the executor's check of recently finished call ids (1,024 kept) as a hashed
//! ring ([`RecentIds`]) next to the linear scan it replaced.

use std::collections::VecDeque;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tether_core::validate::{CompactValidator, CompiledSchema, FullValidator, NativeRegex, Validator};
use tether_core::{CallId, CallRequest, Executor, OwnerId, RecentIds, Risk, Step, ToolDef, ToolRegistry};

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

fn args() -> Value {
    json!({"productId": "mug-red", "quantity": 2, "note": "for my sister"})
}

/// Validation alone: one compiled schema, the same arguments as the call path.
fn validate_only<V: Validator>(c: &mut Criterion, label: &str, validator: &V) {
    let schema = validator.compile(&typical_schema()).unwrap();
    let args = args();
    c.bench_function(&format!("validate: typical schema, valid arguments ({label})"), |b| {
        b.iter(|| {
            let errors = schema.errors(black_box(&args));
            assert!(errors.is_empty());
            black_box(errors)
        });
    });
}

fn call_path<V: Validator>(c: &mut Criterion, label: &str, validator: V) {
    let mut registry = ToolRegistry::new(validator);
    for (n, def) in tools().into_iter().enumerate() {
        registry.register(OwnerId(n as u64), def, ()).unwrap();
    }
    let args = args();
    let mut executor = Executor::default();
    let mut n = 0u64;
    c.bench_function(&format!("call: lookup + validate + defaults + policy, 30 tools ({label})"), |b| {
        b.iter(|| {
            n += 1;
            let request = CallRequest {
                call_id: n.to_string().into(),
                tool: "tool_29".into(),
                args: args.clone(),
                server_risk: Risk::None,
            };
            let step = executor.start(request, &registry, 0);
            assert!(matches!(step, Some(Step::Run { .. })));
            black_box(executor.handler_done(&n.to_string().into(), Ok(Value::Null)));
        });
    });
}

fn call_paths(c: &mut Criterion) {
    validate_only(c, "compact", &CompactValidator::new(NativeRegex));
    validate_only(c, "jsonschema", &FullValidator);
    call_path(c, "compact", CompactValidator::new(NativeRegex));
    call_path(c, "jsonschema", FullValidator);
}

/// A new call id checked against 1,024 finished ones (the executor's `FINISHED_IDS_KEPT`): the
/// hashed ring next to the linear scan of a queue that the executor used before.
fn finished_ids(c: &mut Criterion) {
    const KEPT: usize = 1024;
    let ids: Vec<CallId> = (0..KEPT).map(|n| CallId::from(format!("call_{n:08}"))).collect();
    let mut ring = RecentIds::new(KEPT);
    let mut queue = VecDeque::new();
    for id in &ids {
        ring.insert(id.clone());
        queue.push_back(id.clone());
    }
    let fresh = CallId::from("call_99999999");
    c.bench_function("finished ids: a new id against 1,024 kept (hashed ring)", |b| {
        b.iter(|| assert!(!ring.contains(black_box(&fresh))));
    });
    c.bench_function("finished ids: a new id against 1,024 kept (linear scan, before)", |b| {
        b.iter(|| assert!(!queue.iter().any(|id| id == black_box(&fresh))));
    });
}

criterion_group!(benches, registry_churn, call_paths, finished_ids);
criterion_main!(benches);
