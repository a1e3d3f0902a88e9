//! The JavaScript API (feature `js-api`): the `TetherClient` class that the npm package wraps.
//!
//! Values cross the boundary as plain JSON-compatible objects. Handlers, the approver and
//! callbacks are JavaScript functions; a handler may return a value or a Promise. The
//! TypeScript declarations below are emitted into the generated `.d.ts`.

use std::rc::Rc;

use serde_json::Value;
use tether_core::{ApprovalDecision, ToolDef};
use tether_protocol::Risk;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::WebError;
use crate::client::{Client, ClientConfig, LocalFuture, ResolverHooks};
use crate::json::to_js;

#[wasm_bindgen(typescript_custom_section)]
const TYPESCRIPT: &str = r#"
/** How dangerous a tool is: none runs, low runs and notifies, high/critical ask the user, blocked never runs. */
export type Risk = "none" | "low" | "high" | "critical" | "blocked";
/** A tool as a component declares it. */
export interface ToolDefinition {
  /** Unique name: letters, digits, `_` and `-`, at most 64 characters. */
  name: string;
  /** What the tool does, written for the model. */
  description: string;
  /** JSON Schema (2020-12) of the arguments object. Default: `{ "type": "object" }`. */
  parameters?: Record<string, unknown>;
  /** Default: "none". */
  risk?: Risk;
  /** Survives the unmount of its owner (navigation). Default: false. */
  global?: boolean;
  /** false: the run ends once a call of this tool succeeded, without asking the model again
   * (its rendered result is the answer); a failed call is still followed up. Default: true. */
  followUp?: boolean;
  /** Handler timeout in milliseconds. Default: 10000. */
  timeoutMs?: number;
}
/** What a handler gets besides its arguments. */
export interface ToolContext {
  /** Aborted when the call is cancelled before the handler finished: the user's Stop, the
   * server's `TOOL_CANCEL`, the handler's timeout, or its tool unmounted. */
  signal: AbortSignal;
}
/** Runs a tool with validated arguments (schema defaults applied). Throw or reject to fail. */
export type ToolHandler = (args: any, context: ToolContext) => unknown | Promise<unknown>;
/** A tool as the model sees it. */
export interface ToolSpec { name: string; description: string; parameters: Record<string, unknown>; risk: Risk; global?: boolean; followUp?: boolean; }
/** What an approval dialog shows. */
export interface ApprovalRequest { callId: string; tool: string; description: string; risk: Risk; args: any; }
/** The user's answer: true approves; false, `{approved: false, reason}` or "dismissed" refuse. */
export type ApprovalAnswer = boolean | "dismissed" | { approved: boolean; reason?: string };
/** Decides an approval request. */
export type Approver = (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>;
/** A low-risk call that is running. */
export interface TetherNotification { callId: string; tool: string; args: any; }
/** An error reported to `onError`. `kind` "registry" with `event` "tool.registry.limit" is a tool refused over the cap. */
export interface TetherError { kind: "registry" | "server" | "connection" | "protocol" | "resultsLost"; message: string; event?: string; }
/** Hooks shared by a resolver's tools. `onBeforeAnyCall` may return a string (or throw) to refuse the call. */
export interface ResolverHooks {
  onBeforeAnyCall?: (tool: string, args: any) => void | string | Promise<void | string>;
  onAfterAnyCall?: (tool: string, output: any) => void;
  onErrorAnyCall?: (tool: string, error: string) => void;
}
/** Client settings. */
export interface ClientOptions { maxSettleMs?: number; reconnectBaseMs?: number; reconnectMaxMs?: number; }
/** A finished call. */
export interface CallRecord { callId: string; tool: string; status: string; content: any; settleMs?: number | null; }
/** Everything a client reports to subscribers. */
export type TetherEvent =
  | { type: "connection"; state: "idle" | "connecting" | "open" | "reconnecting" | "closed"; attempt: number }
  | { type: "welcome"; sessionId: string; maxActiveTools: number; resumed: boolean }
  | { type: "contextSent"; revision: number; tools: string[] }
  | { type: "toolRefused"; event: string; tool: string; reason: string }
  | { type: "callStarted"; callId: string; tool: string; args: any }
  | { type: "approvalRequested"; request: ApprovalRequest }
  | { type: "callFinished"; record: CallRecord }
  | { type: "agentMessage"; runId: string; delta: string; done: boolean; status?: string | null; reset?: boolean }
  | { type: "history"; lines: { role: "user" | "agent"; text: string; runId?: string; status?: string }[] }
  | { type: "run"; runId?: string | null; event: { kind: string; [key: string]: unknown } }
  | { type: "serverError"; code: string; message: string };
"#;

#[wasm_bindgen]
extern "C" {
    /// A `ToolDefinition` object.
    #[wasm_bindgen(typescript_type = "ToolDefinition")]
    pub type JsToolDefinition;
    /// A `ToolHandler` function.
    #[wasm_bindgen(typescript_type = "ToolHandler")]
    pub type JsToolHandler;
    /// An array of `ToolDefinition`.
    #[wasm_bindgen(typescript_type = "ToolDefinition[]")]
    pub type JsToolDefinitions;
    /// An array of `ToolHandler`.
    #[wasm_bindgen(typescript_type = "ToolHandler[]")]
    pub type JsToolHandlers;
    /// `ResolverHooks`.
    #[wasm_bindgen(typescript_type = "ResolverHooks")]
    pub type JsResolverHooks;
    /// An `Approver` function.
    #[wasm_bindgen(typescript_type = "Approver")]
    pub type JsApprover;
    /// A notification callback.
    #[wasm_bindgen(typescript_type = "(notification: TetherNotification) => void")]
    pub type JsNotify;
    /// An error callback.
    #[wasm_bindgen(typescript_type = "(error: TetherError) => void")]
    pub type JsOnError;
    /// An event listener.
    #[wasm_bindgen(typescript_type = "(event: TetherEvent) => void")]
    pub type JsListener;
    /// `ClientOptions`.
    #[wasm_bindgen(typescript_type = "ClientOptions")]
    pub type JsClientOptions;
    /// `ToolSpec[]`.
    #[wasm_bindgen(typescript_type = "ToolSpec[]")]
    pub type JsToolSpecs;
}

// Values cross the boundary as JavaScript objects, converted by walking them (`crate::json`);
// Rust view types are turned into JSON values by their `to_value` methods first. The module
// carries no JSON text parser or writer: the browser's `JSON` does that work.

/// A refusal as the JavaScript error a method throws (one copy of the formatting for every
/// method).
#[inline(never)]
#[allow(clippy::needless_pass_by_value, reason = "it is `map_err`'s function")]
fn refusal(error: WebError) -> JsError {
    JsError::new(&error.to_string())
}

fn from_js(value: &JsValue, what: &str) -> Result<Value, JsError> {
    crate::json::from_js(value).map_err(|error| JsError::new(&format!("invalid {what}: {error}")))
}

/// Reads the fields of a plain options object, naming the object in its errors.
struct Fields {
    map: serde_json::Map<String, Value>,
    what: &'static str,
}

impl Fields {
    fn of(value: &JsValue, what: &'static str) -> Result<Fields, JsError> {
        match from_js(value, what)? {
            Value::Object(map) => Ok(Fields { map, what }),
            _ => Err(JsError::new(&format!("invalid {what}: not an object"))),
        }
    }

    fn wrong(&self, key: &str, expected: &str) -> JsError {
        JsError::new(&format!("invalid {}: `{key}` must be {expected}", self.what))
    }

    /// The field, or `None` when it is absent, `null` or `undefined`.
    fn get(&self, key: &str) -> Option<Value> {
        self.map.get(key).filter(|value| !value.is_null()).cloned()
    }

    fn string(&self, key: &str) -> Result<String, JsError> {
        match self.get(key) {
            Some(Value::String(text)) => Ok(text),
            _ => Err(self.wrong(key, "a string")),
        }
    }

    fn flag(&self, key: &str) -> Result<Option<bool>, JsError> {
        self.get(key).map(|value| value.as_bool().ok_or_else(|| self.wrong(key, "a boolean"))).transpose()
    }

    fn number<T: TryFrom<u64>>(&self, key: &str) -> Result<Option<T>, JsError> {
        self.get(key)
            .map(|value| {
                value.as_u64().and_then(|n| T::try_from(n).ok()).ok_or_else(|| self.wrong(key, "a whole number"))
            })
            .transpose()
    }
}

fn definition(value: &JsValue) -> Result<ToolDef, JsError> {
    let fields = Fields::of(value, "tool definition")?;
    let mut def = ToolDef::new(fields.string("name")?, fields.string("description")?);
    if let Some(parameters) = fields.get("parameters") {
        def = def.parameters(parameters);
    }
    if let Some(risk) = fields.get("risk") {
        let risk = risk.as_str().and_then(Risk::parse);
        def = def.risk(risk.ok_or_else(|| fields.wrong("risk", "one of none, low, high, critical, blocked"))?);
    }
    if let Some(global) = fields.flag("global")? {
        def = def.global(global);
    }
    if let Some(follow_up) = fields.flag("followUp")? {
        def = def.follow_up(follow_up);
    }
    if let Some(timeout_ms) = fields.number("timeoutMs")? {
        def = def.timeout_ms(timeout_ms);
    }
    Ok(def)
}

fn error_text(error: &JsValue) -> String {
    crate::js_error_message(error).or_else(|| error.as_string()).unwrap_or_else(|| "the handler failed".into())
}

/// Calls a JS function and awaits its result if it is a Promise.
async fn call_js(function: &js_sys::Function, args: &[JsValue]) -> Result<JsValue, String> {
    let array: js_sys::Array = args.iter().collect();
    let value = function.apply(&JsValue::NULL, &array).map_err(|e| error_text(&e))?;
    match value.dyn_into::<js_sys::Promise>() {
        Ok(promise) => JsFuture::from(promise).await.map_err(|e| error_text(&e)),
        Err(value) => Ok(value),
    }
}

#[wasm_bindgen]
extern "C" {
    /// The page's `AbortController`.
    #[derive(Clone)]
    type AbortController;
    #[wasm_bindgen(constructor)]
    fn new() -> AbortController;
    #[wasm_bindgen(method)]
    fn abort(this: &AbortController);
}

/// Aborts its controller when dropped: the handler's future is dropped when its call is
/// cancelled (Stop, `TOOL_CANCEL`, a timeout, its tool unmounted) before it finished.
struct AbortOnDrop(Option<AbortController>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(controller) = self.0.take() {
            controller.abort();
        }
    }
}

