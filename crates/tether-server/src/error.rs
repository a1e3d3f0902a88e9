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
    /// The session store cannot do what was asked; nothing was half-written.
    #[error("session store {store}: {message}")]
    Store {
        /// Which store (`sqlite:PATH`, `memory`).
        store: String,
        /// What kind of problem.
        problem: StoreProblem,
        /// What happened and what to do.
        message: String,
    },
}

impl ServerError {
    /// A short, fixed name of this kind of error: the `error.type` of the spans it ends
    /// (docs/observability.md).
    pub fn kind(&self) -> &'static str {
        match self {
            ServerError::Config(_) => "config",
            ServerError::Io(_) => "io",
            ServerError::Store { problem: StoreProblem::Full, .. } => "store_full",
            ServerError::Store { problem: StoreProblem::Corrupt, .. } => "store_corrupt",
            ServerError::Store { problem: StoreProblem::Locked, .. } => "store_locked",
            ServerError::Store { problem: StoreProblem::Unavailable, .. } => "store_unavailable",
            ServerError::Store { problem: StoreProblem::Moved, .. } => "store_moved",
        }
    }
}

/// What kind of problem a session store has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreProblem {
    /// The disk or the store's size limit is full.
    Full,
    /// The store's data is not readable (not a store, damaged, another layout).
    Corrupt,
    /// Another process holds the store.
    Locked,
    /// The store cannot be reached or opened.
    Unavailable,
    /// Another server has claimed the session (a shared store): this one may no longer write it.
    Moved,
}
