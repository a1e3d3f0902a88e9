//! A client session (with the executor that runs its calls) against a server session, through a
//! simulated network that loses the frames in flight when a connection dies, cuts connections at
//! random points (each side may notice late), and delivers resent frames twice. For any schedule:
//!
//! - every call's handler runs at most once;
//! - every result the server waited for is applied exactly once (and is the one the handler
//!   made); a result the server stopped waiting for is acknowledged as late, never applied;
//! - nothing the server sent is lost to the client, which resumes within the grace period: it
//!   processes every numbered frame once, in order;
//! - at the end nothing waits: the client's outbox and the server's pending calls are empty.
//!
//! `TETHER_SIM_CASES` (default 4096) sets how many schedules run, `TETHER_SIM_SEED` (default
//! 0x7e7e_5e55) the seed they are drawn from.

use std::collections::{HashMap, HashSet, VecDeque};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};
use tether_core::session::{ClientSession, ClientSessionConfig, ResultOutcome, ServerSession, ServerSessionConfig};
use tether_core::validate::{CompactValidator, NativeRegex};
use tether_core::{CallRequest, Executor, OwnerId, Step, ToolDef, ToolRegistry};
use tether_protocol::{
    AgentMessage, CallId, ClientFrame, ContextUpdate, PROTOCOL_VERSION, Risk, ServerFrame, ToolCall, Welcome,
    decode_client_frame, decode_server_frame, encode_frame,
};

/// One thing that happens.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// The agent calls the client's tool.
    Call,
    /// The server streams some answer text (a numbered frame that must not be lost).
    Say,
    /// The network delivers the next frame to the client.
    ToClient,
    /// The network delivers the next frame to the server.
    ToServer,
    /// A running handler (picked by the number) finishes.
    Finish(usize),
    /// The server stops waiting for a call (picked by the number): the run ended.
    Cancel(usize),
    /// The connection dies: the frames in flight are lost. Neither side knows yet.
    Cut,
    /// The client sees its socket close.
    ClientNotices,
    /// The server sees the socket close.
    ServerNotices,
    /// The client opens a new socket; `twice`: resent frames are delivered twice.
    Reconnect { twice: bool },
    /// Time passes (timeouts, resends on a live connection).
    Tick { ms: u64, twice: bool },
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::Call),
        2 => Just(Action::Say),
        8 => Just(Action::ToClient),
        8 => Just(Action::ToServer),
        4 => any::<usize>().prop_map(Action::Finish),
        1 => any::<usize>().prop_map(Action::Cancel),
        1 => Just(Action::Cut),
        2 => Just(Action::ClientNotices),
        2 => Just(Action::ServerNotices),
        2 => any::<bool>().prop_map(|twice| Action::Reconnect { twice }),
        2 => (0u64..8_000, any::<bool>()).prop_map(|(ms, twice)| Action::Tick { ms, twice }),
    ]
}

const RESULT_TIMEOUT_MS: u64 = 40_000;
const RESEND_AFTER_MS: u64 = 1_000;

struct Sim {
    now: u64,
    // The network: the live connection and what is in flight on it.
    live: Option<u64>,
    connections: u64,
    to_client: VecDeque<String>,
    to_server: VecDeque<String>,
    /// The connection each side uses (it may be dead without the side knowing).
    client_socket: Option<u64>,
    server_socket: Option<u64>,
    // The two sides.
    client: ClientSession,
    executor: Executor,
    registry: ToolRegistry<(), CompactValidator<NativeRegex>>,
    running: Vec<CallId>,
    server: ServerSession,
    // What happened, counted where it happened.
    calls: Vec<CallId>,
    handler_runs: HashMap<CallId, u32>,
    made: HashMap<CallId, Value>,
    applied: HashMap<CallId, Vec<Value>>,
    abandoned: HashSet<CallId>,
    processed: Vec<u64>,
    /// Whether the frames resent on the connection being opened are delivered twice.
    pending_twice: bool,
    /// Whether a HELLO reached the server.
    attached_once: bool,
    stats: Stats,
}

