//! Declarative hooks in the Azure SRE Agent format and in Claude Code's settings format:
//! `Stop`, `PostToolUse` and `PreToolUse` hooks (and Claude Code's `UserPromptSubmit` and
//! `SessionStart`) of `type: command` (a process) or `type: prompt` (a model judges), loaded
//! from YAML or JSON and run by the agent loop as one set of in-process [`Hooks`].
//!
//! Load a [`HookConfig`], build [`DeclarativeHooks`] with the model that judges prompt hooks, and
//! add [`DeclarativeHooks::hooks`] to an [`AgentLoop`](tether_agent::AgentLoop). Every hook call yields
//! one audit record: a tracing event and a [`RunEvent::Hook`] the client receives. A hook that
//! fails (crash, timeout, bad output, missing script, killed) never errors the run: its
//! `failMode` decides, and with `block` nothing the hook was guarding gets through. The format
//! and every difference from Azure are described in `docs/hooks.md`.

mod claude;
mod command;
mod config;
mod decision;
mod error;
mod prompt;
mod transcript;

pub use claude::{CLAUDE_DEFAULT_TIMEOUT_SECS, CLAUDE_MAX_TIMEOUT_SECS};
pub use command::{HOOK_PATH, MAX_STDERR_BYTES, MAX_STDOUT_BYTES};
pub use config::{
    DEFAULT_MAX_REJECTIONS, DEFAULT_TIMEOUT_SECS, FailMode, HookConfig, HookEvent, HookFormat, HookKind, HookLevel,
    HookSpec, MAX_MAX_REJECTIONS, MAX_SCRIPT_BYTES, MAX_TIMEOUT_SECS, ScriptInterpreter, ToolMatcher,
};
pub use decision::{HookDecision, HookVerdict};
pub use error::HooksError;
pub use prompt::{ARGUMENTS_PLACEHOLDER, MAX_JUDGE_TURNS, render_prompt};

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde_json::{Map, Value, json};
use tether_protocol::{HookAudit, HookDecidedBy, ResultStatus, RunEvent, RunId};

use self::command::{Exit, Invocation};
use self::transcript::Transcripts;
use tether_agent::{
    ChatModel, HOOK_LABEL, HookResult, Hooks, ProviderCall, RunBegin, RunBeginDecision, RunInfo, StopCheck,
    StopDecision, ToolDecision, ToolOutput, ToolUse,
};

/// A hook ready to run: its configuration and, for scripts, the file it was written to.
#[derive(Debug)]
struct PreparedHook {
    spec: HookSpec,
    script_path: Option<PathBuf>,
}

/// Everything the hooks share; the server-owned directory is removed when it is dropped.
struct Runtime {
    hooks: Vec<PreparedHook>,
    model: Arc<dyn ChatModel>,
    max_rejections: u32,
    agent_name: Option<String>,
    dir: PathBuf,
    next_workdir: AtomicU64,
    transcripts: Mutex<Transcripts>,
    /// `CLAUDE_PROJECT_DIR` for Claude Code hooks: the server's working directory at start.
    project_dir: PathBuf,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Declarative hooks, ready to be added to an agent loop. Cheap to clone.
#[derive(Clone)]
pub struct DeclarativeHooks {
    runtime: Arc<Runtime>,
}

impl std::fmt::Debug for DeclarativeHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclarativeHooks")
            .field("hooks", &self.runtime.hooks.iter().map(|h| h.spec.id.as_str()).collect::<Vec<_>>())
            .field("dir", &self.runtime.dir)
            .finish()
    }
}

fn io_error(what: &str, path: &Path, error: &std::io::Error) -> HooksError {
    HooksError::Io(format!("declarative hooks: cannot {what} {}: {error}", path.display()))
}

/// Makes a directory only its owner can enter.
fn private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

/// A fresh, private directory under the system's temporary directory.
fn create_runtime_dir() -> Result<PathBuf, HooksError> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|error| HooksError::Io(format!("no randomness: {error}")))?;
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("tether-hooks-{}-{suffix}", std::process::id()));
    private_dir(&dir).map_err(|error| io_error("create", &dir, &error))?;
    for sub in ["scripts", "transcripts", "work"] {
        let path = dir.join(sub);
        private_dir(&path).map_err(|error| io_error("create", &path, &error))?;
    }
    Ok(dir)
}

