//! The soak: many sessions against a real `tether serve` process on loopback, each running
//! tool calls while some clients drop their socket at random and resume. Shared by the small
//! soak test (`tests/soak.rs`) and the full run (`benches/soak.rs`).
//!
//! Each simulated client behaves like the browser runtime: it keeps every result until the
//! server acknowledges it, resends unacknowledged results after resuming, and answers a
//! repeated `TOOL_CALL` with the result it already has (never running the tool twice). The
//! figures come from the server's own counters (`/healthz`) and from what the clients saw.

#![allow(dead_code, unreachable_pub, clippy::print_stdout)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tether_protocol::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

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
}

/// What a soak measured.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Runs the server completed (status `completed`).
    pub runs_completed: u64,
    /// Runs the server started.
    pub runs_started: u64,
    /// Tool calls the clients answered (distinct call ids).
    pub calls_answered: u64,
    /// Results the server applied.
    pub results_applied: u64,
    /// Answered calls whose result the server never applied.
    pub results_lost: u64,
    /// Results the server applied more than once (applied minus distinct calls, when positive).
    pub results_applied_twice: u64,
    /// Duplicate results the server acknowledged and ignored (resent after a drop).
    pub duplicates_ignored: u64,
    /// Socket drops and resumes.
    pub reconnects: u64,
    /// Resumes that did not get the session back.
    pub sessions_lost: u64,
    /// Runs whose end a resumed client did not wait for: once its result was acknowledged it
    /// went on, since the end may have been written to the socket it dropped.
    pub ends_not_awaited: u64,
    /// `ERROR` frames other than `run_in_progress` (which a resumed client may provoke).
    pub unexpected_errors: u64,
    /// Server memory (RSS, KiB) when idle before, at the end with every session open, and after
    /// every session had closed and expired.
    pub rss_before_kib: u64,
    /// See `rss_before_kib`.
    pub rss_peak_kib: u64,
    /// See `rss_before_kib`.
    pub rss_after_kib: u64,
    /// Wall time of the load, in seconds.
    pub seconds: f64,
    /// Clients that were still waiting when the load's time was up, with what they last saw.
    pub stuck: Vec<String>,
}

impl SoakReport {
    /// A one-paragraph summary.
    pub fn summary(&self, plan: &SoakPlan) -> String {
        format!(
            "soak: {} sessions x {} tool calls, drop chance {:.0}%, {:.1} s\n\
             runs completed {}/{} started; calls answered {}, results applied {}, lost {}, applied twice {}, \
             duplicates ignored {}; reconnects {}, sessions lost {}, run ends not awaited {}, unexpected errors {}\n\
             server RSS {} KiB before, {} KiB with all sessions, {} KiB after they expired",
            plan.sessions,
            plan.calls,
            plan.drop_chance * 100.0,
            self.seconds,
            self.runs_completed,
            self.runs_started,
            self.calls_answered,
            self.results_applied,
            self.results_lost,
            self.results_applied_twice,
            self.duplicates_ignored,
            self.reconnects,
            self.sessions_lost,
            self.ends_not_awaited,
            self.unexpected_errors,
            self.rss_before_kib,
            self.rss_peak_kib,
            self.rss_after_kib,
        )
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A small deterministic random source (xorshift), one per client.
struct Rng(u64);

impl Rng {
    fn chance(&mut self, p: f64) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1_000_000) as f64 / 1_000_000.0 < p
    }
}

/// The server under load: a `tether serve` child process.
struct ServerProcess {
    child: Child,
    addr: String,
}

