//! WebMCP: the page's live tools for the browser's own agents, registered with the W3C draft's
//! `document.modelContext` (or `navigator.modelContext` of earlier drafts and of polyfills such
//! as `@mcp-b/global`). Every call runs through the runtime's executor as a call from Tether's
//! server does: validation, the risk policy with the page's approval dialog, the handler. The
//! same as `@tether/react/webmcp`.

use std::collections::HashMap;

use js_sys::{Function, Object, Promise, Reflect};
use leptos::prelude::*;
use serde_json::{Value, json};
use tether_web::json::{from_js, to_js};
use tether_web::{Outcome, ResultStatus, Risk, ToolSpec};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::{AgentContext, agent_for, as_text};

/// The WebMCP hints for a Tether risk: `none` is read-only, `high` and `critical` destructive
/// (`destructiveHint` is MCP's, which MCP-B passes on). Hints for the agent only: the approval is
/// asked in the page whatever they say.
pub fn webmcp_annotations(risk: Risk) -> Value {
    match risk {
        Risk::None => json!({ "readOnlyHint": true }),
        Risk::High | Risk::Critical => json!({ "readOnlyHint": false, "destructiveHint": true }),
        _ => json!({ "readOnlyHint": false }),
    }
}

/// A finished call as the agent reads it (an MCP `CallToolResult`): the content as text (a
/// string as it is, anything else as JSON), and `isError` unless it succeeded.
pub fn webmcp_result(status: ResultStatus, content: &Value) -> Value {
    let mut result = json!({ "content": [{ "type": "text", "text": as_text(content) }] });
    if status != ResultStatus::Ok {
        result["isError"] = Value::Bool(true);
    }
    result
}

/// The page's WebMCP model context, when the browser (or a polyfill) has one.
fn model_context() -> Option<Object> {
    let window = web_sys::window()?;
    let document: JsValue = window.document()?.into();
    let navigator: JsValue = window.navigator().into();
    [document, navigator].iter().find_map(|owner| {
        let found = Reflect::get(owner, &"modelContext".into()).ok()?;
        let register = Reflect::get(&found, &"registerTool".into()).ok()?;
        register.is_function().then(|| found.unchecked_into())
    })
}

/// An agent's input as the call's arguments: none is `{}`; what is not JSON is `null` (which
/// the tool's schema then refuses).
fn arguments(input: &JsValue) -> Value {
    if input.is_undefined() || input.is_null() {
        return json!({});
    }
    from_js(input).unwrap_or(Value::Null)
}

/// One registered tool: what it was registered as, the signal that unregisters it, and its
/// `execute` callback (alive while registered).
struct Registered {
    signature: String,
    controller: web_sys::AbortController,
    _execute: Closure<dyn Fn(JsValue) -> Promise>,
}

/// Keeps a model context's tools equal to the page's tools (`blocked` ones left out: they never
/// run). A tool with a call in flight stays registered as it was until its calls have answered:
/// its own call often changes it (removing the last item unmounts `cart_remove`), and a model
/// context cancels the calls of a tool that is unregistered, which would lose the answer.
struct Bridge {
    model_context: Object,
    registered: HashMap<String, Registered>,
    in_flight: HashMap<String, u32>,
    closed: bool,
}

fn signature(tool: &ToolSpec) -> String {
    json!([tool.description, tool.parameters, tool.risk.as_str()]).to_string()
}

