//! Builds the browser-facing wasm modules: cargo (wasm32, `wasm-release` profile), then
//! `wasm-bindgen --target web`, then `wasm-opt -Oz`, measuring the size after each step.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cmd::{in_repo, run, step};
use crate::toolchain::{WasmToolchain, wasm_opt};

/// Sizes of one module after each build step, in bytes.
#[derive(Debug, Clone)]
pub(crate) struct ModuleSizes {
    /// What the module is.
    pub(crate) label: String,
    /// The `.wasm` cargo produced.
    pub(crate) raw: u64,
    /// The `.wasm` after wasm-bindgen.
    pub(crate) bindgen: u64,
    /// The `.wasm` after `wasm-opt -Oz`.
    pub(crate) optimized: u64,
    /// gzip -9 of the optimised `.wasm`.
    pub(crate) wasm_gzip: u64,
    /// gzip -9 of the generated JS glue, minified as a bundler ships it (esbuild --minify).
    pub(crate) js_gzip: u64,
    /// The optimised `.wasm`.
    pub(crate) wasm_path: PathBuf,
    /// The `.wasm` cargo produced (with names, for twiggy).
    pub(crate) raw_path: PathBuf,
}

impl ModuleSizes {
    /// What a page downloads: wasm and JS glue, both gzipped.
    pub(crate) fn total_gzip(&self) -> u64 {
        self.wasm_gzip + self.js_gzip
    }
}

/// gzip -9 size of a file.
pub(crate) fn gzip_size(path: &Path) -> Result<u64> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&bytes)?;
    Ok(encoder.finish()?.len() as u64)
}

/// gzip -9 size of a JS file after `esbuild --minify`, as an app's bundler would ship it.
pub(crate) fn minified_gzip_size(path: &Path) -> Result<u64> {
    let minified = path.with_extension("min.js");
    let esbuild = crate::toolchain::build_tool("esbuild");
    run(in_repo(esbuild)
        .arg(path)
        .args(["--minify", "--format=esm", "--log-level=warning"])
        .arg(format!("--outfile={}", minified.display())))?;
    gzip_size(&minified)
}

fn size(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len())
}

/// Builds `package`'s library as a cdylib for the browser into `out_dir`, returning its sizes.
pub(crate) fn build_module(
    toolchain: WasmToolchain,
    package: &str,
    features: &[&str],
    out_dir: &Path,
    label: &str,
) -> Result<ModuleSizes> {
    step(format!("building {package} for the browser"));
    let mut cargo = toolchain.cargo_shipping("rustc");
    cargo.args(["--profile", "wasm-release", "--lib", "-p", package, "--crate-type", "cdylib"]);
    if !features.is_empty() {
        cargo.arg("--features").arg(features.join(","));
    }
    run(&mut cargo)?;
    let crate_name = package.replace('-', "_");
    finish_module(&shipped_wasm(&crate_name), out_dir, label)
}

/// Where a shipping build leaves the `.wasm` of the cargo target `name` (a library's name has
/// underscores; a binary's keeps its hyphens).
pub(crate) fn shipped_wasm(name: &str) -> PathBuf {
    shipped_wasm_in(&crate::cmd::repo_root().join(crate::toolchain::SHIPPING_TARGET_DIR), name)
}

/// The module `name` a shipping build left in the target directory `target_dir`.
pub(crate) fn shipped_wasm_in(target_dir: &Path, name: &str) -> PathBuf {
    target_dir.join(format!("wasm32-unknown-unknown/wasm-release/{name}.wasm"))
}

/// `wasm-bindgen --target web` and `wasm-opt` for a module cargo built, into `out_dir`.
pub(crate) fn finish_module(raw_path: &Path, out_dir: &Path, label: &str) -> Result<ModuleSizes> {
    let stem = raw_path.file_stem().and_then(|s| s.to_str()).context("a module name")?.to_string();
    let raw_path = raw_path.to_path_buf();
    std::fs::create_dir_all(out_dir)?;
    run(in_repo("wasm-bindgen").args(["--target", "web", "--out-dir"]).arg(out_dir).arg(&raw_path))?;
    let bindgen_path = out_dir.join(format!("{stem}_bg.wasm"));
    let bindgen = size(&bindgen_path)?;
    optimize(&bindgen_path, &out_dir.join(format!("{stem}.js")))?;
    Ok(ModuleSizes {
        label: label.to_string(),
        raw: size(&raw_path)?,
        bindgen,
        optimized: size(&bindgen_path)?,
        wasm_gzip: gzip_size(&bindgen_path)?,
        js_gzip: minified_gzip_size(&out_dir.join(format!("{stem}.js")))?,
        wasm_path: bindgen_path,
        raw_path,
    })
}