/// How often each hard path was taken, to show that the schedules exercise them.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    cuts: u64,
    resumes: u64,
    frames_skipped_as_seen: u64,
    duplicate_results: u64,
    late_results: u64,
    resends_on_a_live_connection: u64,
    /// `TOOL_CALL`s delivered again (skipped as seen, and refused by the executor too) or
    /// answered with the kept result.
    calls_repeated: u64,
    calls_timed_out: u64,
}

impl Stats {
    fn add(&mut self, other: Stats) {
        self.cuts += other.cuts;
        self.resumes += other.resumes;
        self.frames_skipped_as_seen += other.frames_skipped_as_seen;
        self.duplicate_results += other.duplicate_results;
        self.late_results += other.late_results;
        self.resends_on_a_live_connection += other.resends_on_a_live_connection;
        self.calls_repeated += other.calls_repeated;
        self.calls_timed_out += other.calls_timed_out;
    }
}

impl Sim {
    fn new() -> Sim {
        let mut registry = ToolRegistry::new(CompactValidator::new(NativeRegex));
        let def = ToolDef::new("cart_add", "Add a product to the cart.").parameters(json!({
            "type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]
        }));
        registry.register(OwnerId(1), def, ()).unwrap();
        Sim {
            now: 0,
            live: None,
            connections: 0,
            to_client: VecDeque::new(),
            to_server: VecDeque::new(),
            client_socket: None,
            server_socket: None,
            client: ClientSession::new(ClientSessionConfig { resend_after_ms: RESEND_AFTER_MS, max_resends: 3 }),
            executor: Executor::default(),
            registry,
            running: Vec::new(),
            // The grace period is longer than any schedule: the client always comes back in time.
            server: ServerSession::new(ServerSessionConfig {
                result_timeout_ms: RESULT_TIMEOUT_MS,
                max_pending_calls: 1000,
                grace_ms: u64::MAX,
                ..ServerSessionConfig::default()
            }),
            calls: Vec::new(),
            handler_runs: HashMap::new(),
            made: HashMap::new(),
            applied: HashMap::new(),
            abandoned: HashSet::new(),
            processed: Vec::new(),
            pending_twice: false,
            attached_once: false,
            stats: Stats::default(),
        }
    }

    /// The client writes frames to its socket; they travel only if it is the live one.
    fn client_sends(&mut self, frames: &[ClientFrame], twice: bool) {
        if self.client_socket.is_none() || self.client_socket != self.live {
            return;
        }
        let texts: Vec<String> = frames.iter().map(encode_frame).collect();
        self.to_server.extend(texts.iter().cloned());
        if twice {
            self.to_server.extend(texts);
        }
    }

    /// The server writes what its session queued; it travels only on the live connection.
    fn server_flush(&mut self, twice: bool) {
        let writes = self.server.take_writes();
        if self.server_socket.is_none() || self.server_socket != self.live {
            return;
        }
        self.to_client.extend(writes.iter().cloned());
        if twice {
            // The replay again (not the WELCOME).
            self.to_client.extend(writes.into_iter().filter(|text| !text.contains("\"WELCOME\"")));
        }
    }

