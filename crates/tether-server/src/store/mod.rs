//! Where sessions live between frames, restarts and instances: the [`SessionStore`] seam.
//!
//! A stored session is a snapshot of everything it needs to continue (its state as JSON: the
//! conversation, the live tool list, pending calls, answered ids, approvals, the run checkpoint),
//! the numbered changes made to that state since the snapshot (its *patches*, opaque to the
//! store), and its numbered replay log. A [`SessionWrite`] changes all three atomically: the
//! server writes before the frame that depends on the write leaves, so a crash never leaves a
//! client with a frame the store does not know about. A write appends what changed (a patch,
//! frames) rather than the whole session, so its cost does not grow with the conversation; now
//! and then the server writes a whole snapshot instead, which drops the patches before it.
//! Resume tokens are stored only as SHA-256 hashes.
//!
//! Implementations: [`MemoryStore`] (`--store memory`: nothing survives the process),
//! `SqliteStore` (feature `sqlite`; `--store sqlite:PATH`, the default: one file, WAL, one
//! server) and `RedisStore` (feature `redis`; `--store redis://HOST:PORT/DB`: shared by several
//! servers, on one Redis or a Redis Cluster).

mod memory;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use memory::MemoryStore;
#[cfg(feature = "redis")]
pub use redis::RedisStore;
use sha2::{Digest, Sha256};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

use crate::ServerError;

/// A boxed, sendable future.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How long an untouched session is kept by default: a day.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// The session's id.
    pub id: String,
    /// SHA-256 of the resume token ([`token_hash`]).
    pub token_hash: [u8; 32],
    /// The session's state when it was last written whole, as JSON text (opaque to the store).
    pub state: String,
    /// The changes to `state` since: `(patch number, patch text)`, oldest first (opaque to the
    /// store; the server applies them in order).
    pub patches: Vec<(u64, String)>,
    /// The replay log: `(frame number, frame text)`, oldest first.
    pub log: Vec<(u64, String)>,
    /// When it expires unless written again, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

/// One atomic change to a stored session: all of it is stored, or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionWrite {
    /// The token hash, set when the session is created.
    pub token_hash: Option<[u8; 32]>,
    /// A whole new state, if the writer sends one: it replaces the old one and drops every
    /// stored patch (it includes them). Applied before `patches`.
    pub state: Option<String>,
    /// Changes to the state appended after it, numbered; numbers only grow, and a patch whose
    /// number is not above the last stored one is skipped (a write tried twice applies once).
    pub patches: Vec<(u64, String)>,
    /// Frames appended to the replay log, numbered; numbers only grow.
    pub append: Vec<(u64, String)>,
    /// Frames numbered below this are dropped from the log.
    pub trim_below: Option<u64>,
    /// The new expiry, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
    /// In a store shared by several servers: the writer's claim on the session
    /// ([`SessionStore::claim`]). The write is applied only while that claim is the session's
    /// current one, else it fails with [`StoreProblem::Moved`](crate::StoreProblem::Moved) and
    /// nothing is written (fencing: a server that lost a session can no longer change it).
    pub claim: Option<String>,
}

/// What [`SessionStore::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The session is this server's now: the claim token (put it in every [`SessionWrite`]).
    Claimed(String),
    /// A live server holds it: that server's instance id (ask it to let go with
    /// [`SessionStore::ask_release`]).
    HeldBy(String),
}

/// Keeps sessions. Every method is safe to call from several tasks at once; writes to one
/// session are applied in the order they are made.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// What this store is, for logs and `/healthz` (`memory`, `sqlite:PATH`).
    fn describe(&self) -> String;

    /// Whether what it keeps outlives the process (the server writes sessions to it only
    /// then). Default: yes.
    fn durable(&self) -> bool {
        true
    }

    /// The stored session `id`, if there is one and it has not expired at `now_ms`.
    fn load<'a>(&'a self, id: &'a str, now_ms: u64) -> StoreFuture<'a, Result<Option<StoredSession>, ServerError>>;

    /// Applies `write` to session `id` (creating it when it is new), atomically.
    fn write<'a>(&'a self, id: &'a str, write: SessionWrite) -> StoreFuture<'a, Result<(), ServerError>>;

    /// Forgets session `id`.
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<(), ServerError>>;

    /// Forgets every session that expired before `now_ms`; returns how many. Reclaims their space.
    fn expire(&self, now_ms: u64) -> StoreFuture<'_, Result<usize, ServerError>>;

    /// How many sessions are stored (expired ones not yet removed included).
    fn count(&self) -> StoreFuture<'_, Result<usize, ServerError>>;

    /// Whether several servers share this store, so that a session has one owner at a time
    /// (the methods below). Default: no; the methods below then grant everything.
    fn shared(&self) -> bool {
        false
    }

    /// Claims session `id` for server `instance`, unless a live server holds it. A claim taken
    /// from a server that is gone (its heartbeat expired) fences that server out: its writes fail
    /// from now on. `expires_at_ms`: when the claim of a session that is never written lapses.
    fn claim<'a>(
        &'a self,
        _id: &'a str,
        _instance: &'a str,
        _expires_at_ms: u64,
    ) -> StoreFuture<'a, Result<Claim, ServerError>> {
        Box::pin(async { Ok(Claim::Claimed(String::new())) })
    }

    /// Whether `claim` is still session `id`'s current claim.
    fn holds<'a>(&'a self, _id: &'a str, _claim: &'a str) -> StoreFuture<'a, Result<bool, ServerError>> {
        Box::pin(async { Ok(true) })
    }

    /// Gives session `id` up, if `claim` is its current claim; with an empty `claim`, if any
    /// claim of server `instance` is (a server asked for a session it no longer holds).
    fn release<'a>(
        &'a self,
        _id: &'a str,
        _instance: &'a str,
        _claim: &'a str,
    ) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async { Ok(()) })
    }

    /// Asks server `holder` to let session `id` go (it stores what it has and releases it).
    fn ask_release<'a>(&'a self, _id: &'a str, _holder: &'a str) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async { Ok(()) })
    }

    /// Says that server `instance` is alive for `ttl` more (its claims stand meanwhile); a
    /// `ttl` of zero says it is gone (a drained server), so its sessions may be claimed at once.
    fn heartbeat<'a>(&'a self, _instance: &'a str, _ttl: Duration) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async { Ok(()) })
    }

    /// The ids of the sessions other servers ask server `instance` to let go, as they come
    /// (`None` for a store that is not shared). The stream ends when the store's connection
    /// for it drops; call again.
    fn release_requests<'a>(
        &'a self,
        _instance: &'a str,
    ) -> StoreFuture<'a, Result<Option<futures_util::stream::BoxStream<'static, String>>, ServerError>> {
        Box::pin(async { Ok(None) })
    }
}

