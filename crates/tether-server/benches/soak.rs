//! The soak on loopback against a real `tether serve` process: many sessions running tool calls
//! while clients drop their socket at random and resume. It reports runs completed, results
//! lost and applied twice (both must be 0) and the server's memory before and after, and exits
//! with an error if anything was lost or applied twice.
//!
//! `cargo bench -p tether-server --bench soak` (SESSIONS=1000 CALLS=10 DROP=0.1 by default).

#[path = "../tests/common/soak.rs"]
mod soak;

use soak::{SoakPlan, soak};

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
    };
    let report = soak(env!("CARGO_BIN_EXE_tether"), plan).await;
    println!("{}", report.summary(&plan));
    for stuck in &report.stuck {
        eprintln!("stuck: {stuck}");
    }
    let healthy = report.stuck.is_empty()
        && report.results_lost == 0
        && report.results_applied_twice == 0
        && report.sessions_lost == 0
        && report.runs_completed == report.runs_started;
    if !healthy {
        eprintln!("soak FAILED: {report:?}");
        std::process::exit(1);
    }
}
