//! What `Store::sync` syncs, on real SQLite files.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use store::{Store, StoreError, kv};

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// A `state.db` that is a symbolic link into another folder (found by a power-loss run from
/// outside: the hub confirmed updates with no flush at all, and the database came back with
/// no tables). SQLite keeps its log beside the link's target; the sync must open that log.
#[test]
fn a_linked_database_syncs_the_log_sqlite_writes() {
    let profile = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("real.db");
    let link = profile.path().join("state.db");
    drop(Store::open(&target).unwrap());
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let s = Store::open(&link).unwrap();
    s.write_lazy_sync(|tx| kv::set(tx, "k", "v")).unwrap();
    s.sync().unwrap();

    let real_wal = with_suffix(&target.canonicalize().unwrap(), "-wal");
    assert_eq!(s.wal_path(), real_wal, "the log synced is not SQLite's");
    assert!(real_wal.exists(), "SQLite writes its log beside the target");
    assert!(
        !with_suffix(&link, "-wal").exists(),
        "no log beside the link: SQLite never writes one there"
    );
    assert_eq!(s.unsynced_commits(), 0);
}

/// A log missing when a sync runs is not a sync: it is an error, never a silent success.
#[test]
fn a_missing_log_at_sync_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("state.db")).unwrap();
    s.write_lazy_sync(|tx| kv::set(tx, "k", "v")).unwrap();
    std::fs::remove_file(s.wal_path()).unwrap();
    let r = s.sync();
    assert!(matches!(r, Err(StoreError::Corrupt(_))), "{r:?}");
    assert_eq!(s.unsynced_commits(), 1, "nothing was made durable");
}
