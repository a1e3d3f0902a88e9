//! Ready-made UI over the agent context: the approval dialog, the chat panel, the live tool
//! inspector and the error list. Class names start with `tether-` (styled by
//! [`STYLES`](crate::STYLES), which the provider puts in the page); `data-testid` attributes name
//! the parts.

use leptos::ev::{KeyboardEvent, SubmitEvent};
use leptos::html;
use leptos::prelude::*;
use serde_json::Value;
use tether_web::{ApprovalDecision, Risk};

use tether_web::ConnectionState;

use crate::{ChatRole, ToolCallView, agent_for, as_text, connection_words};

/// `tether-risk tether-risk-<risk>`: each level has its own class.
fn risk_class(risk: Risk) -> String {
    format!("tether-risk tether-risk-{}", risk.as_str())
}

/// The arguments of a call as the approval dialog lists them: for an object, each field with its
/// value (a string as it is, anything else as compact JSON); anything else as one JSON line
/// under an empty name.
pub fn args_summary(args: &Value) -> Vec<(String, String)> {
    match args {
        Value::Object(fields) => fields.iter().map(|(name, value)| (name.clone(), as_text(value))).collect(),
        other => vec![(String::new(), as_text(other))],
    }
}

/// The arguments with the fields the user edited: a string field takes the text; a number field
/// the number written (the text, if it is not one); a boolean field `true` or `false` (else the
/// text). Only such fields are editable in the dialog. The same as `@tether/react`'s `editedArgs`.
pub fn edited_args(args: &Value, edits: &[(String, String)]) -> Value {
    let mut result = args.clone();
    if let Value::Object(fields) = &mut result {
        for (name, text) in edits {
            let typed = text.trim();
            let value =
                match fields.get(name) {
                    Some(Value::Number(_)) => typed.parse::<i64>().map(Value::from).ok().or_else(|| {
                        typed.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number)
                    }),
                    Some(Value::Bool(_)) => match typed {
                        "true" => Some(Value::Bool(true)),
                        "false" => Some(Value::Bool(false)),
                        _ => None,
                    },
                    _ => None,
                };
            fields.insert(name.clone(), value.unwrap_or_else(|| Value::String(text.clone())));
        }
    }
    result
}

/// Whether the dialog lets the user edit a field: a string, a number or a boolean.
fn editable(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// How deep [`allowed_values`] follows a `$ref` into itself.
const MAX_REF_DEPTH: usize = 8;

/// The values a field of a tool's arguments allows, when its schema lists them: `enum`, `const`,
/// or `oneOf`/`anyOf` of those, through local `$ref`s (`#/$defs/…`, `#/definitions/…`, as
/// schemars writes a Rust enum), `null` left out. `None` when the schema does not list them (any
/// value of its type goes). The approval dialog offers them as a choice.
pub fn allowed_values(parameters: &Value, field: &str) -> Option<Vec<Value>> {
    fn resolve<'a>(root: &'a Value, node: &'a Value, depth: usize) -> Option<&'a Value> {
        match node.get("$ref").and_then(Value::as_str) {
            Some(reference) if reference.starts_with('#') => {
                if depth >= MAX_REF_DEPTH {
                    return None;
                }
                resolve(root, root.pointer(&reference[1..])?, depth + 1)
            }
            _ => node.is_object().then_some(node),
        }
    }
    fn values(root: &Value, node: &Value, depth: usize) -> Option<Vec<Value>> {
        let schema = resolve(root, node, depth)?;
        if let Some(listed) = schema.get("enum").and_then(Value::as_array) {
            return Some(listed.iter().filter(|v| !v.is_null()).cloned().collect());
        }
        if let Some(constant) = schema.get("const") {
            return Some(if constant.is_null() { Vec::new() } else { vec![constant.clone()] });
        }
        let branches = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array)?;
        let mut found = Vec::new();
        for branch in branches {
            if resolve(root, branch, depth + 1).and_then(|b| b.get("type")) == Some(&Value::from("null")) {
                continue;
            }
            found.extend(values(root, branch, depth + 1)?);
        }
        Some(found)
    }
    values(parameters, parameters.get("properties")?.get(field)?, 0)
}

/// What the dialog offers for a field with [`allowed_values`]: each as the text an edit holds.
fn choices(parameters: Option<&Value>, field: &str) -> Option<Vec<String>> {
    let values = allowed_values(parameters?, field)?;
    (!values.is_empty())
        .then(|| values.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), String::from)).collect())
}

