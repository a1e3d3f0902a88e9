//! The tasks `cargo xtask` runs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::app::{build_leptos_app, pack_react};
use crate::cmd::{in_repo, probe, repo_root, run, run_contained, step};
use crate::toolchain::{self, Needs, WasmToolchain};
use crate::wasm::{ModuleSizes, build_module, print_sizes};

/// The browser runtime's budget: wasm + minified JS glue, gzip, in bytes (see README, "Sizes").
/// It holds for the shipping build, which compiles std from source.
const RUNTIME_SIZE_BUDGET_GZIP: u64 = 60_000;
/// The guard where std cannot be built from source (rustup without `rust-src`) and the user opted
/// out of the budget with [`PREBUILT_STD_OPT_OUT`]: the prebuilt std carries panic formatting,
/// about 9 kB more.
const RUNTIME_SIZE_GUARD_PREBUILT_STD_GZIP: u64 = 72_000;
/// The environment variable that accepts the looser guard where std cannot be built from source.
const PREBUILT_STD_OPT_OUT: &str = "TETHER_ALLOW_PREBUILT_STD";

/// The size the runtime must stay within on this machine. Where the shipping build cannot
/// compile std from source, the budget cannot be checked: that fails with the command that makes
/// it possible, unless the user opted out with `TETHER_ALLOW_PREBUILT_STD=1` (see the README).
fn size_ceiling(toolchain: WasmToolchain) -> Result<u64> {
    if toolchain.ships_std_from_source() {
        return Ok(RUNTIME_SIZE_BUDGET_GZIP);
    }
    if std::env::var(PREBUILT_STD_OPT_OUT).is_ok_and(|v| v == "1") {
        eprintln!(
            "[xtask] note: {PREBUILT_STD_OPT_OUT}=1: std is prebuilt here, so the runtime is checked against \
             {RUNTIME_SIZE_GUARD_PREBUILT_STD_GZIP} bytes, not its budget of {RUNTIME_SIZE_BUDGET_GZIP}"
        );
        return Ok(RUNTIME_SIZE_GUARD_PREBUILT_STD_GZIP);
    }
    bail!(
        "the runtime's size budget ({RUNTIME_SIZE_BUDGET_GZIP} bytes gzip) holds for std built from source, which \
         this toolchain cannot do: run `rustup component add rust-src` (or, on Debian, remove the rustup wasm32 \
         target so that `cargo xtask setup` uses rustc-web + rust-web-src), or accept a looser check with \
         {PREBUILT_STD_OPT_OUT}=1"
    )
}

pub(crate) fn setup() -> Result<()> {
    toolchain::setup(Needs { browser: true, ..Needs::default() })?;
    Ok(())
}

pub(crate) fn protocol_schema() -> Result<()> {
    run(in_repo("cargo")
        .args(["test", "-p", "tether-protocol", "--test", "frames", "wire_format_changes_only_with_a_version_bump"])
        .env("UPDATE_PROTOCOL_SCHEMA", "1"))?;
    // The React package's run-event types follow the schema.
    let schema = std::fs::read_to_string(repo_root().join("crates/tether-protocol/protocol.schema.json"))?;
    let types = crate::protocol_ts::run_event_types(&serde_json::from_str(&schema)?);
    std::fs::write(repo_root().join(crate::protocol_ts::OUTPUT), types)?;
    println!("[xtask] wrote {}", crate::protocol_ts::OUTPUT);
    Ok(())
}

/// Builds the browser runtime module (with the JS API) and returns its sizes.
pub(crate) fn runtime_module(toolchain: WasmToolchain) -> Result<ModuleSizes> {
    build_module(
        toolchain,
        "tether-web",
        &["js-api"],
        &repo_root().join("target/pkg/tether-web"),
        "tether-web runtime (JS API)",
    )
}