/// Shortens text for logs.
fn excerpt(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl DeclarativeHooks {
    /// Prepares the hooks of `config`: creates the server-owned directory (scripts, transcripts,
    /// working directories) and writes each `script` to a file there. Prompt hooks are judged by
    /// `model`.
    pub fn new(config: HookConfig, model: Arc<dyn ChatModel>) -> Result<DeclarativeHooks, HooksError> {
        let dir = create_runtime_dir()?;
        for warning in config.warnings() {
            tracing::warn!(target: "tether_hooks", "{warning}");
        }
        let max_rejections = config.max_rejections();
        let agent_name = config.agent_name().map(String::from);
        let mut hooks = Vec::with_capacity(config.hooks().len());
        for spec in config.into_hooks() {
            let script_path = match &spec.kind {
                HookKind::Script { script, interpreter } => {
                    let extension = match interpreter {
                        ScriptInterpreter::Bash => "sh",
                        ScriptInterpreter::Python3 => "py",
                    };
                    let name: String =
                        spec.id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                    let path = dir.join("scripts").join(format!("{name}.{extension}"));
                    transcript::write(&path, script).map_err(|error| io_error("write", &path, &error))?;
                    Some(path)
                }
                HookKind::Prompt { model: Some(name), .. } => {
                    tracing::info!(
                        target: "tether_hooks",
                        hook_id = %spec.id,
                        "`model: {name}` is recorded but this server has one model: {} judges this hook",
                        model.name()
                    );
                    None
                }
                _ => None,
            };
            hooks.push(PreparedHook { spec, script_path });
        }
        let transcripts = Mutex::new(Transcripts::new(dir.join("transcripts")));
        Ok(DeclarativeHooks {
            runtime: Arc::new(Runtime {
                hooks,
                model,
                max_rejections,
                agent_name,
                dir,
                next_workdir: AtomicU64::new(0),
                transcripts,
                project_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            }),
        })
    }

    /// The hooks' specs, agent-level first.
    pub fn specs(&self) -> impl Iterator<Item = &HookSpec> {
        self.runtime.hooks.iter().map(|h| &h.spec)
    }

    /// The custom agent's name from an ExtendedAgent document, if one was loaded.
    pub fn agent_name(&self) -> Option<&str> {
        self.runtime.agent_name.as_deref()
    }

    /// The server-owned directory of scripts, transcripts and hook working directories. It is
    /// removed when the last clone of these hooks (and of [`DeclarativeHooks::hooks`]) is dropped.
    pub fn dir(&self) -> &Path {
        &self.runtime.dir
    }

    /// The `maxRejections` bound of a run (the largest one written on a Stop hook, or 3).
    pub fn max_rejections(&self) -> u32 {
        self.runtime.max_rejections
    }

    /// Runs one hook with the given context, as the loop would, and returns its verdict (the
    /// audit record goes to the log only). `None` if no hook has that id. For tests and
    /// benchmarks.
    pub async fn call(&self, hook_id: &str, context: &Value) -> Option<HookVerdict> {
        let hook = self.runtime.hooks.iter().find(|h| h.spec.id == hook_id)?;
        let transcript = context.get("execution_summary").and_then(Value::as_str).map(PathBuf::from);
        let started = Instant::now();
        let verdict = self.runtime.invoke(hook, context, transcript.as_deref()).await;
        self.runtime.audit(None, &hook.spec, &verdict, started);
        Some(verdict)
    }

    /// The in-process hooks that run these declarative hooks. Only the events that have hooks
    /// are set, so a configuration without Stop hooks does not hold the streamed answer back.
    pub fn hooks(&self) -> Hooks {
        let runtime = &self.runtime;
        let has = |event: HookEvent| runtime.hooks.iter().any(|h| h.spec.event == event);
        let mut hooks = Hooks::new();
        if runtime.hooks.is_empty() {
            return hooks;
        }
        let shared = self.runtime.clone();
        hooks = hooks.on_before_provider_call(move |call: ProviderCall| {
            let runtime = shared.clone();
            async move {
                runtime.lock_transcripts().snapshot(&call.run.run_id, &call.messages);
                Ok(call)
            }
        });
        if has(HookEvent::UserPromptSubmit) || has(HookEvent::SessionStart) {
            let shared = self.runtime.clone();
            hooks = hooks.on_before_run(move |begin: RunBegin| {
                let runtime = shared.clone();
                async move { runtime.before_run(begin).await }
            });
        }
        if has(HookEvent::PreToolUse) {
            let shared = self.runtime.clone();
            hooks = hooks.on_before_tool_execution(move |call: ToolUse| {
                let runtime = shared.clone();
                async move { runtime.pre_tool_use(call).await }
            });
        }
        if has(HookEvent::PreToolUse) || has(HookEvent::PostToolUse) {
            let shared = self.runtime.clone();
            hooks = hooks.on_after_tool_execution(move |call: ToolUse, output: ToolOutput| {
                let runtime = shared.clone();
                async move { runtime.post_tool_use(call, output).await }
            });
        }
        if has(HookEvent::Stop) {
            let shared = self.runtime.clone();
            hooks = hooks.on_stop(move |check: StopCheck| {
                let runtime = shared.clone();
                async move { runtime.stop(check).await }
            });
        }
        hooks
    }
}

/// The fields every context of `spec`'s format has.
fn common_context(spec: &HookSpec, run: &RunInfo, transcript: &Path) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert("hook_event_name".into(), json!(spec.event.as_str()));
    match spec.format {
        HookFormat::Azure => {
            context.insert("agent_name".into(), json!(run.agent_name));
            context.insert("current_turn".into(), json!(run.turn));
            context.insert("max_turns".into(), json!(run.max_turns));
            context.insert("execution_summary".into(), json!(transcript.display().to_string()));
        }
        HookFormat::ClaudeCode => {
            context.insert("session_id".into(), json!(run.run_id));
            context.insert("transcript_path".into(), json!(transcript.display().to_string()));
            context.insert("permission_mode".into(), json!("default"));
        }
    }
    context
}

