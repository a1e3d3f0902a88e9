//! MCP servers as Tether tools: attach servers over stdio or streamable HTTP through the
//! official Rust SDK ([`rmcp`]), and offer their tools to the model beside the page's tools.
//!
//! [`McpTools::start`] supervises each [`McpServerSpec`] (`--mcp NAME=COMMAND…` or
//! `--mcp NAME=https://…`): it connects, lists the tools, follows
//! `notifications/tools/list_changed`, and restarts a server whose connection ended, with a
//! backoff. Each tool reaches the model as `NAME__tool` ([`McpTool`]), with its own limit apart
//! from the page's. A call is validated against the tool's schema before it is sent
//! ([`McpTool::check`]), bounded by a timeout (then cancelled at the server), and any failure
//! becomes an [`McpError`] whose text the model reads. The server crate decides where the calls
//! go through the risk floor and the hooks; this crate knows MCP, not Tether's sessions.

mod error;
mod server;
mod spec;
mod tool;
mod tools;

pub use error::McpError;
pub use server::{McpOptions, McpServer, McpSnapshot, McpStatus, TraceContext};
pub use spec::{MAX_SERVER_NAME_LEN, McpServerSpec, McpTarget};
pub use tool::{McpTool, SEPARATOR};
pub use tools::{DEFAULT_MAX_MCP_TOOLS, McpTools};