pub(crate) fn size() -> Result<()> {
    let toolchain = toolchain::setup(Needs::default())?;
    let runtime = runtime_module(toolchain)?;
    print_sizes(std::slice::from_ref(&runtime));
    twiggy_top(&runtime)?;
    step("the React package next to @copilotkit/react-core (installed from npm on first use)");
    run(in_repo("npm").args(["run", "--silent", "react:build"]))?;
    run(in_repo("npm").args(["run", "--silent", "size"]))
}

/// The biggest contributors to a module, by `twiggy top` (installed on first use).
fn twiggy_top(module: &ModuleSizes) -> Result<()> {
    if !crate::cmd::on_path("twiggy") {
        step("installing twiggy (first use)");
        let install = |locked: bool| {
            let mut command = Command::new("cargo");
            command.args(["install", "twiggy"]).current_dir(std::env::temp_dir());
            if locked {
                command.arg("--locked");
            }
            run(&mut command)
        };
        install(true).or_else(|_| install(false))?;
    }
    step(format!("top contributors of {} (twiggy top, before wasm-opt, with names)", module.label));
    let named = repo_root().join("target/pkg/twiggy");
    run(in_repo("wasm-bindgen")
        .args(["--target", "web", "--keep-debug", "--out-dir"])
        .arg(&named)
        .arg(&module.raw_path))?;
    let file = module.wasm_path.file_name().context("a file name")?;
    run(in_repo("twiggy").args(["top", "-n", "25"]).arg(named.join(file)))
}

pub(crate) fn bench(args: &[String]) -> Result<()> {
    if args.iter().any(|a| a == "--tasks") {
        return task_bench(args);
    }
    if args.iter().any(|a| a == "--wire") {
        return wire_bench();
    }
    let only_browser = args.iter().any(|a| a == "--browser");
    if !only_browser {
        run(in_repo("cargo").args(["bench", "-p", "tether-core"]))?;
        run(in_repo("cargo").args(["bench", "-p", "tether-agent", "-p", "tether-hooks", "-p", "tether-server"]))?;
    }
    browser_latency()
}

/// Bytes over the wire for a first load and a reload of both storefronts as `tether serve
/// --static` sends them, in headless Chromium (bench/browser/wire.mjs). `TETHER_BINARY` names
/// another build of `tether` to compare.
fn wire_bench() -> Result<()> {
    let toolchain = toolchain::setup(Needs { browser: true, ..Needs::default() })?;
    let (leptos, _) = build_storefront(toolchain)?;
    runtime_module(toolchain)?;
    build_react_storefront()?;
    run(in_repo("cargo").args(["build", "-p", "tether-server", "--bin", "tether"]))?;
    step("bytes over the wire: first load and reload of both storefronts in headless Chromium");
    run(in_repo("node")
        .arg("bench/browser/wire.mjs")
        .arg(format!("storefront-leptos={}", leptos.display()))
        .arg(format!("storefront-react={}", repo_root().join("www/storefront-react/dist").display())))
}

