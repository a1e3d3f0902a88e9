//! Running a command hook: its own process group, a scrubbed environment, a working directory of
//! its own, the context on stdin, stdout capped, and the whole group killed when it is done.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Most bytes of stdout a command hook may write; more is a hook failure.
pub const MAX_STDOUT_BYTES: usize = 1024 * 1024;
/// Most bytes of stderr kept (for the exit-2 reason and the log); the rest is read and dropped.
pub const MAX_STDERR_BYTES: usize = 64 * 1024;
/// The `PATH` command hooks get. Nothing else is inherited from the server's environment.
pub const HOOK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How a hook process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
    /// It ran past its timeout; its process group was killed.
    TimedOut,
    /// It wrote more than [`MAX_STDOUT_BYTES`]; its process group was killed.
    StdoutOverflow,
    /// It could not be started.
    SpawnFailed(String),
}

/// What a hook process produced.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) exit: Exit,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

/// What to run: a program and its arguments.
pub(crate) struct Invocation<'a> {
    pub(crate) program: &'a str,
    pub(crate) args: Vec<&'a std::ffi::OsStr>,
    /// Variables set besides the fixed ones (e.g. `CLAUDE_PROJECT_DIR`).
    pub(crate) env: Vec<(&'static str, std::ffi::OsString)>,
}

/// Kills every process of the group. The group may already be gone: that is fine.
fn kill_group(group: Option<Pid>) {
    if let Some(group) = group {
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// Reads a pipe to its end, keeping at most `cap` bytes. Returns the bytes and whether there were
/// more than `cap`; with `stop_on_overflow`, it stops at the cap and kills the group.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    cap: usize,
    stop_on_overflow: Option<Option<Pid>>,
) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else { return (Vec::new(), false) };
    let mut kept = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut overflowed = false;
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
                if n > room {
                    overflowed = true;
                    if let Some(group) = stop_on_overflow {
                        kill_group(group);
                        break;
                    }
                }
            }
        }
    }
    (kept, overflowed)
}

fn exit_of(status: std::io::Result<ExitStatus>) -> Exit {
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::SpawnFailed("no exit status".into()),
        },
        Err(error) => Exit::SpawnFailed(error.to_string()),
    }
}

/// Runs one hook process in `workdir` with `input` on stdin, for at most `timeout`.
pub(crate) async fn run(invocation: Invocation<'_>, input: Vec<u8>, timeout: Duration, workdir: &Path) -> Finished {
    let mut command = tokio::process::Command::new(invocation.program);
    command
        .args(&invocation.args)
        .env_clear()
        .env("PATH", HOOK_PATH)
        .env("LANG", "C.UTF-8")
        .env("HOME", workdir)
        .env("TMPDIR", workdir)
        .envs(invocation.env.iter().map(|(name, value)| (*name, value)))
        .current_dir(workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return Finished {
                exit: Exit::SpawnFailed(format!("{}: {error}", invocation.program)),
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
        }
    };
    // The child leads its own group, so the group id is its pid.
    let group = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();

    let write_input = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its stdin closes the pipe: that is not an error.
            let _ = stdin.write_all(&input).await;
        }
    };
    let wait = async {
        let status = child.wait().await;
        // The leader is done: whatever it left running in its group goes too, which also
        // closes the pipes those processes held, so the reads below end.
        kill_group(group);
        status
    };
    let work = async {
        tokio::join!(
            write_input,
            read_capped(stdout, MAX_STDOUT_BYTES, Some(group)),
            read_capped(stderr, MAX_STDERR_BYTES, None),
            wait
        )
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(((), (stdout, overflowed), (stderr, _), status)) => {
            let exit = if overflowed { Exit::StdoutOverflow } else { exit_of(status) };
            Finished { exit, stdout, stderr }
        }
        Err(_) => {
            kill_group(group);
            // Reap the leader so no zombie is left behind.
            let _ = child.wait().await;
            Finished { exit: Exit::TimedOut, stdout: Vec::new(), stderr: Vec::new() }
        }
    }
}
