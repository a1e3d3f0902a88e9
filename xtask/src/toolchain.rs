//! Installs what the tests and the demo need, idempotently, without rustup downloads.
//!
//! The wasm32 toolchain comes from one of two places:
//! - an installed rustup target `wasm32-unknown-unknown` (an ordinary developer machine), or
//! - Debian's `rustc-web` + `cargo-web` + `rust-web-src` (std built from source with
//!   `-Zbuild-std`), an `lld` of the same LLVM major linked as `rust-lld`, and a rustup toolchain
//!   `deb-web` pointing at `/usr` (machines where rustup cannot download targets).
//!
//! Then: `wasm-bindgen-cli` at exactly the version of the `wasm-bindgen` crate, Debian's
//! `chromium` + `chromium-driver` for browser tests, and the npm packages of `package.json`
//! (among them `binaryen` for a working `wasm-opt` and `playwright-core`).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd::{in_repo, on_path, probe, repo_root, run, step};

/// Must equal the `wasm-bindgen` version pinned in the root `Cargo.toml`.
pub(crate) const WASM_BINDGEN_VERSION: &str = "0.2.130";
/// The checkout's target directory of shipping builds (see [`WasmToolchain::cargo_shipping`]).
pub(crate) const SHIPPING_TARGET_DIR: &str = "target/wasm-ship";
/// The rustup name given to Debian's toolchain.
const DEBIAN_TOOLCHAIN: &str = "deb-web";

/// How wasm32 code is compiled on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WasmToolchain {
    /// `rustup target add wasm32-unknown-unknown` is installed: plain `cargo --target`.
    Rustup,
    /// Debian's Rust with `-Zbuild-std`.
    Debian,
}

impl WasmToolchain {
    /// Finds the toolchain already installed, without installing anything.
    pub(crate) fn detect() -> Option<WasmToolchain> {
        if rustup_has_wasm_target() {
            return Some(WasmToolchain::Rustup);
        }
        let debian_ready = std::path::Path::new("/usr/lib/rustlib/src/rust/library/Cargo.lock").is_file()
            && std::path::Path::new("/usr/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld").exists()
            && (!on_path("rustup") || probe("rustc", &[&format!("+{DEBIAN_TOOLCHAIN}"), "--version"]).is_some());
        debian_ready.then_some(WasmToolchain::Debian)
    }

    /// A `cargo` command for the wasm32 target with its own target directory (so host and
    /// wasm builds never invalidate each other).
    pub(crate) fn cargo(self, subcommand: &str) -> Command {
        self.cargo_in(subcommand, &repo_root().join("target/wasm"))
    }

    /// A `cargo` command that builds what ships to browsers: with std built from source, so
    /// that panics abort immediately, without formatting machinery (about 9 kB gzip less).
    /// The flags differ from test builds, so it has its own target directory.
    pub(crate) fn cargo_shipping(self, subcommand: &str) -> Command {
        self.cargo_shipping_into(subcommand, &repo_root().join(SHIPPING_TARGET_DIR))
    }

    /// [`WasmToolchain::cargo_shipping`] with the target directory `target_dir`.
    pub(crate) fn cargo_shipping_into(self, subcommand: &str, target_dir: &std::path::Path) -> Command {
        let mut command = self.cargo_in(subcommand, target_dir);
        let from_source = self.ships_std_from_source();
        if self == WasmToolchain::Rustup && from_source {
            // rustup's prebuilt std cannot abort without formatting: build it from `rust-src`
            // as the Debian toolchain does (RUSTC_BOOTSTRAP lets a stable compiler take -Z).
            command.arg("-Zbuild-std=std,panic_abort").env("RUSTC_BOOTSTRAP", "1");
        }
        if from_source {
            command.env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort");
        }
        command
    }

    /// Whether shipping builds compile std from source (always with the Debian toolchain; with
    /// rustup when its `rust-src` component is installed). Size budgets hold for such builds.
    pub(crate) fn ships_std_from_source(self) -> bool {
        match self {
            WasmToolchain::Debian => true,
            WasmToolchain::Rustup => probe("rustc", &["--print", "sysroot"]).is_some_and(|sysroot| {
                std::path::Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library/Cargo.lock").is_file()
            }),
        }
    }

