//! What a hook answered: the simple (`ok`/`reason`) and extended (`decision`/`reason`/
//! `hookSpecificOutput.additionalContext`) output formats, and the verdict of one hook call.

use serde_json::Value;
use tether_protocol::HookDecidedBy;

/// Allow or block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDecision {
    /// No objection.
    Allow,
    /// Block the tool, its result, or the answer.
    Block,
}

impl HookDecision {
    /// `allow` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookDecision::Allow => "allow",
            HookDecision::Block => "block",
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
    let additional_context = match object.get("hookSpecificOutput") {
        None | Some(Value::Null) => None,
        Some(Value::Object(specific)) => optional_string(specific, "additionalContext")?,
        Some(other) => return Err(format!("`hookSpecificOutput` must be an object, got {other}")),
    };
    Ok(Answer { decision, reason, additional_context })
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