/// The hash under which a resume token is stored.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether two token hashes are equal, in time that does not depend on where they differ
/// (`subtle`).
pub(crate) fn same_hash(a: &[u8; 32], b: &[u8; 32]) -> bool {
    subtle::ConstantTimeEq::ct_eq(&a[..], &b[..]).into()
}

/// Milliseconds since the Unix epoch, now: the clock of stored expiries (shared by every server
/// on a store). The session machines run on another, monotonic one (`session::monotonic_ms`);
/// the two never mix.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Which store a server uses, as given on the command line (`--store`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// `memory`: nothing survives the process.
    Memory,
    /// `sqlite:PATH`: a SQLite file.
    Sqlite(std::path::PathBuf),
    /// `redis://HOST:PORT/DB` (or `rediss://`): a Redis server; or a Redis Cluster, whose seed
    /// nodes' URLs may be given separated by commas.
    Redis {
        /// The URL, or the seeds' URLs separated by commas.
        url: String,
        /// Replicas that must confirm a write before it counts as stored
        /// ([`RedisStore::wait_replicas`]; `tether serve --redis-wait-replicas`).
        wait_replicas: u32,
    },
}

impl std::str::FromStr for StoreSpec {
    type Err = ServerError;

    fn from_str(text: &str) -> Result<StoreSpec, ServerError> {
        if text == "memory" {
            return Ok(StoreSpec::Memory);
        }
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(ServerError::Config("--store sqlite:PATH needs a path, e.g. sqlite:tether.db".into()));
            }
            return Ok(StoreSpec::Sqlite(path.into()));
        }
        if text.starts_with("redis://") || text.starts_with("rediss://") {
            return Ok(StoreSpec::Redis { url: text.to_string(), wait_replicas: 0 });
        }
        Err(ServerError::Config(format!(
            "--store {text:?}: expected `memory`, `sqlite:PATH` or `redis://HOST:PORT/DB`"
        )))
    }
}

impl StoreSpec {
    /// Opens the store (for Redis: connects, and fails at once when it cannot). A store whose
    /// feature this build left out is a clear error.
    pub async fn open(&self) -> Result<std::sync::Arc<dyn SessionStore>, ServerError> {
        Ok(match self {
            StoreSpec::Memory => std::sync::Arc::new(MemoryStore::default()),
            #[cfg(feature = "sqlite")]
            StoreSpec::Sqlite(path) => std::sync::Arc::new(SqliteStore::open(path)?),
            #[cfg(feature = "redis")]
            StoreSpec::Redis { url, wait_replicas } => {
                std::sync::Arc::new(RedisStore::connect(url, "tether").await?.wait_replicas(*wait_replicas))
            }
            #[allow(unreachable_patterns)]
            other => {
                return Err(ServerError::Config(format!(
                    "this build of tether-server has no {} store (its Cargo feature `{}` is off)",
                    other.kind(),
                    other.kind()
                )));
            }
        })
    }

    /// `memory`, `sqlite` or `redis`.
    fn kind(&self) -> &'static str {
        match self {
            StoreSpec::Memory => "memory",
            StoreSpec::Sqlite(_) => "sqlite",
            StoreSpec::Redis { .. } => "redis",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_clear_errors() {
        assert_eq!("memory".parse::<StoreSpec>().unwrap(), StoreSpec::Memory);
        assert_eq!("sqlite:/tmp/t.db".parse::<StoreSpec>().unwrap(), StoreSpec::Sqlite("/tmp/t.db".into()));
        assert!("sqlite:".parse::<StoreSpec>().unwrap_err().to_string().contains("needs a path"));
        assert_eq!(
            "redis://127.0.0.1:6390/2".parse::<StoreSpec>().unwrap(),
            StoreSpec::Redis { url: "redis://127.0.0.1:6390/2".into(), wait_replicas: 0 }
        );
        assert!("postgres://x".parse::<StoreSpec>().unwrap_err().to_string().contains("expected `memory`"));
    }

    #[test]
    fn tokens_are_stored_hashed() {
        let hash = token_hash("0123456789abcdef");
        assert_eq!(hash, token_hash("0123456789abcdef"));
        assert_ne!(hash, token_hash("0123456789abcdeg"));
        assert!(!hash.windows(4).any(|w| w == b"0123"));
    }
}
