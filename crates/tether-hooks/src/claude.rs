//! Claude Code's hook format: a `settings.json`-style `hooks` object, told apart from the Azure
//! format by its shape (each event holds matcher groups with a `hooks` list).
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "cart_.*", "hooks": [{"type": "command", "command": "./check.sh"}]}]}}
//! ```
//!
//! Supported: `PreToolUse`, `PostToolUse`, `Stop`, `UserPromptSubmit`, `SessionStart`; `command`
//! hooks (and `prompt` hooks, judged like the Azure format's); `matcher` (exact name or regex;
//! `*`, empty or absent: every tool); `timeout` (seconds, default 60); exit code 2; JSON output
//! with `decision`, `reason`, `continue`/`stopReason` and `hookSpecificOutput`
//! (`permissionDecision` `allow`/`deny`/`ask`, `permissionDecisionReason`, `updatedInput`,
//! `additionalContext`). Tether's `failMode` applies, and defaults to `block` (fail closed): a
//! hook that crashes, hangs or answers garbage does not let the call through (Claude Code lets it
//! through). `docs/hooks.md` has both formats side by side.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{
    FailMode, HookEvent, HookFormat, HookKind, HookLevel, HookSpec, ToolMatcher, integer_field, string_field,
};

/// Default `timeout` of a command hook in this format, in seconds (Claude Code's).
pub const CLAUDE_DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Largest `timeout` accepted in this format, in seconds (Claude Code's 10 minutes).
pub const CLAUDE_MAX_TIMEOUT_SECS: u64 = 600;

/// Events of Claude Code that Tether has no counterpart for: loaded with a warning, never run.
const IGNORED_EVENTS: &[&str] = &[
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUseFailure",
];

/// Hook fields of this format; `statusMessage`, `async` and `once` are accepted and ignored.
const FIELDS: &[&str] = &["type", "command", "prompt", "timeout", "failMode", "model"];
const IGNORED_FIELDS: &[&str] = &["statusMessage", "async", "once"];

/// Whether a `hooks` value is in Claude Code's shape: some event holds a group with `hooks`.
pub(crate) fn is_claude_shape(hooks: &Value) -> bool {
    hooks.as_object().is_some_and(|events| {
        events.values().filter_map(Value::as_array).flatten().any(|group| group.get("hooks").is_some())
    })
}

fn parse_event(name: &str) -> Option<HookEvent> {
    match name {
        "PreToolUse" => Some(HookEvent::PreToolUse),
        "PostToolUse" => Some(HookEvent::PostToolUse),
        "Stop" => Some(HookEvent::Stop),
        "UserPromptSubmit" => Some(HookEvent::UserPromptSubmit),
        "SessionStart" => Some(HookEvent::SessionStart),
        _ => None,
    }
}

/// Reads the hooks of a settings document. Ids are assigned by the caller; `Err` names the
/// event, group, hook and field.
pub(crate) fn parse(
    document: &Map<String, Value>,
    hooks: &Value,
    warnings: &mut Vec<String>,
) -> Result<Vec<HookSpec>, String> {
    let others: Vec<&str> = document.keys().map(String::as_str).filter(|key| *key != "hooks").collect();
    if !others.is_empty() {
        warnings.push(format!("settings keys other than `hooks` are ignored: {}", others.join(", ")));
    }
    let Some(events) = hooks.as_object() else {
        return Err("`hooks` must be a mapping from event name to a list of matcher groups".into());
    };
    let mut specs = Vec::new();
    for (name, groups) in events {
        let Some(event) = parse_event(name) else {
            if IGNORED_EVENTS.contains(&name.as_str()) {
                warnings.push(format!("Claude Code event {name} has no counterpart in Tether: its hooks never run"));
                continue;
            }
            return Err(format!(
                "event {name:?} is not a Claude Code hook event Tether supports (PreToolUse, PostToolUse, Stop, \
                 UserPromptSubmit, SessionStart)"
            ));
        };
        let groups = match groups {
            Value::Null => continue,
            Value::Array(groups) => groups,
            _ => {
                return Err(format!(
                    "`{name}` must be a list of matcher groups ({{\"matcher\": …, \"hooks\": [...]}})"
                ));
            }
        };
        for (g, group) in groups.iter().enumerate() {
            let at = format!("{name}[{g}]");
            let Value::Object(group) = group else { return Err(format!("{at} must be a matcher group object")) };
            if let Some(unknown) = group.keys().find(|k| *k != "matcher" && *k != "hooks") {
                return Err(format!("{at}: field `{unknown}` is not a matcher-group field (matcher, hooks)"));
            }
            let matcher = matcher(event, group, &at, warnings)?;
            let Some(Value::Array(entries)) = group.get("hooks") else {
                return Err(format!("{at}: `hooks` must be a list of hooks"));
            };
            for (h, entry) in entries.iter().enumerate() {
                let at = format!("{at}.hooks[{h}]");
                let spec =
                    hook(event, matcher.clone(), entry, warnings).map_err(|message| format!("hook {at}: {message}"))?;
                specs.push(spec);
            }
        }
    }
    Ok(specs)
}

/// A group's matcher: for tool events the tool name (exact or a regex; `*`, empty or absent
/// match every tool), for `SessionStart` the source (`startup`); other events have none.
fn matcher(
    event: HookEvent,
    group: &Map<String, Value>,
    at: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<ToolMatcher>, String> {
    let pattern = string_field(group, "matcher").map_err(|e| format!("{at}: {e}"))?.unwrap_or("");
    match event {
        HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::SessionStart => {
            let pattern = if pattern.is_empty() { "*" } else { pattern };
            ToolMatcher::new(pattern)
                .map(Some)
                .map_err(|error| format!("{at}: field `matcher` is not a valid regex: {error}"))
        }
        HookEvent::Stop | HookEvent::UserPromptSubmit => {
            if !pattern.is_empty() {
                warnings.push(format!("{at}: `matcher` is ignored on {event} hooks"));
            }
            Ok(None)
        }
    }
}

fn hook(
    event: HookEvent,
    matcher: Option<ToolMatcher>,
    entry: &Value,
    warnings: &mut Vec<String>,
) -> Result<HookSpec, String> {
    let Value::Object(entry) = entry else { return Err(format!("must be a mapping of hook fields, got {entry}")) };
    for key in entry.keys() {
        if IGNORED_FIELDS.contains(&key.as_str()) {
            warnings.push(format!("field `{key}` is accepted and ignored"));
        } else if !FIELDS.contains(&key.as_str()) {
            return Err(format!("field `{key}` is not a hook field (known: {})", FIELDS.join(", ")));
        }
    }
    let kind = match string_field(entry, "type")? {
        Some("command") => {
            if entry.contains_key("prompt") || entry.contains_key("model") {
                return Err("fields `prompt` and `model` are only for `type: prompt`".into());
            }
            let command = string_field(entry, "command")?.filter(|c| !c.trim().is_empty());
            HookKind::Command { command: command.ok_or("field `command` is required for command hooks")?.to_string() }
        }
        Some("prompt") => {
            if entry.contains_key("command") {
                return Err("field `command` is only for `type: command`".into());
            }
            let prompt = string_field(entry, "prompt")?.filter(|p| !p.trim().is_empty());
            let prompt = prompt.ok_or("field `prompt` is required for prompt hooks")?.to_string();
            HookKind::Prompt { prompt, model: string_field(entry, "model")?.map(String::from) }
        }
        Some(other) => {
            return Err(format!(
                "field `type` must be `command` or `prompt`, got {other:?} (http, mcp_tool and agent hooks are not supported)"
            ));
        }
        None => return Err("field `type` is required (`command` or `prompt`)".into()),
    };
    let default_timeout = if matches!(kind, HookKind::Prompt { .. }) { 30 } else { CLAUDE_DEFAULT_TIMEOUT_SECS };
    let timeout = integer_field(entry, "timeout", (1, CLAUDE_MAX_TIMEOUT_SECS))?.unwrap_or(default_timeout);
    let fail_mode = match string_field(entry, "failMode")? {
        None | Some("block") => FailMode::Block,
        Some("allow") => FailMode::Allow,
        Some(other) => return Err(format!("field `failMode` must be `allow` or `block`, got {other:?}")),
    };
    Ok(HookSpec {
        id: String::new(),
        level: HookLevel::Agent,
        event,
        kind,
        matcher,
        timeout: Duration::from_secs(timeout),
        fail_mode,
        max_rejections: None,
        format: HookFormat::ClaudeCode,
    })
}