fn handler(function: js_sys::Function) -> crate::Handler {
    let function = Rc::new(function);
    Rc::new(move |args: Value| -> LocalFuture<Result<Value, String>> {
        let function = function.clone();
        Box::pin(async move {
            let controller = AbortController::new();
            // The controller itself is the handler's context: its `signal` is what the handler
            // reads (a separate object would cost the runtime bytes it does not have).
            let context: JsValue = controller.clone().into();
            let mut abort = AbortOnDrop(Some(controller));
            let output = call_js(&function, &[to_js(&args), context]).await;
            // Finished: nothing to abort.
            abort.0 = None;
            let output = output?;
            if output.is_undefined() {
                return Ok(Value::Null);
            }
            crate::json::from_js(&output)
                .map_err(|error| format!("the handler returned a value that is not JSON: {error}"))
        })
    })
}

fn function(value: JsValue, what: &str) -> Result<js_sys::Function, JsError> {
    value.dyn_into::<js_sys::Function>().map_err(|_| JsError::new(&format!("{what} must be a function")))
}

fn decision(answer: Result<JsValue, String>) -> ApprovalDecision {
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            return ApprovalDecision::Rejected { reason: Some(format!("the approval callback failed: {error}")) };
        }
    };
    if answer.as_bool() == Some(true) {
        return ApprovalDecision::Approved;
    }
    if answer.as_string().as_deref() == Some("dismissed") {
        return ApprovalDecision::Dismissed;
    }
    let approved = js_sys::Reflect::get(&answer, &"approved".into()).ok().and_then(|v| v.as_bool());
    let reason = js_sys::Reflect::get(&answer, &"reason".into()).ok().and_then(|v| v.as_string());
    if approved == Some(true) { ApprovalDecision::Approved } else { ApprovalDecision::Rejected { reason } }
}