/// The context of a tool event: the call, and for `PostToolUse` its result.
fn tool_context(spec: &HookSpec, call: &ToolUse, transcript: &Path, output: Option<&ToolOutput>) -> Value {
    let mut context = common_context(spec, &call.run, transcript);
    context.insert("tool_name".into(), json!(call.name));
    context.insert("tool_input".into(), call.args.clone());
    match (spec.format, output) {
        (HookFormat::Azure, Some(output)) => {
            context.insert("tool_result".into(), json!(output.content));
            context.insert("tool_succeeded".into(), json!(output.status.is_ok()));
        }
        (HookFormat::ClaudeCode, output) => {
            context.insert("tool_use_id".into(), json!(call.call_id));
            if let Some(output) = output {
                let response = json!({"status": output.status.as_str(), "success": output.status.is_ok(), "content": output.content});
                context.insert("tool_response".into(), response);
            }
        }
        (HookFormat::Azure, None) => {}
    }
    Value::Object(context)
}

/// The verdict of a hook that answered.
fn answered(answer: decision::Answer, exit_code: Option<i32>) -> HookVerdict {
    HookVerdict {
        decision: answer.decision,
        reason: answer.reason,
        additional_context: answer.additional_context,
        updated_input: answer.updated_input,
        decided_by: HookDecidedBy::Hook,
        exit_code,
        failure: None,
    }
}

/// A labelled message carrying a hook's `additionalContext`.
fn context_message(spec: &HookSpec, text: &str) -> String {
    format!("{HOOK_LABEL}{} {} added context] {text}", spec.event, spec.id)
}

impl Runtime {
    fn lock_transcripts(&self) -> std::sync::MutexGuard<'_, Transcripts> {
        self.transcripts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a run's transcript file; `None` (and a warning) if it cannot be written.
    fn write_transcript(&self, run_id: &RunId, text: &str) -> Option<PathBuf> {
        let path = self.lock_transcripts().path(run_id);
        match transcript::write(&path, text) {
            Ok(()) => Some(path),
            Err(error) => {
                tracing::warn!(target: "tether_hooks", "cannot write the transcript {}: {error}", path.display());
                None
            }
        }
    }

