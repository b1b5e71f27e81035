//! pi-telegram's durable state in SQLite (bundled), WAL mode, at
//! `<agent-dir>/telegram/<profile>/state.db`.
//!
//! - One writer: a hub holds one [`Store`]; every change goes through [`Store::write`], one
//!   `IMMEDIATE` transaction; a commit that returned survives a crash of the process (and of
//!   the machine: the write-ahead log is synced before `write` returns, after the connection
//!   is free again, see [`Store::sync`]).
//! - Versioned migrations ([`schema`]) run at open, in one transaction.
//! - Table modules hold plain functions over a `&Connection` (a transaction derefs to one), so a
//!   handler composes several changes into one atomic commit: effects plus "this update is
//!   handled" together.
//! - Times are Unix milliseconds passed in by the caller; the store never reads a clock.

/// Declares a stored enum whose variants without data are given with their column text once,
/// `Name = "text",` inside `units { .. }`, the variants with data following as written: the
/// enum, `unit_text` and `unit` (a text given twice is an unreachable pattern), `UNITS` for
/// tests, and `ToSql`/`FromSql` through the type's own `text()` and `parse()`, so the text, its
/// parsing and the enum cannot drift apart.
/// Defined before the modules, which see it by textual scope.
macro_rules! stored_text_enum {
    (
        $(#[$meta:meta])*
        pub enum $enum:ident {
            units { $($(#[$doc:meta])* $name:ident = $text:literal,)* }
            $($rest:tt)*
        }
    ) => {
        $(#[$meta])*
        pub enum $enum {
            $($(#[$doc])* $name,)*
            $($rest)*
        }

        impl $enum {
            fn unit_text(&self) -> Option<&'static str> {
                match self {
                    $(Self::$name => Some($text),)*
                    _ => None,
                }
            }

            #[cfg(test)]
            const UNITS: &[Self] = &[$(Self::$name,)*];

            fn unit(text: &str) -> Option<Self> {
                match text {
                    $($text => Some(Self::$name),)*
                    _ => None,
                }
            }
        }

        impl rusqlite::types::ToSql for $enum {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(match self.text() {
                    std::borrow::Cow::Borrowed(t) => t.into(),
                    std::borrow::Cow::Owned(t) => t.into(),
                })
            }
        }

        impl rusqlite::types::FromSql for $enum {
            fn column_result(
                v: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                Ok(Self::parse(v.as_str()?))
            }
        }
    };
}

pub mod attachments;
pub mod callbacks;
pub mod controls;
pub mod dialogs;
pub mod files;
pub mod flood;
pub mod incidents;
pub mod instances;
pub mod journal;
pub mod kv;
pub mod lease;
pub mod outbox;
pub mod pairing;
pub mod people;
pub mod retention;
pub mod routes;
pub mod schema;
pub mod spawned;
pub mod stale;
pub mod threads;
pub mod turns;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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

/// What SQLite's refusal says about the file, for advice ([`StoreError::trouble`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// The file is damaged, or is no database at all (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
    Damaged,
    /// A file or its folder may not be read or written (`SQLITE_READONLY`, `SQLITE_CANTOPEN`,
    /// `SQLITE_PERM`, `SQLITE_AUTH`): SQLite writes the `-shm` and `-wal` files beside the
    /// database even to read it.
    Permission,
    /// Anything else (busy, full, I/O).
    Other,
}

impl StoreError {
    /// Wraps a SQLite error with what we were doing.
    pub fn sqlite(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Self {
        let context = context.into();
        move |source| Self::Sqlite { context, source }
    }

    /// What SQLite's refusal says about the file (`Other` for errors that are not SQLite's).
    pub fn trouble(&self) -> Trouble {
        use rusqlite::ErrorCode;
        let Self::Sqlite { source, .. } = self else {
            return Trouble::Other;
        };
        match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Trouble::Damaged,
            Some(
                ErrorCode::ReadOnly
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::AuthorizationForStatementDenied,
            ) => Trouble::Permission,
            _ => Trouble::Other,
        }
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

/// The number of a commit made through one [`Store`], counted from its opening: a later commit
/// has a larger number. For [`Store::sync_through`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CommitNo(u64);

/// The state database. Cheap operations; callers on an async runtime run them on a blocking
/// thread.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    durability: Durability,
    /// Transactions run through this handle, reads and writes (what a step of the hub costs
    /// the store, for benches: `Store::transactions`).
    transactions: AtomicU64,
}

/// What of the commits is on disk. Commits are made with `synchronous=NORMAL` (SQLite writes
/// the log, the OS holds it: a crash of the process loses nothing), and [`Store::sync`] makes
/// them survive the machine by syncing the log file itself, without the connection: other
/// commits and reads go on during the sync, and one sync covers every commit before it.
#[derive(Debug)]
struct Durability {
    /// The write-ahead log (`<db>-wal`).
    wal: PathBuf,
    /// Commits made through this handle (counted once their log frames are written).
    committed: AtomicU64,
    /// Of those, how many are known to be on disk.
    durable: AtomicU64,
    /// One sync at a time: a caller that waited for a running sync usually finds its commit
    /// covered by it.
    syncing: Mutex<()>,
}

impl Durability {
    fn new(path: &Path) -> Self {
        Self {
            wal: files_of(path)[1].clone(),
            committed: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            syncing: Mutex::new(()),
        }
    }
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
        // SQLite keeps its log and shared memory beside the file it opened, a symbolic link's
        // target: these are the files to sync and keep private, not the ones beside `path`.
        let real = real_path(&conn, path)?;
        restrict_existing(&real)?;
        let store = Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
            durability: Durability::new(&real),
            transactions: AtomicU64::new(0),
        };
        preallocate_log(&store.durability.wal)?;
        // The migration committed like every commit, without waiting for the disk; the log's
        // directory entry was perhaps just made.
        sync_log(&store.durability.wal)?;
        sync_directory(&real);
        Ok(store)
    }

    /// Opens an existing database for reading only (`status`), without migrating. `None` when
    /// there is no database yet.
    pub fn open_for_reading(path: &Path) -> Result<Option<Self>> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            // SQLite would read a FIFO until a writer came.
            Ok(m) if !m.is_file() => {
                return Err(StoreError::Corrupt(format!(
                    "{} is not a regular file",
                    path.display()
                )));
            }
            _ => {}
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
        let real = real_path(&conn, path)?;
        Ok(Some(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
            durability: Durability::new(&real),
            transactions: AtomicU64::new(0),
        }))
    }

    /// SQLite's `PRAGMA quick_check`, which only reads: the problems it finds in the file's
    /// pages and indexes (none when the file is sound). A file damaged where SQLite cannot
    /// even walk it is an error with SQLite's `SQLITE_CORRUPT` code.
    pub fn quick_check(&self) -> Result<Vec<String>> {
        let ctx = format!("checking {}", self.path.display());
        let found: Vec<String> = self.read(|c| {
            c.prepare("PRAGMA quick_check")
                .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
                .map_err(StoreError::sqlite(ctx))
        })?;
        Ok(if found == ["ok"] { Vec::new() } else { found })
    }

    /// Where the database lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The write-ahead log SQLite writes, which [`Store::sync`] syncs: beside the database
    /// file SQLite opened (a symbolic link's target), not necessarily beside [`Store::path`].
    pub fn wal_path(&self) -> &Path {
        &self.durability.wal
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock rolled its transaction back; the connection is fine.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one `IMMEDIATE` transaction and commits it durably: when it returns, the
    /// commit survives a crash of the machine. An error from `f` rolls everything back.
    pub fn write<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let (value, commit) = self.commit(f)?;
        self.sync_upto(commit).map_err(E::from)?;
        debug_assert!(self.durability.durable.load(Ordering::Acquire) >= commit);
        Ok(value)
    }

    /// Like [`Store::write`], but returns without waiting for the disk: the commit survives a
    /// crash of the process at once, and a crash of the machine once [`Store::sync`] or any
    /// later [`Store::write`] returns (all commits share one write-ahead log, and a sync
    /// covers everything before it). For a transaction whose effects reach no other machine
    /// before such a sync: lost with the machine, it is redone from what was durable, and
    /// nobody outside saw the difference.
    pub fn write_lazy_sync<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        self.commit(f).map(|(value, _)| value)
    }

    /// [`Store::write_lazy_sync`], also returning the commit's number: whoever acts on the
    /// commit later makes exactly it durable with [`Store::sync_through`], not every commit
    /// made since.
    pub fn write_lazy_sync_numbered<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<(T, CommitNo), E>
    where
        E: From<StoreError>,
    {
        self.commit(f).map(|(value, n)| (value, CommitNo(n)))
    }

    /// One `IMMEDIATE` transaction committed without waiting for the disk; also returns the
    /// commit's number, for [`Store::sync_through`].
    fn commit<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> std::result::Result<T, E>,
    ) -> std::result::Result<(T, u64), E>
    where
        E: From<StoreError>,
    {
        let conn = self.lock();
        self.transactions.fetch_add(1, Ordering::Relaxed);
        let before = conn.total_changes();
        let tx = Tx::begin(&conn, "BEGIN IMMEDIATE")
            .map_err(|e| E::from(StoreError::sqlite("starting a transaction")(e)))?;
        let value = f(&conn)?;
        tx.end("COMMIT")
            .map_err(|e| E::from(StoreError::sqlite("committing")(e)))?;
        // Counted under the connection's lock, after SQLite wrote the commit's log frames: a
        // sync that reads the count afterwards covers it. A transaction that changed nothing
        // wrote nothing to sync.
        let commit = if conn.total_changes() == before {
            self.durability.committed.load(Ordering::Acquire)
        } else {
            self.durability.committed.fetch_add(1, Ordering::AcqRel) + 1
        };
        Ok((value, commit))
    }

    /// Makes every commit made so far survive a crash of the machine: syncs the write-ahead log
    /// unless an earlier sync already covered them. Needs no connection, so commits and reads
    /// go on meanwhile.
    ///
    /// Why syncing the log is enough: with `synchronous=NORMAL` SQLite writes every commit to
    /// the log and syncs the log before a checkpoint copies it into the database, and the
    /// database after; the log starts over only after a complete checkpoint. So every commit
    /// is either in the synced database or in the log, and syncing the log file (data and
    /// size) makes the log's part durable. A `FULL` commit does exactly this sync, holding the
    /// connection.
    pub fn sync(&self) -> Result<()> {
        self.sync_upto(self.durability.committed.load(Ordering::Acquire))
    }

    /// Makes the commit numbered `commit` and every one before it durable (see
    /// [`Store::sync`]); returns at once when a sync covered them, and waits for a sync under
    /// way rather than starting a second one.
    pub fn sync_through(&self, commit: CommitNo) -> Result<()> {
        self.sync_upto(commit.0)
    }

    /// Makes commits up to number `wanted` durable (see [`Store::sync`]).
    fn sync_upto(&self, wanted: u64) -> Result<()> {
        let d = &self.durability;
        if self.is_durable(CommitNo(wanted)) {
            return Ok(());
        }
        let _one = d.syncing.lock().unwrap_or_else(|p| p.into_inner());
        if d.durable.load(Ordering::Acquire) >= wanted {
            return Ok(());
        }
        // Every commit counted by now has its frames in the log: this sync covers them all.
        let covered = d.committed.load(Ordering::Acquire);
        sync_log(&d.wal)?;
        d.durable.fetch_max(covered, Ordering::AcqRel);
        Ok(())
    }

    /// Whether the commit numbered `commit` survives a crash of the machine already.
    pub fn is_durable(&self, commit: CommitNo) -> bool {
        self.durability.durable.load(Ordering::Acquire) >= commit.0
    }

    /// Commits made through this handle that a crash of the machine could still lose.
    pub fn unsynced_commits(&self) -> u64 {
        let d = &self.durability;
        d.committed
            .load(Ordering::Acquire)
            .saturating_sub(d.durable.load(Ordering::Acquire))
    }

    /// Transactions (reads and writes) run through this handle so far.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
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
        self.transactions.fetch_add(1, Ordering::Relaxed);
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

