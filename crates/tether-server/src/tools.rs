//! The tools a run sees: server-side [`ServerTool`]s, then the attached MCP servers' tools, then
//! the client's tools of the session (the earlier wins a name collision). A client tool's call
//! becomes a `TOOL_CALL` to the browser and waits for its result; a server-side or MCP tool runs
//! here. The operator's `blocked` floor refuses a call before either; a floor of `high` or more
//! refuses a server-side or MCP call too, since nobody is asked to approve one.

use std::sync::Arc;

use serde_json::Value;
use tether_core::validate::{CompiledSchema, format_validation_errors};
use tether_protocol::{CallId, ContextEntry, ErrorCode, ResultStatus, Risk, RunId, ToolCall, ToolSpec};
#[cfg(feature = "mcp")]
use tether_protocol::{RunEvent, ToolProgressEvent};

use crate::app::App;
use crate::server_tool::ServerTool;
use crate::session::{NotOpened, Session};
use tether_agent::{BoxFuture, CallRef, RunCheckpoint, ToolHost, ToolOutput};
#[cfg(feature = "mcp")]
use tether_mcp::{McpError, McpTool};

/// The tools a run sees: server-side tools, then the client's (minus name collisions).
pub(crate) struct SessionTools {
    pub(crate) app: Arc<App>,
    pub(crate) session: Arc<Session>,
}

impl SessionTools {
    fn server_tool(&self, name: &str) -> Option<&ServerTool> {
        self.app.server_tools.iter().find(|tool| tool.spec.name == name)
    }

    /// An MCP tool of this name, unless a server tool has the name.
    #[cfg(feature = "mcp")]
    fn mcp_tool(&self, name: &str) -> Option<McpTool> {
        if self.server_tool(name).is_some() { None } else { self.app.mcp.find(name) }
    }

    /// A tool that runs on the server has nobody to approve it: a floor that asks for approval
    /// refuses it.
    fn no_approval_step(&self, name: &str) -> Result<(), ToolOutput> {
        let floor = self.app.config.risk_floor(name);
        if floor < Risk::High {
            return Ok(());
        }
        tracing::info!(session = self.session.id(), tool = name, "call refused: its floor asks for an approval");
        Err(ToolOutput::new(
            ResultStatus::Denied,
            format!(
                "\"{name}\" runs on the server, where nobody is asked to approve a call, and the server's policy \
                 requires approval for it (risk floor {}): it was not run.",
                floor.as_str()
            ),
        ))
    }
}

impl ToolHost for SessionTools {
    fn tools(&self) -> Vec<ToolSpec> {
        let mut tools: Vec<ToolSpec> = self.app.server_tools.iter().map(|t| t.spec.clone()).collect();
        #[cfg(feature = "mcp")]
        for tool in self.app.mcp.tools() {
            if !tools.iter().any(|t| t.name == tool.spec.name) {
                tools.push(tool.spec);
            }
        }
        let taken: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        tools.extend(self.session.offered_tools(&taken));
        tools
    }

    fn context(&self) -> Vec<ContextEntry> {
        self.session.client_context()
    }

    fn checkpoint(&self, checkpoint: RunCheckpoint) {
        self.session.checkpoint(checkpoint);
    }

