//! Loading and validating declarative hooks written in the Azure SRE Agent format or in Claude
//! Code's `settings.json` format (told apart by their shape; see [`crate::claude`]).
//!
//! A hooks file holds one or more YAML documents. A document with a top-level `hooks:` block
//! gives agent-level hooks; an `ExtendedAgent` document (`kind: ExtendedAgent`, hooks under
//! `spec.hooks`) gives custom-agent-level hooks, and so does the REST API v2 payload shape
//! (`properties.hooks`), since JSON is YAML. Every field is checked when the file is loaded, and
//! an invalid hook is refused with a message naming the hook and the field.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde_json::{Map, Value};

use crate::HooksError;

/// Default `timeout` of a hook, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Largest `timeout` accepted, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 300;
/// Default `maxRejections` of the Stop hooks of a run.
pub const DEFAULT_MAX_REJECTIONS: u32 = 3;
/// Largest `maxRejections` accepted.
pub const MAX_MAX_REJECTIONS: u32 = 25;
/// Largest `script` accepted, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// The events a declarative hook can attach to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// The agent is about to deliver its final answer.
    Stop,
    /// A tool call finished (successfully or not).
    PostToolUse,
    /// A tool call is about to run (our addition to the Azure format, mapped to
    /// `before_tool_execution`).
    PreToolUse,
    /// The user sent a message (Claude Code format only).
    UserPromptSubmit,
    /// A conversation starts (Claude Code format only).
    SessionStart,
}

impl HookEvent {
    /// The event's name as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::Stop => "Stop",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionStart => "SessionStart",
        }
    }

    /// An event of the Azure format.
    fn parse(name: &str) -> Option<HookEvent> {
        match name {
            "Stop" => Some(HookEvent::Stop),
            "PostToolUse" => Some(HookEvent::PostToolUse),
            "PreToolUse" => Some(HookEvent::PreToolUse),
            _ => None,
        }
    }

    /// Whether the event is about one tool call (its hooks have a tool matcher).
    pub fn is_tool_event(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a hook was configured. Agent-level hooks run before custom-agent-level hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookLevel {
    /// A top-level `hooks:` block: applies to the whole agent.
    Agent,
    /// `spec.hooks` of an `ExtendedAgent` document: applies to that custom agent.
    CustomAgent,
}

impl HookLevel {
    /// `agent` or `custom_agent` (as in audit records and hook ids).
    pub fn as_str(self) -> &'static str {
        match self {
            HookLevel::Agent => "agent",
            HookLevel::CustomAgent => "custom_agent",
        }
    }
}

/// The format a hook was written in: it decides the context the hook gets and how its answer
/// is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookFormat {
    /// The Azure SRE Agent format.
    Azure,
    /// Claude Code's `settings.json` `hooks` format.
    ClaudeCode,
}

/// What a hook does when it fails (crash, timeout, bad output, missing script).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Go on as if the hook had allowed (the default).
    #[default]
    Allow,
    /// Block: the tool does not run, its result is not delivered, or the answer is rejected.
    Block,
}

impl FailMode {
    /// `allow` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailMode::Allow => "allow",
            FailMode::Block => "block",
        }
    }
}

/// The interpreter named by a `script`'s shebang line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptInterpreter {
    /// `#!/bin/bash`
    Bash,
    /// `#!/usr/bin/env python3`
    Python3,
}

/// How a hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookKind {
    /// `type: prompt`: a model judges, given `prompt` with the context in place of `$ARGUMENTS`.
    Prompt {
        /// The prompt text.
        prompt: String,
        /// The `model` field, if set (see the hooks documentation for what it selects).
        model: Option<String>,
    },
    /// `type: command` with `command`: an inline command run by `/bin/bash -c`.
    Command {
        /// The command line.
        command: String,
    },
    /// `type: command` with `script`: a multi-line script run by its shebang's interpreter.
    Script {
        /// The script, shebang line included.
        script: String,
        /// The interpreter its shebang names.
        interpreter: ScriptInterpreter,
    },
}

/// Which tools a `PostToolUse`/`PreToolUse` hook applies to: a regex anchored as `^(pattern)$`,
/// case-sensitive; `*` matches every tool; an empty or null matcher matches none.
#[derive(Debug, Clone)]
pub struct ToolMatcher {
    pattern: String,
    regex: Option<Regex>,
}

