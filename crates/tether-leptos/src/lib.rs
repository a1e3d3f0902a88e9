//! Leptos bindings for Tether: tools declared in components, next to the state they need.
//!
//! Wrap the app in [`AgentProvider`]; inside it, a component calls [`use_agent_tool`] (or
//! [`use_agent_tool_typed`], whose JSON Schema comes from the argument type) to register a tool
//! while it is mounted. The handler is a closure: it reads signals when it runs, so it always
//! sees the current state without re-registering. [`ApprovalDialog`], [`ChatPanel`] and
//! [`ToolInspector`] are ready-made UI over the same context. Every hook fails loudly when
//! called outside the provider.

pub mod components;

use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;

use futures_channel::oneshot;
use leptos::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tether_web::{
    ApprovalDecision, ApprovalRequest, ApprovalView, CallRecord, Client, ClientConfig, ClientEvent, ConnectionState,
    Handler, LocalFuture, Notification, OwnerId, ResolverHooks, RunStatus,
};

pub use components::{ApprovalDialog, ChatPanel, ToolInspector};
pub use tether_web::{Risk, ToolDef, ToolSpec};

/// The message every hook panics with outside [`AgentProvider`].
pub const OUTSIDE_PROVIDER: &str = "tether-leptos: use_agent_tool and the other use_agent_* hooks must be called \
inside <AgentProvider url=…>; wrap the app (or this component) in it";

/// Who wrote a chat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatRole {
    /// The user.
    User,
    /// The agent (streamed).
    Agent,
    /// The runtime (a low-risk tool ran, an error).
    System,
}

/// One line of the chat.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatLine {
    /// A stable key: the run id for agent lines.
    pub key: String,
    /// Who wrote it.
    pub role: ChatRole,
    /// The text so far.
    pub text: String,
    /// How the run ended, once it did.
    pub status: Option<RunStatus>,
}

/// A refused tool, as the inspector shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedView {
    /// The tool.
    pub tool: String,
    /// `tool.registry.limit` or `tool.registry.refused`.
    pub event: String,
    /// Why.
    pub reason: String,
}

/// The reactive state the provider keeps up to date from the client's events.
#[derive(Debug, Clone, Copy)]
pub struct AgentState {
    /// The connection.
    pub connection: RwSignal<ConnectionState>,
    /// The tools as the model sees them (updated when a `CONTEXT_UPDATE` leaves).
    pub tools: RwSignal<Vec<ToolSpec>>,
    /// Refused registrations.
    pub refused: RwSignal<Vec<RefusedView>>,
    /// The last calls and how they ended, newest last.
    pub calls: RwSignal<Vec<CallRecord>>,
    /// The chat.
    pub messages: RwSignal<Vec<ChatLine>>,
    /// Whether a run is in progress.
    pub running: RwSignal<bool>,
    /// Approval requests waiting for the user, oldest first.
    pub approvals: RwSignal<Vec<ApprovalView>>,
    /// Errors reported by the runtime (refused tools, server errors), newest last.
    pub errors: RwSignal<Vec<String>>,
    /// How many `CONTEXT_UPDATE` frames were sent (dev tools and tests read it).
    pub context_updates: RwSignal<u64>,
}

/// What [`AgentProvider`] puts in the Leptos context.
#[derive(Clone, Copy)]
pub struct AgentContext {
    client: StoredValue<Client, LocalStorage>,
    responders: StoredValue<HashMap<String, oneshot::Sender<ApprovalDecision>>, LocalStorage>,
    /// The reactive state.
    pub state: AgentState,
}

impl AgentContext {
    /// Runs `f` with the client (a no-op once the provider is gone).
    pub fn with_client<R>(&self, f: impl FnOnce(&Client) -> R) -> Option<R> {
        self.client.try_with_value(f)
    }

    /// Sends the user's message and shows it in the chat.
    pub fn send_message(&self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        self.state.messages.update(|lines| {
            let key = format!("user-{}", lines.len());
            lines.push(ChatLine { key, role: ChatRole::User, text: text.to_string(), status: None });
        });
        self.state.running.set(true);
        self.with_client(|client| client.send_message(text));
    }

