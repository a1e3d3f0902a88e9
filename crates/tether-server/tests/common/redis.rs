//! A real `redis-server` for one test: its own free port and data directory (never the
//! machine's 6379), AOF on, killed and restarted at will, removed when dropped.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long Redis may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

pub struct Redis {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    extra: Vec<String>,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

impl Redis {
    /// Starts a Redis with its own port and data directory; `extra` are more `--name value`
    /// arguments (e.g. `--maxmemory 1mb`).
    pub fn start(name: &str, extra: &[&str]) -> Redis {
        let dir = std::env::temp_dir().join(format!("tether-redis-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis =
            Redis { port: free_port(), dir, child: None, extra: extra.iter().map(|s| s.to_string()).collect() };
        redis.launch();
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn launch(&mut self) {
        let mut child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", "", "--appendonly", "yes"])
            .args(["--appendfsync", "always", "--daemonize", "no", "--protected-mode", "yes"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs (`cargo xtask setup` installs it)");
        let stdout = child.stdout.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("Ready to accept connections") {
                    let _ = ready_tx.send(());
                }
            }
        });
        let started = Instant::now();
        ready_rx
            .recv_timeout(READY_WITHIN)
            .unwrap_or_else(|_| panic!("redis-server not ready after {:?}", started.elapsed()));
        self.child = Some(child);
    }

    /// Kills Redis with SIGKILL and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and data directory (it reloads its AOF).
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
