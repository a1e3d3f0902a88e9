//! A small soak on loopback (50 sessions, 10 tool calls each, one call in five dropping the
//! socket), counted at the clients: every handler ran once, every result was applied once (as
//! the client sees in its runs' events) and unaltered, every run completed, every session
//! resumed. The full run is `cargo bench -p tether-server --bench soak` (1,000 sessions;
//! `STORE=sqlite`, `RESTART_SECONDS=N` for a SQLite file and a server killed every N seconds).

mod common;

use common::soak::{SoakPlan, SoakReport, SoakStore, soak};

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

fn check(plan: &SoakPlan, report: &SoakReport) {
    eprintln!("{}", report.summary(plan));
    assert!(report.stuck.is_empty(), "clients stuck:\n{}", report.stuck.join("\n"));
    assert_eq!((report.sessions_lost, report.unexpected_errors), (0, 0), "{report:?}");
    assert!(report.reconnects > 0, "no client dropped its socket: the soak tested nothing");
    let expected = (plan.sessions * plan.calls) as u64;
    assert_eq!((report.calls, report.handler_runs, report.handlers_run_twice), (expected, expected, 0), "{report:?}");
    assert_eq!((report.results_lost, report.results_applied_twice, report.results_altered), (0, 0, 0), "{report:?}");
    assert_eq!((report.runs_ended, report.runs_completed), (expected, expected), "{report:?}");
    // The server's own counter agrees with what the clients saw.
    assert_eq!(report.server_results_applied, expected, "{report:?}");
    assert!(report.healthy(plan));
}
