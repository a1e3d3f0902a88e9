//! Running commands: each one is echoed before it runs and a failure names the command.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The repository root (the parent of `xtask/`).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the repository").to_path_buf()
}

/// Prints a progress line, prefixed so it stands out in CI logs.
pub(crate) fn step(message: impl AsRef<str>) {
    eprintln!("\n[xtask] {}", message.as_ref());
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().to_string();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs a command to completion, failing when it fails. Prints how long it took.
pub(crate) fn run(command: &mut Command) -> Result<()> {
    run_with(command, |command| command.status())
}

/// Like [`run`], for a command that starts processes of its own (servers, browsers): it runs in a
/// process group of its own, and whatever is left of that group when it exits is killed. A test
/// runner that gives up on a hung test file leaves that file's servers and browser behind; they
/// must not outlive the run (CI waits for every process it started).
pub(crate) fn run_contained(command: &mut Command) -> Result<()> {
    use std::os::unix::process::CommandExt;
    run_with(command.process_group(0), |command| {
        let mut child = command.spawn()?;
        let status = child.wait();
        // The group's id is the leader's pid; `kill -- -PGID` reaches every process still in it.
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).stderr(Stdio::null()).status();
        status
    })
}

/// Echoes `command`, runs it with `wait`, prints how long it took and fails when it failed.
fn run_with(command: &mut Command, wait: impl FnOnce(&mut Command) -> std::io::Result<ExitStatus>) -> Result<()> {
    let text = describe(command);
    eprintln!("[xtask] $ {text}");
    let started = Instant::now();
    let status = wait(command).with_context(|| format!("could not start `{text}`"))?;
    eprintln!("[xtask]   ({:.1} s)", started.elapsed().as_secs_f64());
    if !status.success() {
        bail!("`{text}` failed with {status}");
    }
    Ok(())
}

/// Standard output of a command, or `None` if it cannot run or fails. For probing.
pub(crate) fn probe(program: impl AsRef<OsStr>, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).stderr(Stdio::null()).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether a program is on the `PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// A command that runs in the repository root.
pub(crate) fn in_repo(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    command.current_dir(repo_root());
    command
}
