//! The one error type of tether-core.

use tether_protocol::Quoted;

/// Everything tether-core can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// A tool name is empty, too long, or has characters models do not accept.
    #[error("tool name {} is invalid: {reason}", Quoted(.name))]
    InvalidToolName {
        /// The refused name.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The registry is full: the tool was refused (a `tool.registry.limit` event was emitted).
    // `as u64`: the browser runtime formats no `u32` (one integer formatter less in the wasm).
    #[error("tool {} refused: the session allows at most {} active tools", Quoted(.name), u64::from(*.cap))]
    ToolLimit {
        /// The refused tool.
        name: String,
        /// The cap in force.
        cap: u32,
    },
    /// A schema uses a keyword the compact validator does not implement.
    #[error(
        "schema keyword {} at {} is not supported by the compact validator \
         (supported: {supported}); enable the `full` validator or simplify the schema",
        Quoted(.keyword),
        Quoted(.path),
        supported = crate::validate::COMPACT_KEYWORDS.join(", ")
    )]
    UnsupportedKeyword {
        /// The keyword.
        keyword: String,
        /// JSON Pointer to the schema object that uses it.
        path: String,
    },
    /// A schema is not valid JSON Schema.
    #[error("invalid schema at {}: {reason}", Quoted(.path))]
    InvalidSchema {
        /// JSON Pointer into the schema.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// App state shared with the agent was refused: its key is not a valid name, or it would
    /// make more than [`MAX_CONTEXT_ENTRIES`](tether_protocol::MAX_CONTEXT_ENTRIES) entries or
    /// more than [`MAX_CONTEXT_BYTES`](tether_protocol::MAX_CONTEXT_BYTES) of JSON together (an
    /// `agent.context.limit` event was emitted). One fixed message: the browser module carries
    /// no number formatting for it.
    #[error(
        "context {} refused: a key is 1 to 64 of A-Z a-z 0-9 _ -, and a page shares at most 16 entries of 8 KiB of JSON together",
        Quoted(.key)
    )]
    ContextLimit {
        /// The refused entry's key.
        key: String,
    },
    /// A tool's schema was refused when the tool was registered.
    #[error("tool {} refused: {source}", Quoted(.tool))]
    ToolSchema {
        /// The tool.
        tool: String,
        /// Why its schema was refused.
        source: Box<CoreError>,
    },
}
