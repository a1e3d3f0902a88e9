//! Tool calls written into a reply's text, as small local models do: a ```` ```json ```` block,
//! `<tool_call>{…}</tool_call>`, or a bare `{"name": …, "arguments": …}`. Only calls of the tools
//! the request listed count: any other JSON is the model's answer.

use serde_json::{Map, Value};

/// What a reply's text holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentToolCalls {
    /// Plain text.
    None,
    /// One or more tool calls as `(name, arguments)`.
    Calls(Vec<(String, Value)>),
    /// Something that looks like a tool call but cannot be read; the message says why.
    Malformed(String),
}

/// Finds calls of the `listed` tools written into `content`.
///
/// JSON with `//` or `/* */` comments or trailing commas is accepted (small models write them).
/// The arguments may be an object or a JSON string holding one, under `arguments`,
/// `parameters` or `args`; the name under `name`, `tool` or `function.name`. JSON that names no
/// listed tool (an answer that happens to be JSON, a call of a tool the request did not offer)
/// is not a call: [`ContentToolCalls::None`], and the text is the answer. Unreadable JSON is
/// [`ContentToolCalls::Malformed`] only when it looks like a call and names a listed tool.
pub fn extract_tool_calls(content: &str, listed: &[&str]) -> ContentToolCalls {
    if listed.is_empty() {
        return ContentToolCalls::None;
    }
    let mut candidates: Vec<&str> = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("<tool_call>") {
        let after = &rest[start + "<tool_call>".len()..];
        let end = after.find("</tool_call>").unwrap_or(after.len());
        candidates.push(&after[..end]);
        rest = &after[end..];
    }
    let mut rest = content;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        // Skip the info string (`json`, `tool_call`, …) up to the end of the line.
        let body_start = after.find('\n').map_or(0, |n| n + 1);
        let body = &after[body_start..];
        let Some(end) = body.find("```") else {
            candidates.push(body);
            break;
        };
        candidates.push(&body[..end]);
        rest = &body[end + 3..];
    }
    let trimmed = content.trim();
    if candidates.is_empty() && (trimmed.starts_with('{') || trimmed.starts_with('[')) {
        candidates.push(trimmed);
    }

    let mut calls = Vec::new();
    let mut problem = None;
    for candidate in candidates {
        match parse_candidate(candidate.trim()) {
            Ok(found) => calls.extend(found.into_iter().filter(|(name, _)| listed.contains(&name.as_str()))),
            Err(reason) if looks_like_a_call(candidate, listed) => problem = Some(reason),
            Err(_) => {}
        }
    }
    match (calls.is_empty(), problem) {
        (false, _) => ContentToolCalls::Calls(calls),
        (true, Some(reason)) => ContentToolCalls::Malformed(reason),
        (true, None) => ContentToolCalls::None,
    }
}

fn looks_like_a_call(text: &str, listed: &[&str]) -> bool {
    (text.contains("\"name\"") || text.contains("\"function\""))
        && listed.iter().any(|name| text.contains(&format!("\"{name}\"")))
}

fn parse_candidate(text: &str) -> Result<Vec<(String, Value)>, String> {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(first_error) => serde_json::from_str(&relax_json(text))
            .map_err(|_| format!("the tool call is not valid JSON: {first_error}"))?,
    };
    let objects = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut calls = Vec::new();
    for object in objects {
        let Value::Object(object) = object else { continue };
        if let Some(call) = call_from_object(&object)? {
            calls.push(call);
        }
    }
    if calls.is_empty() {
        return Err("the JSON names no tool (expected {\"name\": …, \"arguments\": {…}})".into());
    }
    Ok(calls)
}

fn call_from_object(object: &Map<String, Value>) -> Result<Option<(String, Value)>, String> {
    let function = object.get("function").and_then(Value::as_object);
    let name = object
        .get("name")
        .or_else(|| object.get("tool"))
        .or_else(|| function.and_then(|f| f.get("name")))
        .and_then(Value::as_str);
    let Some(name) = name else { return Ok(None) };
    let arguments = ["arguments", "parameters", "args"]
        .iter()
        .find_map(|key| object.get(*key).or_else(|| function.and_then(|f| f.get(*key))))
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let arguments = match arguments {
        Value::String(text) => serde_json::from_str(&text)
            .or_else(|_| serde_json::from_str(&relax_json(&text)))
            .map_err(|error| format!("the arguments of {name:?} are not valid JSON: {error}"))?,
        other => other,
    };
    Ok(Some((name.to_string(), arguments)))
}

