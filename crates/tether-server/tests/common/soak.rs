//! The soak: many sessions against a real `tether serve` process on loopback, each running
//! tool calls while some clients drop their socket at random and resume. Shared by the small
//! soak test (`tests/soak.rs`) and the full run (`benches/soak.rs`).
//!
//! Each simulated client is the browser runtime's logic without the browser: the same session
//! machine (`tether_core::session::ClientSession`: results kept until acknowledged and resent,
//! `lastSeq`, frames seen before skipped) and the same executor (a repeated call never runs
//! twice). The figures are counted at the client: how many times each call's handler ran, and
//! how many times the server applied each result, as the client sees it in the
//! `tool_execution_end` events of its runs (each carries the result the model read). The
//! server's own counters (`/healthz`) are reported next to them, as a cross-check.

#![allow(dead_code, unreachable_pub, clippy::print_stdout)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tether_core::session::ClientSession;
use tether_core::validate::FullValidator;
use tether_core::{CallRequest, Executor, OwnerId, Step, ToolDef, ToolRegistry};
use tether_protocol::*;
use tokio_tungstenite::tungstenite::Message;

use super::dir::TestDir;
use super::serve::{Serve, Served};

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How a soak runs.
#[derive(Debug, Clone, Copy)]
pub struct SoakPlan {
    /// Concurrent sessions.
    pub sessions: usize,
    /// Tool calls (one per run) each session makes.
    pub calls: usize,
    /// Chance, per tool call, that the client drops its socket (half of the time before sending
    /// the result, half right after sending it) and resumes.
    pub drop_chance: f64,
    /// Where the servers keep sessions.
    pub store: SoakStore,
    /// How many `tether serve` instances (more than one needs [`SoakStore::Redis`]); with more
    /// than one, the clients connect through [`SoakPlan::front`].
    pub instances: usize,
    /// What spreads the connections over several instances.
    pub front: Front,
    /// Kill a server (SIGKILL; the next one in turn, with several) this often and start it again
    /// on the same port and store (needs a durable store); `None`: no restarts.
    pub restart_every: Option<Duration>,
    /// With [`SoakStore::RedisCluster`]: fail a master over to its replica this often, the
    /// masters in turn, alternately the polite way (`CLUSTER FAILOVER`) and the hard way (the
    /// master killed with SIGKILL, its replica told to take over, the old master started again,
    /// rejoining as a replica); `None`: no failovers.
    pub failover_every: Option<Duration>,
    /// The servers' `--redis-wait-replicas`.
    pub wait_replicas: u32,
}

/// What stands in front of several instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// A proxy of the tests' own that sends each new connection to a random instance.
    RandomProxy,
    /// Debian's nginx with the deployment's configuration (`deploy/nginx/tether.conf`): round
    /// robin, an instance that refuses a connection skipped.
    Nginx,
}

/// Where a soak's servers keep sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoakStore {
    /// `--store memory`.
    Memory,
    /// A SQLite file (one server).
    Sqlite,
    /// A Redis server of the soak's own (on a free port).
    Redis,
    /// A Redis Cluster of the soak's own: three masters, a replica each.
    RedisCluster,
}

impl SoakStore {
    /// Whether several servers can share it.
    pub fn shared(self) -> bool {
        matches!(self, SoakStore::Redis | SoakStore::RedisCluster)
    }
}

impl SoakPlan {
    /// One server, sessions in memory, no restarts.
    pub fn new(sessions: usize, calls: usize, drop_chance: f64) -> SoakPlan {
        SoakPlan {
            sessions,
            calls,
            drop_chance,
            store: SoakStore::Memory,
            instances: 1,
            front: Front::RandomProxy,
            restart_every: None,
            failover_every: None,
            wait_replicas: 0,
        }
    }
}