/// Runs `wasm-opt -Oz` (with two rounds of `--flatten --rereloop -Oz`, `--monomorphize` and
/// `--merge-similar-functions` after it) on the module, shortens its import and export names (wasm-bindgen's
/// carry hashes and mangled paths: about 3 kB gzip of the runtime across the wasm and its JS
/// glue) and strips the producers and target-features sections, in one run; then renames the
/// names in the JS glue that uses them, and drops the wasm's own `.d.ts`, which would list the
/// old names.
///
/// binaryen's `--minify-imports-and-exports-and-modules` does the renaming and prints the
/// mapping. In wasm-bindgen's `--target web` glue (its version is pinned), every import is one
/// `name:` key of the single import module's object, and every export is read as `wasm.name`.
fn optimize(wasm: &Path, glue: &Path) -> Result<()> {
    let output = in_repo(wasm_opt())
        .arg(wasm)
        // Two more rounds of flattening and re-reloop after -Oz let -Oz find more: measured on the
        // runtime, 57,369 bytes of gzipped wasm against 57,879 with -Oz alone (-Os and --gufa
        // gave less). Then specialising functions for their constant arguments, merging the
        // similar ones and -Oz once more: 165 bytes less again (gzip -9 of the runtime's wasm,
        // 57,000 → 56,835; a third round of flattening gave more, not less; `--converge` would
        // repeat the renaming below too).
        //
        // `--low-memory-unused` lets binaryen fold a small constant added to an address into the
        // load's or store's offset (383 bytes gzip of the runtime's wasm, 56,562 → 56,179). The two
        // forms differ only where the addition wraps past 2^32 to an address below 1024, so the
        // flag's promise is that nothing valid lives there. rustc links wasm32 stack-first: the
        // data starts at 1 MiB and the stack grows down from there towards 0, so only the last
        // KiB of a 1 MiB stack is below 1024, a depth the runtime's bounded recursion never
        // nears (schemas, JS values and frames are refused past a fixed nesting, 256 levels at
        // most); an overflow traps either way.
        .arg("--low-memory-unused")
        .args(["-Oz", "--flatten", "--rereloop", "-Oz", "--flatten", "--rereloop", "-Oz"])
        .args(["--monomorphize", "-Oz", "--merge-similar-functions", "-Oz"])
        .args(["--minify-imports-and-exports-and-modules", "--strip-producers", "--strip-target-features"])
        .arg("-o")
        .arg(wasm)
        .output()
        .context("running wasm-opt")?;
    anyhow::ensure!(output.status.success(), "wasm-opt could not optimise {}", wasm.display());
    let mapping: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("reading the name mapping wasm-opt printed")?;
    let pairs = |key: &str, old: usize, new: usize| -> Result<Vec<(String, String)>> {
        mapping[key]
            .as_array()
            .context("a list in the mapping")?
            .iter()
            .map(|entry| {
                let name = |n: usize| entry[n].as_str().map(String::from).context("a name in the mapping");
                Ok((name(old)?, name(new)?))
            })
            .collect()
    };
    let js = std::fs::read_to_string(glue).with_context(|| format!("reading {}", glue.display()))?;
    let mut modules: Vec<String> = pairs("imports", 0, 0)?.into_iter().map(|(module, _)| module).collect();
    modules.sort();
    modules.dedup();
    let js = rename_in_glue(js, &modules, &pairs("imports", 1, 2)?, &pairs("exports", 0, 1)?)?;
    std::fs::write(glue, js)?;
    let declarations = wasm.with_extension("wasm.d.ts");
    if declarations.exists() {
        std::fs::remove_file(declarations)?;
    }
    Ok(())
}