    /// Answers the approval request of `call_id`.
    pub fn answer_approval(&self, call_id: &str, decision: ApprovalDecision) {
        let responder = self.responders.try_update_value(|responders| responders.remove(call_id)).flatten();
        if let Some(responder) = responder {
            let _ = responder.send(decision);
        }
        self.state.approvals.update(|pending| pending.retain(|a| a.call_id != call_id));
    }
}

/// The agent context; panics with [`OUTSIDE_PROVIDER`] outside [`AgentProvider`].
pub fn use_agent() -> AgentContext {
    use_context::<AgentContext>().unwrap_or_else(|| panic!("{OUTSIDE_PROVIDER}"))
}

/// How many chat lines and calls the provider keeps.
const KEPT: usize = 50;

fn apply_event(state: &AgentState, event: &ClientEvent) {
    match event {
        ClientEvent::Connection { state: connection, .. } => state.connection.set(*connection),
        ClientEvent::ContextSent { .. } => state.context_updates.update(|n| *n += 1),
        ClientEvent::ToolRefused { event, tool, reason } => state.refused.update(|refused| {
            refused.retain(|r| &r.tool != tool);
            refused.push(RefusedView { tool: tool.clone(), event: event.clone(), reason: reason.clone() });
        }),
        ClientEvent::CallFinished { record } => state.calls.update(|calls| {
            calls.push(record.clone());
            if calls.len() > KEPT {
                calls.remove(0);
            }
        }),
        ClientEvent::AgentMessage { run_id, delta, done, status } => {
            state.messages.update(|lines| match lines.iter_mut().find(|l| &l.key == run_id) {
                Some(line) => {
                    line.text.push_str(delta);
                    line.status = *status;
                }
                None => lines.push(ChatLine {
                    key: run_id.clone(),
                    role: ChatRole::Agent,
                    text: delta.clone(),
                    status: *status,
                }),
            });
            if *done {
                state.running.set(false);
            }
        }
        // The error itself reaches the list through the error callback.
        ClientEvent::ServerError { code, .. } => {
            if matches!(code, tether_web::ErrorCode::RunInProgress | tether_web::ErrorCode::RunFailed) {
                state.running.set(false);
            }
        }
        _ => {}
    }
}

/// Connects to the agent server and provides the context every `use_agent_*` hook needs.
#[component]
pub fn AgentProvider(
    /// The server's WebSocket URL, e.g. `ws://localhost:8787/ws`.
    #[prop(into)]
    url: String,
    /// The app.
    children: Children,
) -> impl IntoView {
    let client = Client::new(ClientConfig::new(url));
    let state = AgentState {
        connection: RwSignal::new(ConnectionState::Idle),
        tools: RwSignal::new(Vec::new()),
        refused: RwSignal::new(Vec::new()),
        calls: RwSignal::new(Vec::new()),
        messages: RwSignal::new(Vec::new()),
        running: RwSignal::new(false),
        approvals: RwSignal::new(Vec::new()),
        errors: RwSignal::new(Vec::new()),
        context_updates: RwSignal::new(0),
    };
    let context = AgentContext {
        client: StoredValue::new_local(client.clone()),
        responders: StoredValue::new_local(HashMap::new()),
        state,
    };

    let tools_client = client.clone();
    client.subscribe(move |event| {
        apply_event(&state, event);
        if matches!(event, ClientEvent::ContextSent { .. }) {
            state.tools.set(tools_client.tools());
        }
    });
    client.set_approver(Rc::new(move |request: ApprovalRequest| -> LocalFuture<ApprovalDecision> {
        let (responder, answer) = oneshot::channel();
        context.responders.update_value(|responders| {
            responders.insert(request.call_id.clone(), responder);
        });
        state.approvals.update(|pending| pending.push(ApprovalView::from(&request)));
        Box::pin(async move { answer.await.unwrap_or(ApprovalDecision::Dismissed) })
    }));
    client.on_notify(move |notification: &Notification| {
        state.messages.update(|lines| {
            let text = format!("Running {} {}", notification.tool, notification.args);
            lines.push(ChatLine {
                key: format!("notify-{}", notification.call_id),
                role: ChatRole::System,
                text,
                status: None,
            });
        });
    });
    client.on_error(move |error| {
        state.errors.update(|errors| {
            errors.push(error.to_string());
            if errors.len() > KEPT {
                errors.remove(0);
            }
        });
    });
    provide_context(context);
    client.connect();
    on_cleanup(move || {
        context.with_client(Client::disconnect);
    });
    children()
}