/// Asks the user to approve `high` and `critical` tool calls, one at a time.
///
/// It shows the tool, its risk, its description and the arguments, field by field
/// ([`args_summary`]). Approve and Reject are buttons (Tab moves between them, Enter or Space
/// presses); Escape rejects. Reject, the safe choice, takes the focus when a request opens, so
/// Enter never approves by accident. What the user types in its text field is the reason the
/// model reads with a refusal (`the user said: …`); Enter there refuses. Edit makes each string,
/// number and boolean field of an object's arguments editable; "Approve with changes" then approves the changed call
/// ([`AgentContext::approve_with_args`](crate::AgentContext::approve_with_args)).
#[component]
pub fn ApprovalDialog() -> impl IntoView {
    let context = agent_for("<ApprovalDialog/>");
    let approvals = context.state.approvals;
    let reject_button = NodeRef::<html::Button>::new();
    let current = move || approvals.with(|pending| pending.first().cloned());
    Effect::new(move |_| {
        if current().is_some() {
            if let Some(button) = reject_button.get() {
                let _ = button.focus();
            }
        }
    });
    // What the user typed: the reason a refusal gives the model (or what to do instead).
    let reason = RwSignal::new(String::new());
    // The fields as the user edits them (after Edit): `None` while not editing.
    let edits = RwSignal::new(None::<Vec<(String, String)>>);
    Effect::new(move |_| {
        let _ = current().map(|request| request.call_id);
        edits.set(None);
    });
    let answer = move |decision: ApprovalDecision| {
        if let Some(request) = current() {
            context.answer_approval(&request.call_id, decision);
            reason.set(String::new());
        }
    };
    let approve = move || {
        let Some(request) = current() else { return };
        match edits.get_untracked() {
            Some(changed) => {
                reason.set(String::new());
                context.approve_with_args(&request.call_id, edited_args(&request.args, &changed));
            }
            None => answer(ApprovalDecision::Approved),
        }
    };
    let reject = move |fallback: &str| {
        let typed = reason.get_untracked();
        let typed = typed.trim();
        let reason = if typed.is_empty() { fallback.to_string() } else { format!("the user said: {typed}") };
        answer(ApprovalDecision::Rejected { reason: Some(reason) });
    };
    let on_keydown = move |event: KeyboardEvent| {
        if event.key() == "Escape" {
            event.prevent_default();
            reject("the user pressed Escape");
        }
    };
    view! {
        <Show when=move || current().is_some()>
            {move || {
                current()
                    .map(|request| {
                        let can_edit = request.args.is_object();
                        let parameters = context
                            .state
                            .tools
                            .with_untracked(|tools| tools.iter().find(|t| t.name == request.tool).map(|t| t.parameters.clone()));
                        let args = args_summary(&request.args)
                            .into_iter()
                            .map(|(name, value)| {
                                let field = name.clone();
                                let can_edit = request.args.get(&name).is_some_and(editable);
                                let allowed = choices(parameters.as_ref(), &name);
                                let shown = move || {
                                    let field = field.clone();
                                    let value = value.clone();
                                    match edits.get().filter(|_| can_edit) {
                                        None => value.into_any(),
                                        Some(changed) => {
                                            let text = changed.iter().find(|(n, _)| *n == field).map_or(value, |(_, t)| t.clone());
                                            let name = field.clone();
                                            // The field's new text, as the user types or picks it.
                                            let edit = move |event: web_sys::Event| {
                                                let text = event_target_value(&event);
                                                edits.update(|edits| {
                                                    if let Some(edits) = edits {
                                                        edits.retain(|(n, _)| *n != name);
                                                        edits.push((name.clone(), text));
                                                    }
                                                });
                                            };
                                            if let Some(allowed) = allowed.clone() {
                                                // The values the tool allows: a choice, never a value its schema refuses.
                                                let options = if allowed.contains(&text) { allowed } else { [vec![text.clone()], allowed].concat() };
                                                let options = options
                                                    .into_iter()
                                                    .map(|choice| {
                                                        let selected = choice == text;
                                                        let shown = choice.clone();
                                                        view! { <option value=choice selected=selected>{shown}</option> }
                                                    })
                                                    .collect_view();
                                                return view! {
                                                    <select
                                                        aria-label=field.clone()
                                                        data-testid="approval-arg-input"
                                                        data-field=field
                                                        on:change=edit
                                                    >
                                                        {options}
                                                    </select>
                                                }
                                                .into_any();
                                            }
                                            view! {
                                                <input
                                                    type="text"
                                                    aria-label=field.clone()
                                                    data-testid="approval-arg-input"
                                                    data-field=field
                                                    prop:value=text
                                                    on:input=edit
                                                />
                                            }
                                            .into_any()
                                        }
                                    }
                                };
                                view! {
                                    <div data-testid="approval-arg">
                                        <dt>{name}</dt>
                                        <dd>{shown}</dd>
                                    </div>
                                }
                            })
                            .collect_view();
                        view! {
                            <div class="tether-approval-backdrop">
                                <div
                                    class="tether-approval"
                                    role="dialog"
                                    aria-modal="true"
                                    aria-labelledby="tether-approval-title"
                                    aria-describedby="tether-approval-description"
                                    data-testid="approval-dialog"
                                    on:keydown=on_keydown
                                >
                                    <h2 id="tether-approval-title">
                                        "The assistant wants to run " <code>{request.tool.clone()}</code>
                                    </h2>
                                    <p>
                                        <span class=risk_class(request.risk) data-testid="approval-risk">
                                            {request.risk.as_str()}
                                        </span>
                                    </p>
                                    <p id="tether-approval-description">{request.description}</p>
                                    <dl class="tether-approval-args" data-testid="approval-args">{args}</dl>
                                    // Enter here refuses, with these words as the reason.
                                    <form on:submit=move |event: SubmitEvent| {
                                        event.prevent_default();
                                        reject("the user pressed Reject");
                                    }>
                                        <input
                                            type="text"
                                            class="tether-approval-reason"
                                            aria-label="Reason for refusing, or what to do instead (optional)"
                                            placeholder="Reason for refusing, or what to do instead (optional)"
                                            data-testid="approval-reason"
                                            prop:value=move || reason.get()
                                            on:input=move |event| reason.set(event_target_value(&event))
                                        />
                                    </form>
                                    <div class="tether-approval-buttons">
                                        <button
                                            class="tether-approve"
                                            data-testid="approval-approve"
                                            on:click=move |_| approve()
                                        >
                                            {move || if edits.with(Option::is_some) { "Approve with changes" } else { "Approve" }}
                                        </button>
                                        <Show when=move || can_edit && edits.with(Option::is_none)>
                                            <button class="tether-edit" data-testid="approval-edit" on:click=move |_| edits.set(Some(Vec::new()))>
                                                "Edit"
                                            </button>
                                        </Show>
                                        <button
                                            class="tether-reject"
                                            data-testid="approval-reject"
                                            node_ref=reject_button
                                            on:click=move |_| reject("the user pressed Reject")
                                        >
                                            "Reject"
                                        </button>
                                        // Ends the whole run, not only this call.
                                        <button class="tether-stop" data-testid="approval-stop" on:click=move |_| context.stop()>
                                            "Stop the run"
                                        </button>
                                    </div>
                                </div>
                            </div>
                        }
                    })
            }}
        </Show>
    }
}