    fn resume_call<'a>(&'a self, _run_id: &'a RunId, call_id: &'a CallId) -> Option<BoxFuture<'a, ToolOutput>> {
        self.session.resume_call(call_id)
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        // The operator's `blocked` floor: refused here, so no TOOL_CALL is ever sent for it.
        if self.app.config.risk_floor(name) == Risk::Blocked {
            tracing::info!(session = self.session.id(), tool = name, "call refused: the tool is blocked by policy");
            return Err(ToolOutput::new(
                ResultStatus::Blocked,
                format!("\"{name}\" is blocked by the server's policy: it was not run and will not be."),
            ));
        }
        if let Some(tool) = self.server_tool(name) {
            self.no_approval_step(name)?;
            let errors = tool.schema.errors(args);
            return if errors.is_empty() {
                Ok(())
            } else {
                Err(ToolOutput::new(ResultStatus::InvalidArgs, format_validation_errors(name, &errors)))
            };
        }
        #[cfg(feature = "mcp")]
        if let Some(tool) = self.mcp_tool(name) {
            self.no_approval_step(name)?;
            return tool.check(args).map_err(|message| ToolOutput::new(ResultStatus::InvalidArgs, message));
        }
        // The page the user is on decides; a call it refuses that another page of the session
        // accepts is made there (`pages.rs`).
        match self.session.check_client_call(name, args) {
            Some(Ok(())) => return Ok(()),
            _ if self.session.page_for(name, args).is_some() => return Ok(()),
            Some(refused) => return refused,
            None => {
                if let Some(message) = self.session.refusal_elsewhere(name, args) {
                    return Err(ToolOutput::new(ResultStatus::InvalidArgs, message));
                }
            }
        }
        // A tool of an MCP server that is down (or that no longer offers it) says so.
        #[cfg(feature = "mcp")]
        if let Some(error @ McpError::NotRunning { .. }) = self.app.mcp.unavailable(name) {
            return Err(ToolOutput::new(ResultStatus::Error, error.to_string()));
        }
        Err(ToolOutput::new(ResultStatus::UnknownTool, format!("Unknown tool \"{name}\".")))
    }

    fn provider_refused(&self, name: &str, reason: &str) {
        tracing::warn!(session = self.session.id(), tool = name, %reason, "the model provider refused a tool");
        let message = format!("the model provider refused the tool \"{name}\" ({reason}); this run goes on without it");
        self.session.send_error(ErrorCode::InvalidTool, message, None);
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.run_call(call.run_id, call.call_id, call.name, args, Risk::None))
    }

    /// A hook asked for the user's approval: a client tool's `TOOL_CALL` goes out with a risk of
    /// at least `high`, so the page shows its approval dialog whatever the tool declared. A
    /// server-side tool has no approval step: it is not run.
    fn execute_with_approval<'a>(
        &'a self,
        call: CallRef<'a>,
        args: Value,
        reason: &'a str,
    ) -> BoxFuture<'a, ToolOutput> {
        let CallRef { run_id, call_id, name } = call;
        if self.app.runs_here(name) {
            tracing::info!(session = self.session.id(), tool = name, %reason, "a hook asked for approval of a server tool");
            return Box::pin(async move {
                ToolOutput::new(
                    ResultStatus::Denied,
                    format!(
                        "A hook asked the user to approve \"{name}\" ({reason}), but it runs on the server, \
                         where there is no approval step: it was not run."
                    ),
                )
            });
        }
        Box::pin(self.run_call(run_id, call_id, name, args, Risk::High))
    }

    fn admit(&self, asked: usize) -> usize {
        let limit = self.app.config.max_pending_calls;
        let room = limit.saturating_sub(self.session.pending_calls());
        if asked > room {
            tracing::warn!(session = self.session.id(), asked, limit, "model asked for more tool calls than allowed");
            self.session.send_error(
                ErrorCode::LimitExceeded,
                format!(
                    "the model asked for {asked} tool calls at once; a session may have {limit} outstanding \
                     (max_pending_calls): {} were not run",
                    asked - room
                ),
                None,
            );
        }
        room.min(asked)
    }
}

