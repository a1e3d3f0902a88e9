//! The one error type of tether-mcp. Its messages are read by the model (as a failed tool's
//! result) and by operators (in logs and `/healthz`), so each says what happened and what follows.

use std::time::Duration;

/// Everything attaching or calling an MCP server can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// A `--mcp` value that cannot be used.
    #[error("invalid MCP server {spec:?}: {reason}")]
    InvalidSpec {
        /// The value as given.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
    /// Two servers were given the same name.
    #[error("two MCP servers are named {0:?}: each needs its own name (it prefixes its tools)")]
    DuplicateName(String),
    /// The server is not connected now (starting, or restarting after a failure).
    #[error(
        "the MCP server {server:?} is not running ({reason}); it is restarted automatically, so the call may be tried again later"
    )]
    NotRunning {
        /// The server's name.
        server: String,
        /// Its last known state.
        reason: String,
    },
    /// The server did not answer in time; the call was cancelled at the server.
    #[error("the MCP server {server:?} did not answer the call of {tool:?} within {timeout:?}; the call was cancelled")]
    Timeout {
        /// The server's name.
        server: String,
        /// The tool called (the server's own name for it).
        tool: String,
        /// How long it was given.
        timeout: Duration,
    },
    /// The call failed on its way (the connection closed, an invalid reply, a JSON-RPC error).
    #[error("the call of {tool:?} on the MCP server {server:?} failed: {message}")]
    Call {
        /// The server's name.
        server: String,
        /// The tool called (the server's own name for it).
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// The tool ran and reported an error (`isError: true`); its text is the message.
    #[error("{tool:?} on the MCP server {server:?} reported an error: {message}")]
    ToolFailed {
        /// The server's name.
        server: String,
        /// The tool called (the server's own name for it).
        tool: String,
        /// The tool's own error text.
        message: String,
    },
    /// No attached server offers a tool of this name now.
    #[error("no MCP server offers a tool named {0:?} now")]
    UnknownTool(String),
}
