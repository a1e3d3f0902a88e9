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

/// Reads a prompt hook's answer: the JSON object, alone or inside one fenced code block.
pub(crate) fn parse_model_answer(text: &str) -> Result<Answer, String> {
    let trimmed = text.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    if unfenced.trim().is_empty() {
        return Err("the model gave no answer".into());
    }
    parse_answer(unfenced)
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
    fn a_model_answer_may_be_fenced() {
        let answer = parse_model_answer("```json\n{\"ok\": false, \"reason\": \"r\"}\n```").unwrap();
        assert_eq!(answer.decision, HookDecision::Block);
        assert!(parse_model_answer("Sure! {\"ok\": true}").is_err());
    }
}
