//! pi-telegram's durable state in SQLite (bundled), WAL mode, at
//! `<agent-dir>/telegram/<profile>/state.db`.
//!
//! - One writer: a hub holds one [`Store`]; every change goes through [`Store::write`], one
//!   `IMMEDIATE` transaction committed with `synchronous=FULL`, so a commit that returned
//!   survives a crash of the process (and of the machine).
//! - Versioned migrations ([`schema`]) run at open, in one transaction.
//! - Table modules hold plain functions over a `&Connection` (a transaction derefs to one), so a
//!   handler composes several changes into one atomic commit: effects plus "this update is
//!   handled" together.
//! - Times are Unix milliseconds passed in by the caller; the store never reads a clock.

pub mod attachments;
pub mod callbacks;
pub mod controls;
pub mod files;
pub mod flood;
pub mod incidents;
pub mod instances;
pub mod journal;
pub mod kv;
pub mod lease;
pub mod outbox;
pub mod pairing;
pub mod retention;
pub mod routes;
pub mod schema;
pub mod spawned;
pub mod threads;
pub mod turns;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use rusqlite::Connection;
use rusqlite::OpenFlags;

/// What went wrong with the state database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused.
    #[error("{context}: {source}")]
    Sqlite {
        /// What we were doing.
        context: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database was written by a newer pi-telegram. It is left as it was.
    #[error(
        "{path} is from a newer pi-telegram (schema {found}, this binary knows {supported}); upgrade pi-telegram or use a matching version (the file was left untouched)"
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// Ours.
        supported: i64,
    },
    /// A stored value has an unexpected form.
    #[error("corrupt state: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Wraps a SQLite error with what we were doing.
    pub fn sqlite(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Self {
        let context = context.into();
        move |source| Self::Sqlite { context, source }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(source: rusqlite::Error) -> Self {
        Self::Sqlite {
            context: "state database".into(),
            source,
        }
    }
}

/// Result of a store operation.
pub type Result<T> = std::result::Result<T, StoreError>;

/// How many prepared statements a connection keeps: more than the store has distinct
/// statements, so the hot path never parses SQL again (parsing was a fifth of the hub's time).
const STATEMENT_CACHE: usize = 256;

/// `execute` and `query_row` through the connection's statement cache.
pub trait Cached {
    /// [`Connection::execute`] with a cached statement.
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    /// [`Connection::query_row`] with a cached statement.
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// The state database. Cheap operations; callers on an async runtime run them on a blocking
/// thread.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    pub fn open(path: &Path) -> Result<Self> {
        // The database holds message text: only its owner reads it. SQLite gives the -wal and
        // -shm files the database file's mode, so creating it 0600 covers all three; files
        // from an older version are tightened.
        create_private(path)?;
        let conn = Connection::open(path)
            .map_err(StoreError::sqlite(format!("opening {}", path.display())))?;
        // A database from a newer build is refused before anything is written to it: not even
        // the journal mode changes.
        refuse_newer(&conn, path)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        configure(&conn, path)?;
        schema::migrate(&conn, path)?;
        restrict_existing(path)?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        })
    }

    /// Opens an existing database for reading only (`status`), without migrating. `None` when
    /// there is no database yet.
    pub fn open_for_reading(path: &Path) -> Result<Option<Self>> {
        if !path.exists() {
            return Ok(None);
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(StoreError::sqlite(format!("opening {}", path.display())))?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let version = refuse_newer(&conn, path)?;
        if version == 0 {
            // Created a moment ago by a hub that has not migrated it yet: nothing to read.
            return Ok(None);
        }
        if version < schema::CURRENT {
            return Err(StoreError::Corrupt(format!(
                "{} has schema version {version}, older than this pi-telegram's {}: start the hub once to upgrade it",
                path.display(),
                schema::CURRENT
            )));
        }
        Ok(Some(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        }))
    }

    /// Where the database lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock rolled its transaction back; the connection is fine.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one `IMMEDIATE` transaction and commits it durably. An error from `f` rolls
    /// everything back.
    pub fn write<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let conn = self.lock();
        let tx = Tx::begin(&conn, "BEGIN IMMEDIATE")
            .map_err(|e| E::from(StoreError::sqlite("starting a transaction")(e)))?;
        let value = f(&conn)?;
        tx.end("COMMIT")
            .map_err(|e| E::from(StoreError::sqlite("committing")(e)))?;
        Ok(value)
    }

    /// Like [`Store::write`], but the commit does not wait for the disk: it survives a crash of
    /// the process at once, and a crash of the machine as soon as any later [`Store::write`]
    /// returns (all commits share one write-ahead log, and a durable commit syncs everything
    /// before it). For a transaction whose effects reach the outside world only through a
    /// later durable commit: lost with the machine, it is redone from what was durable, and
    /// nobody outside saw the difference.
    pub fn write_lazy_sync<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let conn = self.lock();
        conn.exec("PRAGMA synchronous=NORMAL", [])
            .map_err(|e| E::from(StoreError::sqlite("relaxing the commit")(e)))?;
        let result = (|| -> std::result::Result<T, E> {
            let tx = Tx::begin(&conn, "BEGIN IMMEDIATE")
                .map_err(|e| E::from(StoreError::sqlite("starting a transaction")(e)))?;
            let value = f(&conn)?;
            tx.end("COMMIT")
                .map_err(|e| E::from(StoreError::sqlite("committing")(e)))?;
            Ok(value)
        })();
        // Every other commit stays durable, whatever happened above.
        let restored = conn
            .exec("PRAGMA synchronous=FULL", [])
            .map_err(|e| E::from(StoreError::sqlite("restoring durable commits")(e)));
        let value = result?;
        restored?;
        Ok(value)
    }

    /// Runs `f` in a read transaction (a consistent snapshot).
    pub fn read<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let conn = self.lock();
        let tx = Tx::begin(&conn, "BEGIN DEFERRED")
            .map_err(|e| E::from(StoreError::sqlite("starting a read")(e)))?;
        let value = f(&conn)?;
        // Nothing to keep: ending a read transaction.
        tx.end("ROLLBACK")
            .map_err(|e| E::from(StoreError::sqlite("ending a read")(e)))?;
        Ok(value)
    }
}

