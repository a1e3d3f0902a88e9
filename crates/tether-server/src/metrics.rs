//! The server's metrics, served at `/metrics` in the Prometheus text format (OpenMetrics), and
//! the [`MetricsLayer`] that measures the agent's spans into them.
//!
//! One instrumentation, two outputs: the agent loop, the model provider and the server open
//! `tracing` spans named as the OpenTelemetry GenAI conventions name them (`chat`,
//! `execute_tool`, `invoke_agent`, …; docs/observability.md). Exported, they are the traces;
//! measured by [`MetricsLayer`] when they close, they are the durations, token counts and
//! decisions below. What only the server sees (sessions, reconnects, refused frames) it counts
//! itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, field::Field};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use tether_agent::SPAN_TARGET;

use crate::run_log::{Entry, RunLog};

/// A `Family` of histograms made with one bucket layout.
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds, from 5 ms to about 80 s.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Tokens, from 1 to about 65,000.
fn tokens() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 9))
}

/// A model call's labels (GenAI attribute names, dots as underscores).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelCall {
    gen_ai_operation_name: &'static str,
    gen_ai_request_model: String,
    error_type: String,
}

/// A token count's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenUse {
    gen_ai_operation_name: &'static str,
    gen_ai_request_model: String,
    gen_ai_token_type: &'static str,
}

/// A tool call's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCall {
    gen_ai_tool_name: String,
    outcome: String,
}

/// One label: what it was.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: String,
}

/// A hook call's labels: where in the loop it ran, what it decided, and the name of its set
/// (`Hooks::named`: `loop_guard` for the loop guard; empty for a set without one).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookDecision {
    point: String,
    decision: String,
    hook: String,
}

/// A declarative hook's labels: its id in the configuration, its event, what it decided.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeclarativeDecision {
    hook: String,
    event: String,
    decision: String,
}

/// A store write's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreWrite {
    store: String,
    outcome: &'static str,
}

/// Why a frame was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Refusal {
    reason: &'static str,
}

/// What the server observed since it started: its metrics ([`Metrics::encode`] writes them
/// all) and the recent runs' timelines for the console ([`Metrics::runs`]).
pub struct Metrics {
    registry: Registry,
    pub(crate) sessions_live: Gauge,
    pub(crate) runs_started: Counter,
    runs_ended: Family<Outcome, Counter>,
    model_duration: Histograms<ModelCall>,
    token_usage: Histograms<TokenUse>,
    tool_duration: Histograms<ToolCall>,
    approvals: Family<Outcome, Counter>,
    hook_decisions: Family<HookDecision, Counter>,
    declarative_decisions: Family<DeclarativeDecision, Counter>,
    store_writes: Histograms<StoreWrite>,
    pub(crate) reconnects: Counter,
    pub(crate) resumes: Counter,
    pub(crate) handoffs: Counter,
    frames_refused: Family<Refusal, Counter>,
    pub(crate) results_applied: Counter,
    pub(crate) results_duplicate: Counter,
    pub(crate) results_late: Counter,
    /// Spans the OpenTelemetry exporter dropped (its queue was full: a collector down or slow).
    pub spans_dropped: Counter,
    /// The recent runs' timelines, for the console.
    pub runs: RunLog,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let metrics = Metrics {
            sessions_live: Gauge::default(),
            runs_started: Counter::default(),
            runs_ended: Family::default(),
            model_duration: Histograms::new_with_constructor(seconds),
            token_usage: Histograms::new_with_constructor(tokens),
            tool_duration: Histograms::new_with_constructor(seconds),
            approvals: Family::default(),
            hook_decisions: Family::default(),
            declarative_decisions: Family::default(),
            store_writes: Histograms::new_with_constructor(seconds),
            reconnects: Counter::default(),
            resumes: Counter::default(),
            handoffs: Counter::default(),
            frames_refused: Family::default(),
            results_applied: Counter::default(),
            results_duplicate: Counter::default(),
            results_late: Counter::default(),
            spans_dropped: Counter::default(),
            runs: RunLog::default(),
            registry: Registry::default(),
        };
        registry.register("tether_sessions_live", "Sessions held by this server now", metrics.sessions_live.clone());
        registry.register("tether_runs_started", "Runs started", metrics.runs_started.clone());
        registry.register("tether_runs_ended", "Runs ended, by outcome (the run's status)", metrics.runs_ended.clone());
        registry.register_with_unit(
            "gen_ai_client_operation_duration",
            "Duration of model calls (GenAI semantic conventions)",
            Unit::Seconds,
            metrics.model_duration.clone(),
        );
        registry.register(
            "gen_ai_client_token_usage",
            "Tokens per model call, by type (input, output), as the provider counted them (GenAI semantic conventions)",
            metrics.token_usage.clone(),
        );
        registry.register_with_unit(
            "tether_tool_call_duration",
            "Duration of tool calls, approval waits included, by tool and outcome",
            Unit::Seconds,
            metrics.tool_duration.clone(),
        );
        registry.register(
            "tether_approvals",
            "Calls that waited for the user's approval, by outcome (granted, refused)",
            metrics.approvals.clone(),
        );
        registry.register(
            "tether_hook_decisions",
            "Hook calls, by where in the loop they ran and what they decided (error: the hook failed)",
            metrics.hook_decisions.clone(),
        );
        registry.register(
            "tether_declarative_hook_decisions",
            "Declarative hooks' decisions (their audit records), by hook id, event and decision",
            metrics.declarative_decisions.clone(),
        );
        registry.register_with_unit(
            "tether_store_write_duration",
            "Duration of session-store writes, by store and outcome",
            Unit::Seconds,
            metrics.store_writes.clone(),
        );
        registry.register("tether_reconnects", "Connections that resumed a session", metrics.reconnects.clone());
        registry.register(
            "tether_resumes",
            "Sessions read back from the store (after a restart, or from another server)",
            metrics.resumes.clone(),
        );
        registry.register(
            "tether_handoffs",
            "Sessions handed to another server that asked for them",
            metrics.handoffs.clone(),
        );
        registry.register("tether_frames_refused", "Client frames refused, by reason", metrics.frames_refused.clone());
        registry.register(
            "tether_results_applied",
            "TOOL_RESULTs applied (the first for each call)",
            metrics.results_applied.clone(),
        );
        registry.register(
            "tether_results_duplicate",
            "TOOL_RESULTs for calls already answered: acknowledged, not applied",
            metrics.results_duplicate.clone(),
        );
        registry.register(
            "tether_results_late",
            "TOOL_RESULTs for calls that had timed out or were cancelled: acknowledged, not applied",
            metrics.results_late.clone(),
        );
        registry.register(
            "tether_spans_dropped",
            "Spans the trace exporter dropped because its queue was full",
            metrics.spans_dropped.clone(),
        );
        Metrics { registry, ..metrics }
    }
}

