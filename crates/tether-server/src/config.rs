//! Server settings, with their defaults.

use std::time::Duration;

use tether_protocol::{DEFAULT_MAX_ACTIVE_TOOLS, DEFAULT_MAX_FRAME_BYTES};

/// Settings of a [`TetherServer`](crate::TetherServer).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Most tools a session may have active (announced as `maxActiveTools`). Default 30.
    pub max_active_tools: u32,
    /// Largest frame accepted, in bytes; larger ones get `ERROR frame_too_large`. Default 256 KiB.
    pub max_frame_bytes: usize,
    /// How long the server waits for a `TOOL_RESULT`. Default 330 s (a user may take up to
    /// 300 s to approve a risky call, and the handler 10 s more).
    pub tool_result_timeout: Duration,
    /// How long a disconnected session waits for its client to come back. Default 30 s.
    pub reconnect_grace: Duration,
    /// Frames kept for a disconnected client, sent when it resumes. Default 1024.
    pub outbox_limit: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_active_tools: DEFAULT_MAX_ACTIVE_TOOLS,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            tool_result_timeout: Duration::from_secs(330),
            reconnect_grace: Duration::from_secs(30),
            outbox_limit: 1024,
        }
    }
}
