//! Server settings, with their defaults. docs/security.md lists the limits in one table.

use std::time::Duration;

use tether_protocol::{DEFAULT_MAX_ACTIVE_TOOLS, DEFAULT_MAX_FRAME_BYTES, Risk};

use crate::policy::{RiskFloor, floor_for};

/// Default most frames per second one connection may send (bursts of twice as many pass).
pub const DEFAULT_MAX_FRAMES_PER_SECOND: u32 = 30;
/// Default largest argument schema of one tool, in bytes of JSON.
pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Default deepest nesting of one tool's argument schema (objects and arrays).
pub const DEFAULT_MAX_SCHEMA_DEPTH: usize = 32;
/// Default longest tool description, in characters.
pub const DEFAULT_MAX_DESCRIPTION_CHARS: usize = 1024;
/// Default most sessions that may exist at once for one client IP address.
pub const DEFAULT_MAX_SESSIONS_PER_IP: usize = 256;
/// Default most tool calls a session may have outstanding at once.
pub const DEFAULT_MAX_PENDING_CALLS: usize = 16;

/// Settings of a [`TetherServer`](crate::TetherServer).
///
/// A limit of 0 means "no limit" for `max_frames_per_second` and `max_sessions_per_ip`.
#[derive(Clone)]
pub struct ServerConfig {
    /// Most tools a session may have active (announced as `maxActiveTools`); a larger
    /// `CONTEXT_UPDATE` gets `ERROR tool_cap_exceeded`. Default 30.
    pub max_active_tools: u32,
    /// Largest frame accepted, in bytes; larger ones get `ERROR frame_too_large`. Default 256 KiB.
    pub max_frame_bytes: usize,
    /// Most frames per second one connection may send, with bursts of up to twice as many;
    /// frames over it are not dropped: the connection reads them more slowly (backpressure), and
    /// the client gets one `ERROR rate_limited` per flood. Default 30.
    pub max_frames_per_second: u32,
    /// Largest argument schema of one tool, in bytes of JSON; a `CONTEXT_UPDATE` with a larger
    /// one gets `ERROR limit_exceeded`. Default 16 KiB.
    pub max_schema_bytes: usize,
    /// Deepest nesting of objects and arrays in one tool's argument schema; a deeper one gets
    /// `ERROR limit_exceeded`. Default 32.
    pub max_schema_depth: usize,
    /// Longest tool description, in characters; a longer one gets `ERROR limit_exceeded`.
    /// Default 1024.
    pub max_description_chars: usize,
    /// Most sessions (connected, or waiting for their client to come back) one client IP
    /// address may have; a `HELLO` over it gets `ERROR limit_exceeded` and the socket is closed.
    /// Needs the peer address (`TetherServer::serve` provides it); behind a reverse proxy, see
    /// [`trusted_proxies`](Self::trusted_proxies). Default 256.
    pub max_sessions_per_ip: usize,
    /// Reverse proxies (nginx, a load balancer) whose `X-Forwarded-For` is believed: a
    /// connection from one of these addresses counts as the client's address the header names
    /// (its last entry that is not itself a trusted proxy), for
    /// [`max_sessions_per_ip`](Self::max_sessions_per_ip) and the logs. A connection from any
    /// other address is its own client whatever it sends. Default empty.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Most tool calls one session may have outstanding (asked for by the model, not yet
    /// answered). The calls of a model reply beyond it are not run: the model reads why and the
    /// client gets `ERROR limit_exceeded`. Default 16.
    pub max_pending_calls: usize,
    /// Which browser origins may open a WebSocket, besides the server's own origin (always
    /// allowed). Entries: `*` (any), `localhost` (any page on a loopback host, any port), or an
    /// origin pattern like `https://*.example.com`. Clients that send no `Origin` (not browsers)
    /// are not checked here. Default `["localhost"]`.
    pub allowed_origins: Vec<String>,
    /// Tokens a client must present (`Authorization: Bearer …` or `?token=…`) to connect; empty
    /// means none is needed. Never logged. Default empty.
    pub auth_tokens: Vec<String>,
    /// The operator's risk floors by tool-name pattern; `TOOL_CALL.risk` carries the strictest
    /// that applies, and a `blocked` tool is refused without a `TOOL_CALL`. Default none.
    pub risk_floors: Vec<RiskFloor>,
    /// How long the server waits for a `TOOL_RESULT`. Default 330 s (a user may take up to
    /// 300 s to approve a risky call, and the handler 10 s more).
    pub tool_result_timeout: Duration,
    /// How long a disconnected session's run waits in memory for its client to come back.
    /// Default 30 s. (With a durable store the session itself lives on for `session_ttl`: a
    /// client that comes back later resumes it from the store.)
    pub reconnect_grace: Duration,
    /// How long a durable store keeps a session after its last change. Default a day
    /// ([`crate::store::DEFAULT_SESSION_TTL`]).
    pub session_ttl: Duration,
    /// How many of the most recent frames a session keeps to replay after a reconnect (what a
    /// dying socket lost, and what was sent while the client was away). Default 1024.
    pub outbox_limit: usize,
    /// With a store shared by several servers (Redis): how long a server's claims on its
    /// sessions stand after its last heartbeat (it renews it every third of this). A server
    /// silent for longer (killed, cut off) loses its sessions to the servers their clients
    /// reconnect to. Default 5 s.
    pub instance_lease: Duration,
    /// Whether a page may offer its tools to an MCP client it paired with, at `/mcp`
    /// (`--expose-mcp`; docs/mcp.md). Default `false`: `/mcp` does not exist, and a page's
    /// pairing entry is refused.
    pub expose_mcp: bool,
    /// How long a call of a tool that another page of the session offers waits for the page to
    /// open it (the `navigate` run event) and announce its tools; after that the model reads
    /// that the page was not opened (docs/models.md, "Tools on other pages"). Default 3 s.
    pub open_page_wait: Duration,
    /// The token an operator presents (`Authorization: Bearer …`) to read `/metrics`; `None`:
    /// `/metrics` is open (put it behind your network's access rules). Never logged. Default
    /// `None`.
    pub operator_token: Option<String>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("max_active_tools", &self.max_active_tools)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("max_frames_per_second", &self.max_frames_per_second)
            .field("max_schema_bytes", &self.max_schema_bytes)
            .field("max_schema_depth", &self.max_schema_depth)
            .field("max_description_chars", &self.max_description_chars)
            .field("max_sessions_per_ip", &self.max_sessions_per_ip)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("max_pending_calls", &self.max_pending_calls)
            .field("allowed_origins", &self.allowed_origins)
            // The tokens are secrets: only how many there are.
            .field("auth_tokens", &format_args!("[{} redacted]", self.auth_tokens.len()))
            .field("risk_floors", &self.risk_floors)
            .field("tool_result_timeout", &self.tool_result_timeout)
            .field("reconnect_grace", &self.reconnect_grace)
            .field("session_ttl", &self.session_ttl)
            .field("outbox_limit", &self.outbox_limit)
            .field("instance_lease", &self.instance_lease)
            .field("expose_mcp", &self.expose_mcp)
            .field("open_page_wait", &self.open_page_wait)
            .field("operator_token", &self.operator_token.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_active_tools: DEFAULT_MAX_ACTIVE_TOOLS,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_frames_per_second: DEFAULT_MAX_FRAMES_PER_SECOND,
            max_schema_bytes: DEFAULT_MAX_SCHEMA_BYTES,
            max_schema_depth: DEFAULT_MAX_SCHEMA_DEPTH,
            max_description_chars: DEFAULT_MAX_DESCRIPTION_CHARS,
            max_sessions_per_ip: DEFAULT_MAX_SESSIONS_PER_IP,
            max_pending_calls: DEFAULT_MAX_PENDING_CALLS,
            trusted_proxies: Vec::new(),
            allowed_origins: vec!["localhost".to_string()],
            auth_tokens: Vec::new(),
            risk_floors: Vec::new(),
            tool_result_timeout: Duration::from_secs(330),
            reconnect_grace: Duration::from_secs(30),
            session_ttl: crate::store::DEFAULT_SESSION_TTL,
            outbox_limit: 1024,
            expose_mcp: false,
            instance_lease: Duration::from_secs(5),
            open_page_wait: Duration::from_secs(3),
            operator_token: None,
        }
    }
}

impl ServerConfig {
    /// The operator's risk floor for the tool `name`: the strictest matching floor, or `none`.
    pub fn risk_floor(&self, name: &str) -> Risk {
        floor_for(&self.risk_floors, name)
    }
}
