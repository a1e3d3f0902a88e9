//! A fresh directory for one test's files (a SQLite store, a damaged file), removed when dropped.
//! Shared by the tests through `common` and by `tests/store.rs` through `#[path]`.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

/// A directory of its own for one test: `tether-<name>-<pid>` in the temporary directory.
pub struct TestDir(pub PathBuf);

impl TestDir {
    /// Creates it afresh (removing what an earlier run may have left).
    pub fn new(name: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("tether-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }

    /// A path inside it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// `--store sqlite:<dir>/sessions.db`'s value.
    pub fn sqlite_store(&self) -> String {
        format!("sqlite:{}", self.file("sessions.db").display())
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