impl Metrics {
    /// Everything, in the OpenMetrics text format (what Prometheus scrapes).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }

    /// The layer that measures Tether's spans into these metrics: add it to the `tracing`
    /// subscriber (`tether serve` does).
    pub fn layer(self: &Arc<Self>) -> MetricsLayer {
        MetricsLayer { metrics: self.clone() }
    }

    /// A run ended with `outcome` (its status's wire name).
    pub(crate) fn run_ended(&self, outcome: &str) {
        self.runs_ended.get_or_create(&Outcome { outcome: outcome.to_string() }).inc();
    }

    /// A call that needed the user's approval ended: `granted` when it ran.
    pub(crate) fn approval(&self, granted: bool) {
        let outcome = if granted { "granted" } else { "refused" };
        self.approvals.get_or_create(&Outcome { outcome: outcome.into() }).inc();
    }

    /// A declarative hook decided (its audit record).
    pub(crate) fn declarative_decision(&self, audit: &tether_protocol::HookAudit) {
        let labels = DeclarativeDecision {
            hook: audit.hook_id.clone(),
            event: audit.hook_event.clone(),
            decision: audit.decision.clone(),
        };
        self.declarative_decisions.get_or_create(&labels).inc();
    }

    /// A client frame was refused for `reason` (the error code's wire name).
    pub(crate) fn frame_refused(&self, reason: &'static str) {
        self.frames_refused.get_or_create(&Refusal { reason }).inc();
    }

    /// The counters `/healthz` reports (for operators and load tests).
    pub(crate) fn json(&self) -> serde_json::Value {
        let ended: u64 = self.runs_ended_total();
        let completed = self.runs_ended_with(tether_protocol::RunStatus::Completed);
        serde_json::json!({
            "runsStarted": self.runs_started.get(),
            "runsEnded": ended,
            "runsCompleted": completed,
            "resultsApplied": self.results_applied.get(),
            "resultsDuplicate": self.results_duplicate.get(),
            "resultsLate": self.results_late.get(),
            "sessionsRestored": self.resumes.get(),
            "sessionsHandedOff": self.handoffs.get(),
        })
    }

    /// Runs ended with `status`, read without creating its series (an outcome no run had is not
    /// exported as a zero).
    fn runs_ended_with(&self, status: tether_protocol::RunStatus) -> u64 {
        self.runs_ended.get(&Outcome { outcome: status.as_str().into() }).map_or(0, |counter| counter.get())
    }

    fn runs_ended_total(&self) -> u64 {
        tether_protocol::RunStatus::ALL.iter().map(|status| self.runs_ended_with(*status)).sum()
    }
}

/// Measures Tether's spans (target [`SPAN_TARGET`]) into [`Metrics`] when they close: model
/// calls (`chat`), tool calls (`execute_tool`), hooks (`tether.hook`) and store writes
/// (`tether.store.write`); and keeps each run's timeline for the console
/// ([`RunLog`](crate::run_log::RunLog)).
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Arc<Metrics>,
}

/// What a watched span recorded, kept in its extensions until it closes.
struct Watched {
    started: Instant,
    /// When it started, in milliseconds since the Unix epoch.
    started_unix_ms: f64,
    /// Its fields as text (`otel.*` left out).
    attributes: BTreeMap<String, String>,
}