/// Renames, in wasm-bindgen's glue, the import module, the imports (`old: function` keys) and
/// the exports (`wasm.old` reads) that wasm-opt shortened, then checks that no old name is left:
/// a glue that still used one would fail at load time in every app.
fn rename_in_glue(
    mut js: String,
    modules: &[String],
    imports: &[(String, String)],
    exports: &[(String, String)],
) -> Result<String> {
    anyhow::ensure!(modules.len() <= 1, "the module imports from several modules: {modules:?}");
    for module in modules {
        let key = format!("\"{module}\": ");
        anyhow::ensure!(js.matches(&key).count() == 1, "the glue names import module {module} other than once");
        js = js.replace(&key, "\"a\": ");
    }
    for (old, new) in imports {
        let key = format!("{old}: function");
        anyhow::ensure!(js.matches(&key).count() == 1, "the glue defines import {old} other than once");
        js = js.replace(&key, &format!("\"{new}\": function"));
    }
    for (old, new) in exports {
        js = replace_member(&js, &format!("wasm.{old}"), &format!("wasm[\"{new}\"]"));
    }
    // wasm-opt renames every export, so after the renaming no `wasm.name` read may be left.
    let mut left: Vec<String> = unrenamed_reads(&js);
    left.extend(imports.iter().filter(|(old, _)| js.contains(&format!("{old}: function"))).map(|(old, _)| old.clone()));
    left.extend(modules.iter().filter(|module| js.contains(&format!("\"{module}\": "))).cloned());
    anyhow::ensure!(left.is_empty(), "the JS glue still uses names that were not shortened: {left:?}");
    Ok(js)
}

/// The `wasm.name` member reads in `js` (`wasm` as a whole word).
fn unrenamed_reads(js: &str) -> Vec<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    js.match_indices("wasm.")
        .filter(|(at, _)| !js[..*at].ends_with(is_name))
        .map(|(at, _)| js[at + 5..].chars().take_while(|c| is_name(*c)).collect::<String>())
        .filter(|name| !name.is_empty())
        .map(|name| format!("wasm.{name}"))
        .collect()
}

/// Replaces `from` where it is a whole member access (not followed by another name character).
fn replace_member(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let end = at + from.len();
        let whole = !rest[end..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$');
        out.push_str(&rest[..at]);
        out.push_str(if whole { to } else { from });
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Prints the size table.
pub(crate) fn print_sizes(modules: &[ModuleSizes]) {
    println!(
        "| module | raw .wasm | after wasm-bindgen | after wasm-opt -Oz (names shortened) | .wasm gzip | JS glue min+gzip | total gzip |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for m in modules {
        println!(
            "| {} | {} | {} | {} | {} | {} | **{}** |",
            m.label,
            m.raw,
            m.bindgen,
            m.optimized,
            m.wasm_gzip,
            m.js_gzip,
            m.total_gzip()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(old: &str, new: &str) -> (String, String) {
        (old.to_string(), new.to_string())
    }

    #[test]
    fn every_renamed_name_is_renamed_in_the_glue() {
        let glue = "imports[\"wbg\"] = {};\nconst i = { \"wbg\": { __wbg_log_1: function(a) {} } };\n\
                    wasm.tetherclient_new(); wasm.tetherclient_new_x(); wasm.memory;";
        let js = rename_in_glue(
            glue.to_string(),
            &["wbg".to_string()],
            &[pair("__wbg_log_1", "b")],
            &[pair("tetherclient_new", "c"), pair("memory", "d"), pair("tetherclient_new_x", "f")],
        )
        .unwrap();
        assert!(js.contains("\"b\": function") && js.contains("wasm[\"c\"]()") && js.contains("wasm[\"d\"]"), "{js}");
        // A longer name that starts with a renamed one is renamed as itself.
        assert!(js.contains("wasm[\"f\"]()") && !js.contains("_x"), "{js}");
    }

    #[test]
    fn a_name_the_glue_still_uses_is_refused() {
        let glue = "const i = { \"wbg\": { f: function() {}, f: function() {} } };";
        let error = rename_in_glue(glue.to_string(), &["wbg".to_string()], &[pair("f", "b")], &[]).unwrap_err();
        assert!(error.to_string().contains("other than once"), "{error}");
        // An export the mapping does not name stays `wasm.name`: refused, naming it.
        let glue = "wasm.renamed(); wasm.forgotten(); xwasm.other;".to_string();
        let error = rename_in_glue(glue, &[], &[], &[pair("renamed", "e")]).unwrap_err().to_string();
        assert!(error.contains("wasm.forgotten"), "{error}");
        assert!(!error.contains("wasm.renamed") && !error.contains("wasm.other"), "{error}");
    }
}
