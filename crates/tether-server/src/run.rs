//! A run started by `USER_MESSAGE`: the agent loop over the session's tools, its events and
//! streamed text sent as the session's frames, its end recorded (and a panic reported).

use std::sync::Arc;

use tether_protocol::{ErrorCode, RunEvent, RunStatus};

use crate::server::{App, Stats};
use crate::session::Session;
use crate::tools::SessionTools;
use tether_agent::RunSink;

pub(crate) fn start_run(app: &Arc<App>, session: &Arc<Session>, frame_id: String, text: String) {
    let run_id = session.next_run_id();
    let (start, started) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let (app, session, run_id, message_id) = (app.clone(), session.clone(), run_id.clone(), frame_id.clone());
        tokio::spawn(async move {
            // Wait until the run is registered, so that its end is always recorded after it.
            if started.await.is_err() {
                return;
            }
            let host = SessionTools { app: app.clone(), session: session.clone() };
            let on_delta = |delta: &str| session.send_delta(&run_id, delta, false, None);
            let on_event = |event: RunEvent| {
                tracing::debug!(run = run_id, ?event, "run event");
                session.send_event(Some(&run_id), event);
            };
            let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
            let history = session.take_history();
            let outcome = app.agent.run(&host, &sink, &run_id, &text, history).await;
            Stats::count(&app.stats.runs_ended);
            if outcome.status == RunStatus::Completed {
                Stats::count(&app.stats.runs_completed);
            }
            let (status, error) = (outcome.status, outcome.error);
            // The run is over before the client hears so: a message sent right after the last
            // AGENT_MESSAGE starts a new run instead of getting run_in_progress.
            session.end_run(&run_id, Some(outcome.messages));
            if let Some(error) = error {
                tracing::warn!(run = run_id, %error, "run failed");
                session.send_error(ErrorCode::RunFailed, error, None);
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
                tracing::info!(run = run_id, "{message}");
                session.send_error(ErrorCode::LimitExceeded, message, Some(message_id));
            }
            // The last frame of a run.
            session.send_delta(&run_id, "", true, Some(status));
        })
    };
    if !session.begin_run(&run_id, || task.abort_handle(), frame_id) {
        task.abort();
        return;
    }
    Stats::count(&app.stats.runs_started);
    let _ = start.send(());
    // If the run task panics outside a hook, the session still hears about it and can run again.
    let (app, session, run_id) = (app.clone(), session.clone(), run_id);
    tokio::spawn(async move {
        if let Err(error) = task.await {
            // Aborted (its session closed) or panicked: it ended all the same.
            Stats::count(&app.stats.runs_ended);
            if error.is_panic() {
                tracing::error!(run = run_id, "run panicked");
                session.send_delta(&run_id, "", true, Some(RunStatus::Failed));
                session.send_error(ErrorCode::RunFailed, "the run failed unexpectedly (internal error)", None);
                session.end_run(&run_id, None);
            }
        }
    });
}
