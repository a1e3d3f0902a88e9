//! The one error type of tether-hooks.

/// Everything loading and preparing declarative hooks can fail with. (A hook that fails while a
/// run uses it never errors the run: its `failMode` decides.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HooksError {
    /// The hooks file is invalid; the message names the file, the hook and the field.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An operating-system error (the hooks' directory, their scripts).
    #[error("{0}")]
    Io(String),
}
