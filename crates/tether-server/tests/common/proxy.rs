//! A TCP proxy in front of several `tether serve` instances, as a load balancer without
//! stickiness: every new connection goes to a random instance (another one when that one does
//! not answer). Killing an instance resets the connections through it.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};

/// A running proxy; it stops when dropped.
pub struct Proxy {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Connections it opened to an instance.
    pub connections: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and spreads connections over `backends`
    /// (`127.0.0.1:PORT` each), choosing with a random source seeded with `seed`.
    pub async fn start(backends: Vec<String>, seed: u64) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(AtomicU64::new(0));
        let state = Arc::new(AtomicU64::new(seed | 1));
        let opened = connections.clone();
        let task = tokio::spawn(async move {
            let backends = Arc::new(backends);
            while let Ok((mut client, _)) = listener.accept().await {
                let _ = client.set_nodelay(true);
                let (backends, state, opened) = (backends.clone(), state.clone(), opened.clone());
                tokio::spawn(async move {
                    let first = next_random(&state) as usize % backends.len();
                    for offset in 0..backends.len() {
                        let backend = &backends[(first + offset) % backends.len()];
                        if let Ok(mut server) = TcpStream::connect(backend).await {
                            let _ = server.set_nodelay(true);
                            opened.fetch_add(1, Ordering::Relaxed);
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            return;
                        }
                    }
                    // No instance answers: the client's connection closes unanswered.
                });
            }
        });
        Proxy { addr, connections, task }
    }

    /// The WebSocket URL through the proxy.
    pub fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// xorshift on a shared state.
fn next_random(state: &AtomicU64) -> u64 {
    let mut x = state.load(Ordering::Relaxed);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state.store(x, Ordering::Relaxed);
    x
}