/// What a soak measured. Everything but the `server_*` fields is counted at the clients.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Runs whose end (`AGENT_MESSAGE` done) the clients saw, and how many of them completed.
    pub runs_ended: u64,
    /// See `runs_ended`.
    pub runs_completed: u64,
    /// Tool calls the clients received (distinct call ids).
    pub calls: u64,
    /// Handler runs, all calls together.
    pub handler_runs: u64,
    /// Calls whose handler ran more than once.
    pub handlers_run_twice: u64,
    /// Calls whose handler ran but whose result the server never applied (no `tool_execution_end`).
    pub results_lost: u64,
    /// Calls the server applied more than once (more than one `tool_execution_end`).
    pub results_applied_twice: u64,
    /// Calls where the model read something else than what the handler returned.
    pub results_altered: u64,
    /// Socket drops and resumes.
    pub reconnects: u64,
    /// Resumes that did not get the session back.
    pub sessions_lost: u64,
    /// Server frames delivered again that the clients skipped (numbered at or below `lastSeq`).
    pub frames_skipped: u64,
    /// `ERROR` frames, but for those below.
    pub unexpected_errors: u64,
    /// `ERROR` frames saying that the store did not answer in time and the client should
    /// connect again later (then closing the socket): the documented answer while a Redis
    /// master fails over; expected only in soaks with failovers.
    pub retry_later: u64,
    /// The server's counters: results applied, duplicates acknowledged and ignored, late ones.
    pub server_results_applied: u64,
    /// See `server_results_applied`.
    pub server_duplicates_ignored: u64,
    /// See `server_results_applied`.
    pub server_results_late: u64,
    /// Server memory (RSS, KiB) when idle before, at the end with every session open, and after
    /// every session had closed and expired.
    pub rss_before_kib: u64,
    /// See `rss_before_kib`.
    pub rss_peak_kib: u64,
    /// See `rss_before_kib`.
    pub rss_after_kib: u64,
    /// Times a server was killed and started again.
    pub restarts: u64,
    /// Redis Cluster failovers: the polite ones, and the masters killed.
    pub failovers: u64,
    /// See `failovers`.
    pub masters_killed: u64,
    /// Sessions the servers read back from the store, and handed to another server that asked
    /// (the servers' counters, summed over the last process of each instance).
    pub server_sessions_restored: u64,
    /// See `server_sessions_restored`.
    pub server_sessions_handed_off: u64,
    /// Wall time of the load, in seconds.
    pub seconds: f64,
    /// Clients that were still waiting when the load's time was up, with what they last saw.
    pub stuck: Vec<String>,
    /// The `ERROR` frames the clients got (their code and text), the first ten.
    pub errors: Vec<String>,
}

impl SoakReport {
    /// A one-paragraph summary.
    pub fn summary(&self, plan: &SoakPlan) -> String {
        format!(
            "soak: {} sessions x {} tool calls, {} instance(s), {:?} store (--redis-wait-replicas {}), drop chance \
             {:.0}%, {} server restarts (SIGKILL), {} Redis failovers ({} of them a master killed), {:.1} s\n\
             counted at the clients: runs ended {} ({} completed); calls {}, handler runs {}, handlers run twice {}; \
             results lost {}, applied twice {}, altered {}; reconnects {}, sessions lost {}, frames skipped as \
             seen {}, errors {} (and {} \"store busy, connect again later\")\n\
             server counters (the last process of each instance): results applied {}, duplicates ignored {}, late {}; \
             sessions read back from the store {}, handed to another instance {}\n\
             server RSS {} KiB before, {} KiB with all sessions, {} KiB after they expired",
            plan.sessions,
            plan.calls,
            plan.instances,
            plan.store,
            plan.wait_replicas,
            plan.drop_chance * 100.0,
            self.restarts,
            self.failovers + self.masters_killed,
            self.masters_killed,
            self.seconds,
            self.runs_ended,
            self.runs_completed,
            self.calls,
            self.handler_runs,
            self.handlers_run_twice,
            self.results_lost,
            self.results_applied_twice,
            self.results_altered,
            self.reconnects,
            self.sessions_lost,
            self.frames_skipped,
            self.unexpected_errors,
            self.retry_later,
            self.server_results_applied,
            self.server_duplicates_ignored,
            self.server_results_late,
            self.server_sessions_restored,
            self.server_sessions_handed_off,
            self.rss_before_kib,
            self.rss_peak_kib,
            self.rss_after_kib,
        )
    }

