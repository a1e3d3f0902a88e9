//! Small soaks on loopback, counted at the clients: 50 sessions on one server, one call in five
//! dropping the socket; 30 sessions moving between three instances on Redis; 30 sessions on
//! three instances behind nginx, killed (SIGKILL) in turn; 30 sessions on three instances on a
//! six-node Redis Cluster whose masters fail over while the instances are killed in turn. Each time: every handler ran once,
//! every result was applied once (as the client sees in its runs' events) and unaltered, every
//! run completed, every session resumed. The full runs are `cargo bench -p tether-server --bench
//! soak` (1,000 sessions; `STORE=sqlite|redis`, `INSTANCES=3`, `RESTART_SECONDS=N`,
//! `FRONT=nginx`).

mod common;

use common::soak::{Front, SoakPlan, SoakReport, SoakStore, soak};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_with_random_drops_run_every_handler_once_and_apply_every_result_once() {
    let plan = SoakPlan::new(50, 10, 0.2);
    let report = soak(plan).await;
    check(&plan, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_moving_between_three_instances_on_redis_lose_nothing_and_apply_nothing_twice() {
    // Each reconnect goes through the proxy to a random instance: most move the session.
    let plan = SoakPlan { store: SoakStore::Redis, instances: 3, ..SoakPlan::new(30, 6, 0.3) };
    let report = soak(plan).await;
    check(&plan, &report);
    assert!(report.server_sessions_handed_off > 0, "no session moved between instances: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_kill_of_all_three_instances_behind_nginx_under_load_loses_nothing() {
    // Each instance is killed (SIGKILL) and started again in turn, every 0.5 s, while the
    // sessions run: each kill's clients reconnect through nginx (the deployment's configuration,
    // round robin, no stickiness) to another instance, which takes the session over.
    let plan = SoakPlan {
        store: SoakStore::Redis,
        instances: 3,
        front: Front::Nginx,
        restart_every: Some(std::time::Duration::from_millis(500)),
        ..SoakPlan::new(30, 30, 0.1)
    };
    let report = soak(plan).await;
    check(&plan, &report);
    assert!(report.restarts >= 3, "not every instance was killed: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_killed_and_masters_failed_over_on_a_six_node_redis_cluster_lose_nothing() {
    // Three instances on a Redis Cluster of three masters with a replica each: an instance
    // killed every 0.5 s, a master failed over every 1.5 s (alternately the polite way and by
    // killing it), writes confirmed by the replica before the frames that depend on them leave.
    let plan = SoakPlan {
        store: SoakStore::RedisCluster,
        instances: 3,
        restart_every: Some(std::time::Duration::from_millis(500)),
        failover_every: Some(std::time::Duration::from_millis(1500)),
        wait_replicas: 1,
        ..SoakPlan::new(30, 30, 0.1)
    };
    let report = soak(plan).await;
    check(&plan, &report);
    assert!(report.failovers >= 1 && report.masters_killed >= 1, "no failover of each kind: {report:?}");
}

fn check(plan: &SoakPlan, report: &SoakReport) {
    eprintln!("{}", report.summary(plan));
    assert!(report.stuck.is_empty(), "clients stuck:\n{}", report.stuck.join("\n"));
    assert_eq!((report.sessions_lost, report.unexpected_errors), (0, 0), "{report:?}");
    if plan.failover_every.is_none() {
        assert_eq!(report.retry_later, 0, "{report:?}");
    }
    assert!(report.reconnects > 0, "no client dropped its socket: the soak tested nothing");
    let expected = (plan.sessions * plan.calls) as u64;
    assert_eq!((report.calls, report.handler_runs, report.handlers_run_twice), (expected, expected, 0), "{report:?}");
    assert_eq!((report.results_lost, report.results_applied_twice, report.results_altered), (0, 0, 0), "{report:?}");
    assert_eq!((report.runs_ended, report.runs_completed), (expected, expected), "{report:?}");
    // The servers' own counters agree with what the clients saw (unless killed: a killed
    // process's counters go with it).
    if plan.restart_every.is_none() {
        assert_eq!(report.server_results_applied, expected, "{report:?}");
    }
    assert!(report.healthy(plan));
}