    /// Emits the audit record of one hook call: a tracing event, and a run event if in a run.
    fn audit(&self, run: Option<&RunInfo>, spec: &HookSpec, verdict: &HookVerdict, started: Instant) {
        let record = HookAudit {
            hook_id: spec.id.clone(),
            level: spec.level.as_str().into(),
            hook_event: spec.event.as_str().into(),
            decision: verdict.decision.as_str().into(),
            reason: verdict.reason.clone().or_else(|| verdict.failure.clone()),
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            exit_code: verdict.exit_code,
            decided_by: verdict.decided_by,
        };
        let decided_by = match record.decided_by {
            HookDecidedBy::Hook => "hook",
            HookDecidedBy::Timeout => "timeout",
            HookDecidedBy::FailMode => "fail_mode",
        };
        macro_rules! record {
            ($level:ident) => {
                tracing::$level!(
                    target: "tether_hooks",
                    run_id = run.map(|r| r.run_id.as_str()),
                    hook_id = %record.hook_id,
                    level = %record.level,
                    event = %record.hook_event,
                    decision = %record.decision,
                    reason = record.reason.as_deref(),
                    duration_ms = record.duration_ms,
                    exit_code = record.exit_code,
                    decided_by,
                    "hook call"
                )
            };
        }
        if verdict.failure.is_some() {
            record!(warn);
        } else {
            record!(info);
        }
        if let Some(run) = run {
            run.events.emit(RunEvent::Hook(record));
        }
    }

    /// A verdict for a hook that failed: its fail mode decides.
    /// `what` names the failure in the reason the model reads (never any of the hook's output);
    /// `details`, when given, replace it in the audit record and the log.
    fn failed(
        spec: &HookSpec,
        decided_by: HookDecidedBy,
        what: &str,
        details: Option<String>,
        exit_code: Option<i32>,
    ) -> HookVerdict {
        let reason = (spec.fail_mode == FailMode::Block)
            .then(|| format!("Hook {} failed ({what}) and its failMode is block.", spec.id));
        let failure = details.unwrap_or_else(|| what.to_string());
        HookVerdict {
            decision: match spec.fail_mode {
                FailMode::Allow => HookDecision::Allow,
                FailMode::Block => HookDecision::Block,
            },
            reason,
            additional_context: None,
            updated_input: None,
            decided_by,
            exit_code,
            failure: Some(failure),
        }
    }

    /// Runs one hook and interprets its answer.
    async fn invoke(&self, hook: &PreparedHook, context: &Value, transcript: Option<&Path>) -> HookVerdict {
        let spec = &hook.spec;
        match &spec.kind {
            HookKind::Prompt { prompt, .. } => {
                let judged =
                    tokio::time::timeout(spec.timeout, prompt::judge(&*self.model, prompt, context, transcript)).await;
                match judged {
                    Err(_) => Self::failed(
                        spec,
                        HookDecidedBy::Timeout,
                        &format!("timed out after {} s", spec.timeout.as_secs()),
                        None,
                        None,
                    ),
                    Ok(Err(error)) => Self::failed(
                        spec,
                        HookDecidedBy::FailMode,
                        "model error",
                        Some(format!("model error: {error}")),
                        None,
                    ),
                    Ok(Ok(text)) => match decision::parse_model_answer(&text) {
                        Ok(answer) => answered(answer, None),
                        Err(problem) => Self::failed(
                            spec,
                            HookDecidedBy::FailMode,
                            "invalid answer",
                            Some(format!("invalid answer: {problem}: {}", excerpt(&text, 200))),
                            None,
                        ),
                    },
                }
            }
            HookKind::Command { command } => {
                let invocation = Invocation {
                    program: "/bin/bash",
                    args: vec![OsStr::new("-c"), OsStr::new(command)],
                    env: Vec::new(),
                };
                self.run_command(spec, invocation, context).await
            }
            HookKind::Script { interpreter, .. } => {
                let path = hook.script_path.as_deref().unwrap_or(Path::new("/nonexistent")).as_os_str();
                let invocation = match interpreter {
                    ScriptInterpreter::Bash => Invocation { program: "/bin/bash", args: vec![path], env: Vec::new() },
                    ScriptInterpreter::Python3 => {
                        Invocation { program: "/usr/bin/env", args: vec![OsStr::new("python3"), path], env: Vec::new() }
                    }
                };
                self.run_command(spec, invocation, context).await
            }
        }
    }

