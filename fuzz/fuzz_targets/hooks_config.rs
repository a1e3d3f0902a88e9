//! Fuzzes the declarative hooks loader (`HookConfig::from_yaml_str`): any YAML text is loaded or
//! refused with a configuration error, never a panic, a hang or an unbounded allocation.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tether_hooks::HookConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = HookConfig::from_yaml_str(text, "fuzz.yaml") {
        // A loaded configuration is usable: every hook has an id and matchers answer.
        for hook in config.hooks() {
            assert!(!hook.id.is_empty());
            let _ = hook.applies_to("cart_add");
        }
        let _ = (config.agent_name(), config.warnings(), config.max_rejections());
    }
});
