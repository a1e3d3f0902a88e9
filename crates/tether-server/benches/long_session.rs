//! The cost of a write against the length of the conversation. On each store (memory, SQLite,
//! Redis, one after the other in one run, the others idle) a short session takes 20 runs and a
//! long one RUNS runs (2,000 by default). Measured:
//! - the `TOOL_RESULT` → `TOOL_RESULT_ACK` round trip (the server stores the result before it
//!   answers) around run 20 and at the last runs of the long session; the memory store, which
//!   writes nothing, shows what the rest of the server's work adds as the conversation grows;
//! - what each state write stores, read by the bench itself from the SQLite file and from Redis:
//!   the patches of the short session and of the long one (the writes since the last whole
//!   state), and the whole state, which every write stored before patches;
//! - Redis's own time per write script (`INFO commandstats`, reset before each window);
//! - each server's resident memory before and after the long session (what a conversation
//!   costs in memory, per run).
//!
//! `cargo bench -p tether-server --bench long_session` (RUNS=2000 by default).

#[path = "../tests/common/redis.rs"]
mod redis_support;
#[path = "../tests/common/serve.rs"]
mod serve;
mod support;

use std::time::Duration;

use support::{Socket, context, one_run};

/// The runs compared at each end: runs 1-40 (around run 20), and the last 40.
const WINDOW: usize = 40;
/// The short session's runs.
const SHORT: usize = 20;

