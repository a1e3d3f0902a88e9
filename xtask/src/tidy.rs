//! Tidy checks: invariants of the repository checked by tests instead of by memory (as
//! rust-analyzer does). They run with the native tests (`cargo test -p xtask`), so
//! `cargo xtask test` fails when one breaks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::repo_root;

/// The workspace's layered crates and the crates each may depend on (normal and build
/// dependencies): protocol ← core ← {web ← leptos, agent ← {hooks, scripted} ← server, mcp ← server}.
const LAYERS: &[(&str, &[&str])] = &[
    ("tether-protocol", &[]),
    ("tether-core", &["tether-protocol"]),
    ("tether-web", &["tether-core", "tether-protocol"]),
    ("tether-leptos", &["tether-web", "tether-core", "tether-protocol"]),
    ("tether-agent", &["tether-core", "tether-protocol"]),
    ("tether-scripted", &["tether-agent", "tether-protocol"]),
    ("tether-hooks", &["tether-agent", "tether-core", "tether-protocol"]),
    ("tether-mcp", &["tether-core", "tether-protocol"]),
    (
        "tether-server",
        &["tether-hooks", "tether-mcp", "tether-scripted", "tether-agent", "tether-core", "tether-protocol"],
    ),
];

/// External crates a layer must never depend on directly (IO runtimes, servers, the browser).
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("tether-protocol", &["tokio", "axum", "reqwest", "web-sys", "wasm-bindgen", "js-sys"]),
    ("tether-core", &["tokio", "axum", "reqwest", "web-sys", "wasm-bindgen", "js-sys"]),
    ("tether-web", &["tokio", "axum", "reqwest"]),
    ("tether-agent", &["axum", "tower-http", "clap", "web-sys", "wasm-bindgen"]),
    ("tether-scripted", &["axum", "tower-http", "clap", "reqwest", "web-sys", "wasm-bindgen"]),
    ("tether-hooks", &["axum", "tower-http", "clap", "web-sys", "wasm-bindgen"]),
    // MCP is a client here: no HTTP server, no CLI, nothing of the agent loop.
    ("tether-mcp", &["axum", "tower-http", "clap", "web-sys", "wasm-bindgen"]),
];

/// What the agent-loop example must not pull in (it needs the loop, not a server).
const NOT_IN_TRAVEL_AGENT: &[&str] = &["axum", "tower", "tower-http", "clap", "serde_yaml_ng", "nix"];

fn metadata() -> cargo_metadata::Metadata {
    cargo_metadata::MetadataCommand::new()
        .manifest_path(repo_root().join("Cargo.toml"))
        .no_deps()
        .exec()
        .expect("cargo metadata runs")
}

/// Problems with the dependency direction, one line each.
fn direction_problems(metadata: &cargo_metadata::Metadata) -> Vec<String> {
    let mut problems = Vec::new();
    let layered: BTreeSet<&str> = LAYERS.iter().map(|(name, _)| *name).collect();
    for (name, allowed) in LAYERS {
        let Some(package) = metadata.packages.iter().find(|p| p.name.as_str() == *name) else {
            problems.push(format!("{name}: not in the workspace (update xtask/src/tidy.rs)"));
            continue;
        };
        let forbidden = FORBIDDEN.iter().find(|(n, _)| n == name).map_or(&[][..], |(_, f)| f);
        for dependency in &package.dependencies {
            if dependency.kind == cargo_metadata::DependencyKind::Development {
                continue;
            }
            let dep = dependency.name.as_str();
            let internal = layered.contains(dep) || dep.starts_with("tether-");
            if internal && !allowed.contains(&dep) {
                problems.push(format!("{name} depends on {dep}, against the direction in ARCHITECTURE.md"));
            }
            if forbidden.contains(&dep) {
                problems.push(format!("{name} depends on {dep}, which it must not (IO belongs at the edges)"));
            }
        }
    }
    problems
}

#[test]
fn dependencies_follow_the_layers() {
    let problems = direction_problems(&metadata());
    assert!(problems.is_empty(), "dependency direction broken:\n{}", problems.join("\n"));
}