impl Bridge {
    fn sync(&mut self, tools: &[ToolSpec], agent: AgentContext, bridge: StoredValue<Bridge, LocalStorage>) {
        if self.closed {
            return;
        }
        let live: HashMap<&str, &ToolSpec> =
            tools.iter().filter(|t| t.risk != Risk::Blocked).map(|t| (t.name.as_str(), t)).collect();
        let stale: Vec<String> = self
            .registered
            .iter()
            .filter(|(name, entry)| live.get(name.as_str()).is_none_or(|tool| signature(tool) != entry.signature))
            .filter(|(name, _)| !self.in_flight.contains_key(name.as_str()))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            self.unregister(&name);
        }
        for tool in live.values() {
            if !self.registered.contains_key(&tool.name) {
                self.register(tool, agent, bridge);
            }
        }
    }

    /// A call of `name` answered. A task later, when the answer has reached the agent through
    /// the model context's promises, the call is no longer in flight; once none is left, the
    /// tool may change or go.
    fn answered(name: String, agent: AgentContext, bridge: StoredValue<Bridge, LocalStorage>) {
        set_timeout(
            move || {
                let tools = agent.state.tools.try_get_untracked().unwrap_or_default();
                bridge.try_update_value(|b| {
                    let Some(left) = b.in_flight.get_mut(&name) else { return };
                    *left -= 1;
                    if *left == 0 {
                        b.in_flight.remove(&name);
                        b.sync(&tools, agent, bridge);
                    }
                });
            },
            std::time::Duration::ZERO,
        );
    }

    fn register(&mut self, tool: &ToolSpec, agent: AgentContext, bridge: StoredValue<Bridge, LocalStorage>) {
        let Ok(controller) = web_sys::AbortController::new() else { return };
        let name = tool.name.clone();
        let execute = Closure::<dyn Fn(JsValue) -> Promise>::new(move |input: JsValue| {
            let (name, args) = (name.clone(), arguments(&input));
            bridge.try_update_value(|b| *b.in_flight.entry(name.clone()).or_default() += 1);
            let call = agent.with_client(|client| client.invoke_local(&name, args));
            wasm_bindgen_futures::future_to_promise(async move {
                let result = match call {
                    Some(call) => {
                        let Outcome { status, content, .. } = call.await;
                        webmcp_result(status, &content)
                    }
                    None => webmcp_result(ResultStatus::Cancelled, &json!("the page stopped offering its tools")),
                };
                Bridge::answered(name, agent, bridge);
                Ok(to_js(&result))
            })
        });
        let definition = to_js(&json!({
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.parameters,
            "annotations": webmcp_annotations(tool.risk),
        }));
        let options = Object::new();
        let _ = Reflect::set(&definition, &"execute".into(), execute.as_ref());
        let _ = Reflect::set(&options, &"signal".into(), &controller.signal());
        let registered = Reflect::get(&self.model_context, &"registerTool".into())
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok())
            .map(|register| register.call2(&self.model_context, &definition, &options));
        match registered {
            Some(Ok(answer)) => {
                if let Ok(promise) = answer.dyn_into::<Promise>() {
                    let (name, signal) = (tool.name.clone(), controller.signal());
                    wasm_bindgen_futures::spawn_local(async move {
                        if let Err(error) = wasm_bindgen_futures::JsFuture::from(promise).await
                            && !signal.aborted()
                        {
                            refused(&name, &error);
                        }
                    });
                }
            }
            Some(Err(error)) => {
                refused(&tool.name, &error);
                return;
            }
            None => return,
        }
        self.registered
            .insert(tool.name.clone(), Registered { signature: signature(tool), controller, _execute: execute });
    }

    fn unregister(&mut self, name: &str) {
        let Some(entry) = self.registered.remove(name) else { return };
        entry.controller.abort();
        // Earlier drafts unregister by name (the current one has forgotten it already, and may
        // say so).
        if let Some(unregister) =
            Reflect::get(&self.model_context, &"unregisterTool".into()).ok().and_then(|f| f.dyn_into::<Function>().ok())
            && let Ok(answer) = unregister.call1(&self.model_context, &name.into())
            && let Ok(promise) = answer.dyn_into::<Promise>()
        {
            wasm_bindgen_futures::spawn_local(async move {
                let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
            });
        }
    }

    fn close(&mut self) {
        self.closed = true;
        let names: Vec<String> = self.registered.keys().cloned().collect();
        for name in names {
            self.unregister(&name);
        }
    }
}

fn refused(name: &str, error: &JsValue) {
    web_sys::console::error_2(&format!("tether-leptos: {name} was not registered with WebMCP:").into(), error);
}

/// While the calling component is mounted (inside [`AgentProvider`](crate::AgentProvider)),
/// registers the page's live tools with the browser's WebMCP model context, when it has one, so
/// that the browser's own agents can call them; nothing happens where there is none. Each call
/// is validated, passes the risk policy (`high` and `critical` wait for the page's
/// [`ApprovalDialog`](crate::ApprovalDialog)) and runs the tool's handler, as a call from
/// Tether's server does; its result goes to the agent, not to the server. The same as
/// `@tether/react/webmcp`'s `useWebMcp()`.
pub fn use_webmcp() {
    let agent = agent_for("use_webmcp()");
    let Some(model_context) = model_context() else { return };
    let bridge = StoredValue::new_local(Bridge {
        model_context,
        registered: HashMap::new(),
        in_flight: HashMap::new(),
        closed: false,
    });
    Effect::new(move |_| {
        let tools = agent.state.tools.get();
        bridge.update_value(|b| b.sync(&tools, agent, bridge));
    });
    on_cleanup(move || {
        bridge.try_update_value(Bridge::close);
    });
}