/// A tool call in the chat without a renderer of its own: the tool, its arguments, its status.
fn default_tool_call(call: &ToolCallView) -> impl IntoView + use<> {
    let args: Vec<String> = args_summary(&call.args)
        .into_iter()
        .map(|(name, value)| if name.is_empty() { value } else { format!("{name}: {value}") })
        .collect();
    let args = if args.is_empty() { String::new() } else { format!(" ({})", args.join(", ")) };
    view! {
        <span class="tether-tool-call">
            <code>{call.tool.clone()}</code>
            {format!("{args} — {}", call.status.words())}
        </span>
    }
}

/// How close to the bottom (in pixels) the chat counts as showing its newest line.
const NEAR_BOTTOM_PX: i32 = 24;

/// A scrolling list that follows its newest line (see [`follow_newest`]).
#[derive(Clone, Copy)]
struct FollowNewest {
    list: NodeRef<html::Ol>,
    following: StoredValue<bool>,
    /// Where the list was scrolled to last to follow (its own scroll events are not the user's).
    scrolled_to: StoredValue<i32>,
}

impl FollowNewest {
    /// After a scroll: back at the bottom follows again; above where the list last put itself
    /// (the user scrolled up) stops following. Lines that grew below change neither.
    fn on_scroll(self) {
        if let Some(list) = self.list.get_untracked() {
            let gap = list.scroll_height() - list.scroll_top() - list.client_height();
            if gap <= NEAR_BOTTOM_PX {
                self.following.set_value(true);
            } else if list.scroll_top() < self.scrolled_to.get_value() {
                self.following.set_value(false);
            }
        }
    }
}

