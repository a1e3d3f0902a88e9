//! Loading declarative hooks: Azure-format configs load unchanged with Azure's defaults, two
//! levels keep their order, matchers follow Azure's rules, and every invalid config is refused
//! at start with a message naming the hook and the field (`tether serve` refusing one is tested in tether-server).

use std::time::Duration;

use tether_hooks::{FailMode, HookConfig, HookEvent, HookKind, HookLevel, ScriptInterpreter, ToolMatcher};

fn load(yaml: &str) -> HookConfig {
    HookConfig::from_yaml_str(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn refused(yaml: &str) -> String {
    match HookConfig::from_yaml_str(yaml, "test.yaml") {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(error) => error.to_string(),
    }
}

/// An ExtendedAgent written for Azure SRE Agent, with the fields Azure documents.
const AZURE_AGENT: &str = r#"
api_version: azuresre.ai/v2
kind: ExtendedAgent
metadata:
  name: incident_helper
spec:
  instructions: |
    You help with incidents.
  handoffDescription: ""
  enableVanillaMode: true
  hooks:
    Stop:
      - type: prompt
        prompt: |
          Does the answer end with "Task complete."?
          $ARGUMENTS
    PostToolUse:
      - type: command
        matcher: "Bash|ExecuteShellCommand"
        timeout: 45
        failMode: block
        script: |
          #!/usr/bin/env python3
          import sys, json
          json.load(sys.stdin)
          print(json.dumps({"decision": "allow"}))
      - type: command
        matcher: "*"
        command: "cat > /dev/null"
"#;

#[test]
fn an_azure_extended_agent_loads_with_azure_defaults() {
    let config = load(AZURE_AGENT);
    assert_eq!(config.agent_name(), Some("incident_helper"));
    let hooks = config.hooks();
    assert_eq!(hooks.len(), 3);
    let by_id = |id: &str| hooks.iter().find(|h| h.id == id).unwrap_or_else(|| panic!("no hook {id}"));

    let stop = by_id("custom_agent.Stop[0]");
    assert_eq!(
        (stop.id.as_str(), stop.level, stop.event),
        ("custom_agent.Stop[0]", HookLevel::CustomAgent, HookEvent::Stop)
    );
    assert!(matches!(&stop.kind, HookKind::Prompt { prompt, model: None } if prompt.contains("$ARGUMENTS")));
    assert_eq!(stop.timeout, Duration::from_secs(30), "default timeout");
    assert_eq!(stop.fail_mode, FailMode::Allow, "default failMode");
    assert_eq!(config.max_rejections(), 3, "default maxRejections");

    let policy = by_id("custom_agent.PostToolUse[0]");
    assert!(matches!(policy.kind, HookKind::Script { interpreter: ScriptInterpreter::Python3, .. }));
    assert_eq!((policy.timeout, policy.fail_mode), (Duration::from_secs(45), FailMode::Block));
    assert!(policy.applies_to("Bash") && policy.applies_to("ExecuteShellCommand") && !policy.applies_to("ReadFile"));

    let audit = by_id("custom_agent.PostToolUse[1]");
    assert!(matches!(&audit.kind, HookKind::Command { command } if command == "cat > /dev/null"));
    assert!(audit.applies_to("anything_at_all"));
}

#[test]
fn the_rest_api_payload_shape_loads_too() {
    let config = load(
        r#"{"name": "my_hooked_agent", "properties": {"instructions": "Be concise.", "handoffs": [],
            "hooks": {"Stop": [{"type": "prompt", "prompt": "Check: $ARGUMENTS", "timeout": 30}]}}}"#,
    );
    assert_eq!(config.agent_name(), Some("my_hooked_agent"));
    assert_eq!(config.hooks()[0].id, "custom_agent.Stop[0]");
}

#[test]
fn agent_level_hooks_come_before_custom_agent_level_hooks() {
    // The custom agent is written first; the agent-level block still runs first.
    let config = load(
        r#"
kind: ExtendedAgent
metadata: {name: late}
spec:
  hooks:
    PostToolUse:
      - {type: command, matcher: "*", command: "exit 0"}
---
hooks:
  PostToolUse:
    - {type: command, matcher: "*", command: "exit 0"}
    - {type: command, matcher: "Bash", command: "exit 0"}
"#,
    );
    let ids: Vec<&str> = config.hooks().iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["agent.PostToolUse[0]", "agent.PostToolUse[1]", "custom_agent.PostToolUse[0]"]);

    // Across files too.
    let mut merged =
        load("kind: ExtendedAgent\nspec:\n  hooks:\n    Stop:\n      - {type: command, command: 'exit 0'}\n");
    merged.extend(load("hooks:\n  Stop:\n    - {type: command, command: 'exit 0'}\n")).unwrap();
    let ids: Vec<&str> = merged.hooks().iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["agent.Stop[0]", "custom_agent.Stop[0]"]);
}

#[test]
fn matchers_are_anchored_case_sensitive_and_star_or_empty() {
    let matcher = ToolMatcher::new("Bash|ExecuteShellCommand").unwrap();
    assert!(matcher.matches("Bash") && matcher.matches("ExecuteShellCommand"));
    assert!(!matcher.matches("BashTool") && !matcher.matches("MyBash") && !matcher.matches("bash"));
    let prefix = ToolMatcher::new("cart_.*").unwrap();
    assert!(prefix.matches("cart_add") && !prefix.matches("open_cart_page"));
    assert!(ToolMatcher::new("*").unwrap().matches("anything"));
    assert!(!ToolMatcher::new("").unwrap().matches(""));
    assert!(!ToolMatcher::new("").unwrap().matches("Bash"));
    // An empty matcher loads (Azure: matches nothing) with a warning naming the hook.
    let config = load("hooks:\n  PostToolUse:\n    - {type: command, matcher: '', command: 'exit 0'}\n");
    assert!(config.warnings().iter().any(|w| w.contains("agent.PostToolUse[0]") && w.contains("matcher")));
}

