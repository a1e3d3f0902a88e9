//! Runs the travel agent on one request with the built-in model and prints what happens.
//!
//! `cargo run -p travel-agent -- "Book me the most comfortable seat to Mar del Plata on Friday."`

use std::sync::Arc;

use tether_agent::RunSink;
use tether_protocol::{RunEvent, ToolEndEvent, ToolStartEvent};
use tether_scripted::ScriptedModel;
use travel_agent::{TravelDesk, travel_agent};

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() -> anyhow::Result<()> {
    let request = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Book me the most comfortable seat to Mar del Plata on Friday.".into());
    let agent = travel_agent(Arc::new(ScriptedModel::default()));
    let desk = TravelDesk::default();
    let on_delta = |text: &str| print!("{text}");
    let on_event = |event: RunEvent| match event {
        RunEvent::ToolExecutionStart(ToolStartEvent { tool, args, .. }) => println!("→ {tool} {args}"),
        RunEvent::ToolExecutionEnd(ToolEndEvent { tool, status, output, .. }) => {
            println!("← {tool} [{}] {output}", status.as_str());
        }
        _ => {}
    };
    println!("user: {request}");
    let outcome = agent
        .run(&desk, &RunSink { on_delta: &on_delta, on_event: &on_event }, &"run-1".into(), &request, Vec::new())
        .await;
    println!("\n[{}] bookings: {:?}", outcome.status.as_str(), desk.bookings());
    Ok(())
}
