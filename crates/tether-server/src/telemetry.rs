//! Traces over OTLP (HTTP/protobuf), configured by the standard `OTEL_*` environment variables:
//! the layer that turns Tether's spans into OpenTelemetry spans and exports them, with a bounded
//! queue whose drops are counted in [`Metrics`](crate::metrics::Metrics).
//!
//! Nothing is exported unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, and nothing at all with `OTEL_SDK_DISABLED=true`
//! or `OTEL_TRACES_EXPORTER=none`. Export runs on its own thread: a collector that is down or
//! slow never slows a run; what does not fit the queue is dropped and counted
//! (`tether_spans_dropped_total`). docs/observability.md lists the spans and their attributes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter, SpanProcessor,
};
use prometheus_client::metrics::counter::Counter;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::ServerError;
use crate::metrics::Metrics;

/// What [`otlp_layer`] read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Export {
    /// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
    Disabled,
    /// No endpoint is set: nothing to export to.
    NoEndpoint,
    /// Spans go to this endpoint.
    To(String),
}

/// Where traces go, by the `OTEL_*` variables `var` reads.
pub fn export_from(var: impl Fn(&str) -> Option<String>) -> Export {
    let set = |name: &str| var(name).map(|value| value.trim().to_string()).filter(|value| !value.is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|value| value.eq_ignore_ascii_case("none"))
    {
        return Export::Disabled;
    }
    match (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(traces), _) => Export::To(traces),
        (None, Some(base)) => Export::To(format!("{}/v1/traces", base.trim_end_matches('/'))),
        (None, None) => Export::NoEndpoint,
    }
}

/// The exporting half, kept by whoever installed the layer: dropping it (or [`Traces::shutdown`])
/// sends what is queued.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Sends what is queued and stops exporting (bounded by `OTEL_BSP_EXPORT_TIMEOUT`).
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "traces: the last spans could not be sent");
        }
    }
}

/// The layer that exports Tether's spans (target [`tether_agent::SPAN_TARGET`]) over OTLP as the
/// environment says ([`export_from`]), or `None` when it says not to. Sets the global W3C
/// trace-context propagator, so that model requests carry `traceparent`. The spans dropped
/// because the queue (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2,048) was full are counted in
/// `metrics`.
pub fn otlp_layer<S>(metrics: &Arc<Metrics>) -> Result<Option<(impl Layer<S> + use<S>, Traces)>, ServerError>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let endpoint = match export_from(|name| std::env::var(name).ok()) {
        Export::To(endpoint) => endpoint,
        Export::Disabled | Export::NoEndpoint => return Ok(None),
    };
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|_| "http/protobuf".into());
    if protocol.trim() != "http/protobuf" {
        return Err(ServerError::Config(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: tether exports traces over http/protobuf only"
        )));
    }
    // reqwest's TLS (for an `https://` collector) needs a process-wide crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint.clone())
        .build()
        .map_err(|error| ServerError::Config(format!("the OTLP trace exporter: {error}")))?;
    let queue = std::env::var("OTEL_BSP_MAX_QUEUE_SIZE")
        .ok()
        .and_then(|value| value.trim().parse::<usize>().ok())
        .filter(|size| *size > 0)
        .unwrap_or(2048);
    let queued = Arc::new(AtomicUsize::new(0));
    let batch = BatchSpanProcessor::builder(Counted { inner: exporter, queued: queued.clone() })
        .with_batch_config(BatchConfigBuilder::default().with_max_queue_size(queue).build())
        .build();
    let processor = Bounded { inner: batch, queued, limit: queue, dropped: metrics.spans_dropped.clone() };
    let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource()).build();
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let tracer = provider.tracer("tether");
    tracing::info!(endpoint, queue, "traces: exporting over OTLP (http/protobuf)");
    // Only what the spans say: no source locations, threads, target or busy/idle times (which
    // cost a clock read on every poll of an instrumented future), and no OpenTelemetry context
    // made current on each poll (nothing here reads it; `traceparent` is taken from the span).
    let layer = tracing_opentelemetry::layer()
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_context_activation(false)
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| metadata.target() == tether_agent::SPAN_TARGET));
    Ok(Some((layer, Traces { provider })))
}

/// The resource the spans come from: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` as set,
/// the service name `tether` when none is.
fn resource() -> opentelemetry_sdk::Resource {
    let builder = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
        builder.build()
    } else {
        builder.with_service_name("tether").build()
    }
}

/// The exporter, counting the spans that left the queue.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    queued: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        self.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        self.inner.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The batch processor behind a queue limit of its own, so that every span dropped for a full
/// queue is dropped here, where it is counted.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    queued: Arc<AtomicUsize>,
    limit: usize,
    dropped: Counter,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let admitted = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| (queued < self.limit).then_some(queued + 1))
            .is_ok();
        if admitted {
            self.inner.on_end(span);
        } else {
            self.dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(vars: &[(&str, &str)]) -> Export {
        export_from(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_string()))
    }

    #[test]
    fn the_otel_variables_say_where_traces_go_or_that_they_do_not() {
        assert_eq!(export(&[]), Export::NoEndpoint);
        assert_eq!(export(&[("OTEL_SERVICE_NAME", "shop")]), Export::NoEndpoint);
        assert_eq!(
            export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]),
            Export::To("http://collector:4318/v1/traces".into())
        );
        assert_eq!(
            export(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/in")
            ]),
            Export::To("http://traces:9999/in".into())
        );
        assert_eq!(
            export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"), ("OTEL_SDK_DISABLED", "TRUE")]),
            Export::Disabled
        );
        assert_eq!(
            export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"), ("OTEL_TRACES_EXPORTER", "none")]),
            Export::Disabled
        );
        assert_eq!(export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]), Export::NoEndpoint);
    }
}