#[test]
fn max_rejections_is_the_largest_written_on_a_stop_hook() {
    let config = load(
        "hooks:\n  Stop:\n    - {type: command, command: 'exit 0', maxRejections: 2}\n    - {type: command, command: 'exit 0', maxRejections: 7}\n",
    );
    assert_eq!(config.max_rejections(), 7);
}

#[test]
fn invalid_configs_are_refused_naming_the_hook_and_the_field() {
    let big_script = format!("#!/bin/bash\n{}", "# padding\n".repeat(7000));
    let cases: Vec<(String, &str, &str)> = vec![
        (
            "hooks:\n  Stop:\n    - {type: command, command: 'exit 0', script: \"#!/bin/bash\\nexit 0\"}\n".into(),
            "agent.Stop[0]",
            "`command` and `script`",
        ),
        ("hooks:\n  Stop:\n    - {type: command, command: 'exit 0', timeout: 0}\n".into(), "agent.Stop[0]", "`timeout`"),
        (
            "hooks:\n  Stop:\n    - {type: command, command: 'exit 0'}\n    - {type: command, command: 'exit 0', timeout: 301}\n"
                .into(),
            "agent.Stop[1]",
            "`timeout`",
        ),
        ("hooks:\n  PostToolUse:\n    - {type: command, command: 'exit 0'}\n".into(), "agent.PostToolUse[0]", "`matcher`"),
        (
            "kind: ExtendedAgent\nspec:\n  hooks:\n    PostToolUse:\n      - {type: command, matcher: 'Bash(', command: 'exit 0'}\n"
                .into(),
            "custom_agent.PostToolUse[0]",
            "`matcher`",
        ),
        (
            format!("hooks:\n  Stop:\n    - type: command\n      script: {}\n", serde_json::to_string(&big_script).unwrap()),
            "agent.Stop[0]",
            "`script`",
        ),
        (
            "hooks:\n  Stop:\n    - {type: command, script: \"#!/bin/sh\\nexit 0\"}\n".into(),
            "agent.Stop[0]",
            "unsupported shebang",
        ),
        ("hooks:\n  Stop:\n    - {type: command, script: \"exit 0\"}\n".into(), "agent.Stop[0]", "`script`"),
        (
            "hooks:\n  Stop:\n    - {type: command, command: 'exit 0', maxRejections: 26}\n".into(),
            "agent.Stop[0]",
            "`maxRejections`",
        ),
        (
            "hooks:\n  Stop:\n    - {type: command, command: 'exit 0', failMode: deny}\n".into(),
            "agent.Stop[0]",
            "`failMode`",
        ),
        ("hooks:\n  Stop:\n    - {type: command, command: 'exit 0', failmode: block}\n".into(), "agent.Stop[0]", "`failmode`"),
        ("hooks:\n  Stop:\n    - {type: webhook, command: 'exit 0'}\n".into(), "agent.Stop[0]", "`type`"),
        ("hooks:\n  Stop:\n    - {timeout: 10}\n".into(), "agent.Stop[0]", "`prompt`"),
        ("hooks:\n  Stop:\n    - {type: command}\n".into(), "agent.Stop[0]", "`command` or `script`"),
        ("hooks:\n  Stop:\n    - {type: prompt, prompt: 'ok?', command: 'exit 0'}\n".into(), "agent.Stop[0]", "`command`"),
    ];
    for (yaml, hook, field) in cases {
        let message = refused(&yaml);
        assert!(message.contains(&format!("hook {hook}")), "{message}\nfor\n{yaml}");
        assert!(message.contains(field), "{message}\nfor\n{yaml}");
        assert!(message.contains("test.yaml"), "{message}");
    }
    let unknown_event = refused("hooks:\n  SessionStart:\n    - {type: command, command: 'exit 0'}\n");
    assert!(unknown_event.contains("SessionStart") && unknown_event.contains("not supported"), "{unknown_event}");
    let misplaced = refused("kind: ExtendedAgent\nhooks:\n  Stop: []\n");
    assert!(misplaced.contains("`spec.hooks`"), "{misplaced}");
    let other_kind = refused("kind: Agent\nspec:\n  hooks: {}\n");
    assert!(other_kind.contains("unsupported kind \"Agent\""), "{other_kind}");
    let not_yaml = refused("hooks: [unclosed");
    assert!(not_yaml.contains("not valid YAML"), "{not_yaml}");
}

#[test]
fn spec_instructions_are_read_and_must_be_text() {
    let config = load(
        "kind: ExtendedAgent\nmetadata: {name: shop}\nspec:\n  instructions: |\n    You sell mugs.\n    Be brief.\n",
    );
    assert_eq!(config.instructions(), Some("You sell mugs.\nBe brief.\n"));
    assert!(config.hooks().is_empty());
    assert!(config.warnings().is_empty(), "instructions alone are a reason to load the file: {:?}", config.warnings());
    // The REST payload shape carries them under `properties`.
    let rest = load(r#"{"name": "shop", "properties": {"instructions": "Sell mugs."}}"#);
    assert_eq!(rest.instructions(), Some("Sell mugs."));
    // An agent-level hooks block has none.
    assert_eq!(load("hooks:\n  Stop: []\n").instructions(), None);
    assert!(refused("kind: ExtendedAgent\nspec:\n  instructions: '  '\n").contains("`spec.instructions` is empty"));
    assert!(refused("kind: ExtendedAgent\nspec:\n  instructions: [a]\n").contains("must be text"));
}
