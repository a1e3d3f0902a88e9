//! Sessions as sans-IO state machines: the browser's side ([`ClientSession`]) and the server's
//! ([`ServerSession`]) of the protocol's exactly-once and nothing-lost rules (docs/protocol.md,
//! "Exactly once").
//!
//! Like the [`Executor`](crate::Executor), neither does IO, spawns tasks or reads a clock: the
//! edge (the browser runtime, the server's connection loop) feeds in what happened — a socket
//! opened or died, a frame arrived, time passed (`now_ms`, a number the edge passes in) — and
//! performs what comes back (frames to send, results to deliver, losses to report). Their state
//! is plain data (strings, numbers, lists), so that it can be saved and restored.
//!
//! `tests/session.rs` runs one against the other through a simulated network that loses, cuts
//! and duplicates.

mod client;
mod server;

pub use client::{
    ClientSession, ClientSessionConfig, DEFAULT_MAX_RESENDS, DEFAULT_RESEND_AFTER_MS, Link, Unacknowledged, Welcomed,
};
pub use server::{
    Attached, DEFAULT_ANSWERED_IDS_KEPT, PendingCall, Polled, ResultOutcome, ServerSession, ServerSessionConfig,
    ServerSessionSnapshot,
};
