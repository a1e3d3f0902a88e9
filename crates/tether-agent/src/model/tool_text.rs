//! Reading what a model wrote: tool calls and answers written into a reply's text, as small local
//! models write them.
//!
//! A reply's text is scanned once into prose and the JSON values in it: bare (`{…}` or `[…]`
//! anywhere, one per line or several), inside ```` ``` ```` fences (several values per fence, or
//! several fences), or inside `<tool_call>…</tool_call>` tags. JSON is read leniently (as JSON5,
//! by the `json5` crate): `//` and `/* */` comments, trailing commas, single quotes and unquoted
//! keys are accepted. A value is a tool call only when it names a
//! tool the request listed (`{"name": …, "arguments": …}` and the usual variants, or an array of
//! them, or `{"next": <tool>, "arguments": …}` as constrained turns write it); any other JSON stays
//! in the answer exactly as written. `{"next": "answer", "answer": "…"}`, the final-answer shape
//! of constrained turns, becomes its text (as does `{"answer": "…"}`).

use serde_json::{Map, Value};

/// What a reply's text holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadReply {
    /// The tool calls, in the order written, as `(name, arguments)`.
    pub calls: Vec<(String, Value)>,
    /// Everything that is not a tool call, for the user: prose as written, JSON that is not a
    /// call as written, `{"answer": "…"}` as its text. Trimmed.
    pub text: String,
    /// Set when something names a listed tool but cannot be read as a call; says why.
    pub malformed: Option<String>,
}

/// Reads a reply's text against the tools the request listed (see the module docs).
pub fn read_reply(content: &str, tools: &[&str]) -> ReadReply {
    let (text, calls, malformed) = read_pieces(content, tools);
    ReadReply { calls, text: tidy(&text), malformed }
}

/// The user-facing text of `content` before trimming, with the calls and whether something was
/// malformed: the streaming gate compares what it already sent against it.
pub(crate) fn read_pieces(content: &str, tools: &[&str]) -> (String, Vec<(String, Value)>, Option<String>) {
    let mut text = String::with_capacity(content.len());
    let mut calls = Vec::new();
    let mut malformed = None;
    let mut at = 0;
    for span in scan(content) {
        text.push_str(&content[at..span.start]);
        at = span.end;
        let written = &content[span.start..span.end];
        match span.values {
            Ok(values) => {
                let mut found = Vec::new();
                let mut plain = Vec::new();
                for value in &values {
                    match calls_in(value, tools) {
                        Ok(Some(mut more)) => found.append(&mut more),
                        Ok(None) => plain.push(value),
                        Err(reason) => {
                            malformed.get_or_insert(reason);
                        }
                    }
                }
                if found.is_empty() {
                    // Not a call: the answer as written, or the text of `{"answer": …}`.
                    match (values.len(), values.first().and_then(answer_of)) {
                        (1, Some(answer)) => {
                            text.push_str(&answer);
                            text.push_str(&span.leftover);
                        }
                        _ => text.push_str(written),
                    }
                } else {
                    calls.append(&mut found);
                    for value in plain {
                        text.push_str(&answer_of(value).unwrap_or_else(|| value.to_string()));
                    }
                    text.push_str(&span.leftover);
                }
            }
            Err(reason) => {
                if names_a_tool(written, tools) {
                    malformed.get_or_insert(reason);
                } else {
                    text.push_str(written);
                }
            }
        }
    }
    text.push_str(&content[at..]);
    if !calls.is_empty() {
        malformed = None;
    }
    (text, calls, malformed)
}

/// Every JSON value written in `content` (bare, fenced or tagged; leniently read), in order.
/// Prompt-hook judges read their `{"ok": …}` with this.
pub fn json_values(content: &str) -> Vec<Value> {
    scan(content).into_iter().filter_map(|span| span.values.ok()).flatten().collect()
}

/// `{"next": "answer", "answer": "…"}` or `{"answer": "…"}` (a string, no other key): the final
/// answer of a constrained turn.
pub(crate) fn answer_of(value: &Value) -> Option<String> {
    let object = value.as_object()?;
    let step = object.get(crate::model::schema::STEP_KEY);
    if object.len() != 1 + usize::from(step.is_some()) || step.is_some_and(|step| !step.is_string()) {
        return None;
    }
    object.get("answer")?.as_str().map(String::from)
}