/// The latency benchmark in headless Chromium (bench/browser), ajv side by side.
fn browser_latency() -> Result<()> {
    let toolchain = toolchain::setup(Needs { browser: true, ..Needs::default() })?;
    // The runtime as shipped, plus the `dev-api` methods the benchmark calls (`invokeLocal`,
    // `validate`), in its own folder so that the shipped module is not overwritten.
    let runtime = build_module(
        toolchain,
        "tether-web",
        &["dev-api"],
        &repo_root().join("target/pkg/tether-web-dev"),
        "tether-web runtime (JS API + dev API)",
    )?;
    let dir = repo_root().join("target/bench-browser");
    std::fs::create_dir_all(&dir)?;
    let pkg = runtime.wasm_path.parent().context("the module has a folder")?;
    for file in ["tether_web.js", "tether_web_bg.wasm"] {
        std::fs::copy(pkg.join(file), dir.join(file))?;
    }
    std::fs::copy(repo_root().join("bench/browser/latency.html"), dir.join("latency.html"))?;
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><title>Tether benchmarks</title><a href=\"/latency.html\">latency</a>",
    )?;
    run(in_repo("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(repo_root().join("bench/browser")))?;
    run(in_repo(repo_root().join("node_modules/.bin/esbuild"))
        .args([
            "bench/browser/latency.mjs",
            "--bundle",
            "--format=esm",
            "--external:/tether_web.js",
            "--log-level=warning",
        ])
        .arg(format!("--outfile={}", dir.join("bench.js").display())))?;
    run(in_repo("cargo").args(["build", "-p", "tether-server", "--bin", "tether"]))?;
    step("latency in headless Chromium (tether vs ajv in the same page and run)");
    run(in_repo("node").arg("bench/browser/run.mjs").arg(&dir))
}

/// Builds the Leptos storefront into `target/storefront-leptos/dist` (shipping build).
pub(crate) fn build_storefront(toolchain: WasmToolchain) -> Result<(std::path::PathBuf, ModuleSizes)> {
    let dist = repo_root().join("target/storefront-leptos/dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist)?;
    }
    let sizes = build_module(toolchain, "storefront-leptos", &[], &dist, "storefront-leptos (whole app)")?;
    for file in ["index.html", "styles.css"] {
        std::fs::copy(repo_root().join("examples/storefront-leptos/static").join(file), dist.join(file))?;
    }
    crate::precompress::precompress(&dist)?;
    Ok((dist, sizes))
}

/// Builds the React storefront into `www/storefront-react/dist`, precompressed.
fn build_react_storefront() -> Result<()> {
    run(in_repo("npm").args(["run", "--silent", "storefront-react:build"]))?;
    crate::precompress::precompress(&repo_root().join("www/storefront-react/dist"))?;
    Ok(())
}

pub(crate) fn demo(args: &[String]) -> Result<()> {
    let toolchain = toolchain::setup(Needs::default())?;
    let (dist, _) = build_storefront(toolchain)?;
    if args.iter().any(|a| a == "--webmcp") {
        install_webmcp_polyfill(&dist)?;
    }
    step("building the server");
    run(in_repo("cargo").args(["build", "-p", "tether-server", "--bin", "tether"]))?;
    let addr =
        args.iter().position(|a| a == "--addr").and_then(|i| args.get(i + 1)).map_or("127.0.0.1:8787", String::as_str);
    // The local model's server runs while `local` lives, so until `tether serve` ends.
    let local = if args.iter().any(|a| a == "--local-model") {
        Some(crate::local_model::start(crate::local_model::Model::named("1.5b")?)?)
    } else {
        None
    };
    let mut tether = Command::new(repo_root().join("target/debug/tether"));
    tether.arg("serve");
    match &local {
        Some(model) => {
            step("serving the Leptos storefront with the local model (Ctrl-C stops); open the URL below");
            tether.args(["--model", &model.url]).args(LOCAL_MODEL_ARGS);
        }
        None => {
            step("serving the Leptos storefront with the built-in model (Ctrl-C stops); open the URL below");
            tether.args(["--model", "scripted"]);
        }
    }
    run(tether
        .args(["--addr", addr, "--expose-mcp", "--instructions"])
        .arg(repo_root().join("examples/storefront-leptos/instructions.md"))
        .arg("--static")
        .arg(&dist))
}

/// `cargo xtask demo --webmcp`: the storefront loads the WebMCP polyfill from npm
/// (`@mcp-b/global`, a root devDependency) before the app, so that the page has a
/// `document.modelContext` in any browser and the storefront's `use_webmcp()` registers its tools
/// there (and MCP-B's browser extension can reach them).
fn install_webmcp_polyfill(dist: &Path) -> Result<()> {
    let polyfill = repo_root().join("node_modules/@mcp-b/global/dist/index.iife.js");
    anyhow::ensure!(polyfill.is_file(), "{} is missing: run `cargo xtask setup`", polyfill.display());
    std::fs::copy(&polyfill, dist.join("webmcp-polyfill.js"))?;
    let index = dist.join("index.html");
    let html = std::fs::read_to_string(&index)?;
    std::fs::write(&index, with_head_script(&html, "/webmcp-polyfill.js")?)?;
    step("the storefront loads the WebMCP polyfill (@mcp-b/global) before the app");
    Ok(())
}

/// `html` with a classic `<script src>` at the end of its head: it runs before the page's module
/// scripts, which are deferred.
fn with_head_script(html: &str, src: &str) -> Result<String> {
    let at = html.find("</head>").context("the page has no </head>")?;
    Ok(format!("{}  <script src=\"{src}\"></script>\n{}", &html[..at], &html[at..]))
}

/// How `tether serve` talks to the local model in the demo and the task benchmark.
const LOCAL_MODEL_ARGS: [&str; 8] =
    ["--model-name", "qwen2.5-coder-1.5b-instruct", "--tool-mode", "auto", "--temperature", "0", "--max-tokens", "300"];

/// The task benchmark's options: `--modes native,text,constrained,auto`, `--apps leptos,react`,
/// `--suites fresh,conversation`, `--only <task ids>`, `--no-extras` (skip the travel and hook
/// examples), `--task-timeout <seconds>`. The same `BENCH_*` variables work too
/// (bench/tasks/run.mjs); a flag wins.
const TASK_BENCH_FLAGS: [(&str, &str); 7] = [
    ("--modes", "BENCH_MODES"),
    ("--apps", "BENCH_APPS"),
    ("--suites", "BENCH_SUITES"),
    ("--orders", "BENCH_ORDERS"),
    ("--only", "BENCH_TASKS"),
    ("--task-timeout", "BENCH_TASK_TIMEOUT_S"),
    ("--serve-args", "BENCH_SERVE_ARGS"),
];

/// The task benchmark: the local model (`--model 1.5b`, the default, or `0.5b`), the apps of
/// bench/tasks/tasks.mjs (the storefront with and without its instructions, the README's to-do
/// example, the travel example) served by the real `tether serve`, their tasks in headless
/// Chromium in fresh sessions and in conversations of seeded orders, then the hook examples with
/// the same model. Prints a per-task table and a summary; writes
/// target/bench-tasks/{results.json,report.md} (and extras.json).
fn task_bench(args: &[String]) -> Result<()> {
    let mut env: Vec<(&str, String)> = Vec::new();
    for (flag, var) in TASK_BENCH_FLAGS {
        let value = args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
        if let Some(value) = value.or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty())) {
            env.push((var, value));
        }
    }
    let extras = !args.iter().any(|a| a == "--no-extras");
    let model = args.iter().position(|a| a == "--model").and_then(|i| args.get(i + 1)).map_or("1.5b", String::as_str);
    let model = crate::local_model::Model::named(model)?;
    let apps = env
        .iter()
        .find(|(var, _)| *var == "BENCH_APPS")
        .map_or("shop,shop+instructions,todo-react,travel,mail,calendar".to_string(), |(_, v)| v.clone());
    let toolchain = toolchain::setup(Needs { browser: true, ..Needs::default() })?;
    let (leptos, _) = build_storefront(toolchain)?;
    let runtime = runtime_module(toolchain)?;
    if apps.contains("shop-react") {
        build_react_storefront()?;
    }
    if apps.contains("todo-react") {
        build_todo_react(&runtime)?;
    }
    let todo_leptos = repo_root().join("examples/todo-leptos");
    if apps.contains("todo-leptos") {
        build_leptos_app(toolchain, &todo_leptos, &todo_leptos.join("dist"))?;
    }
    run(in_repo("cargo").args(["build", "-p", "tether-server", "--bin", "tether"]))?;
    if ["travel", "mail", "calendar"].iter().any(|app| apps.contains(app)) {
        // Apart: `--bin tether` would leave travel-local's binaries unbuilt.
        run(in_repo("cargo").args(["build", "-p", "travel-local"]))?;
    }
    let server = crate::local_model::start(model)?;
    if let Some(load) = probe("cat", &["/proc/loadavg"]) {
        step(format!("load average before the run: {}", load.trim()));
    }
    let out = repo_root().join("target/bench-tasks");
    step(format!("the task benchmark with {} (headless Chromium)", model.name));
    run(in_repo("node")
        .arg("bench/tasks/run.mjs")
        .envs(env.iter().map(|(var, value)| (*var, value.as_str())))
        .env("BENCH_APPS", &apps)
        .env("BENCH_MODEL_NAME", model.name)
        .env("TETHER_LLM_URL", &server.url)
        .env("TETHER_LEPTOS_DIST", &leptos)
        .env("TETHER_REACT_DIST", repo_root().join("www/storefront-react/dist"))
        .env("TETHER_TODO_REACT_DIST", repo_root().join("examples/todo-react/dist"))
        .env("TETHER_TODO_LEPTOS_DIST", todo_leptos.join("dist"))
        .env("TETHER_TRAVEL_BIN", repo_root().join("target/debug/travel-local"))
        .env("TETHER_MAIL_BIN", repo_root().join("target/debug/mail-local"))
        .env("TETHER_CALENDAR_BIN", repo_root().join("target/debug/calendar-local"))
        .env("BENCH_OUT", &out))?;
    if !extras {
        return Ok(());
    }
    step("the hook examples with the same model");
    run(in_repo("node")
        .arg("bench/tasks/extras.mjs")
        .envs(env.iter().map(|(var, value)| (*var, value.as_str())))
        .env("BENCH_MODEL_NAME", model.name)
        .env("TETHER_LLM_URL", &server.url)
        .env("TETHER_LEPTOS_DIST", &leptos)
        .env("BENCH_OUT", &out))
}

