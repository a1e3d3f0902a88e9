//! The one error type of tether-agent.

/// Everything the agent loop and its models can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The model provider answered with an error status (after retries, for 429 and 5xx).
    #[error("model provider returned HTTP {status}: {message}")]
    ProviderStatus {
        /// The HTTP status.
        status: u16,
        /// The provider's message, cut to a readable length.
        message: String,
    },
    /// The request does not fit the model's context window: the provider said so (HTTP 400
    /// with its context-size error), or Tether's estimate said so before sending it.
    #[error("the request does not fit the model's context window: {0}")]
    ContextOverflow(String),
    /// The model provider could not be reached.
    #[error("model provider unreachable: {0}")]
    ProviderUnreachable(String),
    /// The provider's reply could not be understood.
    #[error("malformed reply from the model provider: {0}")]
    MalformedReply(String),
    /// An in-process hook returned an error.
    #[error("hook {hook} failed: {message}")]
    Hook {
        /// Which hook.
        hook: &'static str,
        /// What it said.
        message: String,
    },
    /// An in-process hook panicked.
    #[error("hook {hook} panicked: {message}")]
    HookPanicked {
        /// Which hook.
        hook: &'static str,
        /// The panic message.
        message: String,
    },
    /// The configuration is invalid (e.g. a provider that cannot be built).
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl AgentError {
    /// A short, fixed name of this kind of error: the `error.type` of the spans it ends
    /// (docs/observability.md). An HTTP error is named by its status.
    pub fn kind(&self) -> std::borrow::Cow<'static, str> {
        match self {
            AgentError::ProviderStatus { status, .. } => format!("http_{status}").into(),
            AgentError::ContextOverflow(_) => "context_overflow".into(),
            AgentError::ProviderUnreachable(_) => "provider_unreachable".into(),
            AgentError::MalformedReply(_) => "malformed_reply".into(),
            AgentError::Hook { .. } => "hook_failed".into(),
            AgentError::HookPanicked { .. } => "hook_panicked".into(),
            AgentError::Config(_) => "config".into(),
        }
    }
}
