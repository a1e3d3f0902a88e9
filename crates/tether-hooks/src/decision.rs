//! What a hook answered: the simple (`ok`/`reason`) and extended (`decision`/`reason`/
//! `hookSpecificOutput.additionalContext`) output formats, and the verdict of one hook call.

use serde_json::Value;
use tether_protocol::HookDecidedBy;

/// Allow, block, or ask the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDecision {
    /// No objection.
    Allow,
    /// Block the tool, its result, or the answer.
    Block,
    /// Run the tool only once the user approves it in the page (Claude Code's
    /// `permissionDecision: "ask"`; `PreToolUse` only).
    Ask,
}

impl HookDecision {
    /// `allow` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookDecision::Allow => "allow",
            HookDecision::Block => "block",
            HookDecision::Ask => "ask",
        }
    }
}

/// What one hook call decided, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct HookVerdict {
    /// The decision the loop applies (after the fail mode, when the hook failed).
    pub decision: HookDecision,
    /// The reason the model reads when blocked: the hook's own, or one the server writes when
    /// the fail mode decided (never the hook's raw output).
    pub reason: Option<String>,
    /// `hookSpecificOutput.additionalContext`, when given.
    pub additional_context: Option<String>,
    /// `hookSpecificOutput.updatedInput`, when given (`PreToolUse`): the arguments to run the
    /// tool with instead.
    pub updated_input: Option<Value>,
    /// Whether the hook, a timeout or the fail mode decided.
    pub decided_by: HookDecidedBy,
    /// The exit code of a command hook, when it exited.
    pub exit_code: Option<i32>,
    /// Why the hook failed, when it did (for the audit record and the log).
    pub failure: Option<String>,
}

/// A hook's answer, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) decision: HookDecision,
    pub(crate) reason: Option<String>,
    pub(crate) additional_context: Option<String>,
    pub(crate) updated_input: Option<Value>,
}

impl Answer {
    /// No objection, nothing to add.
    pub(crate) fn allow() -> Answer {
        Answer { decision: HookDecision::Allow, reason: None, additional_context: None, updated_input: None }
    }
}

/// `hookSpecificOutput.updatedInput`: an object, or absent.
fn updated_input(specific: &serde_json::Map<String, Value>) -> Result<Option<Value>, String> {
    match specific.get("updatedInput") {
        None | Some(Value::Null) => Ok(None),
        Some(value @ Value::Object(_)) => Ok(Some(value.clone())),
        Some(other) => Err(format!("`hookSpecificOutput.updatedInput` must be an object, got {other}")),
    }
}

/// Reads a Claude Code hook's stdout (exit code 0) for `event`. Plain text is context for
/// `UserPromptSubmit` and `SessionStart` (as Claude Code adds it) and ignored elsewhere; JSON is
/// read by its fields: `continue: false` (block, `stopReason`), `decision` (`block`, `approve`),
/// `reason`, and `hookSpecificOutput` (`permissionDecision`, `permissionDecisionReason`,
/// `updatedInput`, `additionalContext`). `Err` says what is wrong with it.
pub(crate) fn parse_claude_answer(event: crate::HookEvent, stdout: &str) -> Result<Answer, String> {
    use crate::HookEvent;
    let text = stdout.trim();
    let mut answer = Answer::allow();
    if text.is_empty() {
        return Ok(answer);
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) else {
        if matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart) {
            answer.additional_context = Some(text.to_string());
        }
        return Ok(answer);
    };
    answer.reason = optional_string(&object, "reason")?;
    match object.get("decision") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) if d == "block" => answer.decision = HookDecision::Block,
        Some(Value::String(d)) if d == "approve" || d == "allow" => {}
        Some(other) => return Err(format!("`decision` must be \"block\" or \"approve\", got {other}")),
    }
    match object.get("continue") {
        None | Some(Value::Null | Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            answer.decision = HookDecision::Block;
            answer.reason = optional_string(&object, "stopReason")?.or(answer.reason);
        }
        Some(other) => return Err(format!("`continue` must be true or false, got {other}")),
    }
    match object.get("hookSpecificOutput") {
        None | Some(Value::Null) => {}
        Some(Value::Object(specific)) => {
            answer.additional_context = optional_string(specific, "additionalContext")?;
            answer.updated_input = updated_input(specific)?;
            let reason = optional_string(specific, "permissionDecisionReason")?;
            match specific.get("permissionDecision") {
                None | Some(Value::Null) => {}
                Some(Value::String(d)) if d == "allow" => {}
                Some(Value::String(d)) if d == "deny" => {
                    answer.decision = HookDecision::Block;
                    answer.reason = reason.or(answer.reason);
                }
                Some(Value::String(d)) if d == "ask" => {
                    if answer.decision != HookDecision::Block {
                        answer.decision = HookDecision::Ask;
                        answer.reason = reason.or(answer.reason);
                    }
                }
                Some(other) => {
                    return Err(format!("`permissionDecision` must be \"allow\", \"deny\" or \"ask\", got {other}"));
                }
            }
        }
        Some(other) => return Err(format!("`hookSpecificOutput` must be an object, got {other}")),
    }
    if event != HookEvent::PreToolUse && (answer.decision == HookDecision::Ask || answer.updated_input.is_some()) {
        return Err(format!("`permissionDecision: ask` and `updatedInput` only apply to PreToolUse, not {event}"));
    }
    Ok(answer)
}

