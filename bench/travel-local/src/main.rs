//! Runs the travel-agent example against a real model and prints one JSON line per request:
//! `travel-local BASE_URL TOOL_MODE [--conversation] [REQUEST…]`. Each request is a run of its own,
//! or, with `--conversation`, the next message of one conversation with one travel desk. The task
//! benchmark reads the lines (bench/tasks/run.mjs). A crate of its own so that the example keeps no
//! HTTP stack.

use std::sync::Mutex;

use anyhow::Result;
use serde_json::{Value, json};
use tether_agent::{BoxFuture, CallRef, ToolHost, ToolOutput};
use tether_protocol::ToolSpec;
use travel_agent::{TravelDesk, travel_agent};

/// The desk, recording every call that passed its check (whatever the policy hooks then decided:
/// what the model tried to do).
struct Recorded<'a> {
    desk: &'a TravelDesk,
    calls: Mutex<Vec<Value>>,
}

impl ToolHost for Recorded<'_> {
    fn tools(&self) -> Vec<ToolSpec> {
        self.desk.tools()
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        self.desk.check(name, args)?;
        self.calls.lock().expect("calls").push(json!({"name": name, "args": args}));
        Ok(())
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        self.desk.execute(call, args)
    }
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() -> Result<()> {
    let mut cli = travel_local::cli("travel-local")?;
    if cli.requests.is_empty() {
        cli.requests = vec![
            "Book me the most comfortable seat to Mar del Plata on Friday.".into(),
            "Book me a tourist seat on the morning train to Mar del Plata on Friday.".into(),
        ];
    }
    // As `tether serve` does for OpenAI-compatible models: a question changes nothing.
    let agent = travel_local::as_served(travel_agent(travel_local::model(&cli)?));
    let mut desk = TravelDesk::default();
    let mut history = Vec::new();
    for (n, request) in cli.requests.iter().enumerate() {
        if !cli.conversation {
            desk = TravelDesk::default();
            history = Vec::new();
        }
        let booked_before = desk.bookings().len();
        let host = Recorded { desk: &desk, calls: Mutex::new(Vec::new()) };
        let (messages, mut line) = travel_local::run_one(&agent, &host, n, request, history).await;
        history = messages;
        line.insert("bookings".into(), Value::from(desk.bookings()[booked_before..].to_vec()));
        line.insert("calls".into(), Value::from(host.calls.into_inner().expect("calls")));
        println!("{}", Value::Object(line));
    }
    Ok(())
}