/// The database file SQLite opened for `path`, as SQLite names it (`sqlite3_db_filename`:
/// symbolic links resolved), so that its `-wal` is the log SQLite writes. A name SQLite
/// cannot give as UTF-8 is resolved the same way by the OS.
fn real_path(conn: &Connection, path: &Path) -> Result<PathBuf> {
    match conn.path() {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => std::fs::canonicalize(path)
            .map_err(|e| StoreError::Corrupt(format!("resolving {}: {e}", path.display()))),
    }
}

/// Syncs the write-ahead log's data and size.
fn sync_log(wal: &Path) -> Result<()> {
    // A missing log is an error: while this handle's connection is open in WAL mode SQLite
    // keeps its log, so a log not found is one at another place than SQLite's (a database
    // reached through a link was once synced this way without ever syncing anything).
    let log = std::fs::File::open(wal)
        .map_err(|e| StoreError::Corrupt(format!("opening {} to sync it: {e}", wal.display())))?;
    log.sync_data()
        .map_err(|e| StoreError::Corrupt(format!("syncing {}: {e}", wal.display())))
}

/// The write-ahead log's size once SQLite checkpoints it (1,000 pages of 4 KiB, each frame
/// with its 24-byte header, and the log's 32-byte header), rounded up to whole blocks.
const LOG_SIZE: u64 = (1000_u64 * (4096 + 24) + 32).div_ceil(4096) * 4096;

