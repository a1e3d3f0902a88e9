//! The Tether browser runtime, compiled to WebAssembly.
//!
//! A [`Client`] owns the page's tool registry (from `tether-core`), talks to the agent server
//! over one WebSocket (HELLO/WELCOME, reconnect with backoff, resume, results kept until
//! acknowledged), and runs tool calls through the core executor: lookup, validation against
//! the tool's schema (the compact validator, `pattern` through the browser's `RegExp`),
//! defaults, the risk policy with an approval callback, resolver hooks, the handler. Registry
//! changes made in one tick reach the server as one `CONTEXT_UPDATE`; a navigating handler's
//! result leaves only after the new page's tools are announced.
//!
//! Rust apps use [`Client`] directly (`tether-leptos` wraps it in hooks); JavaScript apps use
//! the `TetherClient` class of the `js-api` feature, which the npm package wraps.

pub mod chat;
mod client;
mod events;
#[cfg(feature = "js-api")]
mod js;
pub mod json;
mod regex;
mod time;
mod transport;

/// The npm module's allocator: talc is smaller (about 3 kB of wasm) and faster than the default
/// dlmalloc. Only the `js-api` build sets it; Rust apps keep the allocator they choose.
#[cfg(all(feature = "js-api", target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

pub use chat::Chat;
pub use client::{
    AfterHook, Approver, BeforeHook, BrowserValidator, Client, ClientConfig, ErrorHook, Handler, LocalFuture,
    ResolverHooks,
};
pub use events::{ApprovalView, CallRecord, ClientEvent, ConnectionState, Notification};
pub use regex::{BrowserRegex, JsRegex};

/// Makes the browser print the numbers the core writes as text (`String(number)`: the shortest
/// form that reads back as the same `f64`), so that the module carries no float printer of its
/// own (see `tether_core::set_float_printer`). [`Client::new`] calls it; call it yourself before
/// using the compact validator without a client (its `multipleOf` and messages need it).
pub fn install_float_printer() {
    tether_core::set_float_printer(|value| {
        js_sys::Number::from(value).to_string_with_radix(10).map(String::from).unwrap_or_default()
    });
}
pub use tether_core::{
    ApprovalDecision, ApprovalRequest, CoreError, Outcome, OwnerId, RefusedTool, ResultStatus, Risk, ToolDef, ToolSpec,
};
pub use tether_protocol::{CallId, ErrorCode, HistoryLine, HistoryRole, RunEvent, RunId, RunStatus};

/// The message of a thrown JavaScript `Error`, when the value is one.
pub(crate) fn js_error_message(error: &wasm_bindgen::JsValue) -> Option<String> {
    use wasm_bindgen::JsCast;
    error.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message()))
}

/// What the browser runtime reports to the error callback.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebError {
    /// A registration was refused: over the cap (`tool.registry.limit`), or an invalid name or schema.
    #[error(transparent)]
    Registry(#[from] CoreError),
    /// The server refused something the client sent.
    #[error("the server refused a frame ({}): {message}", .code.as_str())]
    Server {
        /// The server's error code.
        code: ErrorCode,
        /// Its explanation.
        message: String,
    },
    /// The connection failed (the client keeps reconnecting).
    #[error("connection problem: {0}")]
    Connection(String),
    /// A frame from the server could not be read.
    #[error("unreadable frame from the server: {0}")]
    Protocol(String),
    /// The server lost the session (it expired while the client was away): results of its
    /// calls could not be delivered.
    #[error("{} tool result(s) could not be delivered: the server no longer knows the session", *.count as u64)]
    ResultsLost {
        /// How many.
        count: usize,
    },
}