    async fn run_command(&self, spec: &HookSpec, mut invocation: Invocation<'_>, context: &Value) -> HookVerdict {
        let number = self.next_workdir.fetch_add(1, Ordering::Relaxed);
        let workdir = self.dir.join("work").join(number.to_string());
        if let Err(error) = private_dir(&workdir) {
            return Self::failed(
                spec,
                HookDecidedBy::FailMode,
                "could not be started",
                Some(format!("cannot create its working directory: {error}")),
                None,
            );
        }
        let mut context = context.clone();
        if spec.format == HookFormat::ClaudeCode {
            // As Claude Code does: the project directory in the environment, `cwd` in the input.
            invocation.env.push(("CLAUDE_PROJECT_DIR", self.project_dir.clone().into_os_string()));
            context["cwd"] = json!(workdir.display().to_string());
        }
        let input = serde_json::to_vec(&context).unwrap_or_default();
        let finished = command::run(invocation, input, spec.timeout, &workdir).await;
        let _ = std::fs::remove_dir_all(&workdir);
        let stderr = String::from_utf8_lossy(&finished.stderr).trim().to_string();
        if !stderr.is_empty() && finished.exit != Exit::Code(2) {
            tracing::info!(target: "tether_hooks", hook_id = %spec.id, stderr = %excerpt(&stderr, 4096), "hook stderr");
        }
        match finished.exit {
            Exit::Code(0) => {
                let stdout = String::from_utf8_lossy(&finished.stdout);
                let parsed = match spec.format {
                    HookFormat::ClaudeCode => decision::parse_claude_answer(spec.event, &stdout),
                    HookFormat::Azure if stdout.trim().is_empty() => Ok(decision::Answer::allow()),
                    HookFormat::Azure => decision::parse_answer(&stdout),
                };
                match parsed {
                    Ok(answer) => answered(answer, Some(0)),
                    Err(problem) => Self::failed(
                        spec,
                        HookDecidedBy::FailMode,
                        "invalid output",
                        Some(format!("invalid output: {problem}")),
                        Some(0),
                    ),
                }
            }
            // Claude Code: exit 2 at SessionStart only shows stderr to the user; nothing to block.
            Exit::Code(2) if spec.event == HookEvent::SessionStart => {
                tracing::info!(target: "tether_hooks", hook_id = %spec.id, "SessionStart hook exited 2: {}", excerpt(&stderr, 4096));
                answered(decision::Answer::allow(), Some(2))
            }
            Exit::Code(2) => HookVerdict {
                decision: HookDecision::Block,
                reason: Some(stderr).filter(|s| !s.is_empty()),
                additional_context: None,
                updated_input: None,
                decided_by: HookDecidedBy::Hook,
                exit_code: Some(2),
                failure: None,
            },
            Exit::Code(code) => {
                Self::failed(spec, HookDecidedBy::FailMode, &format!("exit code {code}"), None, Some(code))
            }
            Exit::Signal(signal) => {
                Self::failed(spec, HookDecidedBy::FailMode, &format!("killed by signal {signal}"), None, None)
            }
            Exit::TimedOut => Self::failed(
                spec,
                HookDecidedBy::Timeout,
                &format!("timed out after {} s", spec.timeout.as_secs()),
                Some(format!("timed out after {} s; its process group was killed", spec.timeout.as_secs())),
                None,
            ),
            Exit::StdoutOverflow => Self::failed(
                spec,
                HookDecidedBy::FailMode,
                &format!("more than {MAX_STDOUT_BYTES} bytes on stdout"),
                None,
                None,
            ),
            Exit::SpawnFailed(error) => Self::failed(
                spec,
                HookDecidedBy::FailMode,
                "could not be started",
                Some(format!("could not be started: {error}")),
                None,
            ),
        }
    }