    /// Whether nothing was lost, run twice or applied twice, and every run completed.
    pub fn healthy(&self, plan: &SoakPlan) -> bool {
        let expected = (plan.sessions * plan.calls) as u64;
        self.stuck.is_empty()
            && self.sessions_lost == 0
            && self.unexpected_errors == 0
            && (plan.failover_every.is_some() || self.retry_later == 0)
            && (self.handlers_run_twice, self.results_lost, self.results_applied_twice, self.results_altered)
                == (0, 0, 0, 0)
            && self.calls == expected
            && self.handler_runs == expected
            && self.runs_completed == expected
    }
}

/// A small deterministic random source (xorshift), one per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 1_000_000.0 < p
    }

    /// A number below `n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Waits until `ready` holds for `/healthz`, polling for at most `limit`.
async fn wait_for(server: &Served, limit: Duration, ready: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let health = server.health().await;
        if ready(&health) || started.elapsed() > limit {
            return health;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The last things a client did and saw, to tell what a stuck client waits for.
type Trace = Arc<Mutex<VecDeque<String>>>;

fn note(trace: &Trace, what: String) {
    let mut trace = trace.lock().unwrap();
    if trace.len() == 40 {
        trace.pop_front();
    }
    trace.push_back(what);
}

fn describe(frame: &ServerFrame) -> String {
    let id = frame.id();
    match frame {
        ServerFrame::ToolCall(c) => format!("{id} TOOL_CALL {} run {}", c.call_id, c.run_id),
        ServerFrame::ToolResultAck(a) => format!("{id} ACK {}", a.call_id),
        ServerFrame::AgentMessage(m) => format!("{id} AGENT_MESSAGE run {} done {}", m.run_id, m.done),
        ServerFrame::Error(e) => format!("{id} ERROR {} reply_to {:?}: {}", e.code.as_str(), e.reply_to, e.message),
        ServerFrame::Welcome(w) => format!("WELCOME resumed {}", w.resumed),
        ServerFrame::ToolCancel(c) => format!("{id} TOOL_CANCEL {}", c.call_id),
        ServerFrame::Event(_) => format!("{id} EVENT"),
        ServerFrame::History(h) => format!("{id} HISTORY {} lines", h.lines.len()),
    }
}

fn cart_add() -> ToolDef {
    let ids = json!({"type": "string", "enum": ["mug-red", "mug-blue", "tee-black"]});
    ToolDef::new("cart_add", "Add a product to the shopping cart.")
        .parameters(json!({"type": "object", "properties": {"productId": ids}, "required": ["productId"]}))
}

/// What one client counted.
#[derive(Default)]
struct Tally {
    handler_runs: HashMap<CallId, u64>,
    /// What each call's handler returned.
    made: HashMap<CallId, String>,
    /// What the model read for each call, once per `tool_execution_end` the client saw.
    applied: HashMap<CallId, Vec<String>>,
    runs_ended: u64,
    runs_completed: u64,
    reconnects: u64,
    sessions_lost: u64,
    frames_skipped: u64,
    errors: u64,
    /// `ERROR` frames that say the store did not answer in time ("… connect again later").
    retry_later: u64,
    error_texts: Vec<String>,
}

/// One browser-like client: the session machine and the executor the browser runtime uses,
/// over a real socket that it drops at random.
struct BrowserLike {
    url: String,
    session: ClientSession,
    executor: Executor,
    registry: ToolRegistry<(), FullValidator>,
    socket: Option<Socket>,
    rng: Rng,
    plan: SoakPlan,
    tally: Tally,
    trace: Trace,
}

impl BrowserLike {
    fn now() -> u64 {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
    }

    async fn send(&mut self, frames: Vec<ClientFrame>) {
        if let Some(socket) = &mut self.socket {
            for frame in frames {
                // A failed send shows up as the end of the stream on the next receive.
                let _ = socket.send(Message::Text(encode_frame(&frame).into())).await;
            }
        }
    }

    /// Opens a socket and says HELLO (resuming the session, if there is one). While the server
    /// is down (restarting) it tries again, as the browser runtime does, for up to 30 s.
    async fn connect(&mut self) -> bool {
        let started = Instant::now();
        let socket = loop {
            match tokio_tungstenite::connect_async(&self.url).await {
                Ok((socket, _)) => break socket,
                Err(_) if self.retries_connect() && started.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(20 + self.rng.below(80))).await;
                }
                Err(_) => return false,
            }
        };
        self.socket = Some(socket);
        let hello = self.session.connected();
        self.send(vec![hello]).await;
        true
    }

    /// Whether a failed connection is tried again (a server may be restarting, or a proxy may
    /// have found no instance).
    fn retries_connect(&self) -> bool {
        self.plan.restart_every.is_some() || self.plan.instances > 1
    }

    /// Drops the socket without a close handshake, as a crash would, and reconnects.
    async fn crash_and_resume(&mut self) -> bool {
        self.socket = None;
        self.session.disconnected();
        self.tally.reconnects += 1;
        note(&self.trace, "socket dropped: reconnecting".into());
        self.connect().await
    }

    /// The next server frame, sending overdue results again meanwhile; `None` if the socket ended.
    async fn next_frame(&mut self) -> Option<ServerFrame> {
        loop {
            let wait = self.session.next_deadline().map(|at| Duration::from_millis(at.saturating_sub(Self::now())));
            let socket = self.socket.as_mut()?;
            let timer = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                message = socket.next() => match message? {
                    Ok(Message::Text(text)) => return decode_server_frame(&text, usize::MAX).ok(),
                    Ok(Message::Close(_)) | Err(_) => return None,
                    Ok(_) => {}
                },
                () = timer => {
                    let resend = self.session.poll(Self::now());
                    self.send(resend).await;
                }
            }
        }
    }

    /// A call finished: keep its result and send it, maybe crashing around the send.
    async fn finished(&mut self, call_id: &CallId, status: ResultStatus, content: Value) -> bool {
        let frame = self.session.result(call_id, status, content, Self::now());
        if self.rng.chance(self.plan.drop_chance) {
            // A crash: half of the time with the result already on its way.
            let sent = self.rng.chance(0.5);
            if sent {
                self.send(frame.into_iter().collect()).await;
            }
            note(&self.trace, format!("crash (result sent: {sent})"));
            return self.crash_and_resume().await;
        }
        self.send(frame.into_iter().collect()).await;
        true
    }

    /// Handles one server frame. Returns whether the run ended (and `false` in `.1` when the
    /// session could not be resumed).
    async fn handle(&mut self, frame: ServerFrame) -> (bool, bool) {
        if !self.session.received(&frame) {
            self.tally.frames_skipped += 1;
            return (false, true);
        }
        if !matches!(frame, ServerFrame::Event(_)) {
            note(&self.trace, describe(&frame));
        }
        match frame {
            ServerFrame::Welcome(welcome) => {
                let had_session = self.session.session_id().is_some();
                if had_session && !welcome.resumed {
                    self.tally.sessions_lost += 1;
                    return (false, false);
                }
                let context = ClientFrame::ContextUpdate(ContextUpdate {
                    id: self.session.next_id(),
                    revision: 1,
                    tools: self.registry.specs(),
                    page: None,
                    context: Vec::new(),
                });
                let welcomed = self.session.welcomed(&welcome, context, Self::now());
                self.send(welcomed.send).await;
            }
            ServerFrame::ToolCall(call) => {
                let call_id = call.call_id.clone();
                let request =
                    CallRequest { call_id: call.call_id, tool: call.name, args: call.args, server_risk: call.risk };
                match self.executor.start(request, &self.registry, Self::now()) {
                    Some(Step::Run { call_id, args, .. }) => {
                        // The handler: counted here, where it runs.
                        *self.tally.handler_runs.entry(call_id.clone()).or_default() += 1;
                        let output = format!("added {} for {call_id}", args["productId"].as_str().unwrap_or("?"));
                        self.tally.made.insert(call_id.clone(), output.clone());
                        let step = self.executor.handler_done(&call_id, Ok(Value::String(output)));
                        let Some(Step::Finish(outcome)) = step else { unreachable!("no hooks here") };
                        if !self.finished(&outcome.call_id, outcome.status, outcome.content).await {
                            return (false, false);
                        }
                    }
                    Some(Step::Finish(outcome)) => {
                        if !self.finished(&outcome.call_id, outcome.status, outcome.content).await {
                            return (false, false);
                        }
                    }
                    Some(other) => unreachable!("no approvals or hooks here: {other:?}"),
                    None => {
                        let again = self.session.repeated_call(&call_id);
                        self.send(again.into_iter().collect()).await;
                    }
                }
            }
            ServerFrame::ToolCancel(cancel) => {
                // (The server only cancels what it stopped waiting for: nothing is sent.)
                if let Some(Step::Finish(outcome)) = self.executor.cancel(&cancel.call_id, &cancel.reason) {
                    self.session.nobody_waits(&outcome.call_id);
                    let unsent = self.session.result(&outcome.call_id, outcome.status, outcome.content, Self::now());
                    debug_assert!(unsent.is_none());
                }
            }
            ServerFrame::ToolResultAck(ack) => self.session.acknowledged(&ack.call_id),
            ServerFrame::Event(event) => {
                if let RunEvent::ToolExecutionEnd(end) = event.event {
                    self.tally.applied.entry(end.call_id).or_default().push(end.output);
                }
            }
            ServerFrame::AgentMessage(message) if message.done => {
                self.tally.runs_ended += 1;
                self.tally.runs_completed += u64::from(message.status == Some(RunStatus::Completed));
                return (true, true);
            }
            ServerFrame::AgentMessage(_) | ServerFrame::History(_) => {}
            ServerFrame::Error(error) => {
                self.session.refused(&error);
                // The store could not answer in time (a Redis failover): the documented answer
                // is this error and a close; the client reconnects.
                if error.message.ends_with("connect again later") {
                    self.tally.retry_later += 1;
                } else {
                    self.tally.errors += 1;
                }
                self.tally.error_texts.push(format!(
                    "{} (reply to {:?}, session {:?}): {}",
                    error.code.as_str(),
                    error.reply_to,
                    self.session.session_id(),
                    error.message
                ));
            }
        }
        (false, true)
    }

    /// `calls` runs of one tool call each.
    async fn run(mut self) -> Tally {
        if !self.connect().await {
            self.tally.sessions_lost += 1;
            return self.tally;
        }
        for n in 0..self.plan.calls {
            if let Some(frame) = self.session.message("add the red mug to my cart") {
                self.send(vec![frame]).await;
            }
            note(&self.trace, format!("sent message {n}"));
            loop {
                let Some(frame) = self.next_frame().await else {
                    if !self.crash_and_resume().await {
                        self.tally.sessions_lost += 1;
                        return self.tally;
                    }
                    continue;
                };
                match self.handle(frame).await {
                    (_, false) => return self.tally,
                    (true, true) => break,
                    (false, true) => {}
                }
            }
        }
        if let Some(mut socket) = self.socket.take() {
            let _ = socket.close(None).await;
            // Read until the server closes, so that the close handshake completes.
            while let Some(Ok(_)) = socket.next().await {}
        }
        self.tally
    }
}