impl PartialEq for ToolMatcher {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl Eq for ToolMatcher {}

impl ToolMatcher {
    /// Compiles a matcher; `Err` is the regex error.
    pub fn new(pattern: &str) -> Result<ToolMatcher, String> {
        let regex = match pattern {
            "" | "*" => None,
            _ => Some(Regex::new(&format!("^(?:{pattern})$")).map_err(|error| error.to_string())?),
        };
        Ok(ToolMatcher { pattern: pattern.to_string(), regex })
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether the matcher applies to the tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        match &self.regex {
            Some(regex) => regex.is_match(name),
            None => self.pattern == "*",
        }
    }
}

/// One validated hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// The hook's id: level, event and position, e.g. `agent.Stop[0]` or `custom_agent.PostToolUse[1]`.
    pub id: String,
    /// Where it was configured.
    pub level: HookLevel,
    /// The event it attaches to.
    pub event: HookEvent,
    /// How it decides.
    pub kind: HookKind,
    /// Which tools it applies to (tool events only).
    pub matcher: Option<ToolMatcher>,
    /// How long it may take.
    pub timeout: Duration,
    /// What happens when it fails.
    pub fail_mode: FailMode,
    /// `maxRejections`, when written (Stop hooks only).
    pub max_rejections: Option<u32>,
    /// The format it was written in.
    pub format: HookFormat,
}

impl HookSpec {
    /// Whether the hook runs for a call of the tool `tool` (for `SessionStart`: for the
    /// conversation's source, `startup`). Hooks without a matcher run always.
    pub fn applies_to(&self, tool: &str) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.matches(tool))
    }
}

/// Validated hooks of one or more files, agent-level hooks first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookConfig {
    hooks: Vec<HookSpec>,
    agent_name: Option<String>,
    instructions: Option<String>,
    warnings: Vec<String>,
}

const HOOK_FIELDS: [&str; 9] =
    ["type", "prompt", "command", "script", "matcher", "timeout", "failMode", "model", "maxRejections"];

fn config_error(origin: &str, message: impl fmt::Display) -> HooksError {
    HooksError::Config(format!("hooks file {origin}: {message}"))
}

