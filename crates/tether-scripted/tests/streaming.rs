//! Tool calls while the model writes them: `tool_call_delta` events, under the id the call
//! then runs with, before it runs; observe-only (the call still runs once, with its complete
//! arguments).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tether_agent::*;
use tether_protocol::{CallId, ResultStatus, RunEvent, ToolCallDeltaEvent, ToolSpec, ToolStartEvent};
use tether_scripted::ScriptedModel;

struct Shop {
    executed: Mutex<Vec<(CallId, Value)>>,
}

impl ToolHost for Shop {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec::new("cart_add", "Add a product to the cart.").with_parameters(json!({
            "type": "object",
            "properties": {
                "productId": {"enum": ["mug-red", "mug-blue", "tshirt-black"]},
                "quantity": {"type": "integer", "minimum": 1},
            },
            "required": ["productId", "quantity"],
        }))]
    }

    fn check(&self, _name: &str, _args: &Value) -> Result<(), ToolOutput> {
        Ok(())
    }

    fn execute<'a>(&'a self, call_ref: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        let call = call_ref.call_id;
        let name = call_ref.name;
        Box::pin(async move {
            self.executed.lock().unwrap().push((call.clone(), args));
            ToolOutput::new(ResultStatus::Ok, format!("{name}: added"))
        })
    }
}

#[tokio::test]
async fn a_calls_arguments_arrive_as_events_before_it_runs_under_its_id() {
    let agent = AgentLoop::new(Arc::new(ScriptedModel::default()));
    let shop = Shop { executed: Mutex::new(Vec::new()) };
    let events = Mutex::new(Vec::new());
    let on_event = |event: RunEvent| events.lock().unwrap().push(event);
    let sink = RunSink { on_delta: &|_| {}, on_event: &on_event };
    let outcome = agent.run(&shop, &sink, &"r1".into(), "add two red mugs to my cart", Vec::new()).await;
    assert_eq!(outcome.status, tether_protocol::RunStatus::Completed);
    let events = events.into_inner().unwrap();
    let started = events
        .iter()
        .position(|e| matches!(e, RunEvent::ToolExecutionStart(ToolStartEvent { .. })))
        .expect("the call ran");
    let RunEvent::ToolExecutionStart(start) = &events[started] else { unreachable!() };
    let deltas: Vec<&ToolCallDeltaEvent> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolCallDelta(delta) => Some(delta),
            _ => None,
        })
        .collect();
    assert!(deltas.len() >= 3, "the arguments came in pieces: {deltas:?}");
    assert!(
        events[..started].iter().filter(|e| matches!(e, RunEvent::ToolCallDelta(_))).count() == deltas.len(),
        "every delta comes before the call runs"
    );
    assert!(deltas.iter().all(|d| d.call_id == start.call_id && d.tool == "cart_add"), "{deltas:?}");
    // Each delta says more than the one before; the last is the call's arguments.
    assert!(deltas.windows(2).all(|pair| pair[0].partial_args != pair[1].partial_args));
    assert_eq!(deltas.last().unwrap().partial_args, start.args);
    assert_eq!(
        *shop.executed.lock().unwrap(),
        [(start.call_id.clone(), json!({"productId": "mug-red", "quantity": 2}))]
    );
}
