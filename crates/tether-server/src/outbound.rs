//! What a connection's socket writer is sent: frames and the close codes the server uses. Shared
//! by the connection loop, the session and its persister, none of which owns the socket.

/// What the connection's writer task sends.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A text frame.
    Text(String),
    /// Close the socket with a code and reason.
    Close(u16, String),
}

/// The WebSocket close code for a refused connection (policy violation).
pub(crate) const CLOSE_POLICY: u16 = 1008;
/// The WebSocket close code for "the server is restarting" (a draining shutdown) and for "this
/// session moved to another server": the client reconnects.
pub(crate) const CLOSE_RESTART: u16 = 1012;
/// The WebSocket close code for "try again later" (the session store is unavailable).
pub(crate) const CLOSE_TRY_AGAIN: u16 = 1013;
