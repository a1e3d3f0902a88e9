//! The page's tools as an MCP server (`--expose-mcp`): an MCP client the user paired in the page
//! reaches that session's live tools at `/mcp` (streamable HTTP, through rmcp). Off unless both
//! the operator (`--expose-mcp`) and the page allow it: the page puts a pairing code in its
//! context under [`PAIRING_KEY`] (the toolkits' pairing components do), the server keeps only
//! its SHA-256 and takes the entry out before the context is stored or shown to the model, and
//! the client presents the code as `Authorization: Bearer CODE` (the pairings: `pairing.rs`). Removing the entry (or the
//! page going away) ends the pairing. A call is a `TOOL_CALL` to the page like the model's: the
//! floor, validation, the page's risk policy with its approval dialog, exactly-once.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tether_agent::ToolHost;
use tether_protocol::{CallId, ResultStatus, Risk, RunId};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::session::Session;
use crate::tools::SessionTools;

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, code) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(code.trim())
}

/// In front of `/mcp`: a request without the code of a paired session is refused with 401.
pub(crate) async fn require_pairing(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let paired = bearer(request.headers()).and_then(|code| app.exposed.session_for(code));
    match paired {
        Some((id, _)) if app.sessions.get(&id).is_some() => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer realm=\"tether\"")],
            "no page is paired with this code: open the page, allow an MCP client there, and use the code it shows \
             (Authorization: Bearer CODE)\n",
        )
            .into_response(),
    }
}

/// The `/mcp` service: rmcp's streamable-HTTP server over [`PageTools`].
pub(crate) fn service(app: Arc<App>) -> StreamableHttpService<PageTools, LocalSessionManager> {
    // The code is the access control; a Host check would refuse every deployment off loopback.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    StreamableHttpService::new(move || Ok(PageTools { app: app.clone() }), Arc::default(), config)
}

/// The MCP server of one request: the paired session's page tools.
#[derive(Clone)]
pub(crate) struct PageTools {
    app: Arc<App>,
}

fn not_paired() -> ErrorData {
    ErrorData::invalid_request(
        "this MCP client's page is no longer paired (the user ended it, or the page closed)",
        None,
    )
}

impl PageTools {
    /// The session id the HTTP request behind `extensions` is paired with, and its end.
    fn paired(&self, extensions: &rmcp::model::Extensions) -> Option<(String, CancellationToken)> {
        let parts = extensions.get::<axum::http::request::Parts>()?;
        bearer(&parts.headers).and_then(|code| self.app.exposed.session_for(code))
    }

    /// The paired session of the HTTP request behind `extensions`.
    fn session(&self, extensions: &rmcp::model::Extensions) -> Result<(Arc<Session>, CancellationToken), ErrorData> {
        let (id, ended) = self.paired(extensions).ok_or_else(not_paired)?;
        let session = self.app.sessions.get(&id).ok_or_else(not_paired)?;
        Ok((session, ended))
    }

    /// The page's own tools (a name a server-side or MCP tool has is not the page's to offer).
    fn page_tools(&self, session: &Session) -> Vec<tether_protocol::ToolSpec> {
        let mut tools = session.client_tools();
        tools.retain(|t| !self.app.runs_here(&t.name));
        tools
    }
}

fn text_result(status: ResultStatus, text: String) -> CallToolResult {
    if status == ResultStatus::Ok {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(format!("{}: {text}", status.as_str()))])
    }
}

impl ServerHandler for PageTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(rmcp::model::Implementation::new("tether-page", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "The tools of one web page the user has open and paired with this client. A call runs in \
                 that page: risky ones wait for the user's approval there.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (session, _) = self.session(&context.extensions)?;
        let tools = self
            .page_tools(&session)
            .into_iter()
            .filter_map(|spec| {
                let risk = self.app.config.risk_floor(&spec.name).stricter(spec.risk);
                let tool = json!({
                    "name": spec.name,
                    "description": spec.description,
                    "inputSchema": spec.parameters,
                    "annotations": {"destructiveHint": risk >= Risk::High},
                    "_meta": {"tether/risk": risk.as_str()},
                });
                serde_json::from_value::<Tool>(tool).ok()
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (session, _) = self.session(&context.extensions)?;
        let name = request.name.to_string();
        if !self.page_tools(&session).iter().any(|t| t.name == name) {
            let result = text_result(ResultStatus::UnknownTool, format!("the page has no tool named {name:?} now"));
            return Ok(CallToolResponse::Complete(result));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let host = SessionTools { app: self.app.clone(), session: session.clone() };
        // The floor and the schema, as for the model's calls; the page's executor checks again.
        if let Err(refused) = host.check(&name, &args) {
            return Ok(CallToolResponse::Complete(text_result(refused.status, refused.content)));
        }
        let n = self.app.exposed.next_call();
        let run_id = RunId::from(format!("mcp-{n}"));
        let call_id = CallId::from(format!("mcp-{}", &crate::session::random_token()[..16]));
        tracing::info!(
            session = session.id(),
            tool = name,
            call = %call_id,
            "a paired MCP client calls a page tool"
        );
        // A cancelled request drops this future; the page's call then times out as any would.
        let output =
            host.execute(tether_agent::CallRef { run_id: &run_id, call_id: &call_id, name: &name }, args).await;
        Ok(CallToolResponse::Complete(text_result(output.status, output.content)))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A client before 2026-07-28: its MCP session's peer hears of tool changes.
        let Some((id, _)) = self.paired(&context.extensions) else { return };
        self.app.exposed.add_peer(&id, context.peer);
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let (session, ended) = self.session(&context.request_context().extensions)?;
        self.app.exposed.add_sink(session.id(), context.sink().clone());
        tokio::select! {
            () = context.cancelled() => {}
            () = ended.cancelled() => {}
        }
        self.app.exposed.remove_sink(session.id(), context.sink());
        Ok(())
    }
}