fn optional_string(object: &serde_json::Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone()).filter(|t| !t.trim().is_empty())),
        Some(other) => Err(format!("`{field}` must be a string, got {other}")),
    }
}

/// Parses a hook's JSON answer in either format. `Err` says what is wrong with it.
pub(crate) fn parse_answer(text: &str) -> Result<Answer, String> {
    let value: Value = serde_json::from_str(text.trim()).map_err(|error| format!("output is not JSON ({error})"))?;
    answer_from_value(value)
}

/// Reads an answer from a JSON value in either format.
fn answer_from_value(value: Value) -> Result<Answer, String> {
    let Value::Object(object) = value else {
        return Err("output is not a JSON object".into());
    };
    let decision = match (object.get("decision"), object.get("ok")) {
        (Some(Value::String(decision)), _) if decision == "allow" => HookDecision::Allow,
        (Some(Value::String(decision)), _) if decision == "block" => HookDecision::Block,
        (Some(other), _) => return Err(format!("`decision` must be \"allow\" or \"block\", got {other}")),
        (None, Some(Value::Bool(true))) => HookDecision::Allow,
        (None, Some(Value::Bool(false))) => HookDecision::Block,
        (None, Some(other)) => return Err(format!("`ok` must be true or false, got {other}")),
        (None, None) => return Err("output has neither `decision` nor `ok`".into()),
    };
    let reason = optional_string(&object, "reason")?;
    let (additional_context, updated_input) = match object.get("hookSpecificOutput") {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(specific)) => (optional_string(specific, "additionalContext")?, updated_input(specific)?),
        Some(other) => return Err(format!("`hookSpecificOutput` must be an object, got {other}")),
    };
    Ok(Answer { decision, reason, additional_context, updated_input })
}

/// Reads a prompt hook's answer as leniently as the agent loop reads tool calls: the first JSON
/// object written anywhere in the reply (bare, after a list marker such as `- `, in a fence or a
/// tag; comments and trailing commas allowed) that is an answer in either format.
pub(crate) fn parse_model_answer(text: &str) -> Result<Answer, String> {
    if text.trim().is_empty() {
        return Err("the model gave no answer".into());
    }
    let mut first_problem = None;
    for value in tether_agent::json_values(text) {
        if !value.is_object() {
            continue;
        }
        match answer_from_value(value) {
            Ok(answer) => return Ok(answer),
            Err(problem) => {
                first_problem.get_or_insert(problem);
            }
        }
    }
    Err(first_problem.unwrap_or_else(|| "output is not JSON (no JSON object in the reply)".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_parse() {
        let allow = parse_answer(r#"{"ok": true}"#).unwrap();
        assert_eq!(allow.decision, HookDecision::Allow);
        let block = parse_answer(r#"{"ok": false, "reason": "Add details."}"#).unwrap();
        assert_eq!((block.decision, block.reason.as_deref()), (HookDecision::Block, Some("Add details.")));
        let extended =
            parse_answer(r#"{"decision":"allow","hookSpecificOutput":{"additionalContext":"audited"}}"#).unwrap();
        assert_eq!(extended.additional_context.as_deref(), Some("audited"));
        let blocked = parse_answer(r#"{"decision":"block","reason":"Dangerous command."}"#).unwrap();
        assert_eq!(blocked.decision, HookDecision::Block);
    }

    #[test]
    fn anything_else_is_refused() {
        for text in ["", "not json", "[1]", r#"{"decision":"deny"}"#, r#"{"ok":"yes"}"#, r#"{"reason":"x"}"#] {
            assert!(parse_answer(text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_model_answer_is_read_wherever_it_was_written() {
        let answer = parse_model_answer("```json\n{\"ok\": false, \"reason\": \"r\"}\n```").unwrap();
        assert_eq!(answer.decision, HookDecision::Block);
        // The judge's reply seen with Qwen2.5-Coder-1.5B: a list marker before the object.
        let answer = parse_model_answer("- {\"ok\": false, \"reason\": \"It does not end with the marker.\"}").unwrap();
        assert_eq!(
            (answer.decision, answer.reason.as_deref()),
            (HookDecision::Block, Some("It does not end with the marker."))
        );
        assert_eq!(parse_model_answer("Sure! {\"ok\": true,} // approved").unwrap().decision, HookDecision::Allow);
        assert_eq!(
            parse_model_answer("<tool_call>{\"x\": 1}</tool_call> then {\"decision\": \"block\", \"reason\": \"no\"}")
                .unwrap()
                .decision,
            HookDecision::Block
        );
        for text in ["", "yes", "I approve.", "{\"ok\": \"yes\"}", "[{\"ok\": true}]"] {
            assert!(parse_model_answer(text).is_err(), "{text}");
        }
    }
}
