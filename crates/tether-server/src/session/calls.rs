//! The page's tool calls of a session: a `TOOL_CALL` out and its wait for the `TOOL_RESULT` (across
//! reconnects, up to the timeout), on another page when the call is made there, a result applied
//! once, a call resumed after a restart.

use std::time::Duration;

use serde_json::Value;
use tether_agent::{BoxFuture, ToolOutput};
use tether_core::session::ResultOutcome;
use tether_core::validate::{CompiledSchema, format_validation_errors};
use tether_protocol::{CallId, NavigateEvent, ResultStatus, RunEvent, RunId, ToolCall, ToolResult};
use tokio::sync::oneshot;

use super::{Applied, Session, Waiter, monotonic_ms};
use crate::persist::Job;

impl Session {
    /// How many tool calls are waiting for the client's result.
    pub(crate) fn pending_calls(&self) -> usize {
        self.lock().machine.pending().len()
    }

    /// Asks the page to open `url` for the call `call_id` of `name` (the `navigate` run event)
    /// and waits, at most `wait`, until a `CONTEXT_UPDATE` from that page offers `name` for
    /// `args`. Once the wait is over, a page that is at `url` and refuses the call (what it offers
    /// changed since it was remembered: the poster left the cart) says why
    /// ([`NotOpened::Refused`]); one that never got there is [`NotOpened::Away`].
    pub(crate) async fn open_page(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        name: &str,
        url: &str,
        args: &Value,
        wait: Duration,
    ) -> Result<(), NotOpened> {
        // Where the call stands on the page as it is now.
        let now = || {
            if self.lock().page.as_ref().is_none_or(|page| page.url != url) {
                return Err(NotOpened::Away);
            }
            match self.check_client_call(name, args) {
                Some(Ok(())) => Ok(()),
                Some(Err(refused)) => Err(NotOpened::Refused(refused)),
                None => Err(NotOpened::Refused(ToolOutput::new(
                    ResultStatus::UnknownTool,
                    format!("{name} is not on it now"),
                ))),
            }
        };
        let deadline = tokio::time::Instant::now() + wait;
        let event = NavigateEvent { call_id: call_id.clone(), tool: name.to_string(), url: url.to_string() };
        self.send_event(Some(run_id), RunEvent::Navigate(event));
        loop {
            let applied = self.context_applied.notified();
            tokio::pin!(applied);
            applied.as_mut().enable();
            let ready = now();
            if ready.is_ok() {
                return ready;
            }
            if tokio::time::timeout_at(deadline, applied).await.is_err() {
                return now();
            }
        }
    }

    /// Checks a call of a client tool: it exists and the arguments match its schema.
    pub(crate) fn check_client_call(&self, name: &str, args: &Value) -> Option<Result<(), ToolOutput>> {
        let schema = self.lock().schemas.get(name).cloned()?;
        let errors = schema.errors(args);
        if errors.is_empty() {
            Some(Ok(()))
        } else {
            Some(Err(ToolOutput::new(ResultStatus::InvalidArgs, format_validation_errors(name, &errors))))
        }
    }

    /// Sends a `TOOL_CALL` and waits for its result (across reconnects, up to the timeout).
    pub(crate) async fn call_client_tool(&self, frame: ToolCall) -> ToolOutput {
        let call_id = frame.call_id.clone();
        let name = frame.name.clone();
        let (reply, answer) = oneshot::channel();
        {
            let mut state = self.lock();
            // The agent loop admits no more calls than the limit; this holds it for any caller.
            if let Err(limit) = state.machine.call(frame, monotonic_ms()) {
                return ToolOutput::new(
                    ResultStatus::Denied,
                    format!("Not run: {limit} tool calls are already waiting for the client (max_pending_calls)."),
                );
            }
            state.waiters.insert(call_id.clone(), Waiter { tool: name.clone(), reply });
            state.dirty = true;
            state.flush();
        }
        self.wait_for(call_id, name, answer).await
    }

