//! The tasks `cargo xtask` runs.

use anyhow::{Result, bail};

use crate::cmd::{in_repo, repo_root, run, step};
use crate::toolchain::{self, Needs, WasmToolchain};
use crate::wasm::{ModuleSizes, build_module, print_sizes};

/// The size budget of the browser runtime (wasm + JS glue, gzip).
const RUNTIME_BUDGET_GZIP: u64 = 60 * 1024;

pub(crate) fn setup() -> Result<()> {
    toolchain::setup(Needs { browser: true })?;
    Ok(())
}

pub(crate) fn protocol_schema() -> Result<()> {
    run(in_repo("cargo")
        .args(["test", "-p", "tether-protocol", "--test", "frames", "wire_format_changes_only_with_a_version_bump"])
        .env("UPDATE_PROTOCOL_SCHEMA", "1"))
}

/// Builds the browser runtime module and returns its sizes.
fn runtime_module(toolchain: WasmToolchain) -> Result<ModuleSizes> {
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
    twiggy_top(&runtime)
}

/// The biggest contributors to a module, by `twiggy top` (installed on first use).
fn twiggy_top(module: &ModuleSizes) -> Result<()> {
    if !crate::cmd::on_path("twiggy") {
        step("installing twiggy (first use)");
        run(std::process::Command::new("cargo")
            .args(["install", "twiggy", "--locked"])
            .current_dir(std::env::temp_dir()))
        .or_else(|_| {
            run(std::process::Command::new("cargo").args(["install", "twiggy"]).current_dir(std::env::temp_dir()))
        })?;
    }
    step(format!("top contributors of {} (twiggy top)", module.label));
    run(in_repo("twiggy").args(["top", "-n", "20"]).arg(&module.wasm_path))
}

pub(crate) fn bench() -> Result<()> {
    run(in_repo("cargo").args(["bench", "-p", "tether-core"]))
}

pub(crate) fn demo(_args: &[String]) -> Result<()> {
    bail!("the demo needs the server and the storefront, which are not built yet")
}

pub(crate) fn test(_args: &[String]) -> Result<()> {
    let toolchain = toolchain::setup(Needs { browser: true })?;

    step("formatting");
    run(in_repo("cargo").args(["fmt", "--all", "--check"]))?;

    step("clippy (host crates)");
    run(in_repo("cargo").args(["clippy", "--all-targets", "--", "-D", "warnings"]))?;

    step("native tests");
    run(in_repo("cargo").args(["test"]))?;

    step("wasm32: core builds, compact validator tests under Node with RegExp");
    run(toolchain.cargo("build").args(["-p", "tether-core", "-p", "tether-protocol"]))?;
    run(toolchain.cargo("test").args(["-p", "tether-web"]))?;

    step("size budget of the browser runtime");
    let runtime = runtime_module(toolchain)?;
    print_sizes(std::slice::from_ref(&runtime));
    if runtime.total_gzip() > RUNTIME_BUDGET_GZIP {
        bail!("the browser runtime is {} bytes gzip, over its budget of {RUNTIME_BUDGET_GZIP}", runtime.total_gzip());
    }
    step("all tests passed");
    Ok(())
}