/// `tether serve` for a soak at `addr`: every client comes from 127.0.0.1 (the other limits stay
/// at their defaults), sessions in `store` (a `--store` value) unless `None` (memory).
/// With Redis, writes wait for `wait_replicas` replicas.
fn soak_server(store: Option<&str>, addr: &str, wait_replicas: u32) -> Served {
    let mut serve = Serve::new().args(["--max-sessions-per-ip", "0", "--reconnect-grace-seconds", "2", "--addr", addr]);
    if let Some(store) = store {
        serve = serve.args(["--store", store, "--lease-ms", "1000"]);
    }
    if wait_replicas > 0 {
        serve = serve.args(["--redis-wait-replicas", &wait_replicas.to_string()]);
    }
    serve.start()
}

/// Fails the cluster's masters over in turn, every `every`, until `stop`: even turns politely,
/// odd turns by killing the master. Returns (polite failovers, masters killed).
async fn fail_over_in_turn(
    cluster: Arc<Mutex<super::redis::RedisCluster>>,
    every: Duration,
    stop: Arc<tokio::sync::Notify>,
) -> (u64, u64) {
    let (mut polite, mut killed) = (0, 0);
    for turn in 0usize.. {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.notified() => break,
        }
        let cluster = cluster.clone();
        let hard = turn % 2 == 1;
        tokio::task::spawn_blocking(move || {
            let mut cluster = cluster.lock().unwrap();
            // The last failover's old master back in sync first (a replica behind cannot take over).
            cluster.wait_until("the cluster settled", super::redis::RedisCluster::settled);
            let masters: Vec<usize> = cluster
                .topology()
                .iter()
                .filter(|node| node.master && !node.slots.is_empty())
                .map(|node| cluster.index_of(node.port))
                .collect();
            let master = masters[turn % masters.len()];
            if hard {
                let replicas = cluster.replicas(master);
                cluster.nodes[master].kill();
                cluster.take_over(replicas[0]);
                cluster.nodes[master].restart();
                cluster.wait_until("the old master is a replica in sync", |cluster| {
                    cluster.cli(master, &["info", "replication"]).contains("master_link_status:up")
                });
            } else {
                cluster.fail_over(master);
            }
        })
        .await
        .expect("a failover");
        if hard {
            killed += 1;
        } else {
            polite += 1;
        }
    }
    (polite, killed)
}