#[test]
fn the_direction_check_catches_an_upward_edge() {
    let mut metadata = metadata();
    let core = metadata.packages.iter_mut().find(|p| p.name.as_str() == "tether-core").expect("tether-core");
    let mut upward = core.dependencies.first().expect("core has dependencies").clone();
    upward.name = "tether-server".into();
    upward.kind = cargo_metadata::DependencyKind::Normal;
    let mut io = upward.clone();
    io.name = "tokio".into();
    core.dependencies.extend([upward, io]);
    let problems = direction_problems(&metadata);
    assert!(problems.iter().any(|p| p.contains("tether-core depends on tether-server")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("tether-core depends on tokio")), "{problems:?}");
}

#[test]
fn the_travel_agent_example_needs_no_server_stack() {
    let output = Command::new(env!("CARGO"))
        .current_dir(repo_root())
        .args(["tree", "-p", "travel-agent", "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let tree = String::from_utf8_lossy(&output.stdout);
    let names: BTreeSet<&str> = tree.lines().filter_map(|line| line.split_whitespace().next()).collect();
    let found: Vec<&&str> = NOT_IN_TRAVEL_AGENT.iter().filter(|n| names.contains(**n)).collect();
    assert!(found.is_empty(), "travel-agent pulls in {found:?}: keep tether-agent's server-free build");
}

/// The version of a package in `Cargo.lock`.
fn locked_version(lock: &str, package: &str) -> Option<String> {
    let header = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&header)? + header.len();
    Some(lock[start..].split('"').next()?.to_string())
}

#[test]
fn wasm_bindgen_crate_matches_the_cli_setup_installs() {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).expect("Cargo.lock");
    let locked = locked_version(&lock, "wasm-bindgen").expect("wasm-bindgen in Cargo.lock");
    let pinned = crate::toolchain::WASM_BINDGEN_VERSION;
    assert_eq!(
        locked, pinned,
        "Cargo.lock has wasm-bindgen {locked} but setup installs wasm-bindgen-cli {pinned}: change both together \
         (root Cargo.toml pins the crate, xtask/src/toolchain.rs the CLI)"
    );
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    assert!(manifest.contains(&format!("wasm-bindgen = \"={pinned}\"")), "the root Cargo.toml must pin ={pinned}");
    if let Some(installed) = crate::cmd::probe("wasm-bindgen", &["--version"]) {
        assert_eq!(installed.trim(), format!("wasm-bindgen {pinned}"), "run `cargo xtask setup`");
    }
}

/// Every Rust file of the repository, outside build output and dependencies.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | "node_modules" | ".git" | "corpus" | "artifacts" | "dist") {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line() {
    let mut files = Vec::new();
    rust_files(&repo_root(), &mut files);
    assert!(files.len() > 50, "found only {} files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).is_ok_and(|text| text.starts_with("//!")))
        .map(|path| path.strip_prefix(repo_root()).unwrap_or(path).display().to_string())
        .collect();
    assert!(missing.is_empty(), "these files do not open with a `//!` line: {missing:?}");
}

#[test]
fn every_crate_is_in_the_architecture_code_map() {
    let map = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let crates = std::fs::read_dir(repo_root().join("crates")).expect("crates/");
    let missing: Vec<String> = crates
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !map.contains(&format!("{name}/")))
        .collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md's code map does not list {missing:?}");
}

#[test]
fn both_toolkits_ship_the_same_component_styles() {
    // tether-leptos embeds its copy (`STYLES`, include_str!) so that the crate stands alone; the
    // React package ships its own. They must not drift apart.
    let root = repo_root();
    let leptos = std::fs::read_to_string(root.join("crates/tether-leptos/src/styles.css")).unwrap();
    let react = std::fs::read_to_string(root.join("www/packages/react/styles.css")).unwrap();
    assert!(
        leptos == react,
        "crates/tether-leptos/src/styles.css and www/packages/react/styles.css differ: change both"
    );
}