fn error_object(error: &WebError) -> JsValue {
    to_js(&crate::chat::ErrorLine::from(error).to_value())
}

/// The Tether browser runtime for JavaScript.
#[wasm_bindgen]
pub struct TetherClient {
    client: Client,
}

#[wasm_bindgen]
impl TetherClient {
    /// A client for the server at `url` (e.g. `ws://localhost:8787/ws`). Call `connect()`.
    #[wasm_bindgen(constructor)]
    pub fn new(url: String, options: Option<JsClientOptions>) -> Result<TetherClient, JsError> {
        let mut config = ClientConfig::new(url);
        if let Some(options) = options.map(JsValue::from).filter(|o| !o.is_undefined() && !o.is_null()) {
            let options = Fields::of(&options, "options")?;
            config.max_settle_ms = options.number("maxSettleMs")?.unwrap_or(config.max_settle_ms);
            config.reconnect_base_ms = options.number("reconnectBaseMs")?.unwrap_or(config.reconnect_base_ms);
            config.reconnect_max_ms = options.number("reconnectMaxMs")?.unwrap_or(config.reconnect_max_ms);
        }
        Ok(TetherClient { client: Client::new(config) })
    }

    /// Opens the connection; reconnects until `disconnect()`.
    pub fn connect(&self) {
        self.client.connect();
    }

