//! The Tether wire protocol: every frame that crosses the WebSocket, and nothing else.
//!
//! This is the only crate that knows the wire format. Frames are JSON text messages with a
//! `type` tag and an `id`; [`ClientFrame`] travels from the browser to the server and
//! [`ServerFrame`] the other way. [`decode_client_frame`] and [`decode_server_frame`] refuse
//! oversized input, unknown frame types and malformed JSON with a typed [`ProtocolError`],
//! never a panic. The checked-in JSON Schema (`protocol.schema.json`) describes the same
//! frames and changes only together with [`PROTOCOL_VERSION`].
//!
//! The protocol is documented for humans in `docs/protocol.md` at the repository root.

mod codec;
mod decode;
mod encode;
mod frames;
mod ids;
mod quoted;

pub use codec::{ProtocolError, decode_client_frame, decode_server_frame, encode_frame, protocol_schema};
pub use decode::EventPayload;
pub use encode::JsonObject;
pub use frames::*;
pub use ids::{CallId, RunId};
pub use quoted::Quoted;

/// The version of the wire format. Bump it whenever a frame changes shape.
pub const PROTOCOL_VERSION: u32 = 5;

/// The oldest client version a server of this version accepts: every change since it only
/// added optional fields and event kinds (4: `ToolSpec.followUp`, the `tool_call_delta` event;
/// 5: the `navigate` event),
/// so a page loaded before a deploy keeps its session.
pub const MIN_PROTOCOL_VERSION: u32 = 3;

/// Default largest frame, in bytes, that either side accepts.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 256 * 1024;

/// Most [`ContextEntry`]s a client shares at once.
pub const MAX_CONTEXT_ENTRIES: usize = 16;

/// Most bytes of JSON that a client's [`ContextEntry`] descriptions and values take together
/// (as compact JSON: what `serde_json::to_string` writes, in bytes).
pub const MAX_CONTEXT_BYTES: usize = 8 * 1024;

/// Default cap on the number of tools a session may have active at once.
pub const DEFAULT_MAX_ACTIVE_TOOLS: u32 = 30;
