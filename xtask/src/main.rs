//! `cargo xtask`: every piece of Tether's automation, in one place.
//!
//! Run `cargo xtask help` for the list of tasks.

// A command-line tool: reports go to standard output.
#![allow(clippy::print_stdout)]

mod app;
mod cmd;
mod local_model;
mod precompress;
mod protocol_ts;
mod snippets;
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
                   (`--local-model`: with a real small model on this machine, installed on first use;
                   `--webmcp`: the page loads the WebMCP polyfill @mcp-b/global first)
  react-package    build the browser runtime and pack @tether/react: target/npm/tether-react-0.1.0.tgz
  leptos-app DIR   build a Leptos crate of your own for the browser into DIR/dist (--serve: and
                   serve it with `tether serve`; --help for the rest)
  e2e [NAME...]    only the browser suite of `test` (tests/e2e/NAME.test.mjs: leptos, react, todo, console),
                   building what it needs first
  size             size report of the browser modules (raw, wasm-bindgen, wasm-opt -Oz, gzip, twiggy)
  bench            criterion benchmarks (core, server), hook and loopback benches, and the
                   browser latency benchmark (`--browser`: only that one)
                   `--tasks`: the task benchmark with a real local model (see docs/models.md;
                   --model 1.5b|0.5b; narrow it with --apps, --modes, --suites, --orders, --only,
                   --task-timeout, --serve-args, --no-extras)
                   `--wire`: bytes over the wire for a first load and a reload of both
                   storefronts in headless Chromium (TETHER_BINARY=path compares another build)
  fuzz             explore the fuzz targets from fresh seeds (--seconds N each, default 300);
                   `test` runs them 30 s each from a fixed seed
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
        "react-package" => app::react_package(toolchain::setup(toolchain::Needs::app_build())?).map(drop),
        "leptos-app" => app::leptos_app(rest),
        "e2e" => tasks::e2e(rest),
        "size" => tasks::size(),
        "bench" => tasks::bench(rest),
        "fuzz" => tasks::fuzz_explore(rest),
        "protocol-schema" => tasks::protocol_schema(),
        "help" | "--help" | "-h" => {
            eprint!("{HELP}");
            Ok(())
        }
        other => bail!("unknown task {other:?}\n\n{HELP}"),
    }
}