    /// Closes the connection and stops reconnecting.
    pub fn disconnect(&self) {
        self.client.disconnect();
    }

    /// A fresh owner id for a component.
    #[wasm_bindgen(js_name = newOwner)]
    pub fn new_owner(&self) -> f64 {
        self.client.new_owner().0 as f64
    }

    /// Registers a tool for `owner`. Throws when refused (over the cap, invalid name or schema);
    /// the refusal is also reported to `onError` and subscribers.
    #[wasm_bindgen(js_name = registerTool)]
    pub fn register_tool(
        &self,
        owner: f64,
        definition: &JsToolDefinition,
        handler: JsToolHandler,
    ) -> Result<(), JsError> {
        let def = self::definition(definition)?;
        let handler = self::handler(function(handler.into(), "handler")?);
        self.client.register_handler(tether_core::OwnerId(owner as u64), def, handler).map_err(refusal)
    }

    /// Registers a resolver group: `definitions[i]` (named `prefix_name`) runs `handlers[i]`,
    /// with `hooks` around every call. Throws the first refusal, after registering the rest.
    #[wasm_bindgen(js_name = registerResolver)]
    pub fn register_resolver(
        &self,
        owner: f64,
        prefix: &str,
        definitions: JsToolDefinitions,
        handlers: JsToolHandlers,
        hooks: Option<JsResolverHooks>,
    ) -> Result<(), JsError> {
        let definitions: js_sys::Array =
            JsValue::from(definitions).dyn_into().map_err(|_| JsError::new("definitions must be an array"))?;
        let handlers: js_sys::Array =
            JsValue::from(handlers).dyn_into().map_err(|_| JsError::new("handlers must be an array"))?;
        if definitions.length() != handlers.length() {
            return Err(JsError::new("definitions and handlers must have the same length"));
        }
        let mut tools = Vec::new();
        for (def, handler) in definitions.iter().zip(handlers.iter()) {
            tools.push((definition(&def)?, self::handler(function(handler, "handler")?)));
        }
        let hooks = hooks.map(JsValue::from).filter(|h| !h.is_undefined() && !h.is_null());
        let get = |name: &str| -> Option<js_sys::Function> {
            hooks.as_ref().and_then(|h| js_sys::Reflect::get(h, &name.into()).ok()).and_then(|f| f.dyn_into().ok())
        };
        let mut resolver = ResolverHooks::default();
        if let Some(before) = get("onBeforeAnyCall") {
            let before = Rc::new(before);
            resolver.before = Some(Rc::new(move |tool: &str, args: &Value| -> LocalFuture<Result<(), String>> {
                let (before, tool, args) = (before.clone(), JsValue::from_str(tool), to_js(args));
                Box::pin(async move {
                    match call_js(&before, &[tool, args]).await? {
                        refusal if refusal.is_string() => Err(refusal.as_string().unwrap_or_default()),
                        _ => Ok(()),
                    }
                })
            }));
        }
        if let Some(after) = get("onAfterAnyCall") {
            resolver.after = Some(Rc::new(move |tool: &str, output: &Value| {
                let _ = after.call2(&JsValue::NULL, &tool.into(), &to_js(output));
            }));
        }
        if let Some(on_error) = get("onErrorAnyCall") {
            resolver.error = Some(Rc::new(move |tool: &str, error: &str| {
                let _ = on_error.call2(&JsValue::NULL, &tool.into(), &error.into());
            }));
        }
        let results = self.client.register_resolver(tether_core::OwnerId(owner as u64), prefix, tools, resolver);
        match results.into_iter().find_map(Result::err) {
            Some(error) => Err(refusal(error)),
            None => Ok(()),
        }
    }

