//! A to-do list the agent can add to and (after you approve) remove from.

use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tether_leptos::{
    AgentProvider, ApprovalDialog, ChatPanel, Risk, RuntimeErrors, ToolDef, ToolInspector, use_agent_context,
    use_agent_tool_reactive, use_agent_tool_typed,
};

/// The arguments of `todo_add`; the doc comments become the schema's descriptions.
#[derive(Deserialize, JsonSchema)]
struct TodoAdd {
    /// What to do, e.g. "buy milk".
    title: String,
}

#[component]
fn Todos() -> impl IntoView {
    let todos = RwSignal::new(Vec::<String>::new());
    // The agent reads the list as it is now (as data, before each message): "what is on my list?"
    // needs no tool.
    use_agent_context("The to-do list", move || json!(todos.get()));
    // The agent may call todo_add while <Todos/> is mounted; the handler reads the signal when it runs.
    use_agent_tool_typed::<TodoAdd>(
        ToolDef::new("todo_add", "Add an item to the to-do list."),
        move |args| async move {
            todos.update(|list| list.push(args.title.clone()));
            Ok(json!({ "added": args.title }))
        },
    );
    // Risk High: the user approves each call first. The enum lists the items there are now (the
    // tool is registered again when they change), so the model can only name one of them.
    use_agent_tool_reactive(
        move || {
            ToolDef::new("todo_remove", "Remove an item from the to-do list.").risk(Risk::High).parameters(json!({
                "type": "object",
                "properties": { "title": { "type": "string", "enum": todos.get() } },
                "required": ["title"]
            }))
        },
        move |args| async move {
            let title = args["title"].as_str().unwrap_or_default().to_string();
            todos.update(|list| list.retain(|item| *item != title));
            Ok(json!({ "removed": title }))
        },
    );
    view! {
        <ul>
            <For each=move || todos.get() key=|item| item.clone() let:item>
                <li data-testid="todo">{item}</li>
            </For>
        </ul>
    }
}

#[component]
fn App() -> impl IntoView {
    // No url: the agent server is at /ws on this page's origin (`tether serve --static`).
    view! {
        <AgentProvider>
            <h1>"To-do"</h1>
            <Todos/>
            <ChatPanel/>
            <ApprovalDialog/>
            <ToolInspector/>
            <RuntimeErrors/>
        </AgentProvider>
    }
}

fn main() {
    mount_to_body(App);
}
