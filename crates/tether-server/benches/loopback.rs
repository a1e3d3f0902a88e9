//! Loopback measurements against a real `tether serve` process:
//! - `TOOL_RESULT` → `TOOL_RESULT_ACK` round trip (the server applies the result and answers),
//! - `USER_MESSAGE` → `TOOL_CALL` latency with the built-in model,
//! - the same two with the memory, SQLite and Redis stores, taking turns in one run,
//! - several servers on one Redis: `HELLO` → `WELCOME` when a client comes back to the server that
//!   holds its session and when it comes to another one (which claims the session from it), and
//!   the throughput of concurrent clients on one server and spread over three,
//! - how many idle sessions one server holds, and its memory per session (memory and Redis
//!   stores),
//! - a restart with SESSIONS stored sessions: the time until the new process listens, and until
//!   every session was resumed by its client.
//!
//! `cargo bench -p tether-server --bench loopback` (SESSIONS=10000 by default). Redis is a
//! `redis-server` of the bench's own, on a free port.

#[path = "../tests/common/redis.rs"]
mod redis;
#[path = "../tests/common/serve.rs"]
mod serve;
mod support;

use std::time::{Duration, Instant};

use support::{context, hello, one_run, percentile, report, resume, send, welcomed};

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() {
    let sessions: usize = std::env::var("SESSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = std::env::temp_dir().join(format!("tether-bench-loopback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sqlite = format!("sqlite:{}", dir.join("sessions.db").display());
    // One client address opens every session, and one connection sends thousands of frames a
    // second: lift those two limits for the measurement.
    let limits = ["--max-sessions-per-ip", "0", "--max-frames-per-second", "0"];
    let redis = redis::Redis::start("bench-loopback", &[]);
    let redis_url = redis.url();
    let memory_server = serve::Serve::new().args(limits).args(["--store", "memory"]).start();
    let sqlite_server = serve::Serve::new().args(limits).args(["--store", sqlite.as_str()]).start();
    let redis_server = serve::Serve::new().args(limits).args(["--store", redis_url.as_str()]).start();

    // Round trips with each store, taking turns, so that all see the same machine. A session
    // holds its whole conversation, so each takes RUNS_PER_SESSION runs (a long chat) and then
    // a new one starts: the figures are for conversations of up to that length.
    const RUNS_PER_SESSION: usize = 20;
    let stores = [("memory", &memory_server), ("SQLite", &sqlite_server), ("Redis", &redis_server)];
    let mut sockets = Vec::new();
    let (mut calls, mut acks): (Vec<Vec<Duration>>, Vec<Vec<Duration>>) = (vec![vec![]; 3], vec![vec![]; 3]);
    for n in 0..2000 {
        if n % RUNS_PER_SESSION == 0 {
            sockets.clear();
            for (_, server) in &stores {
                let mut ws = hello(&server.url()).await;
                send(&mut ws, context(1)).await;
                sockets.push(ws);
            }
        }
        for (index, ws) in sockets.iter_mut().enumerate() {
            let (call, ack) = one_run(ws, n).await;
            calls[index].push(call);
            acks[index].push(ack);
        }
    }
    let median = |samples: &[Duration]| {
        let mut sorted = samples.to_vec();
        sorted.sort();
        percentile(&sorted, 0.5)
    };
    println!(
        "TOOL_RESULT -> TOOL_RESULT_ACK p50 / memory store's: SQLite {:.2}x, Redis {:.2}x",
        median(&acks[1]).as_secs_f64() / median(&acks[0]).as_secs_f64(),
        median(&acks[2]).as_secs_f64() / median(&acks[0]).as_secs_f64()
    );
    for (index, (store, _)) in stores.iter().enumerate() {
        report(&format!("TOOL_RESULT -> TOOL_RESULT_ACK round trip (loopback, {store} store)"), acks[index].clone());
    }
    for (index, (store, _)) in stores.iter().enumerate() {
        report(&format!("USER_MESSAGE -> TOOL_CALL (scripted model, one turn, {store} store)"), calls[index].clone());
    }
    drop(sockets);

    // Several servers on one Redis: a client that comes back to the server holding its session,
    // and one that comes to another server (which asks the holder to let go, then reads the
    // session back), taking turns.
    let other_server = serve::Serve::new().args(limits).args(["--store", redis_url.as_str()]).start();
    let (mut same, mut moved) = (Vec::new(), Vec::new());
    for n in 0..300 {
        let (mut ws, welcome) = welcomed(&redis_server.url()).await;
        send(&mut ws, context(1)).await;
        one_run(&mut ws, n).await;
        drop(ws);
        let started = Instant::now();
        assert!(resume(&redis_server.url(), &welcome.session_id, &welcome.resume_token).await);
        same.push(started.elapsed());
        let started = Instant::now();
        assert!(resume(&other_server.url(), &welcome.session_id, &welcome.resume_token).await);
        moved.push(started.elapsed());
    }
    println!(
        "HELLO -> WELCOME (resume) p50 on another server / on the holder: {:.2}x",
        median(&moved).as_secs_f64() / median(&same).as_secs_f64()
    );
    report("HELLO -> WELCOME resuming on the server that holds the session (Redis)", same);
    report("HELLO -> WELCOME resuming on another server, which claims it from the holder (Redis)", moved);

    // Throughput: CLIENTS clients at once, each RUNS runs, all on one server, then spread over
    // three (every session stays on its server).
    const CLIENTS: usize = 200;
    const RUNS: usize = 10;
    let third_server = serve::Serve::new().args(limits).args(["--store", redis_url.as_str()]).start();
    let fleets = [vec![redis_server.url()], vec![redis_server.url(), other_server.url(), third_server.url()]];
    for urls in &fleets {
        let started = Instant::now();
        futures_util::future::join_all((0..CLIENTS).map(|client| {
            let url = urls[client % urls.len()].clone();
            async move {
                let mut ws = hello(&url).await;
                send(&mut ws, context(1)).await;
                for n in 0..RUNS {
                    one_run(&mut ws, n).await;
                }
            }
        }))
        .await;
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "throughput, Redis store, {} server(s): {CLIENTS} clients x {RUNS} runs in {seconds:.2} s: {:.0} runs/s",
            urls.len(),
            (CLIENTS * RUNS) as f64 / seconds
        );
    }
    drop((other_server, third_server));

    // Idle sessions, memory store and Redis store.
    for (store, server) in [("memory", &memory_server), ("Redis", &redis_server)] {
        let url = server.url();
        let before = server.rss_kib();
        let started = Instant::now();
        let mut idle = Vec::with_capacity(sessions);
        for batch in 0..sessions.div_ceil(250) {
            let count = 250.min(sessions - batch * 250);
            let opened = futures_util::future::join_all((0..count).map(|_| hello(&url))).await;
            idle.extend(opened);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = server.rss_kib();
        println!(
            "idle sessions, {store} store: {} open in {:.1} s; server RSS {} KiB -> {} KiB: {:.1} KiB per session",
            idle.len(),
            started.elapsed().as_secs_f64(),
            before,
            after,
            (after.saturating_sub(before)) as f64 / idle.len() as f64
        );
    }
    drop(memory_server);
    drop(redis_server);

    // A restart with `sessions` stored sessions (each with its page's tools): the time until the
    // new process listens, and until every session has been resumed by its client.
    let url = sqlite_server.url();
    let mut stored = Vec::with_capacity(sessions);
    for batch in 0..sessions.div_ceil(250) {
        let count = 250.min(sessions - batch * 250);
        let opened = futures_util::future::join_all((0..count).map(|_| async {
            let (mut ws, welcome) = welcomed(&url).await;
            send(&mut ws, context(1)).await;
            (ws, welcome.session_id, welcome.resume_token)
        }))
        .await;
        stored.extend(opened);
    }
    let tokens: Vec<(String, String)> = stored.into_iter().map(|(_, id, token)| (id, token)).collect();
    // A deploy: the draining server stores what its sessions queued before it exits.
    let status = sqlite_server.terminate();
    assert!(status.success(), "{status}");
    let size = std::fs::metadata(dir.join("sessions.db")).map(|m| m.len()).unwrap_or(0);
    let started = Instant::now();
    let restarted = serve::Serve::new().args(limits).args(["--store", sqlite.as_str()]).start();
    let listening = started.elapsed();
    let url = restarted.url();
    let mut resumed = 0;
    for batch in tokens.chunks(250) {
        let answers = futures_util::future::join_all(batch.iter().map(|(id, token)| resume(&url, id, token))).await;
        resumed += answers.into_iter().filter(|resumed| *resumed).count();
    }
    let served_again = started.elapsed();
    // For comparison, on the same server: as many clients opening new sessions (what the
    // connection handshakes alone cost this machine).
    let fresh_started = Instant::now();
    for batch in 0..sessions.div_ceil(250) {
        let count = 250.min(sessions - batch * 250);
        drop(futures_util::future::join_all((0..count).map(|_| hello(&url))).await);
    }
    let fresh = fresh_started.elapsed();
    println!(
        "restart with {sessions} stored sessions ({:.1} MB SQLite file): listening after {:.0} ms; all {resumed} \
         resumed (250 clients at a time) after {:.2} s; {sessions} new sessions on the same server: {:.2} s",
        size as f64 / 1e6,
        listening.as_secs_f64() * 1e3,
        served_again.as_secs_f64(),
        fresh.as_secs_f64()
    );
    assert_eq!(resumed, sessions, "every stored session resumes");
    drop(restarted);
    let _ = std::fs::remove_dir_all(&dir);
}
