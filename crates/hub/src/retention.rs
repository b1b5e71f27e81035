//! The retention task: on the slow clock (at start, then every `every`), what recovery no
//! longer needs leaves the state database (`store::retention` has the rules per table), so the
//! database follows the traffic of the last period. It is off the path from an update to pi:
//! each batch is its own short transaction, and other tasks take the store between batches.
//!
//! The same pass removes the files the hub made to send that a crash left behind (the sender
//! removes a copy once its row is settled, but a crash can come between the two, or between a
//! copy and the commit of its row) and the copies of uploads of unknown outcome: in the copy
//! folders (`out/`, `voice/`), regular files only (links are neither followed nor removed),
//! last changed longer ago than `fileRetentionDays` (and [`COPY_MIN_AGE`]), and none that an
//! unsent row still needs (`store::retention::files_in_use`).

use crate::db::Durability;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use store::retention::{self, BATCH, Horizon, Table};
use tokio::sync::watch;

use crate::db::Db;
use crate::error::HubError;

/// When and what the task prunes.
#[derive(Debug, Clone)]
pub struct RetentionSettings {
    /// Finished rows older than this go (`historyRetentionDays`; at least
    /// `store::retention::MIN_AGE_MS`).
    pub age: Duration,
    /// Time between passes.
    pub every: Duration,
    /// Copies older than this are removed when no unsent row needs them (`fileRetentionDays`;
    /// at least [`COPY_MIN_AGE`]).
    pub file_age: Duration,
    /// The folders of the hub's own copies (`telegram_attach`'s `out/`, the voice folder).
    pub copy_dirs: Vec<PathBuf>,
}

/// A copy younger than this is never taken for one left behind, whatever `fileRetentionDays`
/// says: it may be on its way into its row (`telegram_attach` copies before it records) or a
/// voice a template is still making.
pub const COPY_MIN_AGE: Duration = Duration::from_secs(3600);

/// Runs a pass at start and then every `settings.every` until the stop.
pub async fn run(
    db: Db,
    settings: RetentionSettings,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    loop {
        let pruned = pass(&db, &settings, &stop).await?;
        let total: usize = pruned.values().sum();
        if total > 0 {
            tracing::info!(rows = total, per_table = ?pruned, "pruned old state");
        }
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            () = tokio::time::sleep(settings.every) => {}
        }
        if *stop.borrow() {
            return Ok(());
        }
    }
}

/// One pass: each table, batch after batch until a batch finds less than a full one. Returns
/// the rows changed per table.
pub async fn pass(
    db: &Db,
    settings: &RetentionSettings,
    stop: &watch::Receiver<bool>,
) -> Result<BTreeMap<&'static str, usize>, HubError> {
    let age_ms = i64::try_from(settings.age.as_millis()).unwrap_or(i64::MAX);
    let mut pruned = BTreeMap::new();
    for table in Table::ALL {
        loop {
            if *stop.borrow() {
                return Ok(pruned);
            }
            let at = Horizon::new(db.now_ms(), age_ms);
            let n = db
                .write(Durability::OnDisk, move |tx| {
                    retention::prune(tx, table, at, BATCH)
                })
                .await?;
            if n > 0 {
                *pruned.entry(table.name()).or_insert(0) += n;
            }
            if n < BATCH {
                break;
            }
            // The store is free between batches: the worker and the sender go first.
            tokio::task::yield_now().await;
        }
    }
    if *stop.borrow() {
        return Ok(pruned);
    }
    let removed = sweep_copies(db, settings).await?;
    if removed > 0 {
        pruned.insert("copies", removed);
    }
    Ok(pruned)
}

/// Removes old copies no unsent row needs (see the module's comment). Returns how many.
async fn sweep_copies(db: &Db, settings: &RetentionSettings) -> Result<usize, HubError> {
    if settings.copy_dirs.is_empty() {
        return Ok(0);
    }
    let age_ms = i64::try_from(settings.file_age.max(COPY_MIN_AGE).as_millis()).unwrap_or(i64::MAX);
    let before_ms = db.now_ms().saturating_sub(age_ms);
    let dirs = settings.copy_dirs.clone();
    let old = tokio::task::spawn_blocking(move || old_files(&dirs, before_ms))
        .await
        .unwrap_or_default();
    if old.is_empty() {
        return Ok(0);
    }
    // Read after the listing: a row that took one of these files took it before (an old file
    // gets no new row), so it is seen here.
    let in_use = db.read(store::retention::files_in_use).await?;
    let removed = tokio::task::spawn_blocking(move || {
        let needed = needed(&in_use);
        let mut removed = 0;
        for path in old {
            let canonical = std::fs::canonicalize(&path).ok();
            if needed.contains(&path) || canonical.is_some_and(|c| needed.contains(&c)) {
                continue;
            }
            match crate::regular::remove(&path) {
                Ok(r) => removed += usize::from(r),
                Err(e) => tracing::warn!(error = %e, "could not remove an old copy"),
            }
        }
        removed
    })
    .await
    .unwrap_or(0);
    Ok(removed)
}

