//! Building what a newcomer builds from the README: a Leptos app of their own (any crate, inside
//! this checkout or not) and the `@tether/react` package.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd::{in_repo, repo_root, run, step};
use crate::toolchain::{self, Needs, WasmToolchain};
use crate::wasm::{ModuleSizes, finish_module, shipped_wasm_in};

/// The profile shipping builds use (the workspace's `[profile.wasm-release]`), given on the
/// command line so that a crate outside this workspace needs no profile of its own, and builds
/// with the same settings as the storefront (so the two share compiled dependencies).
const WASM_RELEASE_PROFILE: [&str; 6] = [
    "profile.wasm-release.inherits=\"release\"",
    "profile.wasm-release.opt-level=\"z\"",
    "profile.wasm-release.lto=true",
    "profile.wasm-release.codegen-units=1",
    "profile.wasm-release.panic=\"abort\"",
    "profile.wasm-release.debug=false",
];

const LEPTOS_APP_HELP: &str = "\
cargo xtask leptos-app <CRATE_DIR> [--out DIR] [--target-dir DIR] [--serve] [--addr HOST:PORT]

Builds a Leptos (CSR) crate for the browser the way the storefront is built: cargo for
wasm32-unknown-unknown (profile wasm-release, std from source where the toolchain needs it),
wasm-bindgen --target web, wasm-opt -Oz. Writes <CRATE_DIR>/dist (or --out): index.html, the JS
glue (minified as <name>.min.js, which index.html loads) and the .wasm. A binary target (src/main.rs with `fn main() { mount_to_body(App) }`) runs
at load; a library needs `#[wasm_bindgen(start)]`. Files in <CRATE_DIR>/static are copied into
dist (an index.html there replaces the generated one). Without a Cargo.lock, the crate gets a
copy of this checkout's, so it builds with the versions Tether is tested with.

It installs only what the build takes (the wasm toolchain, wasm-bindgen, and binaryen and
esbuild from npm into target/build-tools), not what the workspace's tests need. Cargo builds
into --target-dir, else $CARGO_TARGET_DIR/wasm-ship, else this checkout's target/wasm-ship
(shared with the examples, so a second app builds quickly).

--serve then runs `tether serve --static <dist>` (built-in model) on --addr (default
127.0.0.1:8787): open the printed URL and talk to the agent in the chat.
";

/// `cargo xtask leptos-app`.
pub(crate) fn leptos_app(args: &[String]) -> Result<()> {
    let mut dir = None;
    let mut out = None;
    let mut serve = false;
    let mut addr = "127.0.0.1:8787".to_string();
    let mut target_dir = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(args.next().context("--out needs a folder")?)),
            "--target-dir" => target_dir = Some(PathBuf::from(args.next().context("--target-dir needs a folder")?)),
            "--serve" => serve = true,
            "--addr" => addr = args.next().context("--addr needs HOST:PORT")?.clone(),
            "--help" | "-h" => {
                eprint!("{LEPTOS_APP_HELP}");
                return Ok(());
            }
            other if other.starts_with('-') => bail!("unknown option {other}\n\n{LEPTOS_APP_HELP}"),
            other => dir = Some(PathBuf::from(other)),
        }
    }
    let cwd = std::env::current_dir()?;
    let dir = cwd.join(dir.with_context(|| format!("which crate?\n\n{LEPTOS_APP_HELP}"))?);
    let out = out.map_or_else(|| dir.join("dist"), |out| cwd.join(out));
    let target_dir = app_target_dir(target_dir.map(|t| cwd.join(t)), std::env::var_os("CARGO_TARGET_DIR"));
    let toolchain = toolchain::setup(Needs::app_build())?;
    let sizes = build_leptos_app_into(toolchain, &dir, &out, &target_dir)?;
    crate::wasm::print_sizes(std::slice::from_ref(&sizes));
    eprintln!("[xtask] built {} into {}", dir.display(), out.display());
    if serve {
        step("building the server");
        run(in_repo("cargo").args(["build", "-p", "tether-server", "--bin", "tether"]))?;
        step("serving the app with the built-in model (Ctrl-C stops); open the URL below");
        run(Command::new(repo_root().join("target/debug/tether"))
            .args(["serve", "--model", "scripted", "--addr", &addr, "--static"])
            .arg(&out))?;
    }
    Ok(())
}