/// Runs a soak against `tether serve` processes: one, or several on one Redis behind a proxy;
/// with restarts, each killed in turn and started again on its address and store.
pub async fn soak(plan: SoakPlan) -> SoakReport {
    assert!(plan.instances == 1 || plan.store.shared(), "several instances share a Redis");
    assert!(plan.restart_every.is_none() || plan.store != SoakStore::Memory, "restarts need a durable store");
    assert!(plan.failover_every.is_none() || plan.store == SoakStore::RedisCluster, "failovers need a cluster");
    let dir = Arc::new(TestDir::new("soak"));
    let redis = (plan.store == SoakStore::Redis).then(|| super::redis::Redis::start("soak", &[]));
    let cluster = (plan.store == SoakStore::RedisCluster)
        .then(|| Arc::new(Mutex::new(super::redis::RedisCluster::start("soak", 3, 1))));
    let store: Option<Arc<str>> = match plan.store {
        SoakStore::Memory => None,
        SoakStore::Sqlite => Some(dir.sqlite_store().into()),
        SoakStore::Redis => redis.as_ref().map(|redis| redis.url().into()),
        SoakStore::RedisCluster => cluster.as_ref().map(|cluster| cluster.lock().unwrap().url().into()),
    };
    let wait_replicas = plan.wait_replicas;
    let servers: Vec<Served> =
        (0..plan.instances.max(1)).map(|_| soak_server(store.as_deref(), "127.0.0.1:0", wait_replicas)).collect();
    for server in &servers {
        wait_for(server, Duration::from_secs(5), |h| h["status"] == "ok").await;
    }
    let mut report = SoakReport { rss_before_kib: servers[0].rss_kib(), ..SoakReport::default() };
    let addrs: Vec<String> = servers.iter().map(|server| server.addr.clone()).collect();
    let (proxy, nginx) = match (servers.len() > 1, plan.front) {
        (false, _) => (None, None),
        (true, Front::RandomProxy) => (Some(super::proxy::Proxy::start(addrs.clone(), 0x5EED).await), None),
        (true, Front::Nginx) => (None, Some(super::nginx::Nginx::start("soak", &addrs))),
    };
    let url = match (&proxy, &nginx) {
        (Some(proxy), _) => proxy.url(),
        (_, Some(nginx)) => nginx.url(),
        _ => servers[0].url(),
    };
    // With restarts, each later server takes its predecessor's address and store.
    let servers: Arc<Mutex<Vec<Option<Served>>>> = Arc::new(Mutex::new(servers.into_iter().map(Some).collect()));
    let stop = Arc::new(tokio::sync::Notify::new());
    let restarts = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let restarter = plan.restart_every.map(|every| {
        let (servers, store, stop, restarts, addrs) =
            (servers.clone(), store.clone(), stop.clone(), restarts.clone(), addrs.clone());
        tokio::spawn(async move {
            for turn in 0.. {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.notified() => return,
                }
                let index = turn % addrs.len();
                let old = servers.lock().unwrap()[index].take();
                let (addr, store) = (addrs[index].clone(), store.clone());
                let next = tokio::task::spawn_blocking(move || {
                    if let Some(old) = old {
                        old.kill();
                    }
                    soak_server(store.as_deref(), &addr, wait_replicas)
                })
                .await
                .expect("restart the server");
                servers.lock().unwrap()[index] = Some(next);
                restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    });
    let failovers = match (plan.failover_every, &cluster) {
        (Some(every), Some(cluster)) => {
            let stop = Arc::new(tokio::sync::Notify::new());
            Some((stop.clone(), tokio::spawn(fail_over_in_turn(cluster.clone(), every, stop))))
        }
        _ => None,
    };
    let started = Instant::now();
    let tasks: Vec<(Trace, _)> = (0..plan.sessions)
        .map(|index| {
            let trace = Trace::default();
            let mut registry = ToolRegistry::new(FullValidator);
            registry.register(OwnerId(1), cart_add(), ()).expect("a valid tool");
            let client = BrowserLike {
                url: url.clone(),
                session: ClientSession::default(),
                executor: Executor::default(),
                registry,
                socket: None,
                rng: Rng(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)),
                plan,
                tally: Tally::default(),
                trace: trace.clone(),
            };
            (trace, tokio::spawn(client.run()))
        })
        .collect();
    // Generous: the load takes seconds; a client still waiting after this is stuck.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60 + plan.sessions as u64 / 5);
    for (index, (trace, task)) in tasks.into_iter().enumerate() {
        let abort = task.abort_handle();
        let Ok(tally) = tokio::time::timeout_at(deadline, task).await else {
            abort.abort();
            let seen: Vec<String> = trace.lock().unwrap().iter().cloned().collect();
            report.stuck.push(format!("client {index}: {}", seen.join(" | ")));
            continue;
        };
        let tally = tally.expect("client task");
        report.calls += tally.handler_runs.len() as u64;
        for (call_id, runs) in &tally.handler_runs {
            report.handler_runs += runs;
            report.handlers_run_twice += u64::from(*runs > 1);
            let applied = tally.applied.get(call_id).map_or(&[][..], Vec::as_slice);
            match applied {
                [] => report.results_lost += 1,
                [read] => report.results_altered += u64::from(!read.contains(&tally.made[call_id])),
                _ => report.results_applied_twice += 1,
            }
        }
        report.runs_ended += tally.runs_ended;
        report.runs_completed += tally.runs_completed;
        report.reconnects += tally.reconnects;
        report.sessions_lost += tally.sessions_lost;
        report.frames_skipped += tally.frames_skipped;
        report.unexpected_errors += tally.errors;
        report.retry_later += tally.retry_later;
        let room = 10usize.saturating_sub(report.errors.len());
        report.errors.extend(tally.error_texts.into_iter().take(room));
    }
    report.seconds = started.elapsed().as_secs_f64();
    if let Some(restarter) = restarter {
        stop.notify_one();
        restarter.await.expect("the restarts");
        report.restarts = restarts.load(std::sync::atomic::Ordering::Relaxed);
    }
    if let Some((stop, failovers)) = failovers {
        stop.notify_one();
        (report.failovers, report.masters_killed) = failovers.await.expect("the failovers");
    }
    let servers: Vec<Served> = servers.lock().unwrap().drain(..).map(|server| server.expect("a server runs")).collect();
    report.rss_peak_kib = servers[0].rss_kib();
    for server in &servers {
        let health =
            wait_for(server, Duration::from_secs(30), |h| h["stats"]["runsEnded"] == h["stats"]["runsStarted"]).await;
        let read = |key: &str| health["stats"][key].as_u64().unwrap_or(0);
        report.server_results_applied += read("resultsApplied");
        report.server_duplicates_ignored += read("resultsDuplicate");
        report.server_results_late += read("resultsLate");
        report.server_sessions_restored += read("sessionsRestored");
        report.server_sessions_handed_off += read("sessionsHandedOff");
    }
    // Every session closed; they expire after the reconnect grace.
    for server in &servers {
        wait_for(server, Duration::from_secs(30), |h| h["sessions"] == 0).await;
    }
    report.rss_after_kib = servers[0].rss_kib();
    report
}