/// Gives the write-ahead log its full size in written blocks, so that a commit's sync writes
/// data only. A sync of a file that grew also writes the file's size and block map: on this
/// project's virtual disk a flush after an append took 0.33–0.40 ms at p50 against 0.26–0.29
/// ms for the same write over blocks already written, and a hub's log grows for its first
/// ~1,000 pages after every start (SQLite deletes it at a clean close), which a person's
/// messages meet.
///
/// Safe for SQLite: it reads frames up to the end it recorded, and after a crash recovers
/// frames from the start of the log until the first one whose salt and checksum do not match,
/// which zeros never do. Only zeros past the end are written, before this handle's first
/// transaction. A missing log (nothing opened it yet) is left to SQLite.
fn preallocate_log(wal: &Path) -> Result<()> {
    use std::io::Write;
    let io =
        |e: std::io::Error| StoreError::Corrupt(format!("preallocating {}: {e}", wal.display()));
    let mut log = match std::fs::OpenOptions::new().append(true).open(wal) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let len = log.metadata().map_err(io)?.len();
    if len >= LOG_SIZE {
        return Ok(());
    }
    // Written, not `fallocate`d: an allocated but unwritten block is marked so on ext4 and
    // XFS, and its first write changes the block map again.
    let zeros = vec![0u8; 256 * 1024];
    let mut left = LOG_SIZE - len;
    while left > 0 {
        let n = usize::try_from(left.min(zeros.len() as u64)).unwrap_or(zeros.len());
        log.write_all(&zeros[..n]).map_err(io)?;
        left -= n as u64;
    }
    log.sync_all().map_err(io)
}

