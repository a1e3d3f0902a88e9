//! A small soak on loopback (50 sessions, 10 tool calls each, one call in five dropping the
//! socket): no result lost, none applied twice, every run completed, every session resumed.
//! The full run is `cargo bench -p tether-server --bench soak` (1,000 sessions).

mod common;

use common::soak::{SoakPlan, soak};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_with_random_drops_lose_no_result_and_apply_none_twice() {
    let plan = SoakPlan { sessions: 50, calls: 10, drop_chance: 0.2 };
    let report = soak(env!("CARGO_BIN_EXE_tether"), plan).await;
    eprintln!("{}", report.summary(&plan));
    assert!(report.stuck.is_empty(), "clients stuck:\n{}", report.stuck.join("\n"));
    assert_eq!((report.sessions_lost, report.unexpected_errors), (0, 0), "{report:?}");
    assert!(report.reconnects > 0, "no client dropped its socket: the soak tested nothing");
    assert_eq!((report.results_lost, report.results_applied_twice), (0, 0), "{report:?}");
    assert_eq!(report.calls_answered, (plan.sessions * plan.calls) as u64, "{report:?}");
    assert_eq!(report.results_applied, report.calls_answered, "{report:?}");
    assert_eq!(report.runs_completed, report.runs_started, "{report:?}");
}
