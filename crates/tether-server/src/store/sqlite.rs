//! The SQLite store (`--store sqlite:PATH`, the default): one file, WAL, owned by one server.
//!
//! Durability: WAL with `synchronous=NORMAL`. A committed write survives the process being
//! killed (`kill -9`, a crash, a deploy); the last writes before an operating-system crash or a
//! power cut may be lost (`synchronous=FULL` would fsync every commit, about a millisecond each
//! here). The file is opened in exclusive locking mode: a second server on the same file is
//! refused at start with a message saying so, instead of two servers driving the same sessions.
//! Space of expired sessions is given back to the file system (`auto_vacuum=INCREMENTAL`).
//!
//! Each call is one transaction, run on tokio's blocking threads: most take tens of
//! microseconds, but a long conversation's write takes milliseconds, which must not hold an
//! async worker (see `cargo bench -p tether-server --bench loopback`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use super::{SessionStore, SessionWrite, StoreFuture, StoredSession};
use crate::ServerError;
use crate::error::StoreProblem;

/// The layout this code writes; a file with another one is refused, except layout 1, which is
/// brought to 2 when it is opened. Layout 2: a session's state lives in `states`, written only
/// when it is written whole, with the patches since in `patches`; the `sessions` row (token hash,
/// expiry: written by every write) stays small, since SQLite rewrites a whole row to update one
/// column of it (layout 1 kept the state there, and every write rewrote it). `sessions.state` is
/// empty in layout 2.
const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    token_hash BLOB NOT NULL,
    state TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_at);