/// Removes comments and trailing commas outside strings.
fn relax_json(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match (c, chars.get(i + 1)) {
            ('"', _) => {
                in_string = true;
                out.push(c);
                i += 1;
            }
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            (',', _) => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(c);
                }
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LISTED: &[&str] = &["cart_add", "cart_view", "book_ticket", "navigate", "a", "x"];

    fn calls(content: &str) -> Vec<(String, Value)> {
        match extract_tool_calls(content, LISTED) {
            ContentToolCalls::Calls(calls) => calls,
            other => panic!("{content:?}: {other:?}"),
        }
    }

    #[test]
    fn fenced_json_blocks_are_calls() {
        let content = "```json\n{\n  \"name\": \"cart_add\",\n  \"arguments\": {\"productId\": \"mug-red\", \"quantity\": 2}\n}\n```";
        assert_eq!(calls(content), vec![("cart_add".into(), json!({"productId": "mug-red", "quantity": 2}))]);
    }

    #[test]
    fn comments_and_trailing_commas_are_tolerated() {
        let content = "```json\n{\n  \"name\": \"book_ticket\",\n  \"arguments\": {\n    \"train\": 12345, // Replace with the actual train number\n    \"seat_class\": \"first\",\n  }\n}\n```";
        assert_eq!(calls(content), vec![("book_ticket".into(), json!({"train": 12345, "seat_class": "first"}))]);
    }

    #[test]
    fn qwen_tool_call_tags_and_bare_json_are_calls() {
        let tagged = "Sure.\n<tool_call>\n{\"name\": \"cart_view\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": \"a\"}</tool_call>";
        assert_eq!(calls(tagged), vec![("cart_view".into(), json!({})), ("a".into(), json!({}))]);
        let bare = "  {\"name\": \"navigate\", \"arguments\": \"{\\\"to\\\": \\\"cart\\\"}\"}  ";
        assert_eq!(calls(bare), vec![("navigate".into(), json!({"to": "cart"}))]);
        let openai_shape = "{\"function\": {\"name\": \"x\", \"arguments\": \"{}\"}}";
        assert_eq!(calls(openai_shape), vec![("x".into(), json!({}))]);
    }

    #[test]
    fn plain_text_and_unrelated_code_are_not_calls() {
        assert_eq!(extract_tool_calls("Hello! I can help with your cart.", LISTED), ContentToolCalls::None);
        assert_eq!(extract_tool_calls("```rust\nfn main() {}\n```", LISTED), ContentToolCalls::None);
        assert_eq!(extract_tool_calls("{\"answer\": 42}", LISTED), ContentToolCalls::None);
    }

    #[test]
    fn only_the_listed_tools_are_calls_any_other_json_is_the_answer() {
        // A name the request did not list: the model's answer (e.g. it shows a JSON example).
        let other = "```json\n{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}\n```";
        assert_eq!(extract_tool_calls(other, LISTED), ContentToolCalls::None);
        assert_eq!(extract_tool_calls("{\"name\": \"delete_everything\"}", LISTED), ContentToolCalls::None);
        // Without tools in the request, nothing is a call.
        assert_eq!(extract_tool_calls("{\"name\": \"cart_add\"}", &[]), ContentToolCalls::None);
        // Mixed: only the listed one is kept.
        let mixed = "[{\"name\": \"cart_view\"}, {\"name\": \"rm_rf\"}]";
        assert_eq!(calls(mixed), vec![("cart_view".into(), json!({}))]);
        // Broken JSON that names no listed tool is text, not a malformed call.
        let broken = "```json\n{\"name\": \"Ada\", \"age\": }\n```";
        assert_eq!(extract_tool_calls(broken, LISTED), ContentToolCalls::None);
    }

    #[test]
    fn broken_calls_are_reported_not_dropped() {
        match extract_tool_calls("```json\n{\"name\": \"cart_add\", \"arguments\": {\"productId\": }\n```", LISTED) {
            ContentToolCalls::Malformed(reason) => assert!(reason.contains("not valid JSON"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}
