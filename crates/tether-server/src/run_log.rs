//! The runs' timelines the console shows ([`RunLog`]): kept in memory from the spans by
//! [`MetricsLayer`](crate::metrics::MetricsLayer), read by the console's routes (`console.rs`,
//! where they are public as `tether_server::console::…`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

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