/// The regular files directly in `dirs` last changed before `before_ms` (Unix ms). Links are
/// not followed: a link in a copy folder is not the hub's, and what it points to never is.
fn old_files(dirs: &[PathBuf], before_ms: i64) -> Vec<PathBuf> {
    let mut old = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let changed_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(i64::MAX, |d| {
                    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
                });
            if meta.is_file() && changed_ms < before_ms {
                old.push(path);
            }
        }
    }
    old
}

/// The paths unsent rows name, as written and resolved: a row's path spelled through another
/// route to the same folder (the agent dir through a link) still protects its file.
fn needed(in_use: &BTreeSet<String>) -> BTreeSet<PathBuf> {
    in_use
        .iter()
        .flat_map(|p| {
            let p = Path::new(p);
            [Some(p.to_owned()), std::fs::canonicalize(p).ok()]
        })
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use store::{Store, StoreError};

    use super::*;

    fn old_journal(n: i64, handled: bool) -> Result<(tempfile::TempDir, Db), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let store = Store::open(&dir.path().join("state.db"))?;
        store.write(|tx| {
            let mut stmt = tx.prepare(
                "INSERT INTO journal(update_id, kind, raw, received_ms, handled_ms)
                 VALUES (?1, 'message', '{}', 1, ?2)",
            )?;
            for id in 1..=n {
                stmt.execute((id, handled.then_some(2_i64)))?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok((dir, Db::new(Arc::new(store))))
    }

    fn settings() -> RetentionSettings {
        RetentionSettings {
            age: Duration::from_secs(60),
            every: Duration::from_secs(600),
            file_age: Duration::from_secs(7 * 24 * 3600),
            copy_dirs: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_pass_prunes_batch_after_batch_until_nothing_is_old() -> Result<(), HubError> {
        let rows = 2 * BATCH as i64 + 17;
        let (_dir, db) = old_journal(rows, true)?;
        let (_tx, stop) = watch::channel(false);
        let pruned = pass(&db, &settings(), &stop).await?;
        assert_eq!(pruned.get("journal"), Some(&(rows as usize)));
        let (pending, handled) = db.read(store::journal::counts).await?;
        assert_eq!((pending, handled), (0, rows), "pruned entries still count");
        let left: i64 = db
            .read(|c| {
                c.query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
                    .map_err(StoreError::from)
            })
            .await?;
        assert_eq!(left, 0);
        // Nothing is old any more.
        assert!(pass(&db, &settings(), &stop).await?.is_empty());
        Ok(())
    }

    /// `path` last changed `days` ago (a link itself, not what it leads to).
    fn aged(path: &Path, days: u64) -> std::io::Result<()> {
        let at = std::time::SystemTime::now() - Duration::from_secs(days * 24 * 3600);
        let secs = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(std::io::Error::other)?
            .as_secs() as i64;
        let t = rustix::fs::Timespec {
            tv_sec: secs,
            tv_nsec: 0,
        };
        rustix::fs::utimensat(
            rustix::fs::CWD,
            path,
            &rustix::fs::Timestamps {
                last_access: t,
                last_modification: t,
            },
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )?;
        Ok(())
    }

    fn io(e: std::io::Error) -> HubError {
        HubError::Usage(e.to_string())
    }

    #[tokio::test]
    async fn old_copies_no_unsent_row_needs_are_removed_and_the_others_kept() -> Result<(), HubError>
    {
        let dir = tempfile::tempdir().map_err(io)?;
        let db = Db::new(Arc::new(Store::open(&dir.path().join("state.db"))?));
        let (out, voice, elsewhere) = (
            dir.path().join("out"),
            dir.path().join("voice"),
            dir.path().join("elsewhere"),
        );
        for d in [&out, &voice, &elsewhere, &out.join("sub")] {
            std::fs::create_dir_all(d).map_err(io)?;
        }
        let file = |path: PathBuf, days: u64| -> Result<PathBuf, HubError> {
            std::fs::write(&path, "bytes").map_err(io)?;
            aged(&path, days).map_err(io)?;
            Ok(path)
        };
        let orphan = file(out.join("1-left-by-a-crash.txt"), 8)?;
        let pending = file(out.join("2-pending.txt"), 30)?;
        let ambiguous = file(out.join("3-ambiguous.txt"), 8)?;
        let waiting = file(out.join("4-waiting.txt"), 8)?;
        let fresh = file(out.join("5-fresh.txt"), 0)?;
        let in_a_folder = file(out.join("sub").join("6-deeper.txt"), 8)?;
        let voice_orphan = file(voice.join("voice-9-0.ogg"), 8)?;
        let planned = file(voice.join("voice-10-0.ogg"), 8)?;
        let precious = file(elsewhere.join("precious.txt"), 8)?;
        let link = out.join("7-link.txt");
        std::os::unix::fs::symlink(&precious, &link).map_err(io)?;
        aged(&link, 8).map_err(io)?;

        let files =
            |p: &Path| json!({ "__files": [{ "field": "document", "path": p, "copy": true }] });
        let single = |p: &Path| store::outbox::single("sendDocument", &files(p));
        let (pending_params, ambiguous_params) = (single(&pending), single(&ambiguous));
        // A file in a later message of a plan is needed too.
        let plan = json!({ "alternatives": [
            { "name": "voice", "messages": [{ "method": "sendMessage", "text": "spoken first" }] },
            { "name": "file", "messages": [single(&planned)["alternatives"][0]["messages"][0].clone()] },
        ], "alt": 0, "part": 0 });
        let waiting_path = waiting.display().to_string();
        let pending_id = db
            .write(Durability::OnDisk, move |tx| {
                let row = |delivery: &serde_json::Value, purpose: &store::outbox::Purpose| {
                    store::outbox::enqueue(
                        tx,
                        &store::outbox::NewRow {
                            chat_id: 1,
                            thread_id: None,
                            delivery,
                            purpose,
                            source_update_id: None,
                            resend_if_unknown: false,
                            identity: None,
                            turn_id: None,
                        },
                        1,
                    )
                };
                let pending_id = row(&pending_params, &store::outbox::Purpose::File { id: 1 })?
                    .unwrap_or_default();
                let unknown = row(&ambiguous_params, &store::outbox::Purpose::File { id: 2 })?
                    .unwrap_or_default();
                store::outbox::mark_sending(tx, unknown, 2)?;
                store::outbox::mark_ambiguous(tx, unknown, "lost", "not resent", 3)?;
                row(&plan, &store::outbox::Purpose::Voice { turn: 1, n: 0 })?;
                let turn = store::turns::create(
                    tx,
                    &store::turns::NewTurn {
                        source_update_id: None,
                        chat_id: 1,
                        thread_id: None,
                        message_id: None,
                        target: store::turns::Target::Identity("web"),
                        text: "still open",
                        lane: store::turns::Lane::Normal,
                        prepare: None,
                        sent_ms: None,
                        from_user: None,
                        from_name: None,
                    },
                    1,
                )?
                .unwrap_or_default();
                store::attachments::create(
                    tx,
                    &store::attachments::NewAttachment {
                        turn_id: turn,
                        path: &waiting_path,
                        name: "w.txt",
                        mime: None,
                        size: 5,
                        caption: None,
                    },
                    1,
                )?;
                Ok(pending_id)
            })
            .await?;

        let settings = RetentionSettings {
            copy_dirs: vec![out.clone(), voice.clone()],
            ..settings()
        };
        let (_tx, stop) = watch::channel(false);
        let pruned = pass(&db, &settings, &stop).await?;
        assert_eq!(pruned.get("copies"), Some(&3), "{pruned:?}");
        for gone in [&orphan, &ambiguous, &voice_orphan] {
            assert!(
                !gone.exists(),
                "{} is old and no unsent row needs it",
                gone.display()
            );
        }
        for kept in [
            &pending,
            &waiting,
            &fresh,
            &in_a_folder,
            &planned,
            &precious,
        ] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(
            std::fs::symlink_metadata(&link).is_ok(),
            "a link is not the hub's copy"
        );
        // Once its row is sent, the pending row's copy is an orphan too.
        db.write(Durability::OnDisk, move |tx| {
            store::outbox::mark_sending(tx, pending_id, 4)?;
            store::outbox::mark_sent(tx, pending_id, Some(1), 5)
        })
        .await?;
        assert_eq!(pass(&db, &settings, &stop).await?.get("copies"), Some(&1));
        assert!(!pending.exists());
        Ok(())
    }

    #[tokio::test]
    async fn unhandled_updates_stay_and_a_stop_ends_the_pass() -> Result<(), HubError> {
        let (_dir, db) = old_journal(10, false)?;
        let (tx, stop) = watch::channel(false);
        assert!(pass(&db, &settings(), &stop).await?.is_empty());
        assert_eq!(db.read(store::journal::counts).await?, (10, 0));
        let _ = tx.send(true);
        let run = run(db, settings(), stop);
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .map_err(|_| HubError::Usage("the task did not stop".into()))??;
        Ok(())
    }
}