CREATE TABLE IF NOT EXISTS frames (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS states (
    session TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS patches (
    session TEXT NOT NULL,
    n INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session, n)
) WITHOUT ROWID;
";

/// The tables besides `sessions` that hold a session's rows (by its id in `session`).
const SESSION_TABLES: [&str; 3] = ["frames", "patches", "states"];

/// Sessions in a SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

/// The file and its one connection, shared with the blocking threads that use it.
#[derive(Debug)]
struct Inner {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl SqliteStore {
    /// Opens (or creates) the store at `path`. Refused, with a message that says what to do,
    /// when the directory does not exist, the file is not a Tether store (or is damaged), or
    /// another server has it open.
    pub fn open(path: &Path) -> Result<SqliteStore, ServerError> {
        SqliteStore::open_with_limit(path, None)
    }

    /// Opens the store at `path`, letting the file grow to at most `max_bytes` (rounded down to
    /// whole pages): past it a write fails as full, and nothing of it is stored.
    pub fn open_with_limit(path: &Path, max_bytes: Option<u64>) -> Result<SqliteStore, ServerError> {
        let fail = |problem: StoreProblem, message: String| ServerError::Store {
            store: format!("sqlite:{}", path.display()),
            problem,
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(fail(
                StoreProblem::Unavailable,
                format!("the directory {} does not exist; create it or choose another path", dir.display()),
            ));
        }
        let connection = Connection::open(path).map_err(|e| classify(path, &e))?;
        let setup = || -> rusqlite::Result<()> {
            // Fail at once if another process holds the file, rather than waiting for it.
            connection.busy_timeout(std::time::Duration::ZERO)?;
            connection.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
            let fresh: i64 = connection.query_row("PRAGMA page_count", [], |row| row.get(0))?;
            if fresh == 0 {
                // Only takes effect before the first table exists.
                connection.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
            }
            connection.pragma_update(None, "journal_mode", "WAL")?;
            connection.pragma_update(None, "synchronous", "NORMAL")?;
            if let Some(max_bytes) = max_bytes {
                let page: i64 = connection.query_row("PRAGMA page_size", [], |row| row.get(0))?;
                connection.pragma_update(None, "max_page_count", (max_bytes as i64 / page).max(1))?;
            }
            // Takes the exclusive lock now and keeps it while this server runs.
            connection.execute_batch("BEGIN IMMEDIATE")?;
            connection.execute_batch(SCHEMA)?;
            connection.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?1)",
                params![SCHEMA_VERSION],
            )?;
            // Layout 1 to 2: the tables were created above; the states move out of `sessions`.
            let version: i64 =
                connection.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |row| row.get(0))?;
            if version == 1 {
                connection.execute_batch(
                    "INSERT OR REPLACE INTO states (session, text) SELECT id, state FROM sessions;
                     UPDATE sessions SET state = '';",
                )?;
                connection
                    .execute("UPDATE meta SET value = ?1 WHERE key = 'schema_version'", params![SCHEMA_VERSION])?;
            }
            connection.execute_batch("COMMIT")
        };
        setup().map_err(|e| classify(path, &e))?;
        let version: i64 = connection
            .query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |row| row.get(0))
            .map_err(|e| classify(path, &e))?;
        if version != SCHEMA_VERSION {
            return Err(fail(
                StoreProblem::Corrupt,
                format!(
                    "the file has store layout {version}, this server reads layout {SCHEMA_VERSION}; use the \
                     matching server or another file"
                ),
            ));
        }
        Ok(SqliteStore { inner: Arc::new(Inner { path: path.to_path_buf(), connection: Mutex::new(connection) }) })
    }

    /// Runs `job` on tokio's blocking threads, so that a slow statement never holds an async
    /// worker.
    async fn blocking<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Inner) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, ServerError> {
        let inner = self.inner.clone();
        let done = tokio::task::spawn_blocking(move || job(&inner).map_err(|e| inner.error(&e))).await;
        done.unwrap_or_else(|error| {
            Err(ServerError::Store {
                store: self.describe(),
                problem: StoreProblem::Unavailable,
                message: format!("the store's thread failed ({error}); nothing of this write is stored"),
            })
        })
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn error(&self, error: &rusqlite::Error) -> ServerError {
        classify(&self.path, error)
    }

    fn load_now(&self, id: &str, now_ms: u64) -> rusqlite::Result<Option<StoredSession>> {
        let connection = self.lock();
        let row = connection
            .prepare_cached(
                "SELECT s.token_hash, coalesce(t.text, ''), s.expires_at FROM sessions s
                 LEFT JOIN states t ON t.session = s.id WHERE s.id = ?1 AND s.expires_at >= ?2",
            )?
            .query_row(params![id, now_ms as i64], |row| {
                Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, String>(1)?, row.get::<_, i64>(2)?))
            })
            .optional()?;
        let Some((hash, state, expires_at)) = row else { return Ok(None) };
        let numbered = |sql: &str| -> rusqlite::Result<Vec<(u64, String)>> {
            connection
                .prepare_cached(sql)?
                .query_map(params![id], |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?)))?
                .collect()
        };
        let log = numbered("SELECT seq, text FROM frames WHERE session = ?1 ORDER BY seq")?;
        let patches = numbered("SELECT n, text FROM patches WHERE session = ?1 ORDER BY n")?;
        let mut token_hash = [0u8; 32];
        if hash.len() == 32 {
            token_hash.copy_from_slice(&hash);
        }
        Ok(Some(StoredSession {
            id: id.to_string(),
            token_hash,
            state,
            patches,
            log,
            expires_at_ms: expires_at as u64,
        }))
    }

    fn write_now(&self, id: &str, write: &SessionWrite) -> rusqlite::Result<()> {
        let mut connection = self.lock();
        // One transaction: on any error (a full disk) it rolls back and nothing is half-written.
        let transaction = connection.transaction()?;
        transaction
            .prepare_cached(
                "INSERT INTO sessions (id, token_hash, state, expires_at) VALUES (?1, coalesce(?2, x''), '', ?3)
                 ON CONFLICT (id) DO UPDATE SET token_hash = coalesce(?2, token_hash), expires_at = ?3",
            )?
            .execute(params![id, write.token_hash.map(Vec::from), write.expires_at_ms as i64])?;
        if let Some(state) = &write.state {
            transaction
                .prepare_cached(
                    "INSERT INTO states (session, text) VALUES (?1, ?2) ON CONFLICT (session) DO UPDATE SET text = ?2",
                )?
                .execute(params![id, state])?;
            transaction.prepare_cached("DELETE FROM patches WHERE session = ?1")?.execute(params![id])?;
        }
        if !write.patches.is_empty() {
            // Numbers only grow: a patch not above the last stored one was stored before.
            let last: i64 = transaction
                .prepare_cached("SELECT coalesce(max(n), 0) FROM patches WHERE session = ?1")?
                .query_row(params![id], |row| row.get(0))?;
            let mut append =
                transaction.prepare_cached("INSERT INTO patches (session, n, text) VALUES (?1, ?2, ?3)")?;
            for (n, text) in write.patches.iter().filter(|(n, _)| *n as i64 > last) {
                append.execute(params![id, *n as i64, text])?;
            }
        }
        {
            let mut append =
                transaction.prepare_cached("INSERT OR IGNORE INTO frames (session, seq, text) VALUES (?1, ?2, ?3)")?;
            for (seq, text) in &write.append {
                append.execute(params![id, *seq as i64, text])?;
            }
        }
        if let Some(below) = write.trim_below {
            transaction
                .prepare_cached("DELETE FROM frames WHERE session = ?1 AND seq < ?2")?
                .execute(params![id, below as i64])?;
        }
        transaction.commit()
    }

    fn expire_now(&self, now_ms: u64) -> rusqlite::Result<usize> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        for table in SESSION_TABLES {
            transaction.execute(
                &format!("DELETE FROM {table} WHERE session IN (SELECT id FROM sessions WHERE expires_at < ?1)"),
                params![now_ms as i64],
            )?;
        }
        let removed = transaction.execute("DELETE FROM sessions WHERE expires_at < ?1", params![now_ms as i64])?;
        transaction.commit()?;
        if removed > 0 {
            // Give the freed pages back to the file system: the pragma frees one page per row
            // it is stepped through, so step it to the end.
            let mut vacuum = connection.prepare("PRAGMA incremental_vacuum")?;
            let mut rows = vacuum.query([])?;
            while rows.next()?.is_some() {}
        }
        Ok(removed)
    }
}

