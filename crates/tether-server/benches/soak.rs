//! The soak on loopback against a real `tether serve` process: many sessions running tool calls
//! while clients drop their socket at random and resume. It reports, counted at the clients,
//! handler runs, results lost, applied twice or altered (all but the runs must be 0), runs
//! completed, and the server's memory before and after, and exits with an error if anything was
//! lost, run twice or applied twice.
//!
//! `cargo bench -p tether-server --bench soak` (SESSIONS=1000 CALLS=10 DROP=0.1 by default, in
//! memory; `STORE=sqlite`: on a SQLite file; `STORE=redis INSTANCES=3`: three servers on a Redis
//! of its own, behind a proxy that sends every new connection to a random one, or with
//! `FRONT=nginx` behind Debian's nginx configured as docs/deploy.md says;
//! `RESTART_SECONDS=5`: a server killed with SIGKILL and started again every 5 s, in turn;
//! `STORE=redis-cluster`: a Redis Cluster of its own, three masters with a replica each,
//! `FAILOVER_SECONDS=3`: a master failed over every 3 s, alternately with `CLUSTER FAILOVER`
//! and by killing it, `WAIT_REPLICAS=1`: the servers' `--redis-wait-replicas`).

#[path = "../tests/common/dir.rs"]
mod dir;
#[path = "../tests/common/nginx.rs"]
mod nginx;
#[path = "../tests/common/proxy.rs"]
mod proxy;
#[path = "../tests/common/redis.rs"]
mod redis;
#[path = "../tests/common/serve.rs"]
mod serve;
#[path = "../tests/common/soak.rs"]
mod soak;

use soak::{Front, SoakPlan, SoakStore, soak};

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() {
    let plan = SoakPlan {
        sessions: setting("SESSIONS", 1000),
        calls: setting("CALLS", 10),
        drop_chance: setting("DROP", 0.1),
        store: match std::env::var("STORE").as_deref() {
            Ok("sqlite") => SoakStore::Sqlite,
            Ok("redis") => SoakStore::Redis,
            Ok("redis-cluster") => SoakStore::RedisCluster,
            Ok("memory") | Err(_) => SoakStore::Memory,
            Ok(other) => panic!("STORE={other}: expected memory, sqlite, redis or redis-cluster"),
        },
        instances: setting("INSTANCES", 1),
        front: match std::env::var("FRONT").as_deref() {
            Ok("nginx") => Front::Nginx,
            Ok("proxy") | Err(_) => Front::RandomProxy,
            Ok(other) => panic!("FRONT={other}: expected proxy or nginx"),
        },
        restart_every: match setting("RESTART_SECONDS", 0.0) {
            seconds if seconds > 0.0 => Some(std::time::Duration::from_secs_f64(seconds)),
            _ => None,
        },
        failover_every: match setting("FAILOVER_SECONDS", 0.0) {
            seconds if seconds > 0.0 => Some(std::time::Duration::from_secs_f64(seconds)),
            _ => None,
        },
        wait_replicas: setting("WAIT_REPLICAS", 0),
    };
    let report = soak(plan).await;
    println!("{}", report.summary(&plan));
    for stuck in &report.stuck {
        eprintln!("stuck: {stuck}");
    }
    if !report.healthy(&plan) {
        eprintln!("soak FAILED: {report:?}");
        std::process::exit(1);
    }
}