/// Keeps the list at its newest line whenever `content` changes (lines arrive or grow), unless
/// the user scrolled up to read older ones.
fn follow_newest<T: Send + Sync + 'static>(content: RwSignal<T>) -> FollowNewest {
    let follow =
        FollowNewest { list: NodeRef::new(), following: StoredValue::new(true), scrolled_to: StoredValue::new(0) };
    Effect::new(move |_| {
        content.track();
        // After the new lines are drawn.
        request_animation_frame(move || {
            if let Some(list) = follow.list.get_untracked()
                && follow.following.get_value()
            {
                list.set_scroll_top(list.scroll_height());
                follow.scrolled_to.set_value(list.scroll_top());
            }
        });
    });
    follow
}

/// A chat with the agent: the answer streams in as `AGENT_MESSAGE` frames arrive. Each tool
/// call has its line at its place between the agent's words (`data-testid="chat-tool-call"`,
/// `data-call-status`), drawn by its renderer ([`use_tool_call_renderer`](crate::use_tool_call_renderer)) if it has one. While not
/// connected it says so, and a message written meanwhile is marked as waiting until it leaves.
/// While a run is in progress, Stop ends it (`data-testid="chat-stop"`). The lines follow the
/// newest one unless the user has scrolled up.
#[component]
pub fn ChatPanel() -> impl IntoView {
    let context = agent_for("<ChatPanel/>");
    let state = context.state;
    let open = move || state.connection.get() == ConnectionState::Open;
    // While a run waits for an approval, a message answers it (see `send_message`).
    let busy = move || {
        state.running.get()
            && state.approvals.with(|pending| pending.is_empty())
            && state.questions.with(|pending| pending.is_empty())
    };
    let draft = RwSignal::new(String::new());
    let lines = follow_newest(state.messages);
    let on_submit = move |event: SubmitEvent| {
        event.prevent_default();
        let text = draft.get_untracked();
        let busy = state.running.get_untracked()
            && state.approvals.with_untracked(|pending| pending.is_empty())
            && state.questions.with_untracked(|pending| pending.is_empty());
        if !text.trim().is_empty() && !busy {
            context.send_message(&text);
            draft.set(String::new());
        }
    };
    view! {
        <section class="tether-chat" aria-label="Assistant" data-testid="chat-panel">
            <ol class="tether-chat-lines" aria-live="polite" node_ref=lines.list on:scroll=move |_| lines.on_scroll()>
                <For
                    each=move || state.messages.get()
                    key=|line| {
                        // A call is drawn again when anything its renderer reads changed.
                        let call = line.call.as_ref().map(|c| {
                            (
                                c.status,
                                c.args.to_string(),
                                c.progress.clone(),
                                c.respond.is_some(),
                                c.result.as_ref().map(Value::to_string),
                            )
                        });
                        (line.key.clone(), line.text.clone(), line.status, line.waiting, call)
                    }
                    children=move |line| {
                        if let Some(call) = line.call {
                            let (tool, status) = (call.tool.clone(), call.status.as_str());
                            let drawn = match context.renderer(&call.tool) {
                                Some(render) => render(call),
                                None => default_tool_call(&call).into_any(),
                            };
                            return view! {
                                <li
                                    class="tether-line tether-line-tool"
                                    data-testid="chat-tool-call"
                                    data-tool=tool
                                    data-call-status=status
                                >
                                    {drawn}
                                </li>
                            }
                                .into_any();
                        }
                        let class = match line.role {
                            ChatRole::User => "tether-line tether-line-user",
                            ChatRole::Agent => "tether-line tether-line-agent",
                            ChatRole::System | ChatRole::Tool => "tether-line tether-line-system",
                        };
                        let status = line.status.map(|s| s.as_str()).unwrap_or("");
                        let waiting = line.waiting.then_some("true");
                        view! {
                            <li class=class data-testid="chat-message" data-status=status data-waiting=waiting>
                                {line.text}
                                {line.waiting.then(|| view! { <small class="tether-waiting">" (waiting for the connection)"</small> })}
                            </li>
                        }
                            .into_any()
                    }
                />
            </ol>
            <Show when=move || !open()>
                <p class="tether-chat-status" data-testid="chat-status" role="status">
                    "Not connected to the agent server ("
                    {move || connection_words(state.connection.get(), state.attempt.get())}
                    "). Messages you send wait until the connection is back."
                </p>
            </Show>
            <form class="tether-chat-form" on:submit=on_submit>
                <input
                    type="text"
                    aria-label="Message to the assistant"
                    placeholder="Ask the assistant…"
                    data-testid="chat-input"
                    prop:value=move || draft.get()
                    on:input=move |event| draft.set(event_target_value(&event))
                />
                <button type="submit" data-testid="chat-send" disabled=busy>
                    {move || match (busy(), open()) {
                        (false, _) => "Send",
                        (true, true) => "Working…",
                        (true, false) => "Waiting for the server…",
                    }}
                </button>
                <Show when=move || busy() && open()>
                    <button type="button" class="tether-stop" data-testid="chat-stop" on:click=move |_| context.stop()>
                        "Stop"
                    </button>
                </Show>
            </form>
        </section>
    }
}