    fn cargo_in(self, subcommand: &str, target_dir: &std::path::Path) -> Command {
        let mut command;
        match self {
            WasmToolchain::Rustup => {
                command = in_repo("cargo");
                command.arg(subcommand).args(["--target", "wasm32-unknown-unknown"]);
            }
            WasmToolchain::Debian => {
                if on_path("rustup") {
                    command = in_repo("cargo");
                    command.arg(format!("+{DEBIAN_TOOLCHAIN}"));
                } else {
                    command = in_repo("/usr/bin/cargo");
                    command.env("RUSTC", "/usr/bin/rustc");
                }
                command.arg(subcommand).args(["--target", "wasm32-unknown-unknown", "-Zbuild-std=std,panic_abort"]);
                // Lets Debian's stable compiler accept -Z flags. Always set, so fingerprints stay stable.
                command.env("RUSTC_BOOTSTRAP", "1").env_remove("RUSTUP_TOOLCHAIN").env_remove("RUSTC");
            }
        }
        command.env("CARGO_TARGET_DIR", target_dir);
        command.env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", "wasm-bindgen-test-runner");
        command.env("WASM_BINDGEN_TEST_WEBDRIVER_JSON", repo_root().join("webdriver.json"));
        if std::path::Path::new("/usr/bin/chromedriver").exists() {
            command.env("CHROMEDRIVER", "/usr/bin/chromedriver");
        }
        command.env("WASM_BINDGEN_TEST_TIMEOUT", "120");
        command
    }
}

fn rustup_has_wasm_target() -> bool {
    probe("rustup", &["target", "list", "--installed"])
        .is_some_and(|targets| targets.lines().any(|line| line.trim() == "wasm32-unknown-unknown"))
}

fn is_root() -> bool {
    probe("id", &["-u"]).is_some_and(|uid| uid.trim() == "0")
}

fn deb_installed(package: &str) -> bool {
    probe("dpkg-query", &["-W", "-f=${Status}", package]).is_some_and(|status| status.contains("install ok installed"))
}

/// A command run as root: directly when we are root, through sudo otherwise.
fn privileged(program: &str) -> Command {
    if is_root() {
        Command::new(program)
    } else {
        let mut command = Command::new("sudo");
        command.arg(program);
        command
    }
}