impl HookConfig {
    /// Reads and validates a hooks file.
    pub fn load(path: &Path) -> Result<HookConfig, HooksError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| config_error(&origin, error))?;
        HookConfig::from_yaml_str(&text, &origin)
    }

    /// Validates hooks given as YAML text; `origin` names the source in error messages.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<HookConfig, HooksError> {
        let mut config = HookConfig::default();
        let mut custom_agents = 0;
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .map_err(|error| config_error(origin, format!("not valid YAML: {error}")))?;
            let Value::Object(document) = value else {
                if value.is_null() {
                    continue;
                }
                return Err(config_error(origin, "a document must be a mapping with `hooks` or an ExtendedAgent"));
            };
            let kind = document.get("kind").map(|kind| kind.as_str().unwrap_or_default());
            let body = document.get("spec").or_else(|| document.get("properties"));
            let (level, hooks) = match (kind, document.get("hooks")) {
                (Some(kind), _) if kind != "ExtendedAgent" => {
                    return Err(config_error(origin, format!("unsupported kind {kind:?} (expected ExtendedAgent)")));
                }
                (Some(_), Some(_)) => {
                    return Err(config_error(
                        origin,
                        "an ExtendedAgent document keeps its hooks under `spec.hooks`, not at the top level",
                    ));
                }
                (None, Some(hooks)) if crate::claude::is_claude_shape(hooks) => {
                    let specs = crate::claude::parse(&document, hooks, &mut config.warnings)
                        .map_err(|message| config_error(origin, message))?;
                    for mut spec in specs {
                        let position =
                            config.hooks.iter().filter(|h| h.level == spec.level && h.event == spec.event).count();
                        spec.id = format!("{}.{}[{position}]", spec.level.as_str(), spec.event);
                        config.hooks.push(spec);
                    }
                    continue;
                }
                (None, Some(hooks)) => (HookLevel::Agent, hooks),
                (kind, None) => {
                    let hooks = body.and_then(|b| b.get("hooks"));
                    if kind.is_none() && hooks.is_none() && body.and_then(|b| b.get("instructions")).is_none() {
                        return Err(config_error(
                            origin,
                            "no hooks found: expected a top-level `hooks:` block or an ExtendedAgent with \
                             `spec.hooks` or `spec.instructions`",
                        ));
                    }
                    custom_agents += 1;
                    if custom_agents > 1 {
                        return Err(config_error(origin, "only one ExtendedAgent document is supported"));
                    }
                    let name = document
                        .get("metadata")
                        .and_then(|m| m.get("name"))
                        .or_else(|| document.get("name"))
                        .and_then(Value::as_str);
                    config.agent_name = name.map(String::from);
                    config.instructions = match body.and_then(|b| b.get("instructions")) {
                        None | Some(Value::Null) => None,
                        Some(Value::String(text)) if !text.trim().is_empty() => Some(text.clone()),
                        Some(Value::String(_)) => {
                            return Err(config_error(origin, "`spec.instructions` is empty"));
                        }
                        Some(_) => return Err(config_error(origin, "`spec.instructions` must be text")),
                    };
                    if hooks.is_none() && config.instructions.is_none() {
                        config.warnings.push(format!("{origin}: the ExtendedAgent has no `spec.hooks`"));
                    }
                    (HookLevel::CustomAgent, hooks.unwrap_or(&Value::Null))
                }
            };
            config.add_block(level, hooks, origin)?;
        }
        config.hooks.sort_by_key(|hook| hook.level);
        Ok(config)
    }

    /// Adds the hooks of another configuration (e.g. another file). Agent-level hooks stay first.
    pub fn extend(&mut self, other: HookConfig) -> Result<(), HooksError> {
        if let (Some(mine), Some(theirs)) = (&self.agent_name, &other.agent_name) {
            return Err(HooksError::Config(format!(
                "two ExtendedAgent documents ({mine} and {theirs}): only one custom agent is supported"
            )));
        }
        self.agent_name = self.agent_name.take().or(other.agent_name);
        self.instructions = self.instructions.take().or(other.instructions);
        self.warnings.extend(other.warnings);
        for mut hook in other.hooks {
            let position = self.hooks.iter().filter(|h| h.level == hook.level && h.event == hook.event).count();
            hook.id = format!("{}.{}[{position}]", hook.level.as_str(), hook.event);
            self.hooks.push(hook);
        }
        self.hooks.sort_by_key(|hook| hook.level);
        Ok(())
    }

    /// Every hook, agent-level first, in the order written.
    pub fn hooks(&self) -> &[HookSpec] {
        &self.hooks
    }

    /// The custom agent's `metadata.name`, when an ExtendedAgent document was loaded.
    pub fn agent_name(&self) -> Option<&str> {
        self.agent_name.as_deref()
    }

    /// The custom agent's `spec.instructions` (its system prompt), when an ExtendedAgent document
    /// that has them was loaded.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// Things that load but deserve attention (a matcher that matches nothing, an ignored field).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Takes the hooks out (agent-level first).
    pub(crate) fn into_hooks(self) -> Vec<HookSpec> {
        self.hooks
    }

    /// The `maxRejections` bound of the run: the largest value written on any Stop hook, or 3.
    pub fn max_rejections(&self) -> u32 {
        self.hooks
            .iter()
            .filter(|h| h.event == HookEvent::Stop)
            .filter_map(|h| h.max_rejections)
            .max()
            .unwrap_or(DEFAULT_MAX_REJECTIONS)
    }

    fn add_block(&mut self, level: HookLevel, hooks: &Value, origin: &str) -> Result<(), HooksError> {
        let hooks = match hooks {
            Value::Null => return Ok(()),
            Value::Object(hooks) => hooks,
            _ => return Err(config_error(origin, "`hooks` must be a mapping from event name to a list of hooks")),
        };
        for (event_name, entries) in hooks {
            let event = HookEvent::parse(event_name).ok_or_else(|| {
                config_error(
                    origin,
                    format!("event {event_name:?} is not supported (supported: Stop, PostToolUse, PreToolUse)"),
                )
            })?;
            let entries = match entries {
                Value::Null => continue,
                Value::Array(entries) => entries,
                _ => return Err(config_error(origin, format!("`{event_name}` must be a list of hooks"))),
            };
            for entry in entries {
                let position = self.hooks.iter().filter(|h| h.level == level && h.event == event).count();
                let id = format!("{}.{event}[{position}]", level.as_str());
                let hook = parse_hook(&id, level, event, entry, &mut self.warnings)
                    .map_err(|message| config_error(origin, format!("hook {id}: {message}")))?;
                self.hooks.push(hook);
            }
        }
        Ok(())
    }
}

pub(crate) fn string_field<'a>(entry: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, String> {
    match entry.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!("field `{field}` must be a string, got {other}")),
    }
}

pub(crate) fn integer_field(entry: &Map<String, Value>, field: &str, range: (u64, u64)) -> Result<Option<u64>, String> {
    match entry.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64().filter(|n| (range.0..=range.1).contains(n)) {
            Some(n) => Ok(Some(n)),
            None => Err(format!("field `{field}` must be an integer from {} to {}, got {value}", range.0, range.1)),
        },
    }
}