/// The registry as the model sees it, live: the page's tools (before connecting too), refused
/// ones, the connection in words, and the last calls.
#[component]
pub fn ToolInspector() -> impl IntoView {
    let state = agent_for("<ToolInspector/>").state;
    let open = move || state.connection.get() == ConnectionState::Open;
    view! {
        <aside class="tether-inspector" aria-label="Tool inspector" data-testid="tool-inspector">
            <h2>
                "Tools "
                <span data-testid="inspector-count">{move || state.tools.with(Vec::len)}</span>
                " · "
                <span data-testid="inspector-connection" data-state=move || state.connection.get().as_str()>
                    {move || connection_words(state.connection.get(), state.attempt.get())}
                </span>
                " · updates "
                <span data-testid="inspector-context-updates">{move || state.context_updates.get()}</span>
            </h2>
            <Show when=move || !open()>
                <p class="tether-inspector-note" data-testid="inspector-note">
                    "Registered in this page; the model sees them once connected."
                </p>
            </Show>
            <ul>
                <For
                    each=move || state.tools.get()
                    key=|tool| (tool.name.clone(), tool.risk, tool.global, tool.parameters.to_string())
                    children=move |tool| {
                        let label = tool.name.clone();
                        view! {
                            <li data-testid="inspector-tool" data-tool=tool.name>
                                <code>{label}</code>
                                " "
                                <span class=risk_class(tool.risk)>{tool.risk.as_str()}</span>
                                {tool.global.then_some(" global")}
                                <small>" " {tool.description}</small>
                            </li>
                        }
                    }
                />
            </ul>
            <Show when=move || state.refused.with(|r| !r.is_empty())>
                <h3>"Refused"</h3>
                <ul>
                    <For
                        each=move || state.refused.get()
                        key=|refused| (refused.tool.clone(), refused.reason.clone())
                        children=move |refused| {
                            view! {
                                <li data-testid="inspector-refused" data-event=refused.event>
                                    <code>{refused.tool}</code>
                                    " — "
                                    {refused.reason}
                                </li>
                            }
                        }
                    />
                </ul>
            </Show>
            <h3>"Last calls"</h3>
            <ol>
                <For
                    each=move || state.calls.get()
                    key=|call| call.call_id.clone()
                    children=move |call| {
                        let settle = call.settle_ms.map(|ms| format!(" (settled in {ms:.0} ms)")).unwrap_or_default();
                        view! {
                            <li data-testid="inspector-call" data-status=call.status.as_str()>
                                <code>{call.tool.clone()}</code>
                                " → "
                                {call.status.as_str()}
                                {settle}
                            </li>
                        }
                    }
                />
            </ol>
        </aside>
    }
}

/// The errors the runtime reported, newest last: refused tools, server errors, and connection
/// failures (one line per outage, with the URL and the attempts so far).
#[component]
pub fn RuntimeErrors() -> impl IntoView {
    let errors = agent_for("<RuntimeErrors/>").state.errors;
    view! {
        <ul class="tether-errors" aria-label="Runtime errors" data-testid="runtime-errors">
            {move || {
                errors
                    .get()
                    .into_iter()
                    .map(|error| view! { <li data-testid="runtime-error">{error}</li> })
                    .collect_view()
            }}
        </ul>
    }
}