/// The seed of the test command's fuzz smoke: a fixed seed makes it try the same inputs in the
/// same order every run (how far it gets in the time depends on the machine), so a red CI means
/// a change broke something, not that the dice found an old bug. `cargo xtask fuzz` explores with
/// fresh seeds.
const FUZZ_SMOKE_SEED: u64 = 20_261_201;

/// Runs each fuzz target for `seconds` (cargo-fuzz, libFuzzer; no sanitizer, so stable Rust
/// works), from `seed` (libFuzzer picks one when `None`).
fn fuzz(seconds: u32, seed: Option<u64>) -> Result<()> {
    if !crate::cmd::on_path("cargo-fuzz") {
        step("installing cargo-fuzz (first use)");
        run(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]).current_dir(std::env::temp_dir()))?;
    }
    for (target, dict) in [("decode_client", "json"), ("decode_server", "json"), ("hooks_config", "yaml")] {
        let mut command = in_repo("cargo");
        command
            .args(["fuzz", "run", "--sanitizer", "none", target])
            .arg(format!("fuzz/corpus/{target}"))
            .arg(format!("fuzz/seeds/{target}"))
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg("-rss_limit_mb=1024")
            .arg(format!("-dict=fuzz/dicts/{dict}.dict"))
            .env("RUSTC_BOOTSTRAP", "1");
        if let Some(seed) = seed {
            command.arg(format!("-seed={seed}"));
        }
        run(&mut command)?;
    }
    Ok(())
}