/// The interpreter a script's first line names, or why it is refused.
fn interpreter_of(script: &str) -> Result<ScriptInterpreter, String> {
    let first = script.lines().next().unwrap_or("").trim_end();
    match first {
        "#!/bin/bash" => Ok(ScriptInterpreter::Bash),
        "#!/usr/bin/env python3" => Ok(ScriptInterpreter::Python3),
        _ => Err(format!(
            "field `script`: unsupported shebang {first:?} (supported: \"#!/bin/bash\", \"#!/usr/bin/env python3\")"
        )),
    }
}

fn parse_hook(
    id: &str,
    level: HookLevel,
    event: HookEvent,
    entry: &Value,
    warnings: &mut Vec<String>,
) -> Result<HookSpec, String> {
    let Value::Object(entry) = entry else {
        return Err(format!("must be a mapping of hook fields, got {entry}"));
    };
    if let Some(unknown) = entry.keys().find(|key| !HOOK_FIELDS.contains(&key.as_str())) {
        return Err(format!("field `{unknown}` is not a hook field (known: {})", HOOK_FIELDS.join(", ")));
    }
    let prompt = string_field(entry, "prompt")?;
    let command = string_field(entry, "command")?;
    let script = string_field(entry, "script")?;
    let model = string_field(entry, "model")?;
    let kind = match string_field(entry, "type")?.unwrap_or("prompt") {
        "prompt" => {
            if command.is_some() || script.is_some() {
                let field = if command.is_some() { "command" } else { "script" };
                return Err(format!("field `{field}` is only for `type: command` (this hook is a prompt hook)"));
            }
            let prompt =
                prompt.filter(|p| !p.trim().is_empty()).ok_or("field `prompt` is required for prompt hooks")?;
            HookKind::Prompt { prompt: prompt.to_string(), model: model.map(String::from) }
        }
        "command" => {
            if prompt.is_some() {
                return Err("field `prompt` is only for `type: prompt` (this hook is a command hook)".into());
            }
            if model.is_some() {
                return Err("field `model` is only for `type: prompt` (this hook is a command hook)".into());
            }
            match (command, script) {
                (Some(_), Some(_)) => return Err("fields `command` and `script` are mutually exclusive".into()),
                (None, None) => return Err("field `command` or `script` is required for command hooks".into()),
                (Some(command), None) => {
                    if command.trim().is_empty() {
                        return Err("field `command` is empty".into());
                    }
                    HookKind::Command { command: command.to_string() }
                }
                (None, Some(script)) => {
                    if script.len() > MAX_SCRIPT_BYTES {
                        return Err(format!(
                            "field `script` is {} bytes, over the {MAX_SCRIPT_BYTES}-byte (64 KB) limit",
                            script.len()
                        ));
                    }
                    let interpreter = interpreter_of(script)?;
                    HookKind::Script { script: script.to_string(), interpreter }
                }
            }
        }
        other => return Err(format!("field `type` must be `prompt` or `command`, got {other:?}")),
    };
    let matcher = match event {
        HookEvent::Stop => {
            if entry.contains_key("matcher") {
                warnings.push(format!("hook {id}: field `matcher` is ignored on Stop hooks"));
            }
            None
        }
        HookEvent::PostToolUse | HookEvent::PreToolUse | HookEvent::UserPromptSubmit | HookEvent::SessionStart => {
            if !entry.contains_key("matcher") {
                return Err(format!("field `matcher` is required for {event} hooks (use \"*\" for every tool)"));
            }
            let pattern = string_field(entry, "matcher")?.unwrap_or("");
            if pattern.is_empty() {
                warnings.push(format!("hook {id}: an empty `matcher` matches no tool, so this hook never runs"));
            }
            Some(ToolMatcher::new(pattern).map_err(|error| format!("field `matcher` is not a valid regex: {error}"))?)
        }
    };
    let timeout = integer_field(entry, "timeout", (1, MAX_TIMEOUT_SECS))?.unwrap_or(DEFAULT_TIMEOUT_SECS);
    let fail_mode = match string_field(entry, "failMode")? {
        None | Some("allow") => FailMode::Allow,
        Some("block") => FailMode::Block,
        Some(other) => return Err(format!("field `failMode` must be `allow` or `block`, got {other:?}")),
    };
    let max_rejections = integer_field(entry, "maxRejections", (1, u64::from(MAX_MAX_REJECTIONS)))?.map(|n| n as u32);
    if max_rejections.is_some() && event != HookEvent::Stop {
        warnings.push(format!("hook {id}: field `maxRejections` only applies to Stop hooks and is ignored here"));
    }
    Ok(HookSpec {
        id: id.to_string(),
        level,
        event,
        kind,
        matcher,
        timeout: Duration::from_secs(timeout),
        fail_mode,
        max_rejections: max_rejections.filter(|_| event == HookEvent::Stop),
        format: HookFormat::Azure,
    })
}