    fn step(&mut self, action: Action) {
        if std::env::var("TETHER_SIM_TRACE").is_ok() {
            eprintln!(
                "{action:?} live={:?} c={:?} s={:?} link={:?} seq={} last={:?} tc={} ts={}",
                self.live,
                self.client_socket,
                self.server_socket,
                self.client.link(),
                self.server.seq(),
                self.client.last_seq(),
                self.to_client.len(),
                self.to_server.len()
            );
        }
        match action {
            Action::Call => {
                let call_id = CallId::from(format!("k{}", self.calls.len() + 1));
                self.calls.push(call_id.clone());
                let frame = ToolCall {
                    id: String::new(),
                    call_id,
                    run_id: "r".into(),
                    name: "cart_add".into(),
                    args: json!({"productId": "mug-red"}),
                    risk: Risk::None,
                };
                self.server.call(frame, self.now).expect("room for the call");
                self.server_flush(false);
            }
            Action::Say => {
                let frame = AgentMessage {
                    id: String::new(),
                    run_id: "r".into(),
                    delta: "text".into(),
                    done: false,
                    status: None,
                    reset: false,
                };
                self.server.send(ServerFrame::AgentMessage(frame));
                self.server_flush(false);
            }
            Action::ToClient => {
                if let Some(text) = self.to_client.pop_front() {
                    self.client_receives(&text);
                }
            }
            Action::ToServer => {
                if let Some(text) = self.to_server.pop_front() {
                    self.server_receives(&text);
                }
            }
            Action::Finish(pick) => {
                if !self.running.is_empty() {
                    let call_id = self.running.remove(pick % self.running.len());
                    let output = json!({"madeFor": call_id});
                    let step = self.executor.handler_done(&call_id, Ok(output));
                    self.drive(step);
                }
            }
            Action::Cancel(pick) => {
                let pending = self.server.pending();
                if !pending.is_empty() {
                    let call_id = pending[pick % pending.len()].call_id.clone();
                    assert!(self.server.cancel(&call_id, "the run ended"));
                    self.abandoned.insert(call_id);
                    self.server_flush(false);
                }
            }
            Action::Cut => {
                self.stats.cuts += u64::from(self.live.is_some());
                self.live = None;
                self.to_client.clear();
                self.to_server.clear();
            }
            Action::ClientNotices => {
                if self.client_socket.is_some() && self.client_socket != self.live {
                    self.client_socket = None;
                    self.client.disconnected();
                }
            }
            Action::ServerNotices => {
                if let Some(socket) = self.server_socket.filter(|socket| Some(*socket) != self.live) {
                    self.server_socket = None;
                    // False when a newer connection was attached meanwhile: nothing changes.
                    self.server.detach(socket, self.now);
                }
            }
            Action::Reconnect { twice } => {
                if self.client_socket.is_none() {
                    self.connections += 1;
                    self.live = Some(self.connections);
                    self.client_socket = self.live;
                    self.to_client.clear();
                    self.to_server.clear();
                    self.pending_twice = twice;
                    let hello = self.client.connected();
                    self.client_sends(&[hello], false);
                }
            }
            Action::Tick { ms, twice } => {
                self.now += ms;
                for step in self.executor.poll_timeouts(self.now) {
                    self.drive(Some(step));
                }
                let resent = self.client.poll(self.now);
                self.stats.resends_on_a_live_connection += resent.len() as u64;
                self.client_sends(&resent, twice);
                for call_id in self.server.poll(self.now).timed_out {
                    self.stats.calls_timed_out += 1;
                    self.abandoned.insert(call_id);
                }
                self.server_flush(false);
            }
        }
    }

    fn drive(&mut self, step: Option<Step>) {
        match step {
            None => {}
            Some(Step::Run { call_id, .. }) => {
                *self.handler_runs.entry(call_id.clone()).or_default() += 1;
                self.running.push(call_id);
            }
            Some(Step::Finish(outcome)) => {
                self.running.retain(|id| *id != outcome.call_id);
                self.made.entry(outcome.call_id.clone()).or_insert_with(|| outcome.content.clone());
                let frame = self.client.result(&outcome.call_id, outcome.status, outcome.content, self.now);
                self.client_sends(frame.as_slice(), false);
            }
            Some(other) => panic!("no approvals or hooks in this simulation: {other:?}"),
        }
    }