/// `cargo xtask fuzz [--seconds N]`: explores each target for N seconds (default 300) from a
/// fresh seed, keeping what it finds in fuzz/corpus (crashes in fuzz/artifacts).
pub(crate) fn fuzz_explore(args: &[String]) -> Result<()> {
    let seconds = match args {
        [] => 300,
        [flag, value] if flag == "--seconds" => value.parse().context("--seconds takes a whole number")?,
        _ => bail!("usage: cargo xtask fuzz [--seconds N]"),
    };
    fuzz(seconds, None)
}

/// A child process killed when dropped.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the scripted test peer (built by the native tests) on a free port; returns it and
/// its WebSocket URL.
fn start_test_peer() -> Result<(Background, String)> {
    let mut child = Command::new(repo_root().join("target/debug/tether-test-peer"))
        .arg("127.0.0.1:0")
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start tether-test-peer")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line)?;
    let url = line.split_whitespace().find(|w| w.starts_with("ws://")).context("the peer printed no URL")?.to_string();
    Ok((Background(child), url))
}

pub(crate) fn test(_args: &[String]) -> Result<()> {
    let toolchain = toolchain::setup(Needs { browser: true, ..Needs::default() })?;

    step("formatting");
    run(in_repo("cargo").args(["fmt", "--all", "--check"]))?;
    run(in_repo("cargo").args(["fmt", "--check", "--manifest-path", "examples/todo-leptos/Cargo.toml"]))?;

    step("clippy (every crate, the browser ones compiled for the host)");
    run(in_repo("cargo").args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        "tether-web/dev-api",
        "--",
        "-D",
        "warnings",
    ]))?;

    step("native tests (the browser-only crates run in the browser below)");
    run(in_repo("cargo").args(["test", "--workspace", "--exclude", "tether-web", "--exclude", "storefront-leptos"]))?;
    step("tether-leptos for a hydrating (SSR) app: without leptos/csr, with leptos/hydrate");
    run(in_repo("cargo").args(["check", "-p", "tether-leptos", "--no-default-features", "--features", "hydrate"]))?;
    // (`redis` alone is left out: it gates one module, and its own feature set recompiles much.)
    step(
        "tether-server embedded with none of its optional features (the memory store, no MCP, no CLI), with sqlite, with mcp",
    );
    for features in [&[][..], &["--features", "sqlite"], &["--features", "mcp"]] {
        run(in_repo("cargo")
            .args(["clippy", "-p", "tether-server", "--lib", "--no-default-features"])
            .args(features)
            .args(["--", "-D", "warnings"]))?;
    }

    step(
        "fuzzing: the protocol decoders and the hooks-config loader, 30 s each from a fixed seed (see docs/security.md)",
    );
    fuzz(30, Some(FUZZ_SMOKE_SEED))?;

    step("wasm32: the core builds; the browser runtime's tests in Node and headless Chromium");
    run(toolchain.cargo("build").args(["-p", "tether-core", "-p", "tether-protocol"]))?;
    let (_peer, peer_url) = start_test_peer()?;
    run(toolchain.cargo("test").args(["-p", "tether-web"]).env("TETHER_TEST_PEER", &peer_url))?;

    step("size of the browser runtime");
    let runtime = runtime_module(toolchain)?;
    let (storefront, storefront_sizes) = build_storefront(toolchain)?;
    // The README's Leptos walkthrough, built its way (`cargo xtask leptos-app examples/todo-leptos`),
    // right after the storefront, whose compiled dependencies it shares.
    let todo_leptos_dir = repo_root().join("examples/todo-leptos");
    let todo_leptos = build_leptos_app(toolchain, &todo_leptos_dir, &todo_leptos_dir.join("dist"))?;
    print_sizes(&[runtime.clone(), storefront_sizes, todo_leptos]);
    let ceiling = size_ceiling(toolchain)?;
    if runtime.total_gzip() > ceiling {
        bail!("the browser runtime is {} bytes gzip, over its budget of {ceiling}", runtime.total_gzip());
    }
    eprintln!("[xtask] the browser runtime is {} bytes gzip, within its budget of {ceiling}", runtime.total_gzip());

    step("the React package: build, unit tests (vitest), types (tsc), lint (eslint with the rules of hooks)");
    for script in ["react:build", "react:test", "react:typecheck", "react:lint"] {
        run(in_repo("npm").args(["run", "--silent", script]))?;
    }
    walkthroughs_end_to_end(&runtime, &storefront, &[])?;

    step("all tests passed");
    Ok(())
}

