//! Property tests of the registry invariants: never more than the cap, names unique, an
//! owner's unmount keeps its globals, one snapshot per flush, and no refusal is silent.

use proptest::prelude::*;
use tether_core::validate::{CompactValidator, NativeRegex};
use tether_core::*;

#[derive(Debug, Clone)]
enum Op {
    Register { owner: u64, name: u8, global: bool },
    UnregisterOwner { owner: u64 },
    Unregister { name: u8 },
    SetCap { cap: u32 },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4u64, 0..12u8, any::<bool>()).prop_map(|(owner, name, global)| Op::Register { owner, name, global }),
        2 => (0..4u64).prop_map(|owner| Op::UnregisterOwner { owner }),
        1 => (0..12u8).prop_map(|name| Op::Unregister { name }),
        1 => (0..10u32).prop_map(|cap| Op::SetCap { cap }),
        2 => Just(Op::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn registry_invariants_hold(ops in prop::collection::vec(op(), 1..80), initial_cap in 1..8u32) {
        let mut registry: ToolRegistry<u64, _> = ToolRegistry::new(CompactValidator::new(NativeRegex));
        registry.set_cap(initial_cap);
        let mut last_sent: Option<Vec<ToolSpec>> = None;
        let mut last_revision = 0;
        for op in ops {
            match op {
                Op::Register { owner, name, global } => {
                    let before = registry.len();
                    registry.drain_events();
                    let def = ToolDef::new(format!("tool_{name}"), "").global(global);
                    match registry.register(OwnerId(owner), def, owner) {
                        Ok(Registered::Added) => prop_assert_eq!(registry.len(), before + 1),
                        Ok(Registered::Replaced) => prop_assert_eq!(registry.len(), before),
                        Err(CoreError::ToolLimit { cap, .. }) => {
                            prop_assert_eq!(before, cap as usize);
                            let events = registry.drain_events();
                            prop_assert!(events.iter().any(|e| e.name() == LIMIT_EVENT), "a refusal must be loud");
                            let refused_name = format!("tool_{name}");
                            prop_assert!(registry.refused().iter().any(|r| r.name == refused_name));
                        }
                        Err(other) => prop_assert!(false, "unexpected {}", other),
                    }
                }
                Op::UnregisterOwner { owner } => {
                    let globals_before: Vec<String> = registry
                        .iter()
                        .filter(|t| t.owner() == OwnerId(owner) && t.spec().global)
                        .map(|t| t.spec().name.clone())
                        .collect();
                    registry.unregister_owner(OwnerId(owner));
                    prop_assert!(!registry.iter().any(|t| t.owner() == OwnerId(owner) && !t.spec().global));
                    for name in globals_before {
                        prop_assert!(registry.get(&name).is_some(), "global {} was removed", name);
                    }
                }
                Op::Unregister { name } => {
                    let tool_name = format!("tool_{name}");
                    registry.unregister(&tool_name);
                    prop_assert!(registry.get(&tool_name).is_none());
                }
                Op::SetCap { cap } => {
                    let before = registry.len();
                    let evicted = registry.set_cap(cap);
                    prop_assert_eq!(evicted.len(), before.saturating_sub(cap as usize));
                }
                Op::Flush => {
                    let specs = registry.specs();
                    match registry.flush() {
                        Some(snapshot) => {
                            prop_assert_eq!(snapshot.revision, last_revision + 1);
                            prop_assert_ne!(Some(&snapshot.tools), last_sent.as_ref());
                            prop_assert_eq!(&snapshot.tools, &specs);
                            last_revision = snapshot.revision;
                            last_sent = Some(snapshot.tools);
                        }
                        None => {
                            // Nothing to send means the list is the one last sent (or nothing was ever registered).
                            let unchanged = last_sent.as_ref() == Some(&specs) || (last_sent.is_none() && specs.is_empty());
                            prop_assert!(unchanged, "a change was not flushed");
                        }
                    }
                    prop_assert_eq!(registry.flush(), None, "a second flush has nothing to send");
                }
            }
            prop_assert!(registry.len() <= registry.cap() as usize);
            let mut names: Vec<&str> = registry.iter().map(|t| t.spec().name.as_str()).collect();
            let count = names.len();
            names.sort();
            names.dedup();
            prop_assert_eq!(names.len(), count, "names are unique");
        }
    }
}