/// `written` (a reply as the model wrote it) with its answer replaced by `answer`: the same
/// `{"next": "answer", "answer": …}` object when it was one (a constrained reply, laid out as the
/// model lays it out), else `answer` itself. What the conversation keeps of an answer Tether
/// cleaned, so that later runs do not read, and copy, what was left out.
pub(crate) fn with_answer(written: &str, answer: &str) -> String {
    let wrapped = serde_json::from_str::<Value>(written.trim()).ok();
    if wrapped.as_ref().and_then(answer_of).is_some() {
        let step = crate::model::schema::STEP_KEY;
        format!("{{\n  \"{step}\": \"answer\",\n  \"answer\": {}\n}}", Value::from(answer))
    } else {
        answer.to_string()
    }
}

/// The answer in `written` (an answer the conversation keeps, [`with_answer`]'s inverse): the
/// answer of a `{"next": "answer", "answer": …}` object, else all of it.
pub(crate) fn answer_text(written: &str) -> String {
    let wrapped = serde_json::from_str::<Value>(written.trim()).ok();
    wrapped.as_ref().and_then(answer_of).unwrap_or_else(|| written.to_string())
}

/// Trims and removes runs of blank lines left where calls were cut out.
pub(crate) fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.trim().lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line.trim_end());
    }
    out
}

fn names_a_tool(text: &str, tools: &[&str]) -> bool {
    tools.iter().any(|tool| text.contains(&format!("\"{tool}\"")))
}

/// A stretch of the text that holds JSON (or looked like it and could not be read).
#[derive(Debug)]
struct Span {
    start: usize,
    end: usize,
    values: Result<Vec<Value>, String>,
    /// Text inside a fence or tag next to its JSON (kept for the user).
    leftover: String,
}

const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";
const FENCE: &str = "```";

/// Splits `text` into JSON spans; what lies between them is prose.
fn scan(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with(TAG_OPEN) || rest.starts_with(FENCE) {
            let (body_start, close) = if rest.starts_with(TAG_OPEN) {
                (i + TAG_OPEN.len(), TAG_CLOSE)
            } else {
                // Skip the info string (`json`, `tool_call`, …) up to the end of the line.
                let after = i + FENCE.len();
                (text[after..].find('\n').map_or(text.len(), |n| after + n + 1), FENCE)
            };
            let body_end = text[body_start..].find(close).map_or(text.len(), |n| body_start + n);
            let end = (body_end + close.len()).min(text.len());
            let body = &text[body_start..body_end];
            // `None`: prose (code of another kind), skipped whole and never scanned inside.
            if let Some((values, leftover)) = values_in_block(body) {
                spans.push(Span { start: i, end, values, leftover });
            }
            i = end.max(i + 1);
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '{' || c == '[' {
            if let Some(len) = balanced_len(rest) {
                match parse_lenient(&rest[..len]) {
                    Ok(value) => {
                        spans.push(Span { start: i, end: i + len, values: Ok(vec![value]), leftover: String::new() });
                        i += len;
                        continue;
                    }
                    Err(reason) if looks_like_a_call(&rest[..len]) => {
                        spans.push(Span { start: i, end: i + len, values: Err(reason), leftover: String::new() });
                        i += len;
                        continue;
                    }
                    Err(_) => {}
                }
            } else if looks_like_a_call(rest) {
                // Cut off mid-value (the reply ran out of tokens).
                let reason = match parse_lenient(rest) {
                    Err(reason) => reason,
                    Ok(_) => "the JSON is incomplete".to_string(),
                };
                spans.push(Span { start: i, end: text.len(), values: Err(reason), leftover: String::new() });
                break;
            }
        }
        i += c.len_utf8();
    }
    spans
}

/// The JSON values in a fence's or a tag's `body` (one, or several as JSON lines) and the text
/// between them. `None` when it holds no JSON (code of another kind); `Some((Err, _))` when it
/// looks like a call that cannot be read.
fn values_in_block(body: &str) -> Option<(Result<Vec<Value>, String>, String)> {
    let mut values = Vec::new();
    let mut leftover = String::new();
    let mut rest = body;
    while !rest.is_empty() {
        let Some(start) = rest.find(['{', '[']) else {
            leftover.push_str(rest);
            break;
        };
        leftover.push_str(&rest[..start]);
        rest = &rest[start..];
        match balanced_len(rest).map(|len| (len, parse_lenient(&rest[..len]))) {
            Some((len, Ok(value))) => {
                values.push(value);
                rest = &rest[len..];
                // JSON lines may be separated by commas.
                if let Some(after) = rest.trim_start().strip_prefix(',') {
                    rest = after;
                }
            }
            Some((len, Err(reason))) => {
                if looks_like_a_call(&rest[..len]) {
                    return Some((Err(reason), String::new()));
                }
                leftover.push_str(&rest[..len]);
                rest = &rest[len..];
            }
            None if looks_like_a_call(rest) => {
                let reason = parse_lenient(rest.trim()).err().unwrap_or_else(|| "the JSON is incomplete".into());
                return Some((Err(reason), String::new()));
            }
            None => {
                leftover.push_str(rest);
                break;
            }
        }
    }
    if values.is_empty() {
        return None;
    }
    let leftover = leftover.trim();
    Some((Ok(values), if leftover.is_empty() { String::new() } else { format!("\n{leftover}\n") }))
}