/// The context key `tether serve --expose-mcp` reads a pairing from (docs/mcp.md); the server
/// takes the entry out before the context is stored or shown to the model.
pub const MCP_PAIRING_KEY: &str = "tether-mcp-pairing";

const PAIRING_ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// The pairing code for 16 bytes: their 128 bits, 5 at a time, as 26 characters of
/// `0-9 a-z` without `i l o u` (the encoding `@tether/react/mcp`'s `pairingCode` uses).
pub fn pairing_code_from(bytes: [u8; 16]) -> String {
    let mut code = String::with_capacity(26);
    let (mut held, mut bits) = (0u32, 0u32);
    for byte in bytes {
        held = (held << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            code.push(char::from(PAIRING_ALPHABET[((held >> bits) & 31) as usize]));
        }
        held &= (1 << bits) - 1;
    }
    code.push(char::from(PAIRING_ALPHABET[((held << (5 - bits)) & 31) as usize]));
    code
}

/// A new pairing code: 128 random bits from the browser's `crypto.getRandomValues`. `None`
/// where the page has no `crypto` (never a weaker code).
pub fn pairing_code() -> Option<String> {
    let mut bytes = [0u8; 16];
    web_sys::window()?.crypto().ok()?.get_random_values_with_u8_array(&mut bytes).ok()?;
    Some(pairing_code_from(bytes))
}

/// While mounted, the MCP client that presents `code` as its bearer token may use this page's
/// tools through `tether serve --expose-mcp`. [`McpPairing`] is the button that mounts it.
#[component]
pub fn McpPairingEntry(
    /// The code the MCP client presents (at least 16 characters; [`pairing_code`] makes one).
    #[prop(into)]
    code: String,
) -> impl IntoView {
    crate::use_agent_context_keyed(
        MCP_PAIRING_KEY,
        "MCP pairing (read by the server, never shown to the model)",
        move || serde_json::json!({ "code": code }),
    );
}

/// `/mcp` on this page's origin.
fn default_mcp_endpoint() -> String {
    let location = web_sys::window().map(|window| window.location());
    match location.and_then(|l| Some((l.protocol().ok()?, l.host().ok()?))) {
        Some((protocol, host)) if !host.is_empty() => format!("{protocol}//{host}/mcp"),
        _ => "/mcp".into(),
    }
}

/// A button that lets an MCP client use this page's tools (the same as `@tether/react/mcp`'s
/// `<McpPairing/>`): it makes a pairing code, shows it with the endpoint to enter in the client,
/// and a button that ends the pairing. Off until the user clicks; a reload or unmount ends it.
/// Calls that need approval are asked in this page's [`ApprovalDialog`].
#[component]
pub fn McpPairing(
    /// The URL the MCP client connects to (default: `/mcp` on this page's origin).
    #[prop(optional, into)]
    endpoint: Option<String>,
) -> impl IntoView {
    let code = RwSignal::new(None::<String>);
    let failed = RwSignal::new(false);
    let endpoint = endpoint.unwrap_or_else(default_mcp_endpoint);
    move || match code.get() {
        None => view! {
            <button type="button" class="tether-mcp-pair" data-testid="mcp-pair"
                on:click=move |_| match pairing_code() {
                    Some(new) => code.set(Some(new)),
                    None => failed.set(true),
                }>
                "Let an MCP client use this page"
            </button>
            <Show when=move || failed.get()>
                <p role="alert">"This browser gives no secure random numbers: pairing is not possible."</p>
            </Show>
        }
        .into_any(),
        Some(current) => view! {
            <div class="tether-mcp-pairing" role="region" aria-label="MCP pairing" data-testid="mcp-pairing">
                <McpPairingEntry code=current.clone()/>
                <p>
                    "An MCP client may now use this page's tools. Give it the URL "
                    <code data-testid="mcp-endpoint">{endpoint.clone()}</code>
                    " and the header "
                    <code>"Authorization: Bearer " <span data-testid="mcp-code">{current}</span></code>
                    ". Calls that need your approval are asked here."
                </p>
                <button type="button" data-testid="mcp-unpair" on:click=move |_| code.set(None)>"Stop sharing"</button>
            </div>
        }
        .into_any(),
    }
}