impl ServerProcess {
    fn start(binary: &str) -> ServerProcess {
        let mut child = Command::new(binary)
            .args(["serve", "--addr", "127.0.0.1:0", "--model", "scripted"])
            // Every client comes from 127.0.0.1; the other limits stay at their defaults.
            .args(["--max-sessions-per-ip", "0", "--reconnect-grace-seconds", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tether");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.split("http://").nth(1).and_then(|s| s.split_whitespace().next()).expect("address").to_string();
        ServerProcess { child, addr }
    }

    async fn health(&self) -> Value {
        let mut stream = tokio::net::TcpStream::connect(&self.addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or(Value::Null)
    }

    /// Waits until `ready` holds for `/healthz`, polling for at most `limit`.
    async fn wait_for(&self, limit: Duration, ready: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let health = self.health().await;
            if ready(&health) || started.elapsed() > limit {
                return health;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one client saw.
#[derive(Default)]
struct ClientTally {
    answered: HashSet<String>,
    reconnects: u64,
    sessions_lost: u64,
    ends_not_awaited: u64,
    unexpected_errors: u64,
}

async fn open(url: &str, resume: Option<Resume>) -> Option<(Socket, Welcome)> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.ok()?;
    let hello = Hello { id: "h".into(), protocol_version: PROTOCOL_VERSION, resume, client: Some("soak".into()) };
    ws.send(Message::Text(encode_frame(&ClientFrame::Hello(hello)).into())).await.ok()?;
    loop {
        if let ServerFrame::Welcome(welcome) = recv(&mut ws).await? {
            return Some((ws, welcome));
        }
    }
}

async fn recv(ws: &mut Socket) -> Option<ServerFrame> {
    loop {
        match ws.next().await? {
            Ok(Message::Text(text)) => return decode_server_frame(&text, usize::MAX).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

async fn send(ws: &mut Socket, frame: ClientFrame) {
    // A failed send shows up as the end of the stream on the next receive.
    let _ = ws.send(Message::Text(encode_frame(&frame).into())).await;
}

fn tools() -> Vec<ToolSpec> {
    let ids = json!({"type": "string", "enum": ["mug-red", "mug-blue", "tee-black"]});
    vec![ToolSpec {
        name: "cart_add".into(),
        description: "Add a product to the shopping cart.".into(),
        parameters: json!({"type": "object", "properties": {"productId": ids}, "required": ["productId"]}),
        risk: Risk::None,
        global: false,
    }]
}

/// Resumes the session on a new socket (the old one is dropped, as a crash would), resyncs the
/// tools and resends every unacknowledged result. `false` if the session did not come back.
async fn reconnect(
    url: &str,
    resume: &Resume,
    ws: &mut Socket,
    revision: &mut u64,
    unacked: &HashMap<String, Value>,
) -> bool {
    match open(url, Some(resume.clone())).await {
        Some((socket, welcome)) if welcome.resumed => *ws = socket,
        _ => return false,
    }
    *revision += 1;
    let update = ContextUpdate { id: format!("c{revision}"), revision: *revision, tools: tools(), page: None };
    send(ws, ClientFrame::ContextUpdate(update)).await;
    for (call_id, content) in unacked {
        let result = ToolResult {
            id: format!("r-{call_id}"),
            call_id: call_id.clone(),
            status: ResultStatus::Ok,
            content: content.clone(),
        };
        send(ws, ClientFrame::ToolResult(result)).await;
    }
    true
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
    match frame {
        ServerFrame::ToolCall(c) => format!("TOOL_CALL {} run {}", c.call_id, c.run_id),
        ServerFrame::ToolResultAck(a) => format!("ACK {}", a.call_id),
        ServerFrame::AgentMessage(m) => format!("AGENT_MESSAGE run {} done {}", m.run_id, m.done),
        ServerFrame::Error(e) => format!("ERROR {} reply_to {:?}: {}", e.code.as_str(), e.reply_to, e.message),
        ServerFrame::Welcome(w) => format!("WELCOME resumed {}", w.resumed),
        ServerFrame::ToolCancel(c) => format!("TOOL_CANCEL {}", c.call_id),
        ServerFrame::Event(_) => "EVENT".into(),
    }
}

/// One browser-like client: `calls` runs of one tool call each, dropping its socket at random.
async fn client(url: String, index: usize, plan: SoakPlan, trace: Trace) -> ClientTally {
    let mut tally = ClientTally::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let Some((mut ws, welcome)) = open(&url, None).await else {
        tally.sessions_lost += 1;
        return tally;
    };
    let resume = Resume { session_id: welcome.session_id, token: welcome.resume_token, last_seq: None };
    let mut revision = 1;
    send(&mut ws, ClientFrame::ContextUpdate(ContextUpdate { id: "c".into(), revision, tools: tools(), page: None }))
        .await;
    // Results not yet acknowledged, by call id (resent after a resume), and the runs finished.
    let mut unacked: HashMap<String, Value> = HashMap::new();
    let mut finished_runs: HashSet<String> = HashSet::new();
    let mut message = 0;
    for _ in 0..plan.calls {
        message += 1;
        let mut message_id = format!("m{message}");
        let text = "add the red mug to my cart".to_string();
        send(&mut ws, ClientFrame::UserMessage(UserMessage { id: message_id.clone(), text: text.clone() })).await;
        note(&trace, format!("sent USER_MESSAGE {message_id}"));
        let mut run: Option<String> = None;
        let mut resumed_in_run = false;
        let mut resend_message = false;
        loop {
            let Some(frame) = recv(&mut ws).await else {
                note(&trace, "socket ended: reconnecting".into());
                tally.reconnects += 1;
                if !reconnect(&url, &resume, &mut ws, &mut revision, &unacked).await {
                    tally.sessions_lost += 1;
                    return tally;
                }
                resumed_in_run = true;
                continue;
            };
            if !matches!(frame, ServerFrame::Event(_)) {
                note(&trace, describe(&frame));
            }
            match frame {
                ServerFrame::ToolCall(call) => {
                    if run.is_none() && !finished_runs.contains(&call.run_id) {
                        run = Some(call.run_id.clone());
                    }
                    tally.answered.insert(call.call_id.clone());
                    // A repeated call gets the result the client already has: it never runs twice.
                    let content = unacked
                        .entry(call.call_id.clone())
                        .or_insert_with(|| json!(format!("added for {}", call.call_id)))
                        .clone();
                    let id = format!("r-{}", call.call_id);
                    let result = ToolResult { id, call_id: call.call_id, status: ResultStatus::Ok, content };
                    if rng.chance(plan.drop_chance) {
                        // A crash: half of the time with the result already on its way.
                        let sent = rng.chance(0.5);
                        if sent {
                            send(&mut ws, ClientFrame::ToolResult(result)).await;
                        }
                        note(&trace, format!("dropping the socket (result sent: {sent})"));
                        tally.reconnects += 1;
                        if !reconnect(&url, &resume, &mut ws, &mut revision, &unacked).await {
                            tally.sessions_lost += 1;
                            return tally;
                        }
                        resumed_in_run = true;
                        continue;
                    }
                    send(&mut ws, ClientFrame::ToolResult(result)).await;
                }
                ServerFrame::ToolResultAck(ack) => {
                    unacked.remove(&ack.call_id);
                    // After a resume the end of this run may have been written to the dropped
                    // socket: once its result is acknowledged, go on (a run still going answers
                    // the next message with run_in_progress, and the message is sent again after
                    // the run's end).
                    if resumed_in_run && run.is_some() && unacked.is_empty() {
                        finished_runs.extend(run.clone());
                        tally.ends_not_awaited += 1;
                        break;
                    }
                }
                ServerFrame::AgentMessage(m) if m.done => {
                    let ours = run.as_deref() == Some(m.run_id.as_str());
                    finished_runs.insert(m.run_id);
                    if ours {
                        break;
                    }
                    if resend_message {
                        resend_message = false;
                        message += 1;
                        message_id = format!("m{message}");
                        let again = UserMessage { id: message_id.clone(), text: text.clone() };
                        send(&mut ws, ClientFrame::UserMessage(again)).await;
                        note(&trace, format!("sent USER_MESSAGE {message_id} again"));
                    }
                }
                ServerFrame::Error(error)
                    if error.code == ErrorCode::RunInProgress
                        && error.reply_to.as_deref() == Some(message_id.as_str()) =>
                {
                    resend_message = true;
                }
                ServerFrame::Error(error) if error.code == ErrorCode::RunInProgress => {}
                ServerFrame::Error(_) => tally.unexpected_errors += 1,
                _ => {}
            }
        }
    }
    let _ = ws.close(None).await;
    // Read until the server closes, so that the close handshake completes.
    while recv(&mut ws).await.is_some() {}
    tally
}

/// Runs a soak against the `tether` binary at `binary`.
pub async fn soak(binary: &str, plan: SoakPlan) -> SoakReport {
    let server = ServerProcess::start(binary);
    let url = format!("ws://{}/ws", server.addr);
    let pid = server.child.id();
    server.wait_for(Duration::from_secs(5), |h| h["status"] == "ok").await;
    let mut report = SoakReport { rss_before_kib: rss_kib(pid), ..SoakReport::default() };
    let started = Instant::now();
    let tasks: Vec<(Trace, _)> = (0..plan.sessions)
        .map(|index| {
            let trace = Trace::default();
            (trace.clone(), tokio::spawn(client(url.clone(), index, plan, trace)))
        })
        .collect();
    // Generous: the load takes seconds; a client still waiting after this is stuck.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60 + plan.sessions as u64 / 5);
    let mut answered = 0;
    for (index, (trace, task)) in tasks.into_iter().enumerate() {
        let abort = task.abort_handle();
        let Ok(tally) = tokio::time::timeout_at(deadline, task).await else {
            abort.abort();
            let seen: Vec<String> = trace.lock().unwrap().iter().cloned().collect();
            report.stuck.push(format!("client {index}: {}", seen.join(" | ")));
            continue;
        };
        let tally = tally.expect("client task");
        answered += tally.answered.len() as u64;
        report.reconnects += tally.reconnects;
        report.sessions_lost += tally.sessions_lost;
        report.ends_not_awaited += tally.ends_not_awaited;
        report.unexpected_errors += tally.unexpected_errors;
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.rss_peak_kib = rss_kib(pid);
    // Runs whose end a client did not wait for finish on their own.
    let health =
        server.wait_for(Duration::from_secs(30), |h| h["stats"]["runsEnded"] == h["stats"]["runsStarted"]).await;
    let stats = &health["stats"];
    let read = |key: &str| stats[key].as_u64().unwrap_or(0);
    report.runs_started = read("runsStarted");
    report.runs_completed = read("runsCompleted");
    report.results_applied = read("resultsApplied");
    report.duplicates_ignored = read("resultsDuplicate");
    report.calls_answered = answered;
    report.results_lost = answered.saturating_sub(report.results_applied);
    report.results_applied_twice = report.results_applied.saturating_sub(answered);
    // Every session closed; they expire after the reconnect grace.
    server.wait_for(Duration::from_secs(30), |h| h["sessions"] == 0).await;
    report.rss_after_kib = rss_kib(pid);
    report
}
