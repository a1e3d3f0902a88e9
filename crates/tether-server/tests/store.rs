//! The session stores, one suite for each: what a write stores is read back whole, writes are
//! atomic, old sessions expire and give their space back. SQLite also against real files: a
//! reopened file keeps its sessions, a damaged file, a second opener and a full file are refused
//! clearly and nothing is half-written. Redis against a real `redis-server` of the test's own:
//! killed and restarted (AOF), gone, out of memory; and against a Redis Cluster of the test's
//! own, with a master failed over while a replica has not got its last write.

#[path = "common/dir.rs"]
mod dir;
#[path = "common/redis.rs"]
mod redis_support;

use std::path::PathBuf;

use redis_support::{Redis, RedisCluster};

use tether_server::StoreProblem;
use tether_server::store::{MemoryStore, RedisStore, SessionStore, SessionWrite, SqliteStore, token_hash};
use tether_server::{ServerError, store};

type Dir = dir::TestDir;

fn first_write(expires_at_ms: u64) -> SessionWrite {
    SessionWrite {
        token_hash: Some(token_hash("token-1")),
        state: Some(r#"{"history":["hi"]}"#.into()),
        patches: Vec::new(),
        append: vec![(1, "s1".into()), (2, "s2".into())],
        trim_below: None,
        expires_at_ms,
        claim: None,
    }
}

/// The behaviour every store shares.
async fn suite(store: &dyn SessionStore) {
    let now = store::unix_ms();
    let later = now + 60_000;
    assert_eq!(store.load("s-a", now).await.unwrap(), None);
    store.write("s-a", first_write(later)).await.unwrap();
    let loaded = store.load("s-a", now).await.unwrap().expect("stored");
    assert_eq!(loaded.token_hash, token_hash("token-1"));
    assert_eq!(loaded.state, r#"{"history":["hi"]}"#);
    assert_eq!(loaded.log, vec![(1, "s1".to_string()), (2, "s2".to_string())]);

    // A write without a state keeps the old one; appended frames follow; old ones are trimmed;
    // a frame number already stored is not stored twice.
    let write = SessionWrite {
        append: vec![(2, "dup".into()), (3, "s3".into())],
        trim_below: Some(2),
        expires_at_ms: later,
        ..Default::default()
    };
    store.write("s-a", write).await.unwrap();
    let loaded = store.load("s-a", now).await.unwrap().unwrap();
    assert_eq!(loaded.state, r#"{"history":["hi"]}"#);
    assert_eq!(loaded.token_hash, token_hash("token-1"));
    assert_eq!(loaded.log, vec![(2, "s2".to_string()), (3, "s3".to_string())]);

    // Patches follow the state in order; one whose number is already stored (a write tried
    // twice) is not stored twice; a whole state drops the patches before it, and patches in the
    // same write follow it.
    let patches = |numbers: &[u64]| numbers.iter().map(|n| (*n, format!("p{n}"))).collect::<Vec<_>>();
    let patch_write =
        |numbers: &[u64]| SessionWrite { patches: patches(numbers), expires_at_ms: later, ..Default::default() };
    store.write("s-a", patch_write(&[1, 2])).await.unwrap();
    store.write("s-a", patch_write(&[2, 3])).await.unwrap();
    store.write("s-a", patch_write(&[2, 3])).await.unwrap();
    let loaded = store.load("s-a", now).await.unwrap().unwrap();
    assert_eq!(loaded.state, r#"{"history":["hi"]}"#);
    assert_eq!(loaded.patches, patches(&[1, 2, 3]));
    let whole = SessionWrite { state: Some("whole".into()), ..patch_write(&[4, 5]) };
    store.write("s-a", whole.clone()).await.unwrap();
    store.write("s-a", whole).await.unwrap();
    let loaded = store.load("s-a", now).await.unwrap().unwrap();
    assert_eq!((loaded.state.as_str(), loaded.patches), ("whole", patches(&[4, 5])));
    assert_eq!(loaded.log.len(), 2, "frames are untouched by state writes");

    // Expiry: a session past its time is not loaded, and `expire` removes it and only it.
    store.write("s-old", first_write(now - 1)).await.unwrap();
    assert_eq!(store.load("s-old", now).await.unwrap(), None);
    assert_eq!(store.count().await.unwrap(), 2);
    assert_eq!(store.expire(now).await.unwrap(), 1);
    assert_eq!(store.count().await.unwrap(), 1);
    assert!(store.load("s-a", now).await.unwrap().is_some());

    store.remove("s-a").await.unwrap();
    assert_eq!(store.load("s-a", now).await.unwrap(), None);
    assert_eq!(store.count().await.unwrap(), 0);
    // A session written again after its removal starts without the old patches.
    store.write("s-a", first_write(later)).await.unwrap();
    assert_eq!(store.load("s-a", now).await.unwrap().unwrap().patches, vec![]);
    store.remove("s-a").await.unwrap();
}

#[tokio::test]
async fn the_memory_store_passes_the_suite() {
    suite(&MemoryStore::default()).await;
}

#[tokio::test]
async fn the_sqlite_store_passes_the_suite_and_keeps_sessions_across_a_reopen() {
    let dir = Dir::new("store-reopen");
    let path = dir.file("sessions.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        suite(&store).await;
        store.write("s-kept", first_write(store::unix_ms() + 60_000)).await.unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let kept = store.load("s-kept", store::unix_ms()).await.unwrap().expect("kept across a reopen");
    assert_eq!(kept.log.len(), 2);
    // The token itself is nowhere in the file.
    let bytes = std::fs::read(&path).unwrap();
    assert!(!bytes.windows(7).any(|w| w == b"token-1"));
}

#[tokio::test]
async fn a_file_of_the_layout_before_patches_is_brought_up_to_date_and_keeps_its_sessions() {
    let dir = Dir::new("store-layout-1");
    let path = dir.file("sessions.db");
    {
        // Layout 1, as the server before patches wrote it.
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
                 INSERT INTO meta VALUES ('schema_version', 1);
                 CREATE TABLE sessions (id TEXT PRIMARY KEY, token_hash BLOB NOT NULL, state TEXT NOT NULL,
                     expires_at INTEGER NOT NULL);
                 CREATE TABLE frames (session TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL,
                     PRIMARY KEY (session, seq)) WITHOUT ROWID;",
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO sessions VALUES ('s-old', x'00', 'old state', ?1)",
                [(store::unix_ms() + 60_000) as i64],
            )
            .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let loaded = store.load("s-old", store::unix_ms()).await.unwrap().expect("kept");
    assert_eq!((loaded.state.as_str(), loaded.patches.len()), ("old state", 0));
    let write = SessionWrite {
        patches: vec![(1, "p1".into())],
        expires_at_ms: store::unix_ms() + 60_000,
        ..Default::default()
    };
    store.write("s-old", write).await.unwrap();
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.load("s-old", store::unix_ms()).await.unwrap().unwrap().patches, vec![(1, "p1".to_string())]);
    drop(store);
    // Layout 2: the state moved out of the row every write updates (SQLite rewrites a whole row).
    let connection = rusqlite::Connection::open(&path).unwrap();
    let read = |sql: &str| connection.query_row(sql, [], |row| row.get::<_, rusqlite::types::Value>(0)).unwrap();
    assert_eq!(read("SELECT value FROM meta WHERE key = 'schema_version'"), 2.into());
    assert_eq!(read("SELECT state FROM sessions WHERE id = 's-old'"), String::new().into());
    assert_eq!(read("SELECT text FROM states WHERE session = 's-old'"), "old state".to_string().into());
}

fn problem(error: ServerError) -> (StoreProblem, String) {
    let text = error.to_string();
    match error {
        ServerError::Store { problem, .. } => (problem, text),
        other => panic!("not a store error: {other:?}"),
    }
}

#[test]
fn a_damaged_file_is_refused_and_left_as_it_was() {
    let dir = Dir::new("store-corrupt");
    let path = dir.file("sessions.db");
    let garbage = b"this is not a database, but somebody's notes\n".repeat(200);
    std::fs::write(&path, &garbage).unwrap();
    let (kind, message) = problem(SqliteStore::open(&path).unwrap_err());
    assert_eq!(kind, StoreProblem::Corrupt, "{message}");
    assert!(message.contains("move it aside") && message.contains("sessions.db"), "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage, "the file must not be touched");
}

#[test]
fn a_missing_directory_is_a_clear_error() {
    let dir = Dir::new("store-missing");
    let (kind, message) = problem(SqliteStore::open(&dir.file("no/such/dir/sessions.db")).unwrap_err());
    assert_eq!(kind, StoreProblem::Unavailable);
    assert!(message.contains("does not exist"), "{message}");
}

#[test]
fn a_second_opener_of_the_same_file_is_refused() {
    let dir = Dir::new("store-locked");
    let path = dir.file("sessions.db");
    let first = SqliteStore::open(&path).unwrap();
    let (kind, message) = problem(SqliteStore::open(&path).unwrap_err());
    assert_eq!(kind, StoreProblem::Locked, "{message}");
    assert!(message.contains("one server per SQLite file"), "{message}");
    drop(first);
    SqliteStore::open(&path).expect("free again once the first one closed");
}

#[tokio::test]
async fn a_full_file_refuses_the_write_whole() {
    let dir = Dir::new("store-full");
    let store = SqliteStore::open_with_limit(&dir.file("sessions.db"), Some(96 * 1024)).unwrap();
    let later = store::unix_ms() + 60_000;
    store.write("s-a", first_write(later)).await.unwrap();
    let big: Vec<(u64, String)> = (10..400).map(|n| (n, "x".repeat(1000))).collect();
    let error = store
        .write(
            "s-a",
            SessionWrite { state: Some("changed".into()), append: big, expires_at_ms: later, ..Default::default() },
        )
        .await
        .unwrap_err();
    let (kind, message) = problem(error);
    assert_eq!(kind, StoreProblem::Full, "{message}");
    // Nothing of the failed write is stored: not the state, not one frame.
    let loaded = store.load("s-a", store::unix_ms()).await.unwrap().unwrap();
    assert_eq!(loaded.state, r#"{"history":["hi"]}"#);
    assert_eq!(loaded.log.len(), 2);
    // And the store goes on working for writes that fit.
    store.write("s-b", first_write(later)).await.unwrap();
}

#[tokio::test]
async fn expired_sessions_give_their_space_back() {
    let dir = Dir::new("store-vacuum");
    let path = dir.file("sessions.db");
    let store = SqliteStore::open(&path).unwrap();
    let now = store::unix_ms();
    let frames: Vec<(u64, String)> = (1..=50).map(|n| (n, "f".repeat(2000))).collect();
    for n in 0..40 {
        let write = SessionWrite { append: frames.clone(), expires_at_ms: now - 1, ..first_write(0) };
        store.write(&format!("s-{n}"), write).await.unwrap();
    }
    let pages = |path: &PathBuf| -> u64 {
        // The main file plus what the WAL holds: what the store occupies.
        let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        size(path.clone()) + size(path.with_extension("db-wal"))
    };
    let full = pages(&path);
    assert_eq!(store.expire(now).await.unwrap(), 40);
    // Write once more so that the WAL is checkpointed into the shrunk file.
    store.write("s-new", first_write(now + 60_000)).await.unwrap();
    drop(store);
    let after = pages(&path);
    assert!(after * 4 < full, "the file did not shrink: {full} bytes before, {after} after expiry");
}

#[tokio::test]
async fn the_redis_store_passes_the_suite_and_keeps_sessions_across_a_redis_restart() {
    let mut redis = Redis::start("suite", &[]);
    let store = RedisStore::connect(&redis.url(), "test").await.unwrap();
    suite(&store).await;
    store.write("s-kept", first_write(store::unix_ms() + 60_000)).await.unwrap();
    redis.restart();
    // The connection manager reconnects by itself; the session came back from the AOF.
    let kept = store.load("s-kept", store::unix_ms()).await.unwrap().expect("kept across a Redis restart");
    assert_eq!(kept.log, vec![(1, "s1".to_string()), (2, "s2".to_string())]);
    assert_eq!(kept.token_hash, token_hash("token-1"));
}

#[tokio::test]
async fn redis_gone_is_a_clear_error_and_the_store_recovers() {
    let mut redis = Redis::start("gone", &[]);
    let store = RedisStore::connect(&redis.url(), "test").await.unwrap();
    store.write("s-a", first_write(store::unix_ms() + 60_000)).await.unwrap();
    redis.kill();
    let (kind, message) = problem(store.load("s-a", store::unix_ms()).await.unwrap_err());
    assert_eq!(kind, StoreProblem::Unavailable, "{message}");
    assert!(message.contains("cannot be reached"), "{message}");
    let (kind, _) = problem(store.write("s-b", first_write(store::unix_ms() + 60_000)).await.unwrap_err());
    assert_eq!(kind, StoreProblem::Unavailable);
    redis.restart();
    assert!(store.load("s-a", store::unix_ms()).await.unwrap().is_some());
    // A new connection to a Redis that is not there fails at once, saying so.
    redis.kill();
    let (kind, message) = problem(RedisStore::connect(&redis.url(), "test").await.unwrap_err());
    assert_eq!(kind, StoreProblem::Unavailable, "{message}");
}

#[tokio::test]
async fn redis_out_of_memory_refuses_the_write_whole() {
    let redis = Redis::start("oom", &["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"]);
    let store = RedisStore::connect(&redis.url(), "test").await.unwrap();
    let later = store::unix_ms() + 60_000;
    store.write("s-a", first_write(later)).await.unwrap();
    // Grow one session, a state change and ten frames per write, until Redis refuses one.
    let mut accepted = 0u64;
    let refused = loop {
        assert!(accepted < 500, "Redis never refused a write");
        let first = 3 + accepted * 10;
        let write = SessionWrite {
            state: Some(format!("state after write {accepted}")),
            append: (first..first + 10).map(|n| (n, format!("{n}:{}", "x".repeat(10_000)))).collect(),
            expires_at_ms: later,
            ..Default::default()
        };
        match store.write("s-a", write).await {
            Ok(()) => accepted += 1,
            Err(error) => break error,
        }
    };
    let (kind, message) = problem(refused);
    assert_eq!(kind, StoreProblem::Full, "{message}");
    // The refused write left nothing: the state is the last accepted one, and the log holds the
    // frames of the accepted writes, all of them, and not one of the refused write.
    let loaded = store.load("s-a", store::unix_ms()).await.unwrap().unwrap();
    let expected_state =
        if accepted == 0 { r#"{"history":["hi"]}"#.to_string() } else { format!("state after write {}", accepted - 1) };
    assert_eq!(loaded.state, expected_state);
    assert_eq!(loaded.log.len() as u64, 2 + accepted * 10);
    assert_eq!(loaded.log.last().unwrap().0, 2 + accepted * 10);
}

#[tokio::test]
async fn redis_claims_give_a_session_one_writer_at_a_time() {
    let redis = Redis::start("claims", &[]);
    let store = RedisStore::connect(&redis.url(), "test").await.unwrap();
    claims(&store).await;
}

/// Claims and fencing in a shared store: one writer at a time, a server gone fenced out.
async fn claims(store: &RedisStore) {
    use std::time::Duration;
    use store::Claim;
    let later = store::unix_ms() + 60_000;
    let lease = Duration::from_secs(30);
    store.heartbeat("i-a", lease).await.unwrap();
    store.heartbeat("i-b", lease).await.unwrap();

    // A claims the new session and writes it with its claim.
    let Claim::Claimed(a) = store.claim("s-a", "i-a", later).await.unwrap() else { panic!("a new session is free") };
    store.write("s-a", SessionWrite { claim: Some(a.clone()), ..first_write(later) }).await.unwrap();
    assert!(store.holds("s-a", &a).await.unwrap());
    // While A is alive, B is told who holds it; A asked to let go, releases; B claims it.
    assert_eq!(store.claim("s-a", "i-b", later).await.unwrap(), Claim::HeldBy("i-a".into()));
    let mut requests = store.release_requests("i-a").await.unwrap().expect("a shared store hears requests");
    store.ask_release("s-a", "i-a").await.unwrap();
    let asked = tokio::time::timeout(Duration::from_secs(5), futures_util::StreamExt::next(&mut requests)).await;
    assert_eq!(asked.unwrap().as_deref(), Some("s-a"));
    store.release("s-a", "i-a", &a).await.unwrap();
    let Claim::Claimed(b) = store.claim("s-a", "i-b", later).await.unwrap() else { panic!("released") };
    assert_ne!(a, b);

    // A's writes are fenced out now: refused whole, nothing of them stored.
    let stale = SessionWrite {
        state: Some("A's late state".into()),
        append: vec![(3, "A's late frame".into())],
        expires_at_ms: later,
        claim: Some(a.clone()),
        ..Default::default()
    };
    let (kind, message) = problem(store.write("s-a", stale).await.unwrap_err());
    assert_eq!(kind, StoreProblem::Moved, "{message}");
    let loaded = store.load("s-a", store::unix_ms()).await.unwrap().unwrap();
    assert_eq!(loaded.state, r#"{"history":["hi"]}"#);
    assert_eq!(loaded.log.len(), 2);
    assert!(!store.holds("s-a", &a).await.unwrap());
    // A releasing its old claim changes nothing; B's write goes through.
    store.release("s-a", "i-a", &a).await.unwrap();
    store.release("s-a", "i-a", "").await.unwrap();
    assert!(store.holds("s-a", &b).await.unwrap());
    let write = SessionWrite {
        state: Some("B's state".into()),
        expires_at_ms: later,
        claim: Some(b.clone()),
        ..Default::default()
    };
    store.write("s-a", write).await.unwrap();

    // B gone (its heartbeat removed, as a drained server does, or lapsed, as a killed one's):
    // A takes the session without asking, and B is fenced out.
    store.heartbeat("i-b", Duration::ZERO).await.unwrap();
    let Claim::Claimed(a2) = store.claim("s-a", "i-a", later).await.unwrap() else { panic!("B is gone") };
    let write =
        SessionWrite { state: Some("B again".into()), expires_at_ms: later, claim: Some(b), ..Default::default() };
    assert_eq!(problem(store.write("s-a", write).await.unwrap_err()).0, StoreProblem::Moved);
    assert_eq!(store.load("s-a", store::unix_ms()).await.unwrap().unwrap().state, "B's state");
    assert!(store.holds("s-a", &a2).await.unwrap());
    // A heartbeat that lapses by itself counts as gone too.
    store.heartbeat("i-a", Duration::from_millis(200)).await.unwrap();
    assert_eq!(store.claim("s-a", "i-c", later).await.unwrap(), Claim::HeldBy("i-a".into()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match store.claim("s-a", "i-c", later).await.unwrap() {
            Claim::Claimed(_) => break,
            Claim::HeldBy(_) => assert!(std::time::Instant::now() < deadline, "the heartbeat never lapsed"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_redis_store_passes_the_suite_on_a_redis_cluster_with_each_session_in_one_slot() {
    let cluster = RedisCluster::start("suite", 3, 0);
    let store = RedisStore::connect(&cluster.url(), "test").await.unwrap();
    assert!(store.is_cluster());
    // Every write and every load is one script on one slot: a cross-slot command would fail
    // here.
    suite(&store).await;
    claims(&store).await;
    // Sessions spread over the masters, each session's keys on one of them.
    let later = store::unix_ms() + 60_000;
    for i in 0..30 {
        store.write(&format!("s-spread-{i}"), first_write(later)).await.unwrap();
    }
    for (i, node) in cluster.nodes.iter().enumerate() {
        let keys: usize = cluster.cli(i, &["dbsize"]).trim().parse().unwrap();
        assert!(keys >= 2, "node {} holds {keys} keys: the sessions do not spread", node.port);
    }
    let (master, _) = cluster.serving("test:{s-spread-7}:s");
    assert_eq!(cluster.cli(master, &["exists", "test:{s-spread-7}:log"]).trim(), "1");
    // One node's URL is enough: the client finds the others.
    let through_one = RedisStore::connect(&cluster.nodes[2].url(), "test").await.unwrap();
    assert!(through_one.is_cluster());
    for i in 0..30 {
        let loaded = through_one.load(&format!("s-spread-{i}"), store::unix_ms()).await.unwrap();
        assert_eq!(loaded.expect("written through the other client").log.len(), 2);
    }
    // A cluster has only database 0; several URLs name a cluster's seeds.
    let other_db = cluster.nodes[0].url().replace("/0", "/1");
    let (_, message) = problem(RedisStore::connect(&other_db, "test").await.unwrap_err());
    assert!(message.contains("only database 0"), "{message}");
    let single = Redis::start("not-a-cluster", &[]);
    let (_, message) =
        problem(RedisStore::connect(&format!("{},{}", single.url(), single.url()), "test").await.unwrap_err());
    assert!(message.contains("not one"), "{message}");
    let (_, message) = problem(RedisStore::connect("redis://127.0.0.1:1/0,nonsense", "test").await.unwrap_err());
    assert!(message.contains("not a Redis URL"), "{message}");
}

/// A write with one patch more than `first_write`'s state.
fn patch_write(n: u64, expires_at_ms: u64) -> SessionWrite {
    SessionWrite { patches: vec![(n, format!("patch {n}"))], expires_at_ms, ..Default::default() }
}

#[tokio::test]
async fn a_write_acknowledged_by_a_master_that_dies_is_kept_only_when_a_replica_confirmed_it() {
    // Redis replicates asynchronously. Here the replica is cut off before a write, the master
    // acknowledges it and dies, and the replica takes over without it. A store that trusts
    // the master alone reported that write stored; with --redis-wait-replicas 1 it reported
    // it not stored, and its retry (what the server's persister does before the frames go)
    // lands on the new master once it has a replica again.
    let mut cluster = RedisCluster::start("failover", 3, 1);
    let trusting = RedisStore::connect(&cluster.url(), "test").await.unwrap();
    let waiting = RedisStore::connect(&cluster.url(), "test").await.unwrap().wait_replicas(1);
    let later = store::unix_ms() + 60_000;
    // Two sessions served by the same master.
    let (master, replicas) = cluster.serving("test:{s-trusting}:s");
    let waited_id = (0..)
        .map(|i| format!("s-waiting-{i}"))
        .find(|id| cluster.serving(&format!("test:{{{id}}}:s")).0 == master)
        .unwrap();
    let replica = replicas[0];
    for (store, id) in [(&trusting, "s-trusting"), (&waiting, waited_id.as_str())] {
        store.write(id, first_write(later)).await.unwrap();
        store.write(id, patch_write(1, later)).await.unwrap();
    }
    // The replica confirmed what the waiting store wrote so far.
    assert!(waiting.load(&waited_id, store::unix_ms()).await.unwrap().unwrap().patches.len() == 1);

    // The replica stops, and the master drops its link, so that nothing more reaches it.
    cluster.nodes[replica].pause();
    cluster.cli(master, &["client", "kill", "type", "replica"]);
    trusting.write("s-trusting", patch_write(2, later)).await.expect("the master alone acknowledges it");
    let (kind, message) = problem(waiting.write(&waited_id, patch_write(2, later)).await.unwrap_err());
    assert_eq!(kind, StoreProblem::Unavailable, "{message}");
    assert!(message.contains("reached 0 of the 1 replicas"), "{message}");

    // The master dies; the replica takes over.
    cluster.nodes[master].kill();
    cluster.nodes[replica].resume();
    cluster.take_over(replica);

    // The write the master alone acknowledged is gone: that is what trusting it risks.
    let kept = trusting.load("s-trusting", store::unix_ms()).await.unwrap().expect("the session");
    assert_eq!(kept.patches, vec![(1, "patch 1".to_string())], "the acknowledged patch 2 was lost");

    // The waiting store's write was never reported stored. Tried again while the new master has
    // no replica, it is refused again; once the old master is back (now a replica), it is stored.
    let retried = waiting.write(&waited_id, patch_write(2, later)).await;
    assert_eq!(problem(retried.unwrap_err()).0, StoreProblem::Unavailable);
    cluster.nodes[master].restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while let Err(error) = waiting.write(&waited_id, patch_write(2, later)).await {
        assert!(std::time::Instant::now() < deadline, "the write was never confirmed: {error}");
    }
    let kept = waiting.load(&waited_id, store::unix_ms()).await.unwrap().expect("the session");
    assert_eq!(kept.patches, vec![(1, "patch 1".to_string()), (2, "patch 2".to_string())]);
}
