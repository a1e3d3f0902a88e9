//! Every attached server together: their tools in one list under one limit, found by name,
//! called on the server that offers them.

use std::time::Duration;

use serde_json::Value;

use crate::{McpError, McpOptions, McpServer, McpServerSpec, McpTool};

/// The most MCP tools offered to the model at once by default (over all servers, apart from
/// the page's tools and their own cap).
pub const DEFAULT_MAX_MCP_TOOLS: usize = 64;

/// The attached MCP servers. Dropping it stops them all.
#[derive(Debug, Default)]
pub struct McpTools {
    servers: Vec<McpServer>,
    max_tools: usize,
}

impl McpTools {
    /// No servers (what a server without `--mcp` has).
    pub fn none() -> McpTools {
        McpTools::default()
    }

    /// Starts supervising every spec (in the current tokio runtime); at most `max_tools` of
    /// their tools are offered at once, in the order the servers were given. Refused when two
    /// servers have one name.
    pub fn start(specs: Vec<McpServerSpec>, options: McpOptions, max_tools: usize) -> Result<McpTools, McpError> {
        for (n, spec) in specs.iter().enumerate() {
            if specs[..n].iter().any(|earlier| earlier.name == spec.name) {
                return Err(McpError::DuplicateName(spec.name.clone()));
            }
        }
        let servers = specs.into_iter().map(|spec| McpServer::start(spec, options)).collect();
        Ok(McpTools { servers, max_tools })
    }

    /// The servers, in the order given.
    pub fn servers(&self) -> &[McpServer] {
        &self.servers
    }

    /// Whether no server is attached.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Waits until every server is running, at most `timeout` in all; the names of those
    /// that are not (they go on being retried).
    pub async fn ready(&self, timeout: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut late = Vec::new();
        for server in &self.servers {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !server.ready(left).await {
                late.push(server.name().to_string());
            }
        }
        late
    }

    /// The tools offered now: each running server's, in order, at most the limit (the ones
    /// over it are left out, and logged).
    pub fn tools(&self) -> Vec<McpTool> {
        let mut tools: Vec<McpTool> =
            self.servers.iter().flat_map(|s| s.tools().iter().cloned().collect::<Vec<_>>()).collect();
        if tools.len() > self.max_tools {
            tracing::warn!(
                offered = tools.len(),
                limit = self.max_tools,
                "the MCP servers offer more tools than --max-mcp-tools; the last {} are left out",
                tools.len() - self.max_tools
            );
            tools.truncate(self.max_tools);
        }
        tools
    }

    /// The tool of this Tether name among those offered now.
    /// (The same tools as [`McpTools::tools`], searched in place: only the match is cloned.)
    pub fn find(&self, name: &str) -> Option<McpTool> {
        let mut offered = 0;
        for server in &self.servers {
            for tool in server.tools().iter() {
                if offered == self.max_tools {
                    return None;
                }
                if tool.spec.name == name {
                    return Some(tool.clone());
                }
                offered += 1;
            }
        }
        None
    }

    /// Why `name` is not offered when it names a tool of an attached server (`SERVER__tool`):
    /// [`McpError::NotRunning`] while that server is down, [`McpError::UnknownTool`] when it
    /// runs without such a tool; `None` when no server has that prefix.
    pub fn unavailable(&self, name: &str) -> Option<McpError> {
        let (prefix, _) = name.split_once(crate::SEPARATOR)?;
        let server = self.servers.iter().find(|s| s.name() == prefix)?;
        Some(match server.status() {
            crate::McpStatus::Running => McpError::UnknownTool(name.to_string()),
            crate::McpStatus::Down { reason, .. } => McpError::NotRunning { server: prefix.to_string(), reason },
            other => McpError::NotRunning { server: prefix.to_string(), reason: other.as_str().to_string() },
        })
    }

    /// Calls `tool` on its server (see [`McpServer::call`]); its arguments should have passed
    /// [`McpTool::check`].
    pub async fn call(&self, tool: &McpTool, args: Value) -> Result<String, McpError> {
        self.call_with_progress(tool, args, None, |_| {}).await
    }

    /// [`McpTools::call`], with the call's progress notifications and, when given, the
    /// caller's trace context (see [`McpServer::call_with_progress`]).
    pub async fn call_with_progress(
        &self,
        tool: &McpTool,
        args: Value,
        trace: Option<&crate::TraceContext>,
        on_progress: impl FnMut(String) + Send,
    ) -> Result<String, McpError> {
        let server = self
            .servers
            .iter()
            .find(|s| s.name() == tool.server)
            .ok_or_else(|| McpError::UnknownTool(tool.spec.name.clone()))?;
        server.call_with_progress(&tool.remote, args, trace, on_progress).await
    }

    /// Stops every server.
    pub fn stop(&self) {
        self.servers.iter().for_each(McpServer::stop);
    }
}
