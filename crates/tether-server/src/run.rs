//! A run started by `USER_MESSAGE` (or read back from the store after a restart and going on
//! from its last checkpoint): the agent loop over the session's tools, its events and streamed
//! text sent as the session's frames, its end recorded (and a panic reported).

use std::sync::Arc;

use tether_protocol::{ErrorCode, RunEvent, RunId, RunStatus};

use crate::app::App;
use crate::session::Session;
use crate::tools::SessionTools;
use tether_agent::{RunCheckpoint, RunSink};
use tracing::Instrument;

/// What a run starts from.
enum Start {
    /// The user's message.
    New(String),
    /// A checkpoint of a run the previous process did not finish.
    Resume(Box<RunCheckpoint>),
}

/// Starts a run for the user's message (or answers `ERROR run_in_progress`).
/// A message read before (sent again by a client after a reconnect: the run in progress's, or
/// one of the last runs' that ended) is ignored: the client gets its run's frames from the replay.
pub(crate) fn start_run(app: &Arc<App>, session: &Arc<Session>, frame_id: String, text: String) {
    if !session.first_reading(&frame_id) {
        tracing::debug!(session = session.id(), message = frame_id, "message read before; not run again");
        return;
    }
    let run_id = session.next_run_id();
    tracing::debug!(session = session.id(), run = %run_id, message = frame_id, "message read");
    spawn_run(app, session, run_id, frame_id, Start::New(text));
}

/// Goes on with the run a session read back from its store was in, if it was in one: the
/// client's text for it is reset to what it saw at the checkpoint, and the loop continues.
pub(crate) fn resume_run(app: &Arc<App>, session: &Arc<Session>) {
    let Some((checkpoint, message_id)) = session.run_to_resume() else { return };
    tracing::info!(
        session = session.id(),
        run = %checkpoint.run_id,
        "going on with the run from its checkpoint"
    );
    session.send_reset(&checkpoint.run_id);
    let run_id = checkpoint.run_id.clone();
    spawn_run(app, session, run_id, message_id, Start::Resume(Box::new(checkpoint)));
}

fn spawn_run(app: &Arc<App>, session: &Arc<Session>, run_id: RunId, frame_id: String, start: Start) {
    let (begin, begun) = tokio::sync::oneshot::channel::<()>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let text = match &start {
        Start::New(text) => Some(text.clone()),
        Start::Resume(_) => None,
    };
    // The run's trace: an `invoke_agent` span (GenAI conventions) over its model calls, tool
    // calls, hooks and store writes (docs/observability.md).
    let span = tracing::info_span!(
        target: tether_agent::SPAN_TARGET,
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", app.agent.agent_name()),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %app.agent.agent_name(),
        gen_ai.conversation.id = %session.id(),
        gen_ai.request.model = %app.agent.model().name(),
        tether.run.id = %run_id,
        tether.run.resumed = text.is_none(),
        tether.run.outcome = tracing::field::Empty,
        tether.run.turns = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    // What was said, only when the operator asked for it (`--trace-content`).
    let content = app.agent.trace_content();
    if let (true, Some(text)) = (content, &text) {
        span.record("gen_ai.input.messages", message_json("user", text).as_str());
    }
    let task = {
        let (app, session, run_id, message_id) = (app.clone(), session.clone(), run_id.clone(), frame_id.clone());
        let traced = span.clone();
        tokio::spawn(
            async move {
                // Wait until the run is registered, so that its end is always recorded after it.
                if begun.await.is_err() {
                    return;
                }
                let host = SessionTools { app: app.clone(), session: session.clone() };
                let on_delta = |delta: &str| session.send_delta(&run_id, delta, false, None);
                let on_event = |event: RunEvent| {
                    tracing::debug!(run = %run_id, ?event, "run event");
                    if let RunEvent::Hook(audit) = &event {
                        app.metrics.declarative_decision(audit);
                    }
                    session.send_event(Some(&run_id), event);
                };
                let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
                // A dropped sender (the session closed) is no stop: only `STOP_RUN` stops a run.
                let stop = async move {
                    if stopped.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                let outcome = match start {
                    Start::New(text) => {
                        let history = session.history();
                        app.agent.run_until(&host, &sink, &run_id, &text, history, stop).await
                    }
                    Start::Resume(checkpoint) => app.agent.resume(&host, &sink, *checkpoint, stop).await,
                };
                app.metrics.run_ended(outcome.status.as_str());
                if content {
                    span.record("gen_ai.output.messages", message_json("assistant", &outcome.answer).as_str());
                }
                span.record("tether.run.outcome", outcome.status.as_str());
                span.record("tether.run.turns", outcome.turns);
                if outcome.status != RunStatus::Completed {
                    span.record("otel.status_code", "error");
                }
                let (status, error) = (outcome.status, outcome.error);
                let mut errors = Vec::new();
                if let Some(error) = error {
                    tracing::warn!(run = %run_id, %error, "run failed");
                    errors.push((ErrorCode::RunFailed, error, None));
                }
                let limit = match status {
                    RunStatus::MaxTurns => {
                        Some(format!("the run stopped at the limit of {} turns (max_turns)", app.agent.max_turns()))
                    }
                    RunStatus::TimedOut => Some(format!(
                        "the run stopped at the limit of {} s (run timeout)",
                        app.agent.run_timeout().unwrap_or_default().as_secs_f64()
                    )),
                    _ => None,
                };
                if let Some(message) = limit {
                    tracing::info!(run = %run_id, "{message}");
                    errors.push((ErrorCode::LimitExceeded, message, Some(message_id.clone())));
                }
                // The run is over before the client hears so (a message sent right after the last
                // AGENT_MESSAGE starts a new run instead of getting run_in_progress), and its errors
                // and last frame leave with its end, in one write.
                session.end_run(&run_id, &message_id, Some(outcome.messages), status, errors);
            }
            .instrument(traced),
        )
    };
    if !session.begin_run(&run_id, || task.abort_handle(), stop, frame_id.clone(), text.as_deref()) {
        task.abort();
        return;
    }
    app.metrics.runs_started.inc();
    let _ = begin.send(());
    // If the run task panics outside a hook, the session still hears about it and can run again.
    let (app, session, run_id, message_id) = (app.clone(), session.clone(), run_id, frame_id);
    tokio::spawn(async move {
        if let Err(error) = task.await {
            // Aborted (its session closed, or the server is draining) or panicked: it ended all
            // the same.
            if error.is_panic() {
                tracing::error!(run = %run_id, "run panicked");
                let error = (ErrorCode::RunFailed, "the run failed unexpectedly (internal error)".to_string(), None);
                session.end_run(&run_id, &message_id, None, RunStatus::Failed, vec![error]);
                app.metrics.run_ended(RunStatus::Failed.as_str());
            } else {
                app.metrics.run_ended(RunStatus::Aborted.as_str());
            }
        }
    });
}

/// One message as the GenAI conventions write `gen_ai.input.messages` / `gen_ai.output.messages`.
fn message_json(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}