    fn client_receives(&mut self, text: &str) {
        let frame = decode_server_frame(text, usize::MAX).expect("the server's frames decode");
        if !self.client.received(&frame) {
            self.stats.frames_skipped_as_seen += 1;
            if let ServerFrame::ToolCall(call) = frame {
                // Defence in depth: the executor, too, refuses a call it has seen, should a copy
                // ever get past `lastSeq`.
                let request =
                    CallRequest { call_id: call.call_id, tool: call.name, args: call.args, server_risk: call.risk };
                let step = self.executor.start(request, &self.registry, self.now);
                assert!(step.is_none(), "the executor would run a repeated call again: {step:?}");
                self.stats.calls_repeated += 1;
            }
            return;
        }
        if let Some(seq) = frame.seq().filter(|seq| *seq > 0) {
            if std::env::var("TETHER_SIM_TRACE").is_ok() {
                eprintln!("  processed s{seq} {}", frame.type_name());
            }
            self.processed.push(seq);
        }
        match frame {
            ServerFrame::Welcome(welcome) => {
                assert!(welcome.resumed || self.client.session_id().is_none(), "the session never expires here");
                let context = ClientFrame::ContextUpdate(ContextUpdate {
                    id: self.client.next_id(),
                    revision: 1,
                    tools: self.registry.specs(),
                    page: None,
                    context: Vec::new(),
                });
                let welcomed = self.client.welcomed(&welcome, context, self.now);
                assert_eq!(welcomed.lost, 0);
                let twice = std::mem::take(&mut self.pending_twice);
                self.client_sends(&welcomed.send, twice);
            }
            ServerFrame::ToolCall(call) => {
                let request = CallRequest {
                    call_id: call.call_id.clone(),
                    tool: call.name,
                    args: call.args,
                    server_risk: call.risk,
                };
                match self.executor.start(request, &self.registry, self.now) {
                    Some(step) => self.drive(Some(step)),
                    None => {
                        self.stats.calls_repeated += 1;
                        let again = self.client.repeated_call(&call.call_id);
                        self.client_sends(again.as_slice(), false);
                    }
                }
            }
            ServerFrame::ToolCancel(cancel) => {
                if let Some(step) = self.executor.cancel(&cancel.call_id, &cancel.reason) {
                    self.client.nobody_waits(&cancel.call_id);
                    self.drive(Some(step));
                }
            }
            ServerFrame::ToolResultAck(ack) => self.client.acknowledged(&ack.call_id),
            ServerFrame::Error(error) => panic!("the server refused something: {error:?}"),
            ServerFrame::AgentMessage(_) | ServerFrame::Event(_) | ServerFrame::History(_) => {}
        }
    }

    fn server_receives(&mut self, text: &str) {
        let socket = self.live.expect("frames travel on the live connection");
        match decode_client_frame(text, usize::MAX).expect("the client's frames decode") {
            ClientFrame::Hello(hello) => {
                let resumed = hello.resume.is_some();
                if !resumed && self.attached_once {
                    // The client never heard of the first session (its WELCOME was lost): a new
                    // one starts, and the first one's calls wait for nobody.
                    let fresh = ServerSession::new(*self.server.config());
                    let old = std::mem::replace(&mut self.server, fresh);
                    self.abandoned.extend(old.pending().iter().map(|call| call.call_id.clone()));
                }
                self.attached_once = true;
                let welcome = ServerFrame::Welcome(Welcome {
                    id: "welcome".into(),
                    protocol_version: PROTOCOL_VERSION,
                    session_id: "s-sim".into(),
                    resume_token: "t".into(),
                    resumed,
                    max_active_tools: 30,
                    max_frame_bytes: 1 << 18,
                    capabilities: Vec::new(),
                });
                self.stats.resumes += u64::from(resumed);
                let last_seq = hello.resume.and_then(|resume| resume.last_seq);
                let attached = self.server.attach(socket, encode_frame(&welcome), last_seq);
                assert_eq!(attached.lost, 0, "the log holds every frame of a schedule");
                self.server_socket = Some(socket);
                let twice = self.pending_twice;
                self.server_flush(twice);
            }
            ClientFrame::ToolResult(result) => {
                match self.server.result(result) {
                    ResultOutcome::Applied(result) => {
                        self.applied.entry(result.call_id).or_default().push(result.content);
                    }
                    ResultOutcome::Late => self.stats.late_results += 1,
                    ResultOutcome::Duplicate => self.stats.duplicate_results += 1,
                    ResultOutcome::Unknown => panic!("a result for a call the server never made"),
                }
                self.server_flush(false);
            }
            _ => {}
        }
    }