/// Syncs the directory holding the database, so files SQLite created there (the log) are
/// found after a crash of the machine. Best effort, as SQLite's own directory syncs: some file
/// systems cannot sync a directory, and the hub must still start there.
fn sync_directory(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
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
    // The query planner's stability guarantee: a statement's plan never depends on the values
    // bound to it. Without it, SQLite re-prepares (parses and plans again) a cached statement
    // whenever a value it looked at while planning changes: comparing `col = ?1` with a partial
    // index's condition is enough, and the hub's commonest statements (the next queued turn of
    // an identity, a turn's group) were planned again on most calls. The hub's queries are
    // index lookups whose best plan does not depend on the values.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(StoreError::sqlite(ctx()))?;
    // NORMAL: a commit is in the OS's cache when it returns; `Store::sync` puts it on disk
    // without holding the connection. A page cache of 1 MiB (SQLite's default is 2): the hub's
    // hot rows are a few hundred pages, the OS caches the rest, and the hub stays small next
    // to pi.
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-1024;",
    )
    .map_err(StoreError::sqlite(ctx()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_commits_wait_for_a_sync_and_durable_ones_do_not() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let path = dir.path().join("state.db");
        let s = Store::open(&path)?;
        assert_eq!(s.unsynced_commits(), 0, "the migration is synced at open");
        for round in 1..=3 {
            s.write_lazy_sync(|tx| kv::set(tx, "lazy", &round.to_string()))?;
            assert_eq!(s.unsynced_commits(), round, "lazy commit {round}");
        }
        // A transaction that changes nothing, or fails, adds nothing to sync.
        s.write_lazy_sync(|tx| kv::get(tx, "lazy"))?;
        assert_eq!(s.unsynced_commits(), 3);
        let failed: Result<()> = s.write_lazy_sync(|tx| {
            kv::set(tx, "lazy", "never")?;
            Err(StoreError::Corrupt("on purpose".into()))
        });
        assert!(failed.is_err());
        assert_eq!(s.unsynced_commits(), 3);
        // One durable commit covers the lazy ones before it.
        s.write(|tx| kv::set(tx, "durable", "1"))?;
        assert_eq!(s.unsynced_commits(), 0);
        s.write_lazy_sync(|tx| kv::set(tx, "lazy", "4"))?;
        s.sync()?;
        assert_eq!(s.unsynced_commits(), 0);
        // Nothing left to sync: a sync is free.
        s.sync()?;
        // Commits are made with NORMAL: the sync is ours, not SQLite's.
        let mode: i64 = s.read(|c| {
            c.row("PRAGMA synchronous", [], |r| r.get(0))
                .map_err(StoreError::from)
        })?;
        assert_eq!(mode, 1);
        drop(s);
        let s = Store::open(&path)?;
        assert_eq!(s.read(|c| kv::get(c, "lazy"))?.as_deref(), Some("4"));
        Ok(())
    }

    #[test]
    fn the_log_has_its_full_size_and_commits_before_its_zeros_survive_a_crash() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let path = dir.path().join("state.db");
        let wal = files_of(&path)[1].clone();
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let s = Store::open(&path)?;
        assert!(size(&wal) >= LOG_SIZE, "log of {} bytes", size(&wal));
        for i in 0..300 {
            s.write_lazy_sync(|tx| kv::set(tx, &format!("k{i}"), &"x".repeat(600)))?;
        }
        s.write(|tx| kv::set(tx, "last", "1"))?;
        // A crash: the connection is never closed, so SQLite neither checkpoints nor
        // removes the log; the next open recovers the commits from the frames before the
        // zeros.
        std::mem::forget(s);
        let again = Store::open(&path)?;
        assert_eq!(again.read(|c| kv::get(c, "last"))?.as_deref(), Some("1"));
        assert_eq!(
            again.read(|c| kv::get(c, "k299"))?.map(|v| v.len()),
            Some(600)
        );
        // The frames written over the zeros: the log did not grow past its size.
        assert!(
            size(&wal) <= LOG_SIZE + 8 * 4096,
            "log of {} bytes",
            size(&wal)
        );
        drop(again);
        Ok(())
    }

    #[test]
    fn syncs_from_many_threads_cover_every_commit() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let s = std::sync::Arc::new(Store::open(&dir.path().join("state.db"))?);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || -> Result<()> {
                    for i in 0..25 {
                        // `write` asserts (debug builds) that its own commit is covered.
                        s.write(|tx| kv::set(tx, &format!("k{t}"), &i.to_string()))?;
                        if i % 5 == 0 {
                            s.write_lazy_sync(|tx| kv::set(tx, "lazy", "1"))?;
                            s.sync()?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| StoreError::Corrupt("a writer panicked".into()))??;
        }
        assert_eq!(s.unsynced_commits(), 0);
        assert_eq!(s.durability.committed.load(Ordering::Acquire), 120);
        Ok(())
    }

    #[test]
    fn sync_through_syncs_only_when_its_commit_is_not_durable_yet() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let s = Store::open(&dir.path().join("state.db"))?;
        let ((), first) = s.write_lazy_sync_numbered(|tx| kv::set(tx, "a", "1"))?;
        s.sync_through(first)?;
        assert_eq!(s.unsynced_commits(), 0);
        let ((), second) = s.write_lazy_sync_numbered(|tx| kv::set(tx, "b", "1"))?;
        assert!(second > first);
        s.sync_through(first)?;
        assert_eq!(
            s.unsynced_commits(),
            1,
            "covered already: no sync for the later one"
        );
        s.sync_through(second)?;
        assert_eq!(s.unsynced_commits(), 0);
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
