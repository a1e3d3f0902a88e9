//! A mail app run against a real model, one JSON line per request: `mail-local BASE_URL
//! TOOL_MODE [--conversation] [REQUEST…]`, the same interface and lines as `travel-local`. The
//! task benchmark's app that no prompt or mechanism was tuned on (bench/tasks/tasks.mjs,
//! `MAIL_TASKS`): opaque ids (`e1`…`e4`), an inbox shared as app state, and requests for things no
//! tool does (forward, mark as read), where the only right outcome is to say so.

use std::sync::Mutex;

use anyhow::Result;
use serde_json::{Value, json};
use tether_agent::{AgentLoop, BoxFuture, CallRef, ToolHost, ToolOutput};
use tether_protocol::{ContextEntry, ResultStatus, Risk, ToolSpec};

/// One email in the inbox.
#[derive(Clone)]
struct Mail {
    id: &'static str,
    from: &'static str,
    subject: &'static str,
    unread: bool,
    body: &'static str,
}

/// The mailbox: the inbox, and what the agent did to it (`effects`: archived, deleted, replied,
/// sent), read by the benchmark.
struct Mailbox {
    inbox: Mutex<Vec<Mail>>,
    effects: Mutex<Vec<Value>>,
    calls: Mutex<Vec<Value>>,
}

impl Mailbox {
    fn new() -> Self {
        let mail = |id, from, subject, unread, body| Mail { id, from, subject, unread, body };
        Mailbox {
            inbox: Mutex::new(vec![
                mail(
                    "e1",
                    "Ana Ruiz <ana@example.com>",
                    "Lunch on Friday?",
                    true,
                    "Hi! Are you free for lunch on Friday at 1pm? Ana",
                ),
                mail(
                    "e2",
                    "City Bank <no-reply@citybank.example>",
                    "Your November statement",
                    false,
                    "Your statement is ready. Balance: $1,240.50.",
                ),
                mail(
                    "e3",
                    "Bob Chen <bob@chen.example>",
                    "Invoice 221 for the website",
                    true,
                    "Invoice 221 is attached: $800, due December 15.",
                ),
                mail(
                    "e4",
                    "Carla Diaz <carla@example.com>",
                    "Slides for Monday",
                    true,
                    "Here are the slides for Monday's meeting: 14 slides, comments welcome.",
                ),
            ]),
            effects: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
        }
    }

    fn ids(&self) -> Vec<Value> {
        self.inbox.lock().expect("inbox").iter().map(|m| json!(m.id)).collect()
    }
}