fn register_with_cleanup(register: impl FnOnce(&Client, OwnerId)) {
    let context = use_agent();
    let Some(owner) = context.with_client(Client::new_owner) else { return };
    context.with_client(|client| register(client, owner));
    // When the component unmounts, its tools leave (globals stay) and their calls are aborted.
    on_cleanup(move || {
        context.with_client(|client| client.unregister_owner(owner));
    });
}

/// Registers a tool while the calling component is mounted.
///
/// `handler` gets the validated arguments (schema defaults applied) and runs when the model
/// calls the tool; it reads signals at that moment, so it always sees the current state. A
/// refused registration (over the cap, invalid schema) is reported to the error list and the
/// inspector.
pub fn use_agent_tool<F, Fut>(def: ToolDef, handler: F)
where
    F: Fn(Value) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    let handler: Handler = Rc::new(move |args| Box::pin(handler(args)));
    register_with_cleanup(move |client, owner| {
        // A refusal has already been reported to the error callback and subscribers.
        let _ = client.register_handler(owner, def, handler);
    });
}

/// Like [`use_agent_tool`], but the definition is computed from signals: when a signal it reads
/// changes, the tool is registered again (replacing itself), e.g. a `cart_remove` whose
/// `productId` enum lists what is in the cart now. The handler stays the same.
pub fn use_agent_tool_reactive<D, F, Fut>(def: D, handler: F)
where
    D: Fn() -> ToolDef + 'static,
    F: Fn(Value) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    let context = use_agent();
    let Some(owner) = context.with_client(Client::new_owner) else { return };
    let handler: Handler = Rc::new(move |args| Box::pin(handler(args)));
    Effect::new(move |_| {
        let def = def();
        context.with_client(|client| {
            let _ = client.register_handler(owner, def, handler.clone());
        });
    });
    on_cleanup(move || {
        context.with_client(|client| client.unregister_owner(owner));
    });
}

/// The JSON Schema of an argument type, as tool schemas use it.
pub fn schema_of<A: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(A)).unwrap_or_else(|_| serde_json::json!({"type": "object"}))
}

/// Like [`use_agent_tool`], with typed arguments: the JSON Schema is derived from `A`
/// (`#[derive(Deserialize, JsonSchema)]`), and the handler gets an `A`.
pub fn use_agent_tool_typed<A, F, Fut>(def: ToolDef, handler: F)
where
    A: DeserializeOwned + schemars::JsonSchema + 'static,
    F: Fn(A) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    let def = def.parameters(schema_of::<A>());
    let handler = Rc::new(handler);
    use_agent_tool(def, move |args| {
        let handler = handler.clone();
        async move {
            let args: A =
                serde_json::from_value(args).map_err(|error| format!("arguments do not fit the tool: {error}"))?;
            handler(args).await
        }
    });
}

/// One tool of a resolver group: its definition (name without the prefix) and handler.
pub fn resolver_tool<F, Fut>(def: ToolDef, handler: F) -> (ToolDef, Handler)
where
    F: Fn(Value) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    (def, Rc::new(move |args| Box::pin(handler(args))))
}

/// Registers a resolver group while the component is mounted: tools named `prefix_name`
/// sharing `hooks` (before, after and error hooks around every call).
pub fn use_agent_tool_resolver(prefix: &str, tools: Vec<(ToolDef, Handler)>, hooks: ResolverHooks) {
    let prefix = prefix.to_string();
    register_with_cleanup(move |client, owner| {
        let _ = client.register_resolver(owner, &prefix, tools, hooks);
    });
}