    /// Shares app state with the agent for `owner` (replacing the entry of the same key): the
    /// model reads `description` and `value` (any JSON value) as data. Throws when refused (a
    /// key that is not a valid name, more than 16 entries or 8 KiB of JSON together); the
    /// refusal is also reported to `onError` and subscribers as `agent.context.limit`. The entry
    /// leaves with `unregisterOwner(owner)`.
    #[wasm_bindgen(js_name = setContext)]
    pub fn set_context(&self, owner: f64, key: &str, description: &str, value: &JsValue) -> Result<(), JsError> {
        let value = from_js(value, "context value")?;
        self.client.set_context(tether_core::OwnerId(owner as u64), key, description, value).map_err(refusal)
    }

    /// Removes every non-global tool and every context entry of `owner`, and aborts their
    /// calls in flight.
    #[wasm_bindgen(js_name = unregisterOwner)]
    pub fn unregister_owner(&self, owner: f64) {
        self.client.unregister_owner(tether_core::OwnerId(owner as u64));
    }

    /// Removes one tool of `owner`.
    #[wasm_bindgen(js_name = unregisterTool)]
    pub fn unregister_tool(&self, owner: f64, name: &str) {
        self.client.unregister(tether_core::OwnerId(owner as u64), name);
    }

    /// Sets the approval callback for high and critical tools.
    #[wasm_bindgen(js_name = setApprover)]
    pub fn set_approver(&self, approver: JsApprover) -> Result<(), JsError> {
        let approver = Rc::new(function(approver.into(), "approver")?);
        self.client.set_approver(Rc::new(
            move |request: tether_core::ApprovalRequest| -> LocalFuture<ApprovalDecision> {
                let approver = approver.clone();
                let view = to_js(&crate::ApprovalView::from(&request).to_value());
                Box::pin(async move { decision(call_js(&approver, &[view]).await) })
            },
        ));
        Ok(())
    }

    /// Sets the callback told about low-risk calls as they run.
    #[wasm_bindgen(js_name = onNotify)]
    pub fn on_notify(&self, callback: JsNotify) -> Result<(), JsError> {
        let callback = function(callback.into(), "callback")?;
        self.client.on_notify(move |notification| {
            let _ = callback.call1(&JsValue::NULL, &to_js(&notification.to_value()));
        });
        Ok(())
    }

    /// Sets the error callback (refused tools, server errors, connection problems).
    #[wasm_bindgen(js_name = onError)]
    pub fn on_error(&self, callback: JsOnError) -> Result<(), JsError> {
        let callback = function(callback.into(), "callback")?;
        self.client.on_error(move |error| {
            let _ = callback.call1(&JsValue::NULL, &error_object(error));
        });
        Ok(())
    }

