//! Shared helpers of the declarative-hooks tests: a tool host with a shell tool, a run that
//! records everything, and readers for what the model read and what the hooks reported.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tether_agent::BoxFuture;
use tether_agent::{AgentLoop, CallRef, ChatMessage, ChatModel, NoteKind, RunOutcome, RunSink, ToolHost, ToolOutput};
use tether_hooks::{DeclarativeHooks, HookConfig};
use tether_protocol::{HookAudit, ResultStatus, RunEvent, ToolSpec};
use tether_scripted::ScriptedModel;

/// What the fake shell tool returns; it must never reach the model when a hook blocks it.
pub const RAW_RESULT: &str = "RAW-TOOL-RESULT-7f3a";

/// A session with a shell tool (`ExecuteShellCommand`) that records what it runs.
pub struct ShellHost {
    tools: Vec<ToolSpec>,
    pub executed: Mutex<Vec<Value>>,
    status: ResultStatus,
    /// The reasons of the approvals hooks asked the user for, in order.
    pub approvals_asked: Mutex<Vec<String>>,
    /// Whether the (simulated) user approves when asked.
    pub user_approves: bool,
}

impl ShellHost {
    /// A host whose tool succeeds with [`RAW_RESULT`].
    pub fn new() -> Self {
        ShellHost::with_status(ResultStatus::Ok)
    }

    /// A host whose tool ends with `status` (content [`RAW_RESULT`]).
    pub fn with_status(status: ResultStatus) -> Self {
        let tools = vec![
            ToolSpec::new("ExecuteShellCommand", "Runs a shell command on the server and returns its output.")
                .with_parameters(
                    json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
                ),
        ];
        ShellHost {
            tools,
            executed: Mutex::new(Vec::new()),
            status,
            approvals_asked: Mutex::new(Vec::new()),
            user_approves: true,
        }
    }

    /// How many times the tool ran.
    pub fn runs(&self) -> usize {
        self.executed.lock().unwrap().len()
    }
}

impl ToolHost for ShellHost {
    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.clone()
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        // The tool's schema, as the server would check it: a string `command` is required.
        if args.get("command").is_some_and(Value::is_string) {
            Ok(())
        } else {
            Err(ToolOutput::new(
                ResultStatus::InvalidArgs,
                format!("Validation args \"{name}\": /command must be a string"),
            ))
        }
    }

    fn execute<'a>(&'a self, _: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            self.executed.lock().unwrap().push(args);
            ToolOutput::new(self.status, RAW_RESULT)
        })
    }

    fn execute_with_approval<'a>(
        &'a self,
        call: CallRef<'a>,
        args: Value,
        reason: &'a str,
    ) -> BoxFuture<'a, ToolOutput> {
        self.approvals_asked.lock().unwrap().push(reason.to_string());
        if self.user_approves {
            self.execute(call, args)
        } else {
            Box::pin(async { ToolOutput::new(ResultStatus::Denied, "The user refused.") })
        }
    }
}

/// A finished run and everything it produced.
pub struct Run {
    pub outcome: RunOutcome,
    pub events: Vec<RunEvent>,
    pub text: String,
}

impl Run {
    /// The audit records of the hooks, in order.
    pub fn audits(&self) -> Vec<HookAudit> {
        self.events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Hook(audit) => Some(audit.clone()),
                _ => None,
            })
            .collect()
    }

    /// Tool results as the model read them.
    pub fn tool_messages(&self) -> Vec<String> {
        self.outcome
            .messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }

    /// Messages the server added for hooks (Stop feedback, additional context).
    pub fn hook_messages(&self) -> Vec<String> {
        self.outcome
            .messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Note { kind: NoteKind::Hook, content } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }

    /// Everything the model could read, as one text.
    pub fn model_read(&self) -> String {
        self.outcome
            .messages
            .iter()
            .map(|m| match m {
                ChatMessage::System { content } | ChatMessage::User { content } | ChatMessage::Note { content, .. } => {
                    content.clone()
                }
                ChatMessage::Assistant { content, .. } => content.clone(),
                ChatMessage::Tool { content, .. } => content.clone(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs `agent` for one message with a fresh history.
pub async fn run(agent: &AgentLoop, host: &dyn ToolHost, text: &str) -> Run {
    let events = Mutex::new(Vec::new());
    let streamed = Mutex::new(String::new());
    let on_delta = |delta: &str| streamed.lock().unwrap().push_str(delta);
    let on_event = |event: RunEvent| events.lock().unwrap().push(event);
    let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
    let outcome = agent.run(host, &sink, &"run-1".into(), text, Vec::new()).await;
    Run { outcome, events: events.into_inner().unwrap(), text: streamed.into_inner().unwrap() }
}

/// Hooks from YAML text, judged by the scripted model.
pub fn hooks(yaml: &str) -> DeclarativeHooks {
    hooks_judged_by(yaml, Arc::new(ScriptedModel::default()))
}

/// Hooks from YAML text, prompt hooks judged by `judge`.
pub fn hooks_judged_by(yaml: &str, judge: Arc<dyn ChatModel>) -> DeclarativeHooks {
    let config = HookConfig::from_yaml_str(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    DeclarativeHooks::new(config, judge).unwrap()
}

/// The scripted model with `hooks`.
pub fn agent(hooks: &DeclarativeHooks) -> AgentLoop {
    AgentLoop::new(Arc::new(ScriptedModel::default())).with_hooks(hooks.hooks())
}

/// The repository's `examples/hooks` directory.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hooks")
}

/// Hooks loaded from an example file.
pub fn example(name: &str) -> DeclarativeHooks {
    let config = HookConfig::load(&examples_dir().join(name)).unwrap_or_else(|e| panic!("{e}"));
    DeclarativeHooks::new(config, Arc::new(ScriptedModel::default())).unwrap()
}

/// A directory of the test's own, removed when dropped.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(name: &str) -> TestDir {
        let mut random = [0u8; 6];
        getrandom::fill(&mut random).unwrap();
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("tether-test-{name}-{suffix}"));
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }

    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `jq` is installed where hooks look for programs. The jq example needs it; a machine
/// without it fails that test with a clear message rather than skipping it.
pub fn require_jq() {
    let found = tether_hooks::HOOK_PATH.split(':').any(|dir| Path::new(dir).join("jq").is_file());
    assert!(found, "jq is required by examples/hooks/stop-command-jq.yaml: install it (apt-get install jq)");
}

/// Whether `python3` is installed where hooks look for programs (the Python examples and the
/// recording hooks need it); a machine without it fails with a clear message.
pub fn require_python3() {
    let found = tether_hooks::HOOK_PATH.split(':').any(|dir| Path::new(dir).join("python3").is_file());
    assert!(found, "python3 is required by the Python hook scripts: install it (apt-get install python3)");
}

/// Collects what is logged while it is the thread's default subscriber.
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
