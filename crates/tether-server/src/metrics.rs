//! The server's metrics, served at `/metrics` in the Prometheus text format (OpenMetrics), and
//! the [`MetricsLayer`] that measures the agent's spans into them.
//!
//! One instrumentation, two outputs: the agent loop, the model provider and the server open
//! `tracing` spans named as the OpenTelemetry GenAI conventions name them (`chat`,
//! `execute_tool`, `invoke_agent`, …; docs/observability.md). Exported, they are the traces;
//! measured by [`MetricsLayer`] when they close, they are the durations, token counts and
//! decisions below. What only the server sees (sessions, reconnects, refused frames) it counts
//! itself.

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

/// A hook call's labels: where in the loop it ran and what it decided.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookDecision {
    point: String,
    decision: String,
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

/// The server's metrics since it started. Cheap to share; [`Metrics::encode`] writes them all.
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
        let completed =
            self.runs_ended.get_or_create(&Outcome { outcome: tether_protocol::RunStatus::Completed.as_str().into() });
        serde_json::json!({
            "runsStarted": self.runs_started.get(),
            "runsEnded": ended,
            "runsCompleted": completed.get(),
            "resultsApplied": self.results_applied.get(),
            "resultsDuplicate": self.results_duplicate.get(),
            "resultsLate": self.results_late.get(),
            "sessionsRestored": self.resumes.get(),
            "sessionsHandedOff": self.handoffs.get(),
        })
    }

    fn runs_ended_total(&self) -> u64 {
        tether_protocol::RunStatus::ALL
            .iter()
            .map(|status| self.runs_ended.get_or_create(&Outcome { outcome: status.as_str().into() }).get())
            .sum()
    }
}

/// Measures Tether's spans (target [`SPAN_TARGET`]) into [`Metrics`] when they close: model
/// calls (`chat`), tool calls (`execute_tool`), hooks (`tether.hook`) and store writes
/// (`tether.store.write`).
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Arc<Metrics>,
}

/// What a measured span recorded, kept in its extensions until it closes.
#[derive(Default)]
struct Measured {
    started: Option<Instant>,
    model: String,
    tool: String,
    outcome: String,
    point: String,
    decision: String,
    store: String,
    error: String,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl tracing::field::Visit for Measured {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.request.model" => &mut self.model,
            "gen_ai.tool.name" => &mut self.tool,
            "tether.tool.outcome" | "tether.store.outcome" => &mut self.outcome,
            "tether.hook.point" => &mut self.point,
            "tether.hook.decision" => &mut self.decision,
            "tether.store" => &mut self.store,
            "error.type" => &mut self.error,
            _ => return,
        };
        value.clone_into(slot);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input_tokens = Some(value),
            "gen_ai.usage.output_tokens" => self.output_tokens = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here, formatted as they display.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// The spans [`MetricsLayer`] measures.
const MEASURED: [&str; 4] = ["chat", "execute_tool", "tether.hook", "tether.store.write"];

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let metadata = attrs.metadata();
        if metadata.target() != SPAN_TARGET || !MEASURED.contains(&metadata.name()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut measured = Measured { started: Some(Instant::now()), ..Measured::default() };
        attrs.record(&mut measured);
        span.extensions_mut().insert(measured);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(measured) = span.extensions_mut().get_mut::<Measured>() {
            values.record(measured);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(measured) = span.extensions_mut().remove::<Measured>() else { return };
        let seconds = measured.started.map_or(0.0, |started| started.elapsed().as_secs_f64());
        let metrics = &self.metrics;
        match span.name() {
            "chat" => {
                let labels = ModelCall {
                    gen_ai_operation_name: "chat",
                    gen_ai_request_model: measured.model.clone(),
                    error_type: measured.error,
                };
                metrics.model_duration.get_or_create(&labels).observe(seconds);
                for (kind, count) in [("input", measured.input_tokens), ("output", measured.output_tokens)] {
                    if let Some(count) = count {
                        let labels = TokenUse {
                            gen_ai_operation_name: "chat",
                            gen_ai_request_model: measured.model.clone(),
                            gen_ai_token_type: kind,
                        };
                        metrics.token_usage.get_or_create(&labels).observe(count as f64);
                    }
                }
            }
            "execute_tool" => {
                let labels = ToolCall { gen_ai_tool_name: measured.tool, outcome: measured.outcome };
                metrics.tool_duration.get_or_create(&labels).observe(seconds);
            }
            "tether.hook" => {
                let decision = if measured.error.is_empty() { measured.decision } else { measured.error };
                metrics.hook_decisions.get_or_create(&HookDecision { point: measured.point, decision }).inc();
            }
            "tether.store.write" => {
                let outcome = if measured.error.is_empty() { "ok" } else { "error" };
                metrics.store_writes.get_or_create(&StoreWrite { store: measured.store, outcome }).observe(seconds);
            }
            _ => {}
        }
    }
}