    /// Subscribes to every event; returns an id for `unsubscribe`.
    pub fn subscribe(&self, listener: JsListener) -> Result<u32, JsError> {
        let listener = function(listener.into(), "listener")?;
        Ok(self.client.subscribe(move |event| {
            let _ = listener.call1(&JsValue::NULL, &to_js(&event.to_value()));
        }))
    }

    /// Removes a subscription.
    pub fn unsubscribe(&self, id: u32) {
        self.client.unsubscribe(id);
    }

    /// Sends the user's message (queued until connected).
    /// Stops the run in progress (a Stop button): the server ends it as `aborted` and the
    /// calls it waits for are cancelled in this page. Does nothing when none is in progress.
    pub fn stop(&self) {
        self.client.stop();
    }

    #[wasm_bindgen(js_name = sendMessage)]
    pub fn send_message(&self, text: &str) {
        self.client.send_message(text);
    }

    /// The tools as the model sees them now.
    pub fn tools(&self) -> JsToolSpecs {
        let tools: Vec<Value> = self.client.tools().iter().map(tether_core::ToolSpec::to_value).collect();
        to_js(&Value::Array(tools)).unchecked_into()
    }

    /// The most recent refused registrations: `{name, reason, event}`. Feature `dev-api`
    /// (subscribers get each refusal as a `toolRefused` event).
    #[cfg(feature = "dev-api")]
    pub fn refused(&self) -> JsValue {
        let refused: Vec<Value> = self
            .client
            .refused()
            .iter()
            .map(|r| {
                let event = match r.error {
                    tether_core::CoreError::ToolLimit { .. } => tether_core::LIMIT_EVENT,
                    tether_core::CoreError::ContextLimit { .. } => tether_core::CONTEXT_LIMIT_EVENT,
                    _ => "tool.registry.refused",
                };
                tether_protocol::JsonObject::new()
                    .text("name", &r.name)
                    .text("reason", &r.error.to_string())
                    .text("event", event)
                    .build()
            })
            .collect();
        to_js(&Value::Array(refused))
    }

    /// Runs a tool here without the server (dev tools, benchmarks): lookup, validation,
    /// defaults, risk policy and handler, as for a call from the model. Feature `dev-api`.
    #[cfg(feature = "dev-api")]
    #[wasm_bindgen(js_name = invokeLocal)]
    pub async fn invoke_local(&self, name: String, args: JsValue) -> Result<JsValue, JsError> {
        let args = if args.is_undefined() { Value::Object(Default::default()) } else { from_js(&args, "arguments")? };
        let outcome = self.client.invoke_local(&name, args).await;
        Ok(to_js(
            &tether_protocol::JsonObject::new()
                .text("callId", outcome.call_id.as_str())
                .text("tool", &outcome.tool)
                .text("status", outcome.status.as_str())
                .value("content", outcome.content)
                .build(),
        ))
    }

    /// Starts a call of a registered tool here, without the server (a WebMCP agent's call),
    /// under `callId`, which the caller makes unique (one that is running already starts
    /// nothing): lookup, validation, defaults, risk policy (the approver is asked) and handler,
    /// as for a call from the model. The outcome comes to subscribers as the `callFinished`
    /// event with that id (possibly before this returns) and is not sent to the server. Throws
    /// only for arguments that are not JSON values.
    #[wasm_bindgen(js_name = callLocal)]
    pub fn call_local(&self, call_id: String, name: &str, args: &JsValue) -> Result<(), JsError> {
        self.client.start_local(call_id.into(), name, from_js(args, "arguments")?);
        Ok(())
    }

    /// Checks arguments against a registered tool's schema; returns every problem (empty when
    /// valid). Throws for an unknown tool. Feature `dev-api`.
    #[cfg(feature = "dev-api")]
    pub fn validate(&self, name: &str, args: &JsValue) -> Result<Vec<String>, JsError> {
        let args = from_js(args, "arguments")?;
        self.client
            .validate(name, &args)
            .ok_or_else(|| JsError::new(&format!("unknown tool {}", tether_protocol::Quoted(name))))
    }

    /// The session id, once connected.
    #[wasm_bindgen(js_name = sessionId)]
    pub fn session_id(&self) -> Option<String> {
        self.client.session_id()
    }
}
