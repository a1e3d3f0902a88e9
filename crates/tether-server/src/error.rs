//! The one error type of tether-server.

/// Everything the server library can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An operating-system error (files, processes, sockets).
    #[error("{0}")]
    Io(String),
}
