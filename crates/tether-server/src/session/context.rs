//! What the page offers, in the session: its tools and app state from `CONTEXT_UPDATE` (checked
//! against the limits), the tools of the pages seen before (`pages.rs`), and what a run is offered.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tether_core::check_tool_name;
use tether_core::validate::{FullValidator, Validator};
use tether_protocol::{
    ContextEntry, ContextUpdate, ErrorCode, MAX_CONTEXT_BYTES, MAX_CONTEXT_ENTRIES, PageInfo, ToolSpec,
};

use super::{Refusal, Session, json_bytes, json_depth};

impl Session {
    /// Applies a `CONTEXT_UPDATE`, or refuses it and keeps the previous list.
    pub(crate) fn apply_context(&self, update: ContextUpdate) -> Result<usize, Refusal> {
        let cap = self.config.max_active_tools as usize;
        if update.tools.len() > cap {
            return Err(Refusal {
                code: ErrorCode::ToolCapExceeded,
                message: format!(
                    "CONTEXT_UPDATE has {} tools but this session allows {cap}; the previous list is kept",
                    update.tools.len()
                ),
            });
        }
        let mut schemas = HashMap::with_capacity(update.tools.len());
        for tool in &update.tools {
            let invalid = |message: String| Refusal { code: ErrorCode::InvalidTool, message };
            check_tool_name(&tool.name).map_err(|e| invalid(format!("{e}; the previous list is kept")))?;
            if schemas.contains_key(&tool.name) {
                return Err(invalid(format!("tool {:?} appears twice; the previous list is kept", tool.name)));
            }
            self.check_tool_limits(tool)?;
            let schema = FullValidator.compile(&tool.parameters).map_err(|error| {
                invalid(format!("tool {:?} has an invalid schema: {error}; the previous list is kept", tool.name))
            })?;
            schemas.insert(tool.name.clone(), Arc::new(schema));
        }
        check_context(&update.context)?;
        let count = update.tools.len();
        let mut state = self.lock();
        if let Some(page) = &update.page {
            state.pages.record(&page.url, &update.tools, &schemas);
        }
        state.tools = update.tools;
        state.schemas = schemas;
        state.context = update.context;
        state.revision = update.revision;
        state.page = update.page;
        state.dirty = true;
        state.flush();
        drop(state);
        self.context_applied.notify_waiters();
        Ok(count)
    }

    /// Checks the configured size limits of one announced tool.
    pub(super) fn check_tool_limits(&self, tool: &ToolSpec) -> Result<(), Refusal> {
        let over = |what: String| Refusal {
            code: ErrorCode::LimitExceeded,
            message: format!("tool {:?}: {what}; the previous list is kept", tool.name),
        };
        let config = &self.config;
        let description = tool.description.chars().count();
        if description > config.max_description_chars {
            return Err(over(format!(
                "the description has {description} characters, over the limit of {} (max_description_chars)",
                config.max_description_chars
            )));
        }
        let bytes = json_bytes(&tool.parameters);
        if bytes > config.max_schema_bytes {
            return Err(over(format!(
                "the parameters schema is {bytes} bytes, over the limit of {} (max_schema_bytes)",
                config.max_schema_bytes
            )));
        }
        let depth = json_depth(&tool.parameters);
        if depth > config.max_schema_depth {
            return Err(over(format!(
                "the parameters schema nests {depth} levels deep, over the limit of {} (max_schema_depth)",
                config.max_schema_depth
            )));
        }
        Ok(())
    }

    /// The risk the client declared for its tool `name` (`none` if it has no such tool).
    pub(crate) fn client_risk(&self, name: &str) -> tether_protocol::Risk {
        self.lock().tools.iter().find(|tool| tool.name == name).map(|tool| tool.risk).unwrap_or_default()
    }

    /// The client's tools now.
    pub fn client_tools(&self) -> Vec<ToolSpec> {
        self.lock().tools.clone()
    }

    /// The app state the page shares with the agent now.
    pub fn client_context(&self) -> Vec<ContextEntry> {
        self.lock().context.clone()
    }

    /// The last applied `CONTEXT_UPDATE` revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// The client tools the model is offered, leaving out the names in `taken` (server-side and
    /// MCP tools): the page's own, their allowed values widened with those other pages of the
    /// session allowed, then the tools only other pages offered (`pages.rs`).
    pub(crate) fn offered_tools(&self, taken: &[String]) -> Vec<ToolSpec> {
        let state = self.lock();
        let here = state.page.as_ref().map(|page| page.url.as_str());
        let mut tools: Vec<ToolSpec> = state.tools.iter().filter(|tool| !taken.contains(&tool.name)).cloned().collect();
        for tool in &mut tools {
            state.pages.widen(here, tool);
        }
        let mut names: Vec<String> = taken.to_vec();
        names.extend(tools.iter().map(|tool| tool.name.clone()));
        tools.extend(state.pages.elsewhere(here, &names));
        tools
    }

    /// Another page of the session whose tool `name` accepts `args` (most recently seen first),
    /// when the page the user is on does not.
    pub(crate) fn page_for(&self, name: &str, args: &Value) -> Option<String> {
        let state = self.lock();
        let here = state.page.as_ref().map(|page| page.url.as_str());
        state.pages.page_for(here, name, args)
    }

    /// Why the last other page that offered `name` refuses `args`, for a tool the page the user
    /// is on does not offer.
    pub(crate) fn refusal_elsewhere(&self, name: &str, args: &Value) -> Option<String> {
        let state = self.lock();
        let here = state.page.as_ref().map(|page| page.url.as_str());
        state.pages.refusal(here, name, args)
    }

    /// The page the client is on.
    pub fn page(&self) -> Option<PageInfo> {
        self.lock().page.clone()
    }
}

/// Checks a page's shared app state against the limits every client applies too (so a refusal
/// here means a client that does not), keeping the previous list when refused.
fn check_context(context: &[ContextEntry]) -> Result<(), Refusal> {
    let refuse =
        |code, message: String| Err(Refusal { code, message: format!("{message}; the previous list is kept") });
    if context.len() > MAX_CONTEXT_ENTRIES {
        return refuse(
            ErrorCode::LimitExceeded,
            format!("CONTEXT_UPDATE has {} context entries, over the limit of {MAX_CONTEXT_ENTRIES}", context.len()),
        );
    }
    let mut bytes = 0;
    for (n, entry) in context.iter().enumerate() {
        if let Err(error) = check_tool_name(&entry.key) {
            return refuse(ErrorCode::InvalidTool, format!("context key {:?} is invalid ({error})", entry.key));
        }
        if context[..n].iter().any(|other| other.key == entry.key) {
            return refuse(ErrorCode::InvalidTool, format!("context key {:?} appears twice", entry.key));
        }
        bytes += json_bytes(&Value::String(entry.description.clone())) + json_bytes(&entry.value);
    }
    if bytes > MAX_CONTEXT_BYTES {
        return refuse(
            ErrorCode::LimitExceeded,
            format!("the context entries take {bytes} bytes of JSON, over the limit of {MAX_CONTEXT_BYTES}"),
        );
    }
    Ok(())
}
