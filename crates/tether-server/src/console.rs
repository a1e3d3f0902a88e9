//! The run console: `/console`, a page for operators that lists the sessions this server holds
//! and shows each run as a timeline (model calls, tool calls and their approval waits, hook
//! decisions, store writes, tokens, errors) while it goes on; its data at `/console/api/…`,
//! behind the operator token.
//!
//! The timelines come from the same spans as the traces and metrics ([`RunLog`], fed by
//! [`MetricsLayer`](crate::metrics::MetricsLayer)): the last [`KEPT_RUNS`] runs, in memory, with
//! names, ids, counts, durations and outcomes only (no conversation text, as in the traces).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;

use crate::server::App;

/// How many runs the console keeps (all sessions together), the oldest forgotten first.
pub const KEPT_RUNS: usize = 200;
/// Most entries one run's timeline keeps; later ones are counted, not kept.
pub const KEPT_ENTRIES: usize = 500;

/// One entry of a run's timeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `chat`, `tool`, `hook`, `store` or `event`.
    pub kind: &'static str,
    /// What it was: the model, the tool, the hook point, the store, the event's message.
    pub name: String,
    /// When it started, in milliseconds after the run started.
    pub at_ms: f64,
    /// How long it took, in milliseconds (0 for an event).
    pub duration_ms: f64,
    /// Its span's attributes (GenAI and Tether names), as text.
    pub attributes: BTreeMap<String, String>,
}

/// One run as the console shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The session (`gen_ai.conversation.id`).
    pub session: String,
    /// The run's id.
    pub run: String,
    /// The model.
    pub model: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// How long it took, in milliseconds; `None` while it goes on.
    pub duration_ms: Option<f64>,
    /// How it ended (the run's status); `None` while it goes on.
    pub outcome: Option<String>,
    /// Turns taken, once ended.
    pub turns: Option<u64>,
    /// Why it failed, when it did (`error.type`).
    pub error: Option<String>,
    /// Input and output tokens of its model calls, as the provider counted them.
    pub input_tokens: u64,
    /// See `input_tokens`.
    pub output_tokens: u64,
    /// The timeline, in the order its entries ended (events when they happened).
    pub entries: Vec<Entry>,
    /// Entries left out over [`KEPT_ENTRIES`].
    pub entries_dropped: u64,
}

/// The recent runs, newest last.
#[derive(Debug, Default)]
pub struct RunLog {
    runs: Mutex<VecDeque<RunRecord>>,
}

impl RunLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<RunRecord>> {
        self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A run started.
    pub(crate) fn started(&self, session: String, run: String, model: String) {
        let mut runs = self.lock();
        if runs.len() == KEPT_RUNS {
            runs.pop_front();
        }
        runs.push_back(RunRecord {
            session,
            run,
            model,
            started_ms: crate::store::unix_ms(),
            duration_ms: None,
            outcome: None,
            turns: None,
            error: None,
            input_tokens: 0,
            output_tokens: 0,
            entries: Vec::new(),
            entries_dropped: 0,
        });
    }

    /// An entry of run `run` (of `session`) ended; `started_ms` is its start (Unix ms).
    pub(crate) fn entry(&self, session: &str, run: &str, mut entry: Entry, started_ms: f64) {
        let mut runs = self.lock();
        let Some(record) = runs.iter_mut().rev().find(|r| r.run == run && r.session == session) else { return };
        entry.at_ms = (started_ms - record.started_ms as f64).max(0.0);
        if entry.kind == "chat" {
            let tokens = |name: &str| entry.attributes.get(name).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            record.input_tokens += tokens("gen_ai.usage.input_tokens");
            record.output_tokens += tokens("gen_ai.usage.output_tokens");
        }
        if record.entries.len() < KEPT_ENTRIES {
            record.entries.push(entry);
        } else {
            record.entries_dropped += 1;
        }
    }

    /// Run `run` ended.
    pub(crate) fn ended(&self, session: &str, run: &str, attributes: &BTreeMap<String, String>, duration_ms: f64) {
        let mut runs = self.lock();
        let Some(record) = runs.iter_mut().rev().find(|r| r.run == run && r.session == session) else { return };
        record.duration_ms = Some(duration_ms);
        record.outcome = Some(attributes.get("tether.run.outcome").cloned().unwrap_or_else(|| "ended".into()));
        record.turns = attributes.get("tether.run.turns").and_then(|n| n.parse().ok());
        record.error = attributes.get("error.type").cloned();
    }

    /// How many runs are kept of each session.
    pub fn counts(&self) -> std::collections::HashMap<String, usize> {
        let mut counts = std::collections::HashMap::new();
        for record in self.lock().iter() {
            *counts.entry(record.session.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// The runs kept of `session` (all sessions: `None`), newest first.
    pub fn runs(&self, session: Option<&str>) -> Vec<RunRecord> {
        self.lock().iter().rev().filter(|r| session.is_none_or(|s| r.session == s)).cloned().collect()
    }
}

/// The console page: no data of its own (it asks `/console/api/…` with the token it is given).
pub(crate) async fn page() -> Html<&'static str> {
    Html(include_str!("console.html"))
}

/// The `401` for a request that does not present the operator token; `None` when it does (or
/// none is set).
pub(crate) fn without_operator_token(app: &App, headers: &HeaderMap) -> Option<Response> {
    use subtle::ConstantTimeEq;
    let token = app.config.operator_token.as_ref()?;
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default();
    let same = crate::store::token_hash(presented).ct_eq(&crate::store::token_hash(token));
    if bool::from(same) {
        return None;
    }
    Some(
        (
            axum::http::StatusCode::UNAUTHORIZED,
            [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
            "the operator token is needed: Authorization: Bearer TOKEN\n",
        )
            .into_response(),
    )
}

/// One session as the console lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionRow {
    id: String,
    connected: bool,
    running: bool,
    page: Option<String>,
    runs: usize,
}

/// `GET /console/api/sessions`: the sessions this server holds, and how many its store keeps.
pub(crate) async fn sessions(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(refused) = without_operator_token(&app, &headers) {
        return refused;
    }
    let counts = app.metrics.runs.counts();
    let mut rows: Vec<SessionRow> = app
        .sessions
        .all()
        .iter()
        .map(|session| SessionRow {
            id: session.id().to_string(),
            connected: session.connected(),
            running: session.run_in_progress(),
            page: session.page().map(|page| page.url),
            runs: counts.get(session.id()).copied().unwrap_or(0),
        })
        .collect();
    rows.sort_by(|a, b| b.running.cmp(&a.running).then(b.connected.cmp(&a.connected)).then(a.id.cmp(&b.id)));
    let stored = match &app.store {
        Some(store) => store.count().await.ok(),
        None => None,
    };
    axum::Json(serde_json::json!({"sessions": rows, "stored": stored, "instance": app.instance})).into_response()
}

/// The query of `GET /console/api/runs`.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct RunsQuery {
    session: Option<String>,
}

/// `GET /console/api/runs[?session=ID]`: the runs kept, newest first.
pub(crate) async fn runs(State(app): State<Arc<App>>, headers: HeaderMap, Query(query): Query<RunsQuery>) -> Response {
    if let Some(refused) = without_operator_token(&app, &headers) {
        return refused;
    }
    axum::Json(serde_json::json!({"runs": app.metrics.runs.runs(query.session.as_deref())})).into_response()
}