/// The wire's names from `protocol.schema.json`: the frames' `type` tags and the run events'
/// `kind` tags (those with an underscore: `hook` and `navigate` are words of other things too).
fn wire_names() -> Vec<String> {
    let path = repo_root().join("crates/tether-protocol/protocol.schema.json");
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the schema")).unwrap();
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(object) => {
                for tag in ["type", "kind"] {
                    if let Some(name) = object.get("properties").and_then(|p| p.get(tag)).and_then(|t| t.get("const")) {
                        let name = name.as_str().unwrap_or_default();
                        if name.contains('_') || (tag == "type" && name.chars().all(|c| c.is_ascii_uppercase())) {
                            out.push(name.to_string());
                        }
                    }
                }
                object.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut names = Vec::new();
    walk(&schema, &mut names);
    names.sort();
    names.dedup();
    names
}

/// Where Rust code outside the protocol crate spells a wire name as a string literal (its
/// tests left out: they send and read raw frames on purpose).
fn wire_spellings(names: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["crates", "examples", "bench"] {
        rust_files(&repo_root().join(dir), &mut files);
    }
    let mut found = Vec::new();
    for path in files {
        let relative = path.strip_prefix(repo_root()).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        if relative.starts_with("crates/tether-protocol/")
            || relative.contains("/tests/")
            || relative.contains("/benches/")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // A file's unit tests come last, after `#[cfg(test)]`.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            for name in names {
                if line.contains(&format!("\"{name}\"")) {
                    found.push(format!("{relative}:{}: \"{name}\"", n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn the_react_package_reads_run_events_through_types_made_from_the_schema() {
    let schema = std::fs::read_to_string(repo_root().join("crates/tether-protocol/protocol.schema.json")).unwrap();
    let expected = crate::protocol_ts::run_event_types(&serde_json::from_str(&schema).unwrap());
    let path = repo_root().join(crate::protocol_ts::OUTPUT);
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} is not what the schema gives: run `cargo xtask protocol-schema`",
        crate::protocol_ts::OUTPUT
    );
    for variant in ["({ kind: \"tool_call_delta\" } & ToolCallDeltaEvent)", "export interface ToolEndEvent {"] {
        assert!(expected.contains(variant), "{variant} missing:\n{expected}");
    }
}

#[test]
fn only_the_protocol_crate_spells_the_wire() {
    let names = wire_names();
    for expected in ["TOOL_RESULT", "CONTEXT_UPDATE", "TOOL_RESULT_ACK", "tool_execution_end", "run_end"] {
        assert!(names.iter().any(|n| n == expected), "{expected} not read from the schema: {names:?}");
    }
    let found = wire_spellings(&names);
    assert!(
        found.is_empty(),
        "only tether-protocol spells frame types and event kinds; use its types (ClientFrame, ServerFrame, RunEvent):\n{}",
        found.join("\n")
    );
}

/// The top-level modules of the library crate in `src` (a file or folder each; `#[path]` files
/// under the name `lib.rs` gives them), and for each the others its code (not its comments, not
/// its `tests` module) names through `crate::`. A name `lib.rs` re-exports counts as the module
/// it comes from.
fn module_imports(src: &Path) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    use std::collections::{BTreeMap, HashMap};
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let mut modules: BTreeSet<String> = BTreeSet::new();
    let mut by_path: HashMap<String, String> = HashMap::new();
    let mut exported: HashMap<String, String> = HashMap::new();
    let mut path_attr: Option<String> = None;
    for line in lib.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[path = \"") {
            path_attr = rest.split('"').next().map(str::to_string);
        } else if let Some(name) = line.strip_prefix("mod ").or_else(|| line.strip_prefix("pub mod ")) {
            let name = name.trim_end_matches(';').to_string();
            if let Some(file) = path_attr.take() {
                by_path.insert(file.trim_end_matches(".rs").to_string(), name.clone());
            }
            modules.insert(name);
        } else if !line.starts_with("#[") {
            path_attr = None;
        }
    }
    for (at, _) in lib.match_indices("pub use ") {
        let statement = lib[at + "pub use ".len()..].split(';').next().unwrap_or_default();
        let (module, names) = statement.split_once("::").unwrap_or((statement, ""));
        for name in names.split(['{', '}', ',']) {
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() {
                exported.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut imports: BTreeMap<String, BTreeSet<String>> =
        modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in files {
        let relative = file.strip_prefix(src).unwrap_or(&file);
        let first = relative.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned());
        let Some(first) = first else { continue };
        let stem = first.trim_end_matches(".rs").to_string();
        let module = by_path.get(&stem).cloned().unwrap_or(stem);
        if !modules.contains(&module) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let code: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            let names = match rest.strip_prefix('{') {
                Some(list) => braced_items(list),
                None => vec![rest],
            };
            for name in names {
                let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let target = if modules.contains(&name) { Some(name) } else { exported.get(&name).cloned() };
                if let Some(target) = target.filter(|target| *target != module) {
                    imports.get_mut(&module).expect("a module").insert(target);
                }
            }
        }
    }
    imports
}

/// The items of a `use` list whose `{` came just before `list`, up to its `}`: split at the
/// commas of this level (`a, b::{c, d}` is `a` and `b::{c, d}`).
fn braced_items(list: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(list[start..i].trim());
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(list[start..].trim());
    items
}

/// The cycles among `imports` (module → modules it names): each as the path that closes it.
fn import_cycles(imports: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit<'a>(
        module: &'a str,
        imports: &'a std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        cycles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|m| *m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module);
            cycles.push(cycle.join(" → "));
            return;
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in imports.get(module).into_iter().flatten() {
            visit(next, imports, path, done, cycles);
        }
        path.pop();
    }
    let mut cycles = Vec::new();
    let mut done = BTreeSet::new();
    for module in imports.keys() {
        visit(module, imports, &mut Vec::new(), &mut done, &mut cycles);
    }
    cycles
}

/// Import cycles among a crate's modules that were there when the check came (2026-12-05), to be
/// broken as those crates change; a cycle not listed fails the check, and one that is gone must
/// leave the list.
const KNOWN_CYCLES: &[(&str, &str)] = &[
    ("tether-agent", "hooks → model → hooks"),
    ("tether-core", "error → validate → error"),
    ("tether-hooks", "claude → config → claude"),
    ("tether-web", "client → transport → client"),
];

#[test]
fn modules_import_each_other_without_a_cycle() {
    let server = module_imports(&repo_root().join("crates/tether-server/src"));
    for (module, expected) in [("connection", "session"), ("session", "persist"), ("tools", "app")] {
        assert!(server[module].contains(expected), "{module} should import {expected}: {server:?}");
    }
    let mut new = Vec::new();
    let mut known = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("crates")).expect("crates/").flatten() {
        let src = entry.path().join("src");
        if !src.join("lib.rs").exists() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        for cycle in import_cycles(&module_imports(&src)) {
            if KNOWN_CYCLES.contains(&(name.as_str(), cycle.as_str())) {
                known.push((name.clone(), cycle));
            } else {
                new.push(format!("{name}: {cycle}"));
            }
        }
    }
    assert!(
        new.is_empty(),
        "modules import each other in a cycle (move what both need into a module of its own): {new:?}"
    );
    let gone: Vec<_> =
        KNOWN_CYCLES.iter().filter(|(name, cycle)| !known.iter().any(|(n, c)| n == name && c == cycle)).collect();
    assert!(gone.is_empty(), "these cycles are gone: take them out of KNOWN_CYCLES: {gone:?}");
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let imports = [("a", &["b"][..]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]
        .into_iter()
        .map(|(m, to)| (m.to_string(), to.iter().map(|t| t.to_string()).collect()))
        .collect();
    assert_eq!(import_cycles(&imports), ["a → b → c → a"]);
    assert_eq!(braced_items("a, b::{c, d}, E} rest"), ["a", "b::{c, d}", "E"]);
}