fn looks_like_a_call(text: &str) -> bool {
    text.contains("\"name\"") || text.contains("\"function\"") || text.contains("\"tool\"")
}

/// The length of the balanced `{…}` or `[…]` at the start of `text`, skipping strings and
/// comments; `None` when it never closes.
fn balanced_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Parses JSON, accepting what small models write around it: comments, trailing commas, single
/// quotes and unquoted keys (JSON5, read by the `json5` crate).
pub(crate) fn parse_lenient(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).or_else(|first_error| {
        json5::from_str(text).map_err(|_| format!("the tool call is not valid JSON: {first_error}"))
    })
}

/// The calls `value` holds, when it names listed tools: `Ok(None)` when it is not a call.
fn calls_in(value: &Value, tools: &[&str]) -> Result<Option<Vec<(String, Value)>>, String> {
    let items: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        Value::Object(object) => match ["tool_calls", "calls"].iter().find_map(|k| object.get(*k)) {
            Some(Value::Array(items)) if object.len() == 1 => items.iter().collect(),
            _ => vec![value],
        },
        _ => return Ok(None),
    };
    if items.is_empty() {
        return Ok(None);
    }
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        let Some(object) = item.as_object() else { return Ok(None) };
        match call_from_object(object, tools)? {
            Some(call) => calls.push(call),
            // One item that is not a call makes the whole value the answer.
            None => return Ok(None),
        }
    }
    Ok(Some(calls))
}