impl SessionTools {
    /// Runs a server tool, or sends a client tool's `TOOL_CALL` with a risk of at least
    /// `at_least` and waits for its result.
    async fn run_call(&self, run_id: &RunId, call_id: &CallId, name: &str, args: Value, at_least: Risk) -> ToolOutput {
        // On the call's `execute_tool` span (the agent loop's): where it runs, at what risk.
        let span = tracing::Span::current();
        if let Some(tool) = self.server_tool(name) {
            span.record("tether.tool.location", "server");
            span.record("tether.tool.risk", tool.spec.risk.as_str());
            let handler = tool.handler.clone();
            return match tokio::spawn(async move { handler(args).await }).await {
                Ok(Ok(value)) => ToolOutput::new(
                    ResultStatus::Ok,
                    match value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    },
                ),
                Ok(Err(message)) => ToolOutput::new(ResultStatus::Error, message),
                Err(_) => ToolOutput::new(ResultStatus::Error, format!("server tool \"{name}\" failed unexpectedly")),
            };
        }
        #[cfg(feature = "mcp")]
        if let Some(tool) = self.mcp_tool(name) {
            span.record("tether.tool.location", "mcp");
            span.record("tether.tool.risk", self.app.config.risk_floor(name).as_str());
            // Not spawned: a stopped run drops this future, which cancels the call at its server.
            // Its progress notifications reach the chat as the page's own progress does.
            let progress = |message: String| {
                let event = ToolProgressEvent { call_id: call_id.clone(), message };
                self.session.send_event(None, RunEvent::ToolProgress(event));
            };
            // The call's trace context, for an MCP server that traces (`_meta`, SEP-414).
            #[cfg(feature = "otel")]
            let trace = {
                let mut fields = tether_agent::trace_context();
                fields.remove("traceparent").map(|traceparent| tether_mcp::TraceContext {
                    traceparent,
                    tracestate: fields.remove("tracestate"),
                })
            };
            #[cfg(not(feature = "otel"))]
            let trace = None;
            return match self.app.mcp.call_with_progress(&tool, args, trace.as_ref(), progress).await {
                Ok(text) => ToolOutput::new(ResultStatus::Ok, text),
                Err(error) => {
                    tracing::info!(session = self.session.id(), tool = name, %error, "MCP call failed");
                    ToolOutput::new(ResultStatus::Error, error.to_string())
                }
            };
        }
        // A call the page the user is on refuses and another page accepts: that page first.
        let mut opened = None;
        let accepted_here = matches!(self.session.check_client_call(name, &args), Some(Ok(())));
        let elsewhere = if accepted_here { None } else { self.session.page_for(name, &args) };
        if let Some(url) = elsewhere {
            tracing::info!(
                session = self.session.id(),
                tool = name,
                url,
                "the call's tool is on another page; opening it"
            );
            let wait = self.app.config.open_page_wait;
            match self.session.open_page(run_id, call_id, name, &url, &args, wait).await {
                Ok(()) => {}
                Err(NotOpened::Away) => {
                    return ToolOutput::new(
                        ResultStatus::Error,
                        format!(
                            "Not run: {name} with these arguments is on the page {url}, and the app did not open it \
                             (waited {:.1} s). Open that page first, then call {name} again.",
                            wait.as_secs_f64()
                        ),
                    );
                }
                Err(NotOpened::Refused(mut refused)) => {
                    // Remembered from an earlier visit; the page shows something else now.
                    refused.content = format!(
                        "Not run: the page {url} is open, and it does not take this call now (it changed since it was \
                         last seen): {}",
                        refused.content
                    );
                    return refused;
                }
            }
            opened = Some(url);
        }
        let frame = ToolCall {
            id: String::new(),
            call_id: call_id.clone(),
            run_id: run_id.clone(),
            name: name.to_string(),
            args,
            // The client applies the stricter of this and its own risk, so it cannot lower it.
            risk: self.app.config.risk_floor(name).stricter(self.session.client_risk(name)).stricter(at_least),
        };
        span.record("tether.tool.location", "page");
        span.record("tether.tool.risk", frame.risk.as_str());
        let approval = frame.risk >= Risk::High && frame.risk < Risk::Blocked;
        if approval {
            // Span events of the call (traces only: the target is the spans').
            tracing::info!(target: tether_agent::SPAN_TARGET, risk = frame.risk.as_str(), "the page asks the user to approve the call");
        }
        let mut output = self.session.call_client_tool(frame).await;
        if approval {
            // The page refuses a call the user did not approve as `denied`; any other result ran
            // (or failed in its handler) after the user approved it.
            let granted = !matches!(
                output.status,
                ResultStatus::Denied | ResultStatus::Cancelled | ResultStatus::Timeout | ResultStatus::Interrupted
            );
            if output.status != ResultStatus::Cancelled {
                self.app.metrics.approval(granted);
            }
            tracing::info!(target: tether_agent::SPAN_TARGET, granted, status = output.status.as_str(), "the approval wait ended");
        }
        if let Some(url) = opened {
            output.content = format!("(Opened the page {url} first: {name} is there.) {}", output.content);
        }
        output
    }
}
