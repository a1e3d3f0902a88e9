//! One MCP tool as Tether offers it: a [`ToolSpec`] named `SERVER__tool`, its compiled argument
//! schema, and how a result's content blocks become the text the model reads.

use std::sync::Arc;

use serde_json::Value;
use tether_core::validate::{CompiledSchema, FullSchema, FullValidator, Validator, format_validation_errors};
use tether_protocol::{Risk, ToolSpec};

/// Between a server's name and its tool's name: `files__read_text_file`.
pub const SEPARATOR: &str = "__";

/// An MCP server's tool, offered to the model beside the page's tools.
#[derive(Clone)]
pub struct McpTool {
    /// What the model sees: the name `SERVER__tool`, the server's description and schema,
    /// the risk `none` for a tool the server marks read-only (`readOnlyHint`), `low`
    /// otherwise (the operator's risk floor can raise it), and `global` (it does not depend
    /// on the page).
    pub spec: ToolSpec,
    /// The server's name.
    pub server: String,
    /// The server's own name for the tool.
    pub remote: String,
    schema: Arc<FullSchema>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("spec", &self.spec).field("remote", &self.remote).finish_non_exhaustive()
    }
}

impl McpTool {
    /// The tool `tool` (an MCP `Tool` as JSON) of `server`, or why it cannot be offered: a name
    /// that does not fit Tether's tool names, or a schema that does not compile.
    pub(crate) fn from_listing(server: &str, tool: &Value) -> Result<McpTool, String> {
        let remote = tool.get("name").and_then(Value::as_str).ok_or("the tool has no name")?.to_string();
        // Tether's tool names are letters, digits, `_` and `-`; MCP's may hold `.` and `/` too.
        let local: String =
            remote.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
        let name = format!("{server}{SEPARATOR}{local}");
        tether_core::check_tool_name(&name).map_err(|e| format!("{remote:?}: {e}"))?;
        let parameters = tool.get("inputSchema").cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let schema = FullValidator.compile(&parameters).map_err(|e| format!("{remote:?}: its inputSchema: {e}"))?;
        let read_only = tool.pointer("/annotations/readOnlyHint").and_then(Value::as_bool).unwrap_or(false);
        let title = tool.get("title").or_else(|| tool.pointer("/annotations/title")).and_then(Value::as_str);
        let description = match (title, tool.get("description").and_then(Value::as_str)) {
            (_, Some(text)) if !text.trim().is_empty() => text.trim().to_string(),
            (Some(title), _) => title.to_string(),
            _ => format!("The tool {remote:?} of the MCP server {server:?}."),
        };
        let spec = ToolSpec::new(name, description)
            .with_parameters(parameters)
            .with_risk(if read_only { Risk::None } else { Risk::Low })
            .with_global(true);
        Ok(McpTool { spec, server: server.to_string(), remote, schema: Arc::new(schema) })
    }

    /// Checks a call's arguments against the tool's schema: `Err` holds the message the model
    /// reads (`Validation args "files__read_text_file": …`), and the server is not called.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let errors = self.schema.errors(args);
        if errors.is_empty() { Ok(()) } else { Err(format_validation_errors(&self.spec.name, &errors)) }
    }
}

/// The text the model reads for a `tools/call` result (as JSON): its text blocks, in order, with
/// images, audio, resources and links summarised in one line each (their bytes are not text the
/// model can read); the structured content when there are no blocks.
pub(crate) fn result_text(result: &Value) -> String {
    let blocks = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut parts: Vec<String> = blocks.iter().map(block_text).collect();
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null())
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

fn block_text(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => field("text").to_string(),
        kind @ ("image" | "audio") => {
            let bytes = field("data").len() / 4 * 3;
            format!("[{kind} {}, about {bytes} bytes, not shown]", field("mimeType"))
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or_default();
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or_default();
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[resource {uri}, binary, not shown]"),
            }
        }
        "resource_link" => format!("[link to the resource {} ({})]", field("uri"), field("name")),
        other => format!("[a {other:?} block, not shown]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listing_becomes_a_prefixed_tool_with_its_risk_from_the_read_only_hint() {
        let listed = json!({"name": "get.weather", "description": "Weather.", "inputSchema": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "annotations": {"readOnlyHint": true}});
        let tool = McpTool::from_listing("wx", &listed).unwrap();
        assert_eq!((tool.spec.name.as_str(), tool.remote.as_str()), ("wx__get_weather", "get.weather"));
        assert_eq!(tool.spec.risk, Risk::None);
        assert!(tool.spec.global);
        assert!(tool.check(&json!({"city": "Oslo"})).is_ok());
        let error = tool.check(&json!({})).unwrap_err();
        assert!(error.starts_with("Validation args \"wx__get_weather\": "), "{error}");
        let unmarked = McpTool::from_listing("wx", &json!({"name": "set", "inputSchema": {"type": "object"}})).unwrap();
        assert_eq!(unmarked.spec.risk, Risk::Low);
        assert!(unmarked.spec.description.contains("\"set\""));
    }

    #[test]
    fn a_tool_that_cannot_be_offered_says_why() {
        let long = "x".repeat(70);
        assert!(McpTool::from_listing("wx", &json!({"name": long})).unwrap_err().contains("longer than 64"));
        let bad = json!({"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"type": 7}}}});
        assert!(McpTool::from_listing("wx", &bad).unwrap_err().contains("inputSchema"));
    }

    #[test]
    fn results_are_text_with_other_blocks_summarised() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
        ]});
        assert_eq!(
            result_text(&result),
            "hello\n[image image/png, about 3 bytes, not shown]\n[resource file:///a.txt]\ninside\n[link to the resource file:///b (b)]"
        );
        assert_eq!(result_text(&json!({"content": [], "structuredContent": {"n": 1}})), "{\"n\":1}");
    }
}