/// The README's React walkthrough, built its way: `cargo xtask react-package`, then
/// examples/todo-react installs the tarball and builds into its `dist`. Returns the tarball and
/// the example's folder.
fn build_todo_react(runtime: &ModuleSizes) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    step(
        "the README's React walkthrough: `cargo xtask react-package`, then examples/todo-react installs and builds it",
    );
    let tarball = pack_react(runtime)?;
    let todo_react = repo_root().join("examples/todo-react");
    // A rebuilt tarball keeps its version: make npm take the new one.
    let installed = todo_react.join("node_modules/@tether");
    if installed.exists() {
        std::fs::remove_dir_all(&installed)?;
    }
    run(Command::new("npm").args(["install", "--no-audit", "--no-fund", "--prefer-offline"]).current_dir(&todo_react))?;
    run(Command::new("npm").args(["run", "build"]).current_dir(&todo_react))?;
    crate::precompress::precompress(&todo_react.join("dist"))?;
    Ok((tarball, todo_react))
}

/// The README's React walkthrough (`cargo xtask react-package`, then examples/todo-react installs
/// the tarball and builds), the React storefront's build, and the browser suite: the real server,
/// both storefronts and both to-do examples in headless Chromium. Expects `target/debug/tether`,
/// the Leptos storefront in `storefront` and examples/todo-leptos/dist built. `only` picks test
/// files of tests/e2e (default: all four).
fn walkthroughs_end_to_end(runtime: &ModuleSizes, storefront: &Path, only: &[String]) -> Result<()> {
    let (tarball, todo_react) = build_todo_react(runtime)?;
    run(in_repo("node").arg("www/packages/react/scripts/pack-test.mjs").arg(&tarball).arg(&todo_react))?;
    build_react_storefront()?;

    step("end to end: the real server, both storefronts and both to-do examples in headless Chromium (Playwright)");
    let all = ["leptos", "react", "todo", "console"].map(String::from);
    let files: Vec<String> =
        if only.is_empty() { &all[..] } else { only }.iter().map(|name| format!("tests/e2e/{name}.test.mjs")).collect();
    // Each test (and each file) is bounded: one that hangs fails with its name instead of holding
    // CI, and the servers and browser it started are killed with its process group.
    run_contained(
        in_repo("node")
            .args(["--test", "--test-concurrency=1", "--test-timeout=300000"])
            .args(&files)
            .env("TETHER_LEPTOS_DIST", storefront),
    )
}

