//! A calendar app run against a real model, one JSON line per request: `calendar-local BASE_URL
//! TOOL_MODE [--conversation] [REQUEST…]`, the same interface and lines as `travel-local`. The
//! task benchmark's second app that no prompt or mechanism was tuned on (bench/tasks/tasks.mjs,
//! `CALENDAR_TASKS`): a week's events with opaque ids (`c1`…`c4`) shared as app state, times the
//! user says in words ("4pm") and the tools take as `HH:MM`, and requests no tool does (invite
//! someone, set a reminder), where the only right outcome is to say so.

use std::sync::Mutex;

use anyhow::Result;
use serde_json::{Value, json};
use tether_agent::{AgentLoop, BoxFuture, CallRef, ToolHost, ToolOutput};
use tether_protocol::{ContextEntry, ResultStatus, Risk, ToolSpec};

/// The days an event may be on.
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// One event of the week.
#[derive(Clone)]
struct Event {
    id: String,
    title: String,
    day: String,
    time: String,
    place: &'static str,
}

/// The calendar: the week's events, and what the agent did to it (`effects`: added, moved,
/// cancelled), read by the benchmark.
struct Calendar {
    events: Mutex<Vec<Event>>,
    effects: Mutex<Vec<Value>>,
    calls: Mutex<Vec<Value>>,
    next_id: Mutex<usize>,
}

/// `HH:MM`, 24 hours.
fn is_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 5
        && bytes[2] == b':'
        && text[..2].parse::<u8>().is_ok_and(|h| h < 24)
        && text[3..].parse::<u8>().is_ok_and(|m| m < 60)
        && bytes.iter().enumerate().all(|(i, b)| i == 2 || b.is_ascii_digit())
}

impl Calendar {
    fn new() -> Self {
        let event = |id: &str, title: &str, day: &str, time: &str, place| Event {
            id: id.into(),
            title: title.into(),
            day: day.into(),
            time: time.into(),
            place,
        };
        Calendar {
            events: Mutex::new(vec![
                event("c1", "Team standup", "Monday", "09:00", "Video call"),
                event("c2", "Dentist", "Tuesday", "15:00", "Dr. Lopez, 12 High Street"),
                event("c3", "Lunch with Ana", "Friday", "13:00", "Cafe Roma"),
                event("c4", "Project review with Bob", "Thursday", "11:00", "Room 2"),
            ]),
            effects: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            next_id: Mutex::new(5),
        }
    }

    fn ids(&self) -> Vec<Value> {
        self.events.lock().expect("events").iter().map(|e| json!(e.id)).collect()
    }
}

impl ToolHost for Calendar {
    fn tools(&self) -> Vec<ToolSpec> {
        let time = json!({"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$", "description": "24-hour time, HH:MM"});
        let day = json!({"type": "string", "enum": DAYS});
        let id = json!({"type": "string", "enum": self.ids()});
        vec![
            ToolSpec::new("open_event", "Show an event with its place.")
                .with_parameters(json!({"type": "object", "properties": {"id": id}, "required": ["id"]})),
            ToolSpec::new("add_event", "Put a new event on the calendar.")
                .with_parameters(json!({"type": "object", "properties": {"title": {"type": "string"}, "day": day, "time": time}, "required": ["title", "day", "time"]}))
                .with_risk(Risk::Low),
            ToolSpec::new("move_event", "Change the day or the time of an event.")
                .with_parameters(json!({"type": "object", "properties": {"id": id, "day": day, "time": time}, "required": ["id"]}))
                .with_risk(Risk::Low),
            ToolSpec::new("cancel_event", "Cancel an event and take it off the calendar.")
                .with_parameters(json!({"type": "object", "properties": {"id": id}, "required": ["id"]}))
                .with_risk(Risk::High),
        ]
    }

