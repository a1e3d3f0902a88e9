//! The Tether agent server: sessions over WebSocket, limits and access control, and the
//! `tether` CLI (in `main.rs`).
//!
//! [`TetherServer`] runs a [`tether_agent::AgentLoop`] for every browser session: the page's
//! tools (from `CONTEXT_UPDATE`) and server-side [`ServerTool`]s are what the model may call.
//! The agent loop, its hooks and the model providers live in `tether-agent`; declarative hooks
//! in `tether-hooks`.

mod app;
mod config;
mod connection;
pub mod console;
mod error;
#[cfg(feature = "mcp")]
mod expose;
mod handoff;
pub mod metrics;
mod outbound;
mod pages;
#[cfg(feature = "mcp")]
mod pairing;
#[cfg(not(feature = "mcp"))]
#[path = "pairing_off.rs"]
mod pairing;
mod persist;
mod policy;
mod run;
mod run_log;
mod server;
mod server_tool;
mod session;
mod static_files;
pub mod store;
#[cfg(feature = "otel")]
pub mod telemetry;
mod tools;

pub use config::{
    DEFAULT_MAX_DESCRIPTION_CHARS, DEFAULT_MAX_FRAMES_PER_SECOND, DEFAULT_MAX_PENDING_CALLS, DEFAULT_MAX_SCHEMA_BYTES,
    DEFAULT_MAX_SCHEMA_DEPTH, DEFAULT_MAX_SESSIONS_PER_IP, ServerConfig,
};
pub use error::{ServerError, StoreProblem};
pub use pairing::PAIRING_KEY;
pub use policy::{RiskFloor, glob_matches};
pub use server::TetherServer;
pub use server_tool::{ServerTool, ServerToolResult};
pub use session::Session;