/// A transaction begun and ended with cached statements (rusqlite's `Transaction` parses
/// `BEGIN` and `COMMIT` anew every time). Dropped while still open (an error or a panic in the
/// caller's closure, a failed `COMMIT`), it rolls back.
struct Tx<'c> {
    conn: &'c Connection,
}

impl<'c> Tx<'c> {
    fn begin(conn: &'c Connection, begin: &str) -> rusqlite::Result<Self> {
        conn.exec(begin, [])?;
        Ok(Self { conn })
    }

    fn end(self, end: &str) -> rusqlite::Result<()> {
        self.conn.exec(end, []).map(|_| ())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            // Nothing else to do with a failed rollback: the next BEGIN reports the state.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// The schema version, unless it is newer than this build knows.
fn refuse_newer(conn: &Connection, path: &Path) -> Result<i64> {
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(StoreError::sqlite(format!("opening {}", path.display())))?;
    let found = schema::version(conn)?;
    if found > schema::CURRENT {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found,
            supported: schema::CURRENT,
        });
    }
    Ok(found)
}

/// The database and its companion files.
fn files_of(path: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    [path.to_owned(), with("-wal"), with("-shm")]
}

fn private_io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Corrupt(format!("making {} private: {e}", path.display()))
}

/// Creates an empty database file with mode 0600 unless it exists.
fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(private_io(path)(e)),
    }
}

/// Takes group and other permissions off the database files that have them.
fn restrict_existing(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for f in files_of(path) {
        let mode = match std::fs::metadata(&f) {
            Ok(m) => m.permissions().mode(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(private_io(&f)(e)),
        };
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode & 0o700))
                .map_err(private_io(&f))?;
        }
    }
    Ok(())
}

