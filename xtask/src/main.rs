//! `cargo xtask`: every piece of Tether's automation, in one place.
//!
//! Run `cargo xtask help` for the list of tasks.

// A command-line tool: reports go to standard output.
#![allow(clippy::print_stdout)]

mod cmd;
mod local_model;
mod tasks;
#[cfg(test)]
mod tidy;
mod toolchain;
mod wasm;

use anyhow::{Result, bail};

const HELP: &str = "\
cargo xtask <task>

  setup            install what tests and the demo need (idempotent; apt, cargo, npm)
  test             everything CI runs: setup, lints, native, wasm and browser tests, size budget
  demo             build the Leptos storefront and serve it with the built-in model
                   (`--local-model`: with a real small model on this machine, installed on first use)
  size             size report of the browser modules (raw, wasm-bindgen, wasm-opt -Oz, gzip, twiggy)
  bench            criterion benchmarks (core, server), hook and loopback benches, and the
                   browser latency benchmark (`--browser`: only that one)
                   `--tasks`: the task benchmark with a real local model (see docs/models.md;
                   narrow it with --modes, --apps, --suites, --only, --task-timeout, --no-extras)
  protocol-schema  regenerate crates/tether-protocol/protocol.schema.json after a version bump
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    match task {
        "setup" => tasks::setup(),
        "test" => tasks::test(rest),
        "demo" => tasks::demo(rest),
        "size" => tasks::size(),
        "bench" => tasks::bench(rest),
        "protocol-schema" => tasks::protocol_schema(),
        "help" | "--help" | "-h" => {
            eprint!("{HELP}");
            Ok(())
        }
        other => bail!("unknown task {other:?}\n\n{HELP}"),
    }
}