impl Watched {
    fn get(&self, name: &str) -> String {
        self.attributes.get(name).cloned().unwrap_or_default()
    }

    fn count(&self, name: &str) -> Option<u64> {
        self.attributes.get(name)?.parse().ok()
    }
}

/// Every field of a span or an event, as text.
struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !field.name().starts_with("otel.") {
            self.0.insert(field.name().to_string(), value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields and numbers arrive here too, formatted as they display.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// The spans [`MetricsLayer`] watches.
const WATCHED: [&str; 5] = ["invoke_agent", "chat", "execute_tool", "tether.hook", "tether.store.write"];

/// Which run a span belongs to: kept on its `invoke_agent` span.
struct RunKey {
    session: String,
    run: String,
}

fn unix_ms_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |since| since.as_secs_f64() * 1e3)
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let metadata = attrs.metadata();
        if metadata.target() != SPAN_TARGET || !WATCHED.contains(&metadata.name()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut watched =
            Watched { started: Instant::now(), started_unix_ms: unix_ms_now(), attributes: BTreeMap::new() };
        attrs.record(&mut Fields(&mut watched.attributes));
        let mut extensions = span.extensions_mut();
        if metadata.name() == "invoke_agent" {
            let key = RunKey { session: watched.get("gen_ai.conversation.id"), run: watched.get("tether.run.id") };
            self.metrics.runs.started(key.session.clone(), key.run.clone(), watched.get("gen_ai.request.model"));
            extensions.insert(key);
        }
        extensions.insert(watched);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(watched) = span.extensions_mut().get_mut::<Watched>() {
            values.record(&mut Fields(&mut watched.attributes));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != SPAN_TARGET {
            return;
        }
        let Some(scope) = ctx.event_scope(event) else { return };
        for span in scope {
            if let Some(key) = span.extensions().get::<RunKey>() {
                let mut attributes = BTreeMap::new();
                event.record(&mut Fields(&mut attributes));
                let name = attributes.remove("message").unwrap_or_default();
                let entry = Entry { kind: "event", name, at_ms: 0.0, duration_ms: 0.0, attributes };
                self.metrics.runs.entry(&key.session, &key.run, entry, unix_ms_now());
                return;
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(watched) = span.extensions_mut().remove::<Watched>() else { return };
        let elapsed = watched.started.elapsed();
        let seconds = elapsed.as_secs_f64();
        let metrics = &self.metrics;
        let (kind, name) = match span.name() {
            "invoke_agent" => {
                if let Some(key) = span.extensions().get::<RunKey>() {
                    metrics.runs.ended(&key.session, &key.run, &watched.attributes, seconds * 1e3);
                }
                return;
            }
            "chat" => {
                let model = watched.get("gen_ai.request.model");
                let labels = ModelCall {
                    gen_ai_operation_name: "chat",
                    gen_ai_request_model: model.clone(),
                    error_type: watched.get("error.type"),
                };
                metrics.model_duration.get_or_create(&labels).observe(seconds);
                for (kind, name) in [("input", "gen_ai.usage.input_tokens"), ("output", "gen_ai.usage.output_tokens")] {
                    if let Some(count) = watched.count(name) {
                        let labels = TokenUse {
                            gen_ai_operation_name: "chat",
                            gen_ai_request_model: model.clone(),
                            gen_ai_token_type: kind,
                        };
                        metrics.token_usage.get_or_create(&labels).observe(count as f64);
                    }
                }
                ("chat", model)
            }
            "execute_tool" => {
                let tool = watched.get("gen_ai.tool.name");
                let labels = ToolCall { gen_ai_tool_name: tool.clone(), outcome: watched.get("tether.tool.outcome") };
                metrics.tool_duration.get_or_create(&labels).observe(seconds);
                ("tool", tool)
            }
            "tether.hook" => {
                let error = watched.get("error.type");
                let decision = if error.is_empty() { watched.get("tether.hook.decision") } else { error };
                let point = watched.get("tether.hook.point");
                let hook = watched.get("tether.hook.name");
                metrics.hook_decisions.get_or_create(&HookDecision { point: point.clone(), decision, hook }).inc();
                ("hook", point)
            }
            "tether.store.write" => {
                let outcome = if watched.get("error.type").is_empty() { "ok" } else { "error" };
                let store = watched.get("tether.store");
                metrics.store_writes.get_or_create(&StoreWrite { store: store.clone(), outcome }).observe(seconds);
                ("store", store)
            }
            _ => return,
        };
        // The run it belongs to, for the console: its nearest `invoke_agent` ancestor.
        for ancestor in span.scope().skip(1) {
            if let Some(key) = ancestor.extensions().get::<RunKey>() {
                let entry =
                    Entry { kind, name, at_ms: 0.0, duration_ms: seconds * 1e3, attributes: watched.attributes };
                metrics.runs.entry(&key.session, &key.run, entry, watched.started_unix_ms);
                return;
            }
        }
    }
}