fn configure(conn: &Connection, path: &Path) -> Result<()> {
    let ctx = || format!("configuring {}", path.display());
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(StoreError::sqlite(ctx()))?;
    let mode: String = conn
        .row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(StoreError::sqlite(ctx()))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Corrupt(format!(
            "{} refused WAL mode ({mode})",
            path.display()
        )));
    }
    // FULL: a returned commit is on disk, not only in the OS cache. A page cache of 1 MiB
    // (SQLite's default is 2): the hub's hot rows are a few hundred pages, the OS caches the
    // rest, and the hub stays small next to pi.
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-1024;")
        .map_err(StoreError::sqlite(ctx()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lazily_synced_commit_is_kept_and_later_commits_are_durable_again() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let path = dir.path().join("state.db");
        let s = Store::open(&path)?;
        let synchronous = |s: &Store| -> Result<i64> {
            s.read(|c| {
                c.row("PRAGMA synchronous", [], |r| r.get(0))
                    .map_err(StoreError::from)
            })
        };
        // Every time, not only the first: a PRAGMA acts when it is prepared, so a cached one
        // would not act again.
        for round in 0..3 {
            let inside: i64 = s.write_lazy_sync(|tx| {
                kv::set(tx, "lazy", "1")?;
                tx.query_row("PRAGMA synchronous", [], |r| r.get(0))
                    .map_err(StoreError::from)
            })?;
            assert_eq!(inside, 1, "NORMAL inside lazy commit {round}");
            assert_eq!(synchronous(&s)?, 2, "FULL again after lazy commit {round}");
        }
        // A failing lazy transaction rolls back and still restores FULL.
        let failed: Result<()> = s.write_lazy_sync(|tx| {
            kv::set(tx, "lazy", "2")?;
            Err(StoreError::Corrupt("on purpose".into()))
        });
        assert!(failed.is_err());
        assert_eq!(synchronous(&s)?, 2);
        drop(s);
        let s = Store::open(&path)?;
        assert_eq!(s.read(|c| kv::get(c, "lazy"))?.as_deref(), Some("1"));
        Ok(())
    }

    #[test]
    fn open_migrates_and_reopen_keeps_data() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let path = dir.path().join("state.db");
        assert!(Store::open_for_reading(&path)?.is_none());
        {
            let s = Store::open(&path)?;
            s.write(|tx| kv::set(tx, "k", "v"))?;
        }
        let s = Store::open(&path)?;
        assert_eq!(s.read(|c| kv::get(c, "k"))?.as_deref(), Some("v"));
        let r =
            Store::open_for_reading(&path)?.ok_or_else(|| StoreError::Corrupt("missing".into()))?;
        assert_eq!(r.read(schema::version)?, schema::CURRENT);
        let mode: String = r.read(|c| {
            c.row("PRAGMA journal_mode", [], |row| row.get(0))
                .map_err(StoreError::from)
        })?;
        assert_eq!(mode, "wal");
        Ok(())
    }

    #[test]
    fn the_database_files_are_private() -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let io = |e: std::io::Error| StoreError::Corrupt(e.to_string());
        let dir = tempfile::tempdir().map_err(io)?;
        let mode = |p: &Path| -> Result<u32> {
            Ok(std::fs::metadata(p).map_err(io)?.permissions().mode() & 0o777)
        };
        // A new database: the file and the WAL companions SQLite makes beside it.
        let path = dir.path().join("new.db");
        let s = Store::open(&path)?;
        s.write(|tx| kv::set(tx, "k", "v"))?;
        for f in files_of(&path) {
            assert!(f.exists(), "{}", f.display());
            assert_eq!(mode(&f)?, 0o600, "{}", f.display());
        }
        drop(s);
        // One an older version left readable by others is tightened at open.
        let old = dir.path().join("old.db");
        Store::open(&old)?.write(|tx| kv::set(tx, "k", "v"))?;
        for f in files_of(&old) {
            if f.exists() {
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
            }
        }
        let s = Store::open(&old)?;
        s.write(|tx| kv::set(tx, "k", "w"))?;
        for f in files_of(&old) {
            if f.exists() {
                assert_eq!(mode(&f)?, 0o600, "{}", f.display());
            }
        }
        Ok(())
    }

    #[test]
    fn an_error_rolls_the_whole_transaction_back() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let s = Store::open(&dir.path().join("state.db"))?;
        let r: Result<()> = s.write(|tx| {
            kv::set(tx, "a", "1")?;
            Err(StoreError::Corrupt("handler failed".into()))
        });
        assert!(r.is_err());
        assert_eq!(s.read(|c| kv::get(c, "a"))?, None);
        Ok(())
    }

    #[test]
    fn a_newer_schema_is_refused() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let path = dir.path().join("state.db");
        {
            let s = Store::open(&path)?;
            s.write(|tx| {
                tx.execute_batch("PRAGMA user_version = 999")
                    .map_err(StoreError::from)
            })?;
        }
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::TooNew { found: 999, .. })
        ));
        assert!(matches!(
            Store::open_for_reading(&path),
            Err(StoreError::TooNew { .. })
        ));
        Ok(())
    }
}