fn call_from_object(object: &Map<String, Value>, tools: &[&str]) -> Result<Option<(String, Value)>, String> {
    let function = object.get("function").and_then(Value::as_object);
    let name = [crate::model::schema::STEP_KEY, "name", "tool", "tool_name"]
        .iter()
        .find_map(|key| object.get(*key))
        .or_else(|| function.and_then(|f| f.get("name")))
        .and_then(Value::as_str);
    let Some(name) = name.filter(|name| tools.contains(name)) else { return Ok(None) };
    let arguments = ["arguments", "parameters", "args", "input"]
        .iter()
        .find_map(|key| object.get(*key).or_else(|| function.and_then(|f| f.get(*key))))
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let arguments = match arguments {
        Value::String(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Value::String(text) => parse_lenient(&text).map_err(|error| format!("the arguments of {name:?}: {error}"))?,
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    Ok(Some((name.to_string(), arguments)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOOLS: &[&str] = &["cart_add", "cart_view", "navigate", "book_ticket", "x", "a"];

    fn calls(content: &str) -> Vec<(String, Value)> {
        let read = read_reply(content, TOOLS);
        assert!(!read.calls.is_empty(), "{content:?}: {read:?}");
        read.calls
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
    fn single_quotes_and_unquoted_keys_are_tolerated() {
        let content = "```json\n{name: 'cart_add', arguments: {productId: 'mug-red', quantity: 2,},}\n```";
        assert_eq!(calls(content), vec![("cart_add".into(), json!({"productId": "mug-red", "quantity": 2}))]);
    }

    #[test]
    fn qwen_tool_call_tags_and_bare_json_are_calls() {
        let tagged = "Sure.\n<tool_call>\n{\"name\": \"cart_view\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": \"a\"}</tool_call>";
        assert_eq!(calls(tagged), vec![("cart_view".into(), json!({})), ("a".into(), json!({}))]);
        assert_eq!(read_reply(tagged, TOOLS).text, "Sure.");
        let bare = "  {\"name\": \"navigate\", \"arguments\": \"{\\\"to\\\": \\\"cart\\\"}\"}  ";
        assert_eq!(calls(bare), vec![("navigate".into(), json!({"to": "cart"}))]);
        let openai_shape = "{\"function\": {\"name\": \"x\", \"arguments\": \"{}\"}}";
        assert_eq!(calls(openai_shape), vec![("x".into(), json!({}))]);
    }

    #[test]
    fn a_call_followed_or_preceded_by_text_keeps_the_text() {
        let read = read_reply("{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"tee-black\"}}\nDone.", TOOLS);
        assert_eq!(read.calls, vec![("cart_add".into(), json!({"productId": "tee-black"}))]);
        assert_eq!(read.text, "Done.");
        let read = read_reply("I'll add it now.\n```json\n{\"name\": \"cart_add\", \"arguments\": {}}\n```\n", TOOLS);
        assert_eq!((read.calls.len(), read.text.as_str()), (1, "I'll add it now."));
    }

    #[test]
    fn several_calls_as_json_lines_an_array_or_several_fences() {
        let lines = "{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug-red\"}}\n{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug-blue\"}}";
        assert_eq!(calls(lines).len(), 2);
        let array = "[{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug-red\"}}, {\"name\": \"navigate\", \"arguments\": {\"to\": \"cart\"}},]";
        assert_eq!(calls(array).iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["cart_add", "navigate"]);
        let fences =
            "```json\n{\"name\": \"cart_add\", \"arguments\": {}}\n```\nand\n```json\n{\"name\": \"cart_view\"}\n```";
        let read = read_reply(fences, TOOLS);
        assert_eq!(read.calls.len(), 2);
        assert_eq!(read.text, "and");
        let fenced_lines =
            "```json\n{\"name\": \"cart_add\", \"arguments\": {}}\n{\"name\": \"cart_view\", \"arguments\": {}}\n```";
        assert_eq!(calls(fenced_lines).len(), 2);
        let wrapped = "{\"tool_calls\": [{\"name\": \"cart_view\"}, {\"name\": \"x\"}]}";
        assert_eq!(calls(wrapped).len(), 2);
    }

    #[test]
    fn plain_text_and_unrelated_code_are_the_answer_as_written() {
        for text in [
            "Hello! I can help with your cart.",
            "```rust\nfn main() {}\n```",
            "{\"answer\": 42}",
            "Use [brackets] and {braces} freely.",
            "The result: {\"total\": 2400}",
            "[1, 2, 3]",
        ] {
            let read = read_reply(text, TOOLS);
            assert_eq!((read.calls.len(), read.text.as_str(), read.malformed), (0, text, None), "{text}");
        }
    }

    #[test]
    fn only_listed_tools_are_calls_other_json_reaches_the_user_whole() {
        let text = "{\"name\": \"cart_clear\", \"arguments\": {}}";
        let read = read_reply(text, TOOLS);
        assert_eq!((read.calls.len(), read.text.as_str(), read.malformed), (0, text, None));
        let mixed = "[{\"name\": \"cart_add\"}, {\"name\": \"delete_everything\"}]";
        assert_eq!(read_reply(mixed, TOOLS).text, mixed);
    }

    #[test]
    fn the_answer_shape_becomes_its_text() {
        assert_eq!(read_reply("{\"answer\": \"Your cart has 2 items.\"}", TOOLS).text, "Your cart has 2 items.");
        assert_eq!(read_reply(" {\"answer\": \"a\\nb \\u00d7\"} ", &[]).text, "a\nb ×");
    }

    #[test]
    fn broken_calls_are_reported_not_dropped() {
        let read = read_reply("```json\n{\"name\": \"cart_add\", \"arguments\": {\"productId\": }\n```", TOOLS);
        assert!(read.malformed.as_deref().is_some_and(|r| r.contains("not valid JSON")), "{read:?}");
        // Cut off before the end.
        let read = read_reply("{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug", TOOLS);
        assert!(read.malformed.is_some(), "{read:?}");
        // Broken JSON that names no listed tool is just text.
        let read = read_reply("{\"name\": \"other\", oops}", TOOLS);
        assert_eq!((read.malformed, read.text.as_str()), (None, "{\"name\": \"other\", oops}"));
    }

    #[test]
    fn json_values_finds_a_judges_answer_anywhere() {
        assert_eq!(json_values("- {\"ok\": false, \"reason\": \"r\"}"), vec![json!({"ok": false, "reason": "r"})]);
        assert_eq!(json_values("Sure! ```json\n{\"ok\": true,}\n```"), vec![json!({"ok": true})]);
        assert!(json_values("no json here").is_empty());
    }

    #[test]
    fn a_cleaned_answer_keeps_the_shape_the_model_wrote() {
        let written = "{\n  \"next\": \"answer\",\n  \"answer\": \"The request was: 'Archive it.' Done so far\"\n}";
        assert_eq!(
            with_answer(written, "Archived \"Slides\"."),
            "{\n  \"next\": \"answer\",\n  \"answer\": \"Archived \\\"Slides\\\".\"\n}"
        );
        assert_eq!(with_answer("The request was: 'Archive it.'", "Archived."), "Archived.");
    }
}
