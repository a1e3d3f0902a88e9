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

/// A free port for a Redis Cluster node: its cluster bus takes the port 10000 higher too, so that
/// one must be free and at most 65535 (Redis refuses a port over 55535 and exits at once; seen
/// as "redis-server not ready after 9 ms" in the cluster soak, 2026-12-06).
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55535 && std::net::TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}

impl Redis {
    /// Starts a Redis with its own port and data directory; `extra` are more `--name value`
    /// arguments (e.g. `--maxmemory 1mb`).
    pub fn start(name: &str, extra: &[&str]) -> Redis {
        let dir = std::env::temp_dir().join(format!("tether-redis-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = if extra.contains(&"--cluster-enabled") { free_cluster_port() } else { free_port() };
        let mut redis = Redis { port, dir, child: None, extra: extra.iter().map(|s| s.to_string()).collect() };
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

/// A Redis Cluster of the test's own: `masters` masters with `replicas` replicas each, every node
/// a [`Redis`] (own port and directory, AOF on), created with `redis-cli --cluster create`.
/// Nodes are killed, paused and restarted one by one; a restarted node rejoins from its
/// `nodes.conf`.
pub struct RedisCluster {
    pub nodes: Vec<Redis>,
    masters: usize,
    replicas: usize,
}

/// What `CLUSTER NODES` says of one node.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub master: bool,
    /// For a replica: its master's id.
    pub master_id: Option<String>,
    /// For a master: its slot ranges.
    pub slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Starts the nodes, joins them into a cluster and waits until every node says it is ok.
    pub fn start(name: &str, masters: usize, replicas: usize) -> RedisCluster {
        let args =
            ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"];
        let nodes: Vec<Redis> =
            (0..masters * (1 + replicas)).map(|i| Redis::start(&format!("{name}-n{i}"), &args)).collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)))
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli runs (`cargo xtask setup` installs redis-tools)");
        assert!(output.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&output.stdout));
        let cluster = RedisCluster { nodes, masters, replicas };
        cluster.wait_until("every node sees the cluster ok, with all its replicas", RedisCluster::settled);
        cluster
    }

    /// Whether every node sees the cluster ok, with its masters, each with all its replicas
    /// online.
    pub fn settled(&self) -> bool {
        let all_ok = (0..self.nodes.len()).all(|i| self.cli(i, &["cluster", "info"]).contains("cluster_state:ok"));
        let known = self.topology();
        all_ok
            && known.iter().filter(|node| node.master).count() == self.masters
            && known.iter().filter(|node| !node.master).count() == self.masters * self.replicas
            && known.iter().filter(|node| node.master).all(|node| {
                let info = self.cli(self.index_of(node.port), &["info", "replication"]);
                info.matches("state=online").count() == self.replicas
            })
    }

    /// The seeds' URLs, separated by commas (as `--store` takes them).
    pub fn url(&self) -> String {
        self.nodes.iter().map(Redis::url).collect::<Vec<_>>().join(",")
    }

    /// `redis-cli` on node `index` (empty when the node does not answer).
    pub fn cli(&self, index: usize, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.nodes[index].port.to_string()])
            .args(args)
            .stderr(Stdio::null())
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The cluster as the first node that answers sees it.
    pub fn topology(&self) -> Vec<ClusterNode> {
        let text = (0..self.nodes.len()).map(|i| self.cli(i, &["cluster", "nodes"])).find(|t| !t.trim().is_empty());
        let text = text.unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let flags = *fields.get(2)?;
                if flags.contains("fail") || flags.contains("noaddr") {
                    return None;
                }
                let port = fields[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
                let slots = fields[8..]
                    .iter()
                    .filter(|range| !range.starts_with('['))
                    .filter_map(|range| match range.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => range.parse().ok().map(|n| (n, n)),
                    })
                    .collect();
                Some(ClusterNode {
                    id: fields[0].to_string(),
                    port,
                    master: flags.contains("master"),
                    master_id: (fields[3] != "-").then(|| fields[3].to_string()),
                    slots,
                })
            })
            .collect()
    }

    /// The index of the node with `port`.
    pub fn index_of(&self, port: u16) -> usize {
        self.nodes.iter().position(|node| node.port == port).expect("a node of this cluster")
    }

    /// The master serving `key`'s slot and that master's replicas, as node indexes.
    pub fn serving(&self, key: &str) -> (usize, Vec<usize>) {
        let live = (0..self.nodes.len()).find(|&i| !self.cli(i, &["ping"]).trim().is_empty()).expect("a live node");
        let slot: u16 = self.cli(live, &["cluster", "keyslot", key]).trim().parse().expect("a slot");
        let known = self.topology();
        let master = known
            .iter()
            .find(|node| node.master && node.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .expect("a master serves every slot");
        (self.index_of(master.port), self.replicas_of(&known, master))
    }

    /// The replicas of master `index`, as node indexes.
    pub fn replicas(&self, index: usize) -> Vec<usize> {
        let known = self.topology();
        let master = known.iter().find(|node| node.port == self.nodes[index].port).expect("a known node");
        self.replicas_of(&known, master)
    }

    /// The replicas of `master` in `known`, as node indexes.
    fn replicas_of(&self, known: &[ClusterNode], master: &ClusterNode) -> Vec<usize> {
        known
            .iter()
            .filter(|node| node.master_id.as_deref() == Some(&master.id))
            .map(|node| self.index_of(node.port))
            .collect()
    }

    /// Polls `done` every 50 ms until it holds; panics, naming `what`, after 30 s.
    pub fn wait_until(&self, what: &str, done: impl Fn(&RedisCluster) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(started.elapsed() < Duration::from_secs(30), "{what}: not after {:?}", started.elapsed());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Makes replica `index` its master's master at once (`CLUSTER FAILOVER TAKEOVER`, which
    /// needs no word from the old master) and waits until it serves as one.
    pub fn take_over(&self, index: usize) {
        assert!(self.cli(index, &["cluster", "failover", "takeover"]).contains("OK"), "takeover refused");
        self.wait_until("the replica serves as master", |cluster| {
            cluster.cli(index, &["role"]).starts_with("master")
                && cluster.cli(index, &["cluster", "info"]).contains("cluster_state:ok")
        });
    }

    /// Fails master `index` over to a replica the polite way (`CLUSTER FAILOVER` on the replica:
    /// the master stops taking writes until the replica has all of them) and waits until the
    /// replica serves as master. Returns the replica's index.
    pub fn fail_over(&self, index: usize) -> usize {
        let replica = *self.replicas(index).first().expect("the master has a replica");
        assert!(self.cli(replica, &["cluster", "failover"]).contains("OK"), "failover refused");
        self.wait_until("the replica serves as master", |cluster| {
            cluster.cli(replica, &["role"]).starts_with("master") && cluster.cli(index, &["role"]).starts_with("slave")
        });
        replica
    }
}

impl Redis {
    /// Stops the process (SIGSTOP) without killing it: it answers nothing until [`Redis::resume`].
    pub fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
    }

    /// Lets a paused process go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self.child.as_ref().expect("running").id();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).expect("the signal is delivered");
    }
}