/// The crate's browser target: its name, its kind (`bin` or `lib`), and whether the crate is
/// its own workspace (then it keeps a `Cargo.lock` of its own).
fn browser_target(manifest: &Path) -> Result<(String, &'static str, bool)> {
    let output = Command::new("cargo")
        .args(["metadata", "--no-deps", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .output()
        .context("running cargo metadata")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo metadata failed for {}:\n{}",
        manifest.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let manifest = manifest.canonicalize()?;
    let own_workspace =
        metadata["workspace_root"].as_str().is_some_and(|root| Some(Path::new(root)) == manifest.parent());
    let package = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["manifest_path"].as_str().is_some_and(|m| Path::new(m) == manifest))
        .context("cargo metadata lists no package for this manifest")?;
    let targets = package["targets"].as_array().context("a target list")?;
    let has =
        |kind: &str| targets.iter().find(|t| t["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == kind)));
    if let Some(bin) = has("bin") {
        return Ok((bin["name"].as_str().context("a name")?.to_string(), "bin", own_workspace));
    }
    match has("lib").or_else(|| has("cdylib")) {
        Some(lib) => Ok((lib["name"].as_str().context("a name")?.replace('-', "_"), "lib", own_workspace)),
        None => bail!("{} has neither a binary nor a library target", manifest.display()),
    }
}

/// Where `cargo xtask leptos-app` builds: `--target-dir`, else `$CARGO_TARGET_DIR/wasm-ship`,
/// else the checkout's shipping target directory.
fn app_target_dir(flag: Option<PathBuf>, env: Option<std::ffi::OsString>) -> PathBuf {
    flag.or_else(|| env.filter(|e| !e.is_empty()).map(|e| PathBuf::from(e).join("wasm-ship")))
        .unwrap_or_else(|| repo_root().join(toolchain::SHIPPING_TARGET_DIR))
}

/// The `index.html` written beside an app's module `name`: it loads the minified glue.
fn index_html(name: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  \
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n  <title>{name}</title>\n</head>\n\
         <body>\n  <noscript>This app needs JavaScript and WebAssembly.</noscript>\n  <script type=\"module\">\n    \
         import init from \"/{name}.min.js\";\n    await init({{ module_or_path: \"/{name}_bg.wasm\" }});\n  </script>\n\
         </body>\n</html>\n"
    )
}

/// Builds the crate in `dir` for the browser into `out` (shipping build, shared target folder).
pub(crate) fn build_leptos_app(toolchain: WasmToolchain, dir: &Path, out: &Path) -> Result<ModuleSizes> {
    build_leptos_app_into(toolchain, dir, out, &repo_root().join(toolchain::SHIPPING_TARGET_DIR))
}

/// [`build_leptos_app`] with cargo's target directory `target_dir`.
fn build_leptos_app_into(toolchain: WasmToolchain, dir: &Path, out: &Path, target_dir: &Path) -> Result<ModuleSizes> {
    let manifest = dir.join("Cargo.toml");
    anyhow::ensure!(manifest.is_file(), "{} has no Cargo.toml", dir.display());
    let (name, kind, own_workspace) = browser_target(&manifest)?;
    let lock = dir.join("Cargo.lock");
    if own_workspace && !lock.exists() {
        // The versions this checkout is tested with (cargo drops what the crate does not use).
        std::fs::copy(repo_root().join("Cargo.lock"), &lock)?;
    }
    step(format!("building {} for the browser", dir.display()));
    let mut cargo = toolchain.cargo_shipping_into(if kind == "bin" { "build" } else { "rustc" }, target_dir);
    cargo.arg("--manifest-path").arg(&manifest).args(["--profile", "wasm-release"]);
    for setting in WASM_RELEASE_PROFILE {
        cargo.args(["--config", setting]);
    }
    if kind == "bin" {
        cargo.args(["--bin", &name]);
    } else {
        cargo.args(["--lib", "--crate-type", "cdylib"]);
    }
    run(&mut cargo)?;
    if out.exists() {
        std::fs::remove_dir_all(out)?;
    }
    let sizes = finish_module(&shipped_wasm_in(target_dir, &name), out, &format!("{name} (whole app)"))?;
    std::fs::write(out.join("index.html"), index_html(&name))?;
    let statics = dir.join("static");
    if statics.is_dir() {
        for entry in std::fs::read_dir(&statics)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), out.join(entry.file_name()))?;
            }
        }
    }
    let compressed = crate::precompress::precompress(out)?;
    eprintln!(
        "[xtask] precompressed {} files ({} bytes; {} as brotli) for tether serve --static",
        compressed.files, compressed.bytes, compressed.brotli_bytes
    );
    Ok(sizes)
}