    fn context(&self) -> Vec<ContextEntry> {
        let events: Vec<Value> = self
            .events
            .lock()
            .expect("events")
            .iter()
            .map(|e| json!({"id": e.id, "title": e.title, "day": e.day, "time": e.time}))
            .collect();
        vec![ContextEntry {
            key: "events".into(),
            description: "This week's events".into(),
            value: Value::Array(events),
        }]
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        let invalid =
            |why: String| Err(ToolOutput::new(ResultStatus::InvalidArgs, format!("Validation args \"{name}\": {why}")));
        let Some(tool) = self.tools().into_iter().find(|t| t.name == name) else {
            return Err(ToolOutput::new(ResultStatus::UnknownTool, format!("Unknown tool \"{name}\".")));
        };
        let required = tool.parameters["required"].as_array().cloned().unwrap_or_default();
        for key in required.iter().filter_map(Value::as_str) {
            if !args.get(key).is_some_and(Value::is_string) {
                return invalid(format!("/{key}: a string is required"));
            }
        }
        if let Some(id) = args.get("id")
            && !self.ids().contains(id)
        {
            return invalid("/id: not one of the events on the calendar".into());
        }
        if let Some(day) = args.get("day")
            && !day.as_str().is_some_and(|d| DAYS.contains(&d))
        {
            return invalid(format!("/day: {day} is not one of {DAYS:?}"));
        }
        if let Some(time) = args.get("time")
            && !time.as_str().is_some_and(is_time)
        {
            return invalid(format!("/time: {time} is not a 24-hour time HH:MM"));
        }
        if name == "move_event" && args.get("day").is_none() && args.get("time").is_none() {
            return invalid("a new day or time is required".into());
        }
        self.calls.lock().expect("calls").push(json!({"name": name, "args": args}));
        Ok(())
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        let name = call.name;
        Box::pin(async move {
            let text = |key: &str| args[key].as_str().map(str::to_string);
            let mut events = self.events.lock().expect("events");
            let at = text("id").and_then(|id| events.iter().position(|e| e.id == id));
            let effect = |what: Value| self.effects.lock().expect("effects").push(what);
            let said = match (name, at) {
                ("open_event", Some(at)) => {
                    let e = &events[at];
                    format!("\"{}\" on {} at {}, at {}", e.title, e.day, e.time, e.place)
                }
                ("add_event", _) => {
                    let mut next = self.next_id.lock().expect("next id");
                    let e = Event {
                        id: format!("c{next}"),
                        title: text("title").unwrap_or_default(),
                        day: text("day").unwrap_or_default(),
                        time: text("time").unwrap_or_default(),
                        place: "",
                    };
                    *next += 1;
                    effect(json!({"did": "add", "id": e.id, "title": e.title, "day": e.day, "time": e.time}));
                    let said = format!("added \"{}\" on {} at {}", e.title, e.day, e.time);
                    events.push(e);
                    said
                }
                ("move_event", Some(at)) => {
                    let e = &mut events[at];
                    if let Some(day) = text("day") {
                        e.day = day;
                    }
                    if let Some(time) = text("time") {
                        e.time = time;
                    }
                    effect(json!({"did": "move", "id": e.id, "day": e.day, "time": e.time}));
                    format!("moved \"{}\" to {} at {}", e.title, e.day, e.time)
                }
                ("cancel_event", Some(at)) => {
                    let e = events.remove(at);
                    effect(json!({"did": "cancel", "id": e.id}));
                    format!("cancelled \"{}\" on {} at {}", e.title, e.day, e.time)
                }
                _ => return ToolOutput::new(ResultStatus::Error, "That event is not on the calendar any more."),
            };
            ToolOutput::new(ResultStatus::Ok, said)
        })
    }
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() -> Result<()> {
    let cli = travel_local::cli("calendar-local")?;
    let agent = travel_local::as_served(AgentLoop::new(travel_local::model(&cli)?).with_agent_name("calendar"));
    let mut calendar = Calendar::new();
    let mut history = Vec::new();
    for (n, request) in cli.requests.iter().enumerate() {
        if !cli.conversation {
            calendar = Calendar::new();
            history = Vec::new();
        }
        let effects_before = calendar.effects.lock().expect("effects").len();
        let before = {
            let events = calendar.events.lock().expect("events");
            let listed: Vec<Value> =
                events.iter().map(|e| json!({"id": e.id, "title": e.title, "day": e.day, "time": e.time})).collect();
            json!({"events": listed})
        };
        calendar.calls.lock().expect("calls").clear();
        let (messages, mut line) = travel_local::run_one(&agent, &calendar, n, request, history).await;
        history = messages;
        line.insert("before".into(), before);
        line.insert("bookings".into(), json!([]));
        line.insert(
            "effects".into(),
            Value::from(calendar.effects.lock().expect("effects")[effects_before..].to_vec()),
        );
        line.insert("calls".into(), Value::from(calendar.calls.lock().expect("calls").clone()));
        println!("{}", Value::Object(line));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_time;

    #[test]
    fn times_are_24_hour_hh_mm() {
        assert!(is_time("09:00") && is_time("23:59") && is_time("16:30"));
        assert!(!is_time("24:00") && !is_time("9:00") && !is_time("4pm") && !is_time("16:60") && !is_time("1a:00"));
    }
}