    /// The hooks of `event` that apply to `tool`, in order.
    fn matching<'a>(&'a self, event: HookEvent, tool: &'a str) -> impl Iterator<Item = &'a PreparedHook> + 'a {
        self.hooks.iter().filter(move |h| h.spec.event == event && h.spec.applies_to(tool))
    }

    /// `PreToolUse`: block means the tool never runs and the model reads the reason; `ask`
    /// escalates the call to the page's approval dialog whatever its risk; `updatedInput`
    /// replaces the arguments (later hooks see the new ones; the loop checks them against the
    /// schema before anything runs).
    async fn pre_tool_use(&self, mut call: ToolUse) -> HookResult<ToolDecision> {
        let hooks: Vec<&PreparedHook> = self.matching(HookEvent::PreToolUse, &call.name).collect();
        if hooks.is_empty() {
            return Ok(ToolDecision::Allow);
        }
        let extra = format!("[assistant is about to call tool {} ({})] {}\n", call.name, call.call_id, call.args);
        let text = self.lock_transcripts().text(&call.run.run_id, None, &extra);
        let transcript = self.write_transcript(&call.run.run_id, &text);
        let path = transcript.clone().unwrap_or_default();
        let (mut args, mut ask) = (None, None);
        for hook in hooks {
            let context = tool_context(&hook.spec, &call, &path, None);
            let started = Instant::now();
            let verdict = self.invoke(hook, &context, transcript.as_deref()).await;
            self.audit(Some(&call.run), &hook.spec, &verdict, started);
            if let Some(added) = &verdict.additional_context {
                let mut transcripts = self.lock_transcripts();
                let run = transcripts.run(&call.run.run_id);
                run.pending_context.entry(call.call_id.clone()).or_default().push(context_message(&hook.spec, added));
            }
            match verdict.decision {
                HookDecision::Block => {
                    self.lock_transcripts().run(&call.run.run_id).blocked_calls.insert(call.call_id.clone());
                    let reason = verdict.reason.unwrap_or_else(|| format!("Blocked by hook {}.", hook.spec.id));
                    return Ok(ToolDecision::Deny { reason });
                }
                HookDecision::Ask => {
                    let reason =
                        verdict.reason.unwrap_or_else(|| format!("hook {} asks for your approval", hook.spec.id));
                    ask = Some(reason);
                }
                HookDecision::Allow => {}
            }
            if let Some(updated) = verdict.updated_input {
                call.args = updated.clone();
                args = Some(updated);
            }
        }
        Ok(if args.is_none() && ask.is_none() { ToolDecision::Allow } else { ToolDecision::Change { args, ask } })
    }

    /// `UserPromptSubmit` (block refuses the message; context is added after it) and, when a
    /// conversation starts, `SessionStart` (its context and plain stdout are added).
    async fn before_run(&self, begin: RunBegin) -> HookResult<RunBeginDecision> {
        let mut context = Vec::new();
        // The lock is released before writing (writing takes it again).
        let text = self.lock_transcripts().text(&begin.run.run_id, None, "");
        let transcript = self.write_transcript(&begin.run.run_id, &text);
        let path = transcript.clone().unwrap_or_default();
        let starts: Vec<&PreparedHook> =
            if begin.first { self.matching(HookEvent::SessionStart, "startup").collect() } else { Vec::new() };
        for hook in starts {
            let mut fields = common_context(&hook.spec, &begin.run, &path);
            fields.insert("source".into(), json!("startup"));
            let started = Instant::now();
            let verdict = self.invoke(hook, &Value::Object(fields), transcript.as_deref()).await;
            self.audit(Some(&begin.run), &hook.spec, &verdict, started);
            context.extend(verdict.additional_context.map(|added| context_message(&hook.spec, &added)));
        }
        for hook in self.matching(HookEvent::UserPromptSubmit, "") {
            let mut fields = common_context(&hook.spec, &begin.run, &path);
            fields.insert("prompt".into(), json!(begin.text));
            let started = Instant::now();
            let verdict = self.invoke(hook, &Value::Object(fields), transcript.as_deref()).await;
            self.audit(Some(&begin.run), &hook.spec, &verdict, started);
            if verdict.decision == HookDecision::Block {
                let reason = verdict.reason.unwrap_or_else(|| format!("refused by hook {}", hook.spec.id));
                return Ok(RunBeginDecision::Refuse { reason });
            }
            context.extend(verdict.additional_context.map(|added| context_message(&hook.spec, &added)));
        }
        Ok(RunBeginDecision::Continue { context })
    }

    /// `PostToolUse`: after every call (failed ones too), except those a `PreToolUse` hook
    /// blocked. Block replaces what the model reads with the reason; every
    /// `additionalContext` is added, in hook order, as a labelled message.
    async fn post_tool_use(&self, call: ToolUse, mut output: ToolOutput) -> HookResult<ToolOutput> {
        let run_id = call.run.run_id.clone();
        let blocked_before = {
            let mut transcripts = self.lock_transcripts();
            let run = transcripts.run(&run_id);
            if let Some(pending) = run.pending_context.remove(&call.call_id) {
                output.extra_context.extend(pending);
            }
            run.blocked_calls.remove(&call.call_id)
        };
        let hooks: Vec<&PreparedHook> =
            if blocked_before { Vec::new() } else { self.matching(HookEvent::PostToolUse, &call.name).collect() };
        if !hooks.is_empty() {
            let extra = format!(
                "[assistant called tool {} ({})] {}\n[tool {} ({}) returned]\n{}\n",
                call.name,
                call.call_id,
                call.args,
                call.name,
                call.call_id,
                transcript::data(&output.for_model())
            );
            let text = self.lock_transcripts().text(&run_id, None, &extra);
            let transcript = self.write_transcript(&run_id, &text);
            let path = transcript.clone().unwrap_or_default();
            for hook in hooks {
                let context = tool_context(&hook.spec, &call, &path, Some(&output));
                let started = Instant::now();
                let verdict = self.invoke(hook, &context, transcript.as_deref()).await;
                self.audit(Some(&call.run), &hook.spec, &verdict, started);
                if let Some(added) = &verdict.additional_context {
                    output.extra_context.push(context_message(&hook.spec, added));
                }
                if verdict.decision == HookDecision::Block {
                    let reason = verdict.reason.unwrap_or_else(|| format!("Blocked by hook {}.", hook.spec.id));
                    output = ToolOutput {
                        status: ResultStatus::Denied,
                        content: reason,
                        extra_context: output.extra_context,
                    };
                    break;
                }
            }
        }
        self.lock_transcripts().add_result(&run_id, &call.name, &call.call_id, &output.for_model());
        Ok(output)
    }

    /// `Stop`: the first rejection with a reason sends the answer back (or caps the run once
    /// `maxRejections` rejections were sent back); a rejection without a reason is an approval.
    async fn stop(&self, check: StopCheck) -> HookResult<StopDecision> {
        let run_id = check.run.run_id.clone();
        let extra = format!(
            "[assistant: final answer, under review by Stop hooks]\n{}\n",
            transcript::data(&check.final_output)
        );
        let text = self.lock_transcripts().text(&run_id, Some(&check.messages), &extra);
        let transcript = self.write_transcript(&run_id, &text);
        let path = transcript.clone().unwrap_or_default();
        for hook in self.matching(HookEvent::Stop, "") {
            let mut context = common_context(&hook.spec, &check.run, &path);
            context.insert("stop_hook_active".into(), json!(check.rejection_count > 0));
            match hook.spec.format {
                HookFormat::Azure => {
                    context.insert("final_output".into(), json!(check.final_output));
                    context.insert("stop_rejection_count".into(), json!(check.rejection_count));
                }
                HookFormat::ClaudeCode => {
                    context.insert("last_assistant_message".into(), json!(check.final_output));
                }
            }
            let started = Instant::now();
            let mut verdict = self.invoke(hook, &Value::Object(context), transcript.as_deref()).await;
            if verdict.decision == HookDecision::Block && verdict.reason.is_none() {
                tracing::warn!(
                    target: "tether_hooks",
                    hook_id = %hook.spec.id,
                    "Stop hook {} rejected the answer without a reason: counted as approval (give a reason to reject)",
                    hook.spec.id
                );
                verdict.decision = HookDecision::Allow;
                verdict.reason = Some("rejected without a reason: counted as approval".into());
            }
            self.audit(Some(&check.run), &hook.spec, &verdict, started);
            if verdict.decision == HookDecision::Block {
                if check.rejection_count >= self.max_rejections {
                    tracing::warn!(
                        target: "tether_hooks",
                        run_id = %run_id,
                        "Stop hook {} rejected the answer again after {} rejections (maxRejections): the run is capped",
                        hook.spec.id,
                        check.rejection_count
                    );
                    return Ok(StopDecision::Capped);
                }
                let reason = verdict.reason.unwrap_or_default();
                return Ok(StopDecision::Reject { reason, hook: hook.spec.id.clone() });
            }
        }
        Ok(StopDecision::Accept)
    }
}