impl ToolHost for Mailbox {
    fn tools(&self) -> Vec<ToolSpec> {
        let id = || json!({"type": "object", "properties": {"id": {"type": "string", "enum": self.ids()}}, "required": ["id"]});
        vec![
            ToolSpec::new("open_email", "Open an email and read all of it.").with_parameters(id()),
            ToolSpec::new("archive_email", "Move an email out of the inbox into the archive.")
                .with_parameters(id())
                .with_risk(Risk::Low),
            ToolSpec::new("delete_email", "Delete an email for good.").with_parameters(id()).with_risk(Risk::High),
            ToolSpec::new("reply_email", "Send a reply to the sender of an email.")
                .with_parameters(json!({"type": "object", "properties": {"id": {"type": "string", "enum": self.ids()}, "text": {"type": "string"}}, "required": ["id", "text"]}))
                .with_risk(Risk::High),
            ToolSpec::new("send_email", "Write and send a new email.")
                .with_parameters(json!({"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}}, "required": ["to", "subject", "body"]}))
                .with_risk(Risk::High),
        ]
    }

    fn context(&self) -> Vec<ContextEntry> {
        let inbox: Vec<Value> = self
            .inbox
            .lock()
            .expect("inbox")
            .iter()
            .map(|m| json!({"id": m.id, "from": m.from, "subject": m.subject, "unread": m.unread}))
            .collect();
        vec![ContextEntry { key: "inbox".into(), description: "The inbox".into(), value: Value::Array(inbox) }]
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        let Some(tool) = self.tools().into_iter().find(|t| t.name == name) else {
            return Err(ToolOutput::new(ResultStatus::UnknownTool, format!("Unknown tool \"{name}\".")));
        };
        let required = tool.parameters["required"].as_array().cloned().unwrap_or_default();
        for key in required.iter().filter_map(Value::as_str) {
            if !args.get(key).is_some_and(Value::is_string) {
                return Err(ToolOutput::new(
                    ResultStatus::InvalidArgs,
                    format!("Validation args \"{name}\": /{key}: a string is required"),
                ));
            }
        }
        if let Some(id) = args.get("id")
            && !self.ids().contains(id)
        {
            return Err(ToolOutput::new(
                ResultStatus::InvalidArgs,
                format!("Validation args \"{name}\": /id: not one of the emails in the inbox"),
            ));
        }
        self.calls.lock().expect("calls").push(json!({"name": name, "args": args}));
        Ok(())
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        let name = call.name;
        Box::pin(async move {
            let text = |key: &str| args[key].as_str().unwrap_or_default().to_string();
            let mut inbox = self.inbox.lock().expect("inbox");
            let at = inbox.iter().position(|m| m.id == text("id"));
            let effect = |what: Value| self.effects.lock().expect("effects").push(what);
            let said = match (name, at) {
                ("open_email", Some(at)) => {
                    inbox[at].unread = false;
                    let m = &inbox[at];
                    format!("From {}, \"{}\": {}", m.from, m.subject, m.body)
                }
                ("archive_email", Some(at)) => {
                    let m = inbox.remove(at);
                    effect(json!({"did": "archive", "id": m.id}));
                    format!("archived \"{}\" from {}", m.subject, m.from)
                }
                ("delete_email", Some(at)) => {
                    let m = inbox.remove(at);
                    effect(json!({"did": "delete", "id": m.id}));
                    format!("deleted \"{}\" from {}", m.subject, m.from)
                }
                ("reply_email", Some(at)) => {
                    effect(json!({"did": "reply", "id": inbox[at].id, "text": text("text")}));
                    format!("sent a reply to {}: \"{}\"", inbox[at].from, text("text"))
                }
                ("send_email", _) => {
                    effect(json!({"did": "send", "to": text("to"), "subject": text("subject"), "body": text("body")}));
                    format!("sent \"{}\" to {}", text("subject"), text("to"))
                }
                _ => return ToolOutput::new(ResultStatus::Error, "That email is not in the inbox any more."),
            };
            ToolOutput::new(ResultStatus::Ok, said)
        })
    }
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() -> Result<()> {
    let cli = travel_local::cli("mail-local")?;
    let agent = travel_local::as_served(AgentLoop::new(travel_local::model(&cli)?).with_agent_name("mail"));
    let mut mailbox = Mailbox::new();
    let mut history = Vec::new();
    for (n, request) in cli.requests.iter().enumerate() {
        if !cli.conversation {
            mailbox = Mailbox::new();
            history = Vec::new();
        }
        let effects_before = mailbox.effects.lock().expect("effects").len();
        let before = {
            let inbox = mailbox.inbox.lock().expect("inbox");
            let unread: Vec<&str> = inbox.iter().filter(|m| m.unread).map(|m| m.id).collect();
            json!({"inbox": inbox.iter().map(|m| m.id).collect::<Vec<_>>(), "unreadIds": unread, "unread": unread.len()})
        };
        mailbox.calls.lock().expect("calls").clear();
        let (messages, mut line) = travel_local::run_one(&agent, &mailbox, n, request, history).await;
        history = messages;
        line.insert("before".into(), before);
        line.insert("bookings".into(), json!([]));
        line.insert("effects".into(), Value::from(mailbox.effects.lock().expect("effects")[effects_before..].to_vec()));
        line.insert("calls".into(), Value::from(mailbox.calls.lock().expect("calls").clone()));
        println!("{}", Value::Object(line));
    }
    Ok(())
}
