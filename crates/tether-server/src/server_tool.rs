//! Tools that run in the server process ([`ServerTool`]): a name, a schema checked when the tool
//! is made, and an async handler. `tools.rs` offers them to runs before the page's tools.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tether_agent::BoxFuture;
use tether_core::validate::{FullSchema, FullValidator, Validator};
use tether_protocol::ToolSpec;

use crate::ServerError;

/// What a server-side tool's handler returns.
pub type ServerToolResult = Result<Value, String>;

pub(crate) type ServerToolHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, ServerToolResult> + Send + Sync>;

/// A tool that runs in the server process. It wins over a client tool of the same name.
#[derive(Clone)]
pub struct ServerTool {
    pub(crate) spec: ToolSpec,
    pub(crate) schema: Arc<FullSchema>,
    pub(crate) handler: ServerToolHandler,
}

impl std::fmt::Debug for ServerTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTool").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl ServerTool {
    /// A server-side tool. Refused when its name or schema is invalid.
    pub fn new<F, Fut>(spec: ToolSpec, handler: F) -> Result<Self, ServerError>
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ServerToolResult> + Send + 'static,
    {
        tether_core::check_tool_name(&spec.name).map_err(|e| ServerError::Config(e.to_string()))?;
        let schema = FullValidator
            .compile(&spec.parameters)
            .map_err(|e| ServerError::Config(format!("tool {:?}: {e}", spec.name)))?;
        Ok(ServerTool { spec, schema: Arc::new(schema), handler: Arc::new(move |args| Box::pin(handler(args))) })
    }
}