fn median<T: Ord + Copy>(samples: &[T]) -> T {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Session `id` in the SQLite file: its whole state's size and its patches' sizes.
fn sqlite_writes(path: &std::path::Path, id: &str) -> (usize, Vec<usize>) {
    let connection = rusqlite::Connection::open(path).unwrap();
    let state: i64 =
        connection.query_row("SELECT length(text) FROM states WHERE session = ?1", [id], |row| row.get(0)).unwrap();
    let mut statement = connection.prepare("SELECT length(text) FROM patches WHERE session = ?1").unwrap();
    let patches = statement.query_map([id], |row| row.get::<_, i64>(0)).unwrap().map(|n| n.unwrap() as usize).collect();
    (state as usize, patches)
}

/// Session `id` in Redis: its whole state's size and its patches' sizes.
async fn redis_writes(connection: &mut redis::aio::MultiplexedConnection, id: &str) -> (usize, Vec<usize>) {
    let state: usize =
        redis::cmd("HSTRLEN").arg(format!("tether:{{{id}}}:s")).arg("s").query_async(connection).await.unwrap();
    let entries: redis::streams::StreamRangeReply =
        redis::cmd("XRANGE").arg(format!("tether:{{{id}}}:p")).arg("-").arg("+").query_async(connection).await.unwrap();
    let patches = entries.ids.iter().map(|entry| entry.get::<String>("f").map_or(0, |text| text.len())).collect();
    (state, patches)
}

/// Redis's own count of script calls (writes, and the session's one claim) since the last reset,
/// and its microseconds per call.
async fn redis_writes_and_usec(connection: &mut redis::aio::MultiplexedConnection) -> (f64, f64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(connection).await.unwrap();
    let line = info.lines().find(|line| line.starts_with("cmdstat_evalsha:")).unwrap_or_default();
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|field| field.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    (field("calls="), field("usec_per_call="))
}

async fn reset_redis_stats(connection: &mut redis::aio::MultiplexedConnection) {
    redis::cmd("CONFIG").arg("RESETSTAT").query_async::<()>(connection).await.unwrap();
}

async fn session(url: &str) -> (Socket, String) {
    let (mut ws, welcome) = support::welcomed(url).await;
    support::send(&mut ws, context(1)).await;
    (ws, welcome.session_id)
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() {
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    assert!(runs >= 3 * WINDOW, "RUNS must be at least {}", 3 * WINDOW);
    let dir = std::env::temp_dir().join(format!("tether-bench-long-session-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("sessions.db");
    let sqlite = format!("sqlite:{}", db.display());
    let limits = ["--max-sessions-per-ip", "0", "--max-frames-per-second", "0"];
    let redis = redis_support::Redis::start("bench-long-session", &[]);
    let redis_url = redis.url();
    let mut stats = redis::Client::open(redis_url.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let memory_server = serve::Serve::new().args(limits).args(["--store", "memory"]).start();
    let sqlite_server = serve::Serve::new().args(limits).args(["--store", sqlite.as_str()]).start();
    let redis_server = serve::Serve::new().args(limits).args(["--store", redis_url.as_str()]).start();
    let servers = [("memory", &memory_server), ("SQLite", &sqlite_server), ("Redis", &redis_server)];

    // One store at a time, the others idle (a server still freeing a run's conversation would
    // compete with the next store's round trips on two cores): its short session, then its long
    // one.
    let mut short_ids = Vec::new();
    let mut long = Vec::new();
    let mut acks: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); servers.len()];
    let mut rss_before = Vec::new();
    let mut rss_after = Vec::new();
    let mut redis_usec = Vec::new();
    for (index, (store, server)) in servers.iter().enumerate() {
        let (mut ws, id) = session(&server.url()).await;
        for n in 0..SHORT {
            one_run(&mut ws, n).await;
        }
        short_ids.push(id);
        let (mut ws, id) = session(&server.url()).await;
        rss_before.push(server.rss_kib());
        for n in 0..runs {
            if *store == "Redis" && (n == 0 || n == runs - WINDOW) {
                reset_redis_stats(&mut stats).await;
            }
            acks[index].push(one_run(&mut ws, n).await.1);
            if *store == "Redis" && (n == WINDOW - 1 || n == runs - 1) {
                redis_usec.push(redis_writes_and_usec(&mut stats).await);
            }
        }
        rss_after.push(server.rss_kib());
        long.push((ws, id));
    }
    let long_ids: Vec<String> = long.into_iter().map(|(_, id)| id).collect();

    println!("TOOL_RESULT -> TOOL_RESULT_ACK p50, one session of {runs} runs (runs 1-{WINDOW} and the last {WINDOW}):");
    println!("| store | around run 20 | at run {runs} | ratio |");
    println!("| --- | --- | --- | --- |");
    for (index, (store, _)) in servers.iter().enumerate() {
        let early = ms(median(&acks[index][..WINDOW]));
        let late = ms(median(&acks[index][runs - WINDOW..]));
        println!("| {store} | {early:.3} ms | {late:.3} ms | {:.2}x |", late / early);
    }
    for (index, (store, _)) in servers.iter().enumerate() {
        println!(
            "server memory (RSS), {store} store: {} KiB before the long session, {} KiB after its {runs} runs: {:.2} KiB per run",
            rss_before[index],
            rss_after[index],
            rss_after[index].saturating_sub(rss_before[index]) as f64 / runs as f64
        );
    }
    let ((early_calls, early_usec), (late_calls, late_usec)) = (redis_usec[0], redis_usec[1]);
    println!(
        "Redis's own time per write script: {early_usec:.1} us around run 20, {late_usec:.1} us at run {runs} ({:.2}x); \
         scripts per run: {:.1} and {:.1}",
        late_usec / early_usec,
        early_calls / WINDOW as f64,
        late_calls / WINDOW as f64
    );

    let redis_short = redis_writes(&mut stats, &short_ids[2]).await;
    let redis_long = redis_writes(&mut stats, &long_ids[2]).await;
    // A deploy: the SQLite server stores what it queued, then the bench reads the file.
    assert!(sqlite_server.terminate().success());
    let sqlite_short = sqlite_writes(&db, &short_ids[1]);
    let sqlite_long = sqlite_writes(&db, &long_ids[1]);
    println!("what a state write stores (median patch since the last whole state) and the whole state:");
    println!("| store | patch after {SHORT} runs | patch after {runs} runs | whole state after {runs} runs |");
    println!("| --- | --- | --- | --- |");
    for (store, short, long) in [("SQLite", sqlite_short, sqlite_long), ("Redis", redis_short, redis_long)] {
        println!(
            "| {store} | {} bytes (of {}) | {} bytes (of {}) | {} bytes |",
            median(&short.1),
            short.1.len(),
            median(&long.1),
            long.1.len(),
            long.0
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