/// `cargo xtask e2e [leptos|react|todo ...]`: only the browser part of `cargo xtask test`, with
/// what it needs built first (the runtime, the Leptos storefront, examples/todo-leptos, the React
/// package and `tether`).
pub(crate) fn e2e(args: &[String]) -> Result<()> {
    let toolchain = toolchain::setup(Needs { browser: true, ..Needs::default() })?;
    let runtime = runtime_module(toolchain)?;
    let (storefront, _) = build_storefront(toolchain)?;
    let todo_leptos_dir = repo_root().join("examples/todo-leptos");
    build_leptos_app(toolchain, &todo_leptos_dir, &todo_leptos_dir.join("dist"))?;
    run(in_repo("npm").args(["run", "--silent", "react:build"]))?;
    step("building the server");
    run(in_repo("cargo").args(["build", "-p", "tether-server", "--bin", "tether"]))?;
    walkthroughs_end_to_end(&runtime, &storefront, args)
}

#[cfg(test)]
mod tests {
    use super::with_head_script;

    #[test]
    fn the_webmcp_polyfill_goes_in_the_head_before_the_app() {
        let html =
            std::fs::read_to_string(crate::cmd::repo_root().join("examples/storefront-leptos/static/index.html"))
                .unwrap();
        let patched = with_head_script(&html, "/webmcp-polyfill.js").unwrap();
        let script = patched.find(r#"<script src="/webmcp-polyfill.js"></script>"#).expect("the tag");
        assert!(script < patched.find("</head>").unwrap());
        assert!(script < patched.find(r#"<script type="module">"#).unwrap(), "before the app");
        assert!(with_head_script("<p>no head</p>", "/x.js").is_err());
    }
}