/// Where `cargo xtask react-package` leaves the package.
pub(crate) fn react_tarball() -> PathBuf {
    repo_root().join("target/npm/tether-react-0.1.0.tgz")
}

/// Copies a folder, leaving out the names in `skip` (at any depth).
fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name), skip)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

/// `cargo xtask react-package`: builds the browser runtime, then packs `www/packages/react` the
/// way any copy of that folder packs (`npm install`, `npm pack`, whose `prepack` copies the wasm
/// in and compiles the TypeScript), in a copy outside this checkout (so nothing of the
/// repository's `node_modules` is in reach: the package builds standalone). Returns the tarball.
pub(crate) fn react_package(toolchain: WasmToolchain) -> Result<PathBuf> {
    let runtime = crate::tasks::runtime_module(toolchain)?;
    pack_react(&runtime)
}

/// Packs `@tether/react` standalone around the runtime already built (see [`react_package`]).
pub(crate) fn pack_react(runtime: &ModuleSizes) -> Result<PathBuf> {
    let pkg = runtime.wasm_path.parent().context("the runtime has a folder")?.to_path_buf();
    let npm = repo_root().join("target/npm");
    std::fs::create_dir_all(&npm)?;
    // One copy per checkout, kept between runs so that its npm install is quick the next time.
    let checkout =
        repo_root().to_string_lossy().bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let copy = std::env::temp_dir().join(format!("tether-react-package-{checkout:x}"));
    step("packing @tether/react in a copy of www/packages/react (standalone: its own npm install)");
    for stale in ["src", "scripts", "test", "dist", "wasm"] {
        let path = copy.join(stale);
        if path.exists() {
            std::fs::remove_dir_all(path)?;
        }
    }
    copy_tree(&repo_root().join("www/packages/react"), &copy, &["node_modules", "dist", "wasm"])?;
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--no-package-lock", "--prefer-offline"])
        .current_dir(&copy))?;
    let tarball = react_tarball();
    if tarball.exists() {
        std::fs::remove_file(&tarball)?;
    }
    run(Command::new("npm")
        .args(["pack", "--pack-destination"])
        .arg(&npm)
        .current_dir(&copy)
        .env("TETHER_WEB_PKG", &pkg))?;
    anyhow::ensure!(tarball.is_file(), "npm pack wrote no {}", tarball.display());
    eprintln!("[xtask] @tether/react: {}", tarball.display());
    Ok(tarball)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_page_loads_the_minified_glue() {
        let html = index_html("notes");
        assert!(html.contains("import init from \"/notes.min.js\""), "{html}");
        assert!(html.contains("module_or_path: \"/notes_bg.wasm\""), "{html}");
    }

    #[test]
    fn an_app_builds_where_the_user_says() {
        let flag = PathBuf::from("/tmp/mine");
        assert_eq!(app_target_dir(Some(flag.clone()), Some("/elsewhere".into())), flag);
        assert_eq!(app_target_dir(None, Some("/elsewhere".into())), PathBuf::from("/elsewhere/wasm-ship"));
        assert_eq!(app_target_dir(None, Some("".into())), repo_root().join("target/wasm-ship"));
        assert_eq!(app_target_dir(None, None), repo_root().join("target/wasm-ship"));
    }

    #[test]
    fn an_app_build_installs_only_what_it_takes() {
        let app = Needs::app_build().installs();
        assert!(!app.workspace_npm && !app.python_mcp && !app.services && !app.browser, "{app:?}");
        let tests = Needs { browser: true, ..Needs::default() }.installs();
        assert!(tests.workspace_npm && tests.python_mcp && tests.services && tests.browser, "{tests:?}");
    }
}