/// Turns a SQLite error into the server's error, saying what happened and what to do.
fn classify(path: &Path, error: &rusqlite::Error) -> ServerError {
    let (problem, advice) = match error.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => {
            (StoreProblem::Full, "the disk (or the file's size limit) is full; nothing was written")
        }
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => (
            StoreProblem::Corrupt,
            "the file is not a Tether session store or is damaged; move it aside (sessions in it are lost) or choose \
             another path",
        ),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => (
            StoreProblem::Locked,
            "another process (another `tether serve`?) has the file open; one server per SQLite file (use Redis \
             for several instances)",
        ),
        Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => {
            (StoreProblem::Unavailable, "the file cannot be opened for writing")
        }
        _ => (StoreProblem::Unavailable, "the store failed"),
    };
    ServerError::Store { store: format!("sqlite:{}", path.display()), problem, message: format!("{advice} ({error})") }
}

impl SessionStore for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.inner.path.display())
    }

    fn load<'a>(&'a self, id: &'a str, now_ms: u64) -> StoreFuture<'a, Result<Option<StoredSession>, ServerError>> {
        let id = id.to_string();
        Box::pin(self.blocking(move |inner| inner.load_now(&id, now_ms)))
    }

    fn write<'a>(&'a self, id: &'a str, write: SessionWrite) -> StoreFuture<'a, Result<(), ServerError>> {
        let id = id.to_string();
        Box::pin(self.blocking(move |inner| inner.write_now(&id, &write)))
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<(), ServerError>> {
        let id = id.to_string();
        Box::pin(self.blocking(move |inner| {
            let mut connection = inner.lock();
            let transaction = connection.transaction()?;
            for table in SESSION_TABLES {
                transaction.execute(&format!("DELETE FROM {table} WHERE session = ?1"), params![id])?;
            }
            transaction.execute("DELETE FROM sessions WHERE id = ?1", params![id])?;
            transaction.commit()
        }))
    }

    fn expire(&self, now_ms: u64) -> StoreFuture<'_, Result<usize, ServerError>> {
        Box::pin(self.blocking(move |inner| inner.expire_now(now_ms)))
    }

    fn count(&self) -> StoreFuture<'_, Result<usize, ServerError>> {
        Box::pin(self.blocking(|inner| {
            inner.lock().query_row("SELECT count(*) FROM sessions", [], |row| row.get::<_, i64>(0)).map(|n| n as usize)
        }))
    }
}