    /// For a run that goes on after a restart: the result of a call it had asked for, if this
    /// session can still give it — kept since it arrived, or still waited for (it is sent again
    /// with the other waiting calls when the client resumes). `None`: the call never left.
    pub(crate) fn resume_call(&self, call_id: &CallId) -> Option<BoxFuture<'_, ToolOutput>> {
        let mut state = self.lock();
        let kept = state.stored_run.as_ref().and_then(|run| run.results.iter().find(|(id, _)| id == call_id));
        if let Some((_, output)) = kept {
            let output = output.clone();
            return Some(Box::pin(async move { output }));
        }
        let Some(call) = state.machine.pending().iter().find(|call| call.call_id == *call_id).cloned() else {
            // Sent and settled, but its result is not kept: never sent again (the page would not
            // run it twice, and nothing would answer), the model is told it may have happened.
            if state.machine.settled(call_id) {
                tracing::warn!(
                    session = self.id,
                    call = %call_id,
                    "a resumed run's call was settled without a kept result"
                );
                let output = ToolOutput::new(
                    ResultStatus::Interrupted,
                    "The call was interrupted by a restart of the server: whether it took effect is unknown; check \
                     before trying again.",
                );
                return Some(Box::pin(async move { output }));
            }
            return None;
        };
        let name = serde_json::from_str::<Value>(&call.text)
            .ok()
            .and_then(|frame| frame["name"].as_str().map(String::from))
            .unwrap_or_default();
        let (reply, answer) = oneshot::channel();
        state.waiters.insert(call_id.clone(), Waiter { tool: name.clone(), reply });
        let call_id = call_id.clone();
        Some(Box::pin(self.wait_for(call_id, name, answer)))
    }

    pub(super) async fn wait_for(
        &self,
        call_id: CallId,
        name: String,
        mut answer: oneshot::Receiver<ToolOutput>,
    ) -> ToolOutput {
        loop {
            let deadline = {
                let state = self.lock();
                state.machine.pending().iter().find(|call| call.call_id == call_id).map(|call| call.deadline_ms)
            };
            // Waits for the answer, or for the deadline: then the session times the call out
            // (which answers with a timeout unless the result came first).
            let wait = deadline.map(|at| Duration::from_millis(at.saturating_sub(monotonic_ms())));
            let timed = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                output = &mut answer => {
                    return output.unwrap_or_else(|_| {
                        ToolOutput::new(ResultStatus::Error, format!("The client went away before \"{name}\" answered."))
                    });
                }
                () = timed => self.poll_timeouts(),
            }
        }
    }

    /// Times out the calls whose deadline has passed: the client is told to abort them
    /// (`TOOL_CANCEL`) and their runs read a timeout.
    pub(super) fn poll_timeouts(&self) {
        let mut state = self.lock();
        let polled = state.machine.poll(monotonic_ms());
        state.dirty |= !polled.timed_out.is_empty();
        let seconds = self.config.tool_result_timeout.as_secs();
        for call_id in polled.timed_out {
            if let Some(waiter) = state.waiters.remove(&call_id) {
                let message = format!("The client did not answer \"{}\" within {seconds} s.", waiter.tool);
                let _ = waiter.reply.send(ToolOutput::new(ResultStatus::Timeout, message));
            }
        }
        state.flush();
    }

    /// Applies a `TOOL_RESULT` once, and acknowledges it (duplicates and late ones too) or
    /// refuses it (`ERROR unknown_call`, naming the frame).
    pub(crate) fn apply_result(&self, result: ToolResult) -> Applied {
        let mut state = self.lock();
        if state.leaving || state.moved {
            state.deferred = true;
            return Applied::Deferred;
        }
        let mut wake = None;
        let applied = match state.machine.result(result) {
            ResultOutcome::Applied(result) => {
                let content = match result.content {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                let output = ToolOutput::new(result.status, content);
                // Kept with the run until its next checkpoint, so a restart before then still has it.
                if let Some(run) = &mut state.stored_run {
                    run.results.push((result.call_id.clone(), output.clone()));
                }
                state.dirty = true;
                wake = state.waiters.remove(&result.call_id).map(|waiter| (waiter, output));
                Applied::First
            }
            ResultOutcome::Duplicate => Applied::Duplicate,
            ResultOutcome::Late => Applied::Late,
            ResultOutcome::Unknown => Applied::Unknown,
        };
        state.flush();
        if let Some((waiter, output)) = wake {
            match &state.persister {
                // The run goes on once the result and its acknowledgement were given to the store
                // and sent: its next turn's work, which grows with the conversation, does not
                // compete with them.
                Some(persister) => {
                    let (stored, wait) = oneshot::channel();
                    persister.send(Job::Flush(stored));
                    tokio::spawn(async move {
                        let _ = wait.await;
                        let _ = waiter.reply.send(output);
                    });
                }
                None => {
                    let _ = waiter.reply.send(output);
                }
            }
        }
        applied
    }
}

/// Why [`Session::open_page`] could not make a call on the page it opened.
#[derive(Debug)]
pub(crate) enum NotOpened {
    /// The page did not report being at the URL within the wait (an app whose router ignores
    /// the `navigate` event).
    Away,
    /// The page is there and refuses the call: its refusal.
    Refused(ToolOutput),
}