    /// The network heals: the client reconnects, every frame is delivered, every handler
    /// finishes, and time passes until nothing is left to do.
    fn settle(&mut self) {
        for _ in 0..200 {
            if self.client_socket != self.live || self.live.is_none() {
                self.step(Action::Cut);
                self.step(Action::ClientNotices);
                self.step(Action::ServerNotices);
                self.step(Action::Reconnect { twice: false });
            }
            while !self.to_client.is_empty() || !self.to_server.is_empty() {
                self.step(Action::ToServer);
                self.step(Action::ToClient);
            }
            while !self.running.is_empty() {
                self.step(Action::Finish(0));
            }
            let idle = self.to_client.is_empty()
                && self.to_server.is_empty()
                && self.client.unacknowledged().is_empty()
                && self.server.pending().is_empty();
            if idle {
                return;
            }
            self.step(Action::Tick { ms: RESEND_AFTER_MS, twice: false });
        }
        panic!(
            "the sessions did not settle: {} unacknowledged, {} pending",
            self.client.unacknowledged().len(),
            self.server.pending().len()
        );
    }

    fn check(&self) {
        for (call_id, runs) in &self.handler_runs {
            assert!(*runs <= 1, "the handler of {call_id} ran {runs} times");
        }
        for call_id in &self.calls {
            let applied = self.applied.get(call_id).map_or(0, Vec::len);
            if self.abandoned.contains(call_id) {
                assert_eq!(applied, 0, "{call_id} was applied after the server stopped waiting");
            } else {
                assert_eq!(applied, 1, "{call_id}: the server waited for it, so it is applied exactly once");
                assert_eq!(Some(&self.applied[call_id][0]), self.made.get(call_id), "{call_id}: the handler's result");
            }
        }
        let expected: Vec<u64> = (1..=self.server.seq()).collect();
        assert_eq!(self.processed, expected, "every numbered frame processed once, in order");
    }
}

fn cases() -> u32 {
    std::env::var("TETHER_SIM_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(4096)
}

fn seed() -> u64 {
    std::env::var("TETHER_SIM_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or(0x7e7e_5e55)
}

/// Runs one schedule and checks it; returns what it exercised.
fn run(actions: &[Action]) -> Stats {
    let mut sim = Sim::new();
    sim.step(Action::Reconnect { twice: false });
    for action in actions {
        sim.step(*action);
    }
    sim.settle();
    sim.check();
    sim.stats
}

#[test]
fn exactly_once_and_nothing_lost_over_a_lossy_network() {
    let (cases, seed) = (cases(), seed());
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: std::env::var("TETHER_SIM_SHRINK").ok().and_then(|n| n.parse().ok()).unwrap_or(4096),
        ..Config::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let total = std::cell::Cell::new(Stats::default());
    let outcome = runner.run(&prop::collection::vec(action(), 1..300), |actions| {
        let stats = run(&actions);
        let mut sum = total.get();
        sum.add(stats);
        total.set(sum);
        Ok(())
    });
    if let Err(error) = outcome {
        panic!("seed {seed}: {error}");
    }
    let total = total.get();
    eprintln!("{cases} schedules from seed {seed:#x}: {total:?}");
    // Every hard path was taken, many times over (the totals include shrinking's reruns only on failure).
    for (what, count) in [
        ("connections cut", total.cuts),
        ("resumes", total.resumes),
        ("frames skipped as seen", total.frames_skipped_as_seen),
        ("duplicate results", total.duplicate_results),
        ("late results", total.late_results),
        ("resends on a live connection", total.resends_on_a_live_connection),
        ("calls timed out", total.calls_timed_out),
        ("calls delivered again", total.calls_repeated),
    ] {
        assert!(count >= u64::from(cases / 16), "only {count} {what} in {cases} schedules");
    }
}

/// A result that reaches the server after its call timed out is acknowledged as late (not
/// applied), and the client forgets it.
#[test]
fn a_late_result_is_acknowledged_and_leaves_the_outbox() {
    let mut sim = Sim::new();
    for action in [Action::Reconnect { twice: false }, Action::ToServer, Action::ToClient, Action::Call] {
        sim.step(action);
    }
    sim.step(Action::ToClient);
    assert_eq!(sim.running.len(), 1, "the handler runs");
    sim.step(Action::Tick { ms: RESULT_TIMEOUT_MS, twice: false });
    assert!(sim.abandoned.contains("k1"));
    sim.step(Action::Finish(0));
    sim.settle();
    sim.check();
    assert_eq!(sim.stats.late_results, 1);
    assert!(sim.client.unacknowledged().is_empty());
}
