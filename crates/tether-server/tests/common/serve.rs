//! `tether serve` as a child process, for every test and bench that needs the real binary: it
//! listens on `127.0.0.1:0`, and the address is read from the line it prints. The process is
//! killed when the handle is dropped. Shared by the tests (`common::serve`) and the benches
//! (`#[path]`).

#![allow(dead_code, unreachable_pub)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long the helper waits for the process to print its address or to exit.
const PROCESS_WAIT: Duration = Duration::from_secs(30);

/// What to start: `tether serve --addr 127.0.0.1:0` (unless `--addr` is given) plus the
/// arguments and environment given.
#[derive(Debug, Default)]
pub struct Serve {
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    capture_logs: bool,
}

/// A running `tether serve`.
#[derive(Debug)]
pub struct Served {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    logs: Option<JoinHandle<String>>,
}

impl Serve {
    /// `tether serve --addr 127.0.0.1:0 --model scripted` unless `--model` is given.
    pub fn new() -> Serve {
        Serve::default()
    }

    /// Adds arguments after `serve`.
    pub fn args<I, S>(mut self, args: I) -> Serve
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable of the process.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Serve {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Keeps the process's standard error (its logs), for [`Served::stop_and_read_logs`].
    pub fn capture_logs(mut self) -> Serve {
        self.capture_logs = true;
        self
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tether"));
        command.arg("serve");
        if !self.args.iter().any(|arg| arg == "--addr") {
            command.args(["--addr", "127.0.0.1:0"]);
        }
        if !self.args.iter().any(|arg| arg == "--model") {
            command.args(["--model", "scripted"]);
        }
        // Tests keep sessions in memory unless they say where: the default SQLite file is one
        // server's at a time, and tests run side by side.
        if !self.args.iter().any(|arg| arg == "--store") {
            command.args(["--store", "memory"]);
        }
        command.args(&self.args);
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    /// Starts the server and waits until it listens.
    pub fn start(self) -> Served {
        let mut child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(if self.capture_logs {
                Stdio::piped()
            } else if std::env::var_os("TETHER_TEST_LOGS").is_some() {
                // To see the servers' logs when a test fails: TETHER_TEST_LOGS=1 cargo test …
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start tether serve");
        let logs = child.stderr.take().map(|mut stderr| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                text
            })
        });
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut reader = BufReader::new(stdout);
            let _ = reader.read_line(&mut line);
            let _ = sender.send(line);
            // Reads the rest, so that the server never writes to a closed pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = lines.recv_timeout(PROCESS_WAIT).expect("tether serve printed no address in time");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Served { child, addr, logs }
    }

    /// Runs the command to its end (for a server that must refuse to start).
    pub fn run_to_end(self) -> Output {
        self.command().output().expect("run tether serve")
    }
}

impl Served {
    /// The WebSocket URL.
    pub fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's resident memory, in KiB (0 when it cannot be read).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// `GET /healthz`, as JSON (`Null` if it cannot be read).
    pub async fn health(&self) -> Value {
        let Ok(mut stream) = tokio::net::TcpStream::connect(&self.addr).await else { return Value::Null };
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response).await;
        serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap_or(Value::Null)
    }

    /// Stops the server as Ctrl-C would (SIGINT) and returns how it exited.
    pub fn interrupt(mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("signal tether serve");
        self.wait_for_exit()
    }

    /// Stops the server as a deploy does (SIGTERM) and returns how it exited.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal tether serve");
        self.wait_for_exit()
    }

    /// Kills the server (SIGKILL, as a crash would: nothing of it runs after) and waits for it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        self.wait_for_exit();
    }

    /// Kills the server and returns what it logged (with [`Serve::capture_logs`]).
    pub fn stop_and_read_logs(mut self) -> String {
        let _ = self.child.kill();
        self.wait_for_exit();
        self.logs.take().map(|logs| logs.join().unwrap_or_default()).unwrap_or_default()
    }

    fn wait_for_exit(&mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let (sender, exited) = mpsc::channel();
        let status = std::thread::scope(|scope| {
            let child = &mut self.child;
            scope.spawn(move || {
                let _ = sender.send(child.wait());
            });
            let status = exited.recv_timeout(PROCESS_WAIT);
            if status.is_err() {
                // Ends the wait above, then the test fails.
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
            status
        });
        status.expect("tether serve did not exit in time").expect("wait for tether serve")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
