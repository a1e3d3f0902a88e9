//! The run console: `/console`, a page for operators that lists the sessions this server holds
//! and shows each run as a timeline (model calls, tool calls and their approval waits, hook
//! decisions, store writes, tokens, errors) while it goes on; its data at `/console/api/…`,
//! behind the operator token.
//!
//! The timelines come from the same spans as the traces and metrics ([`RunLog`], fed by
//! [`MetricsLayer`](crate::metrics::MetricsLayer)): the last [`KEPT_RUNS`] runs, in memory, with
//! names, ids, counts, durations and outcomes only (no conversation text, as in the traces).

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;

use crate::app::App;
pub use crate::run_log::{Entry, KEPT_ENTRIES, KEPT_RUNS, RunLog, RunRecord};

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
