//! The corporate-travel example: an agent books train seats, and company policy is enforced by
//! hooks rather than by asking the model nicely.
//!
//! - `before_tool_execution` refuses `book_ticket` with `seat_class: first`, and tells the model
//!   what to do instead; the model reads the reason and books tourist.
//! - `after_tool_execution` masks national ID numbers (`DNI 12.345.678` → `DNI ***`) in every
//!   tool result, so they never reach the model provider.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use serde_json::{Value, json};
use tether_agent::BoxFuture;
use tether_agent::{AgentLoop, CallRef, ChatModel, Hooks, ToolDecision, ToolHost, ToolOutput, ToolUse};
use tether_protocol::{ResultStatus, ToolSpec};

/// What the model reads when it tries to book first class.
pub const FIRST_CLASS_REFUSAL: &str =
    "Blocked by policy: first class needs a manager's approval. Book tourist instead.";

fn dni() -> &'static Regex {
    static DNI: OnceLock<Regex> = OnceLock::new();
    DNI.get_or_init(|| Regex::new(r"DNI\s*[0-9]+(?:\.[0-9]+)*").expect("the DNI pattern compiles"))
}

/// Replaces every `DNI <digits>` with `DNI ***`.
pub fn mask_ids(text: &str) -> String {
    dni().replace_all(text, "DNI ***").into_owned()
}

/// The company policy as hooks.
pub fn policy_hooks() -> Hooks {
    Hooks::new()
        .on_before_tool_execution(|call: ToolUse| async move {
            let first_class = call.name == "book_ticket" && call.args.get("seat_class") == Some(&json!("first"));
            Ok(if first_class {
                ToolDecision::Deny { reason: FIRST_CLASS_REFUSAL.into() }
            } else {
                ToolDecision::Allow
            })
        })
        .on_after_tool_execution(|_, mut output: ToolOutput| async move {
            output.content = mask_ids(&output.content);
            Ok(output)
        })
}

/// The travel agent around `model`, with the policy hooks.
pub fn travel_agent(model: Arc<dyn ChatModel>) -> AgentLoop {
    AgentLoop::new(model).with_agent_name("travel-desk").with_hooks(policy_hooks())
}

/// The travel desk's tools (server-side, in process). Results contain the traveller's DNI,
/// as a real booking system's would.
#[derive(Debug, Default)]
pub struct TravelDesk {
    bookings: std::sync::Mutex<Vec<Value>>,
}

impl TravelDesk {
    /// Every booking made, as `{"train": …, "seat_class": …}`.
    pub fn bookings(&self) -> Vec<Value> {
        self.bookings.lock().expect("bookings").clone()
    }
}

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec::new(name, description).with_parameters(parameters)
}

impl ToolHost for TravelDesk {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            spec(
                "find_trains",
                "List the trains to a destination on a date, with the fare for each class.",
                json!({"type": "object", "properties": {"to": {"type": "string"}, "date": {"type": "string"}}, "required": ["to", "date"]}),
            ),
            spec(
                "book_ticket",
                "Book one seat on a train for the employee who is asking.",
                json!({"type": "object", "properties": {"train": {"type": "integer"}, "seat_class": {"type": "string", "enum": ["first", "tourist"]}}, "required": ["train", "seat_class"]}),
            ),
        ]
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        let known = self.tools().into_iter().any(|t| t.name == name);
        if !known {
            return Err(ToolOutput::new(ResultStatus::UnknownTool, format!("Unknown tool \"{name}\".")));
        }
        if !args.is_object() {
            return Err(ToolOutput::new(
                ResultStatus::InvalidArgs,
                format!("Validation args \"{name}\": /: not an object"),
            ));
        }
        Ok(())
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        let name = call.name;
        Box::pin(async move {
            match name {
                "find_trains" => ToolOutput::new(
                    ResultStatus::Ok,
                    format!(
                        "Trains to {} on {}: Train 412 dep 08:10, first 95000 ARS, tourist 41000 ARS; Train 418 dep 17:30, \
                         first 99000 ARS, tourist 43000 ARS. Passenger DNI 30.123.456",
                        args["to"].as_str().unwrap_or("?"),
                        args["date"].as_str().unwrap_or("?")
                    ),
                ),
                _ => {
                    self.bookings.lock().expect("bookings").push(args.clone());
                    ToolOutput::new(
                        ResultStatus::Ok,
                        format!(
                            "Booked train {}, {} class, for DNI 12.345.678. Reference TRV-7731.",
                            args["train"],
                            args["seat_class"].as_str().unwrap_or("?")
                        ),
                    )
                }
            }
        })
    }
}