/// Installs Debian packages that are missing.
pub(crate) fn apt_install(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !deb_installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !on_path("apt-get") {
        bail!("these packages are needed but this is not a Debian-like system: {}", missing.join(", "));
    }
    step(format!("apt: installing {}", missing.join(" ")));
    run(privileged("apt-get").args(["update", "-qq"]))?;
    run(privileged("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Debian's Rust with its own std source, `rust-lld`, and the `deb-web` rustup toolchain.
fn install_debian_wasm_toolchain() -> Result<()> {
    step("wasm32 target not installed in rustup: using Debian's rustc-web with -Zbuild-std");
    apt_install(&["rustc-web", "cargo-web", "rust-web-src"])?;
    let version = probe("/usr/bin/rustc", &["-vV"]).context("Debian's /usr/bin/rustc does not run")?;
    let llvm_major = version
        .lines()
        .find_map(|line| line.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("cannot read the LLVM version of /usr/bin/rustc")?
        .to_string();
    apt_install(&[&format!("lld-{llvm_major}")])?;
    let lld = PathBuf::from(format!("/usr/lib/llvm-{llvm_major}/bin/lld"));
    let link_dir = PathBuf::from("/usr/lib/rustlib/x86_64-unknown-linux-gnu/bin");
    let link = link_dir.join("rust-lld");
    if std::fs::read_link(&link).ok().as_deref() != Some(lld.as_path()) {
        // rustc links wasm32 with `rust-lld`, which Debian does not ship: point it at lld.
        run(privileged("mkdir").arg("-p").arg(&link_dir))?;
        run(privileged("ln").arg("-sfn").arg(&lld).arg(&link))?;
    }
    if on_path("rustup") && probe("rustc", &[&format!("+{DEBIAN_TOOLCHAIN}"), "--version"]).is_none() {
        run(Command::new("rustup").args(["toolchain", "link", DEBIAN_TOOLCHAIN, "/usr"]))?;
    }
    Ok(())
}

/// `wasm-bindgen` and `wasm-bindgen-test-runner` at the pinned version.
fn install_wasm_bindgen_cli() -> Result<()> {
    let installed = probe("wasm-bindgen", &["--version"]).unwrap_or_default();
    if installed.trim() == format!("wasm-bindgen {WASM_BINDGEN_VERSION}") && on_path("wasm-bindgen-test-runner") {
        return Ok(());
    }
    step(format!("installing wasm-bindgen-cli {WASM_BINDGEN_VERSION} (a few minutes on 2 cores)"));
    let install = |locked: bool| {
        let mut command = Command::new("cargo");
        // Outside the repository, so its config and toolchain files do not apply.
        command.current_dir(std::env::temp_dir()).env_remove("RUSTUP_TOOLCHAIN");
        command.args(["install", "wasm-bindgen-cli", "--version", &format!("={WASM_BINDGEN_VERSION}"), "--force"]);
        if locked {
            command.arg("--locked");
        }
        run(&mut command)
    };
    // The crate's own lock file names a webpki-roots release some registries lack; then resolve afresh.
    install(true).or_else(|_| install(false))
}

/// The npm packages of the repository (`package-lock.json`), installed once per lock change.
fn install_npm_packages() -> Result<()> {
    if !on_path("npm") {
        apt_install(&["nodejs", "npm"])?;
    }
    let root = repo_root();
    let stamp = root.join("node_modules/.package-lock.json");
    let lock = root.join("package-lock.json");
    let fresh = match (std::fs::metadata(&stamp), std::fs::metadata(&lock)) {
        (Ok(stamp), Ok(lock)) => stamp.modified()? >= lock.modified()?,
        _ => false,
    };
    if fresh {
        return Ok(());
    }
    step("npm ci (binaryen, playwright-core, …)");
    run(in_repo("npm").args(["ci", "--no-audit", "--no-fund"]))
}

/// The official MCP Python SDK, pinned: the MCP client of `crates/tether-server/tests/expose.rs`.
pub(crate) const PYTHON_MCP: &str = "mcp==2.3.0";

/// A virtual environment of its own with [`PYTHON_MCP`], at `target/python-mcp` (from PyPI once;
/// a stamp file says what it holds).
fn install_python_mcp() -> Result<()> {
    let venv = repo_root().join("target/python-mcp");
    let stamp = venv.join("tether-installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|held| held.trim() == PYTHON_MCP) {
        return Ok(());
    }
    step(format!("the MCP Python SDK ({PYTHON_MCP}) in target/python-mcp"));
    let _ = std::fs::remove_dir_all(&venv);
    let make = || run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    if make().is_err() {
        // Debian's python3 makes environments only with python3-venv.
        let _ = std::fs::remove_dir_all(&venv);
        apt_install(&["python3-venv"])?;
        make()?;
    }
    run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--disable-pip-version-check", PYTHON_MCP]))?;
    std::fs::write(&stamp, PYTHON_MCP)?;
    Ok(())
}

/// What a task needs installed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs {
    /// A headless Chromium and its driver.
    pub(crate) browser: bool,
    /// Only what building a user's app takes (`cargo xtask leptos-app`, `react-package`): the
    /// wasm toolchain, wasm-bindgen, wasm-opt and esbuild; not the workspace's npm packages, the
    /// MCP Python SDK or the services the tests start.
    pub(crate) app_build: bool,
}

impl Needs {
    /// What building a user's app takes (see [`Needs::app_build`]).
    pub(crate) fn app_build() -> Needs {
        Needs { browser: false, app_build: true }
    }

    /// What [`setup`] installs for these needs, beside the wasm toolchain and wasm-bindgen.
    pub(crate) fn installs(self) -> Installs {
        Installs {
            browser: self.browser,
            services: !self.app_build,
            workspace_npm: !self.app_build,
            python_mcp: !self.app_build,
        }
    }
}

/// What [`setup`] installs beside the wasm toolchain and wasm-bindgen (see [`Needs::installs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Installs {
    /// Chromium and chromedriver.
    pub(crate) browser: bool,
    /// jq, python3, redis-server, nginx and prometheus (the hook examples, the store tests, the
    /// tests of the deployment's nginx configuration, the metrics test).
    pub(crate) services: bool,
    /// `npm ci` of the whole workspace (else only binaryen and esbuild, see [`build_tool`]).
    pub(crate) workspace_npm: bool,
    /// The MCP Python SDK in `target/python-mcp`.
    pub(crate) python_mcp: bool,
}

/// Installs everything, skipping what is already there. Returns the wasm toolchain to use.
pub(crate) fn setup(needs: Needs) -> Result<WasmToolchain> {
    step("checking the toolchain (installs only what is missing)");
    let toolchain = match WasmToolchain::detect() {
        Some(toolchain) => toolchain,
        None => {
            install_debian_wasm_toolchain()?;
            WasmToolchain::detect().context("the Debian wasm toolchain is still not usable after installing it")?
        }
    };
    if toolchain == WasmToolchain::Rustup && !toolchain.ships_std_from_source() {
        // Shipping builds compile std from source (see `cargo_shipping`); without the component
        // they still build, bigger, and the size check says so.
        let added = run(Command::new("rustup").args(["component", "add", "rust-src"])).is_ok();
        if !added {
            eprintln!("[xtask] note: rustup could not add rust-src; browser modules ship with the prebuilt std");
        }
    }
    install_wasm_bindgen_cli()?;
    let installs = needs.installs();
    let browser_missing =
        !std::path::Path::new("/usr/bin/chromium").exists() || !std::path::Path::new("/usr/bin/chromedriver").exists();
    if installs.browser && browser_missing {
        apt_install(&["chromium", "chromium-driver"])?;
    }
    if installs.services {
        // The declarative-hook examples use jq and python3 (the hooks' PATH is /usr/local/bin:/usr/bin:/bin);
        // the Redis store's tests start redis-server instances of their own (never the machine's 6379),
        // and Redis Clusters of them, joined with redis-cli (redis-tools);
        // the nginx tests start nginx with deploy/nginx/tether.conf on free ports of their own;
        // the metrics test has a prometheus of its own scrape `/metrics`.
        apt_install(&["jq", "python3", "redis-server", "redis-tools", "nginx", "prometheus"])?;
    }
    if installs.workspace_npm {
        install_npm_packages()?;
    } else {
        install_build_tools()?;
    }
    if installs.python_mcp {
        install_python_mcp()?;
    }
    eprintln!("[xtask] wasm toolchain: {toolchain:?}");
    Ok(toolchain)
}

/// The path of npm's `wasm-opt` (binaryen 132: Debian's binaryen 108 breaks wasm-bindgen output).
pub(crate) fn wasm_opt() -> PathBuf {
    build_tool("wasm-opt")
}

/// The npm packages an app build runs: wasm-opt and esbuild (for the `.min.js`).
const BUILD_TOOL_PACKAGES: [&str; 2] = ["binaryen", "esbuild"];

/// Where an app build's npm tools go when the workspace's `node_modules` lacks them.
fn build_tools_dir() -> PathBuf {
    repo_root().join("target/build-tools")
}

/// A command of the build tools' npm packages: the workspace's (after `npm ci`), else the one
/// [`install_build_tools`] put in `target/build-tools`.
pub(crate) fn build_tool(name: &str) -> PathBuf {
    let workspace = repo_root().join("node_modules/.bin").join(name);
    if workspace.exists() { workspace } else { build_tools_dir().join("node_modules/.bin").join(name) }
}

/// binaryen and esbuild alone, at the versions of the workspace's `package.json`, into
/// `target/build-tools` (seconds, where `npm ci` of the workspace takes minutes).
fn install_build_tools() -> Result<()> {
    if ["wasm-opt", "esbuild"].iter().all(|tool| build_tool(tool).exists()) {
        return Ok(());
    }
    if !on_path("npm") {
        apt_install(&["nodejs", "npm"])?;
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("package.json"))?)?;
    let mut specs = Vec::new();
    for package in BUILD_TOOL_PACKAGES {
        let version = manifest["devDependencies"][package]
            .as_str()
            .or_else(|| manifest["dependencies"][package].as_str())
            .with_context(|| format!("package.json pins no {package}"))?;
        specs.push(format!("{package}@{version}"));
    }
    step(format!("npm install {} into target/build-tools", specs.join(" ")));
    let dir = build_tools_dir();
    std::fs::create_dir_all(&dir)?;
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--no-save", "--prefix"])
        .arg(&dir)
        .args(&specs))
}
