//! Journal -> handlers, in update order. A batch of updates is handled in one transaction
//! (each update's effects with its "handled" mark); if the batch fails, updates are handled one
//! by one so a single bad update cannot block the others.
//!
//! A freshly polled batch smaller than a full poll, with nothing older unhandled, is handled by
//! the poller in the transaction that journals it ([`journal_batch`]): one commit and one task
//! hand-over less between a message and pi. The worker takes what that leaves: full batches (a
//! backlog), updates journaled before a restart or behind older ones, and batches whose
//! handling failed.

use crate::db::Durability;
use store::{Cached, StoreError, incidents, journal};
use tokio::sync::watch;

use crate::config::{ConfigFile, PairingMode};
use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::incoming::handlers::{self, AfterCommit, HandlerCtx};
use crate::paths::ProfileName;
use crate::wakes::Wakes;

/// Updates handled per transaction.
pub const BATCH: usize = 512;

/// What the worker needs besides the store.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Bot username for texts.
    pub bot_username: String,
    /// Pairing mode.
    pub pairing: PairingMode,
    /// Config file to mirror a new owner into.
    pub config_path: std::path::PathBuf,
    pub profile: ProfileName,
    /// The hub's lease epoch (binding changes are fenced by it).
    pub epoch: store::lease::Epoch,
    /// Topic title template (for a topic the person binds with "move here").
    pub title_template: String,
}

/// Handles journaled updates until `stop`.
pub async fn run(
    db: Db,
    settings: WorkerSettings,
    wakes: Wakes,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    // Whether the last look found fewer than a whole batch: then nothing is left, and the next
    // look waits for the poller's wake (a wake while handling is kept by the `Notify`).
    let mut drained = false;
    loop {
        if std::mem::take(&mut drained) {
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                () = wakes.worker.notified() => {}
            }
        }
        let (last, after) = match handle_batch(&db, &settings, Pending::Read).await {
            Ok(Some((last, count, after))) => {
                drained = count < BATCH;
                (last, after)
            }
            Ok(None) => {
                tokio::select! {
                    _ = stop.changed() => return Ok(()),
                    () = wakes.worker.notified() => continue,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "a batch failed; handling its updates one by one");
                let batch = db.read(|c| journal::pending(c, BATCH)).await?;
                let last = batch.last().map_or(0, |e| e.update_id);
                (last, handle_singly(&db, &settings, batch).await?)
            }
        };
        crashpoint::hit(crashpoint::CrashPoint::HandleAfterCommit);
        crate::latency::mark(crate::latency::Step::Handled, last);
        after_commit(&db, &settings, &wakes, after).await?;
        if *stop.borrow() {
            return Ok(());
        }
    }
}

/// What follows a committed handling: the tasks with new work are woken, a new owner is
/// written to the config file.
async fn after_commit(
    db: &Db,
    settings: &WorkerSettings,
    wakes: &Wakes,
    after: AfterCommit,
) -> Result<(), HubError> {
    if after.outbox {
        wakes.sender.notify_one();
    }
    if after.controls {
        wakes
            .controls
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    if after.turns {
        wakes.conductor.notify_one();
    }
    if after.topics {
        wakes.topics.notify_one();
    }
    if after.inbound {
        wakes.inbound.notify_one();
    }
    if let Some(owner) = after.new_owner {
        mirror_owner(db, settings, owner).await?;
    }
    Ok(())
}

/// Journals a polled batch with the offset after it (`next`) in one transaction, and, if
/// `handle`, handles it in the same transaction when no older update is still unhandled (so
/// the order of handling stays the journal's). `true` when it was handled; otherwise the
/// worker is woken for it. A handler's error leaves the batch journaled and unhandled: the
/// worker then handles it update by update, isolating the bad one.
pub async fn journal_batch(
    db: &Db,
    settings: &WorkerSettings,
    wakes: &Wakes,
    rows: Vec<(i64, String, String)>,
    next: i64,
    handle: bool,
) -> Result<bool, HubError> {
    let last = rows.iter().map(|r| r.0).max().unwrap_or(0);
    let ctx = handler_ctx(db, settings);
    let now = ctx.now_ms;
    let handled = db
        .write(Durability::Lazy, move |tx| {
            let incoming: Vec<journal::Incoming<'_>> = rows
                .iter()
                .map(|(id, kind, raw)| journal::Incoming {
                    update_id: *id,
                    kind,
                    raw,
                })
                .collect();
            journal::append_batch(tx, &incoming, next, now)?;
            crashpoint::hit(crashpoint::CrashPoint::JournalBeforeCommit);
            if !handle {
                return Ok(None);
            }
            let pending = journal::pending(tx, BATCH)?;
            let fresh = pending.len() == rows.len()
                && pending.iter().zip(&rows).all(|(e, r)| e.update_id == r.0);
            if !fresh {
                return Ok(None);
            }
            tx.exec("SAVEPOINT handling", [])
                .map_err(StoreError::sqlite("handling a batch"))?;
            match handle_entries(tx, &ctx, &pending) {
                Ok(after) => {
                    tx.exec("RELEASE handling", [])
                        .map_err(StoreError::sqlite("handling a batch"))?;
                    Ok(Some(after))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a fresh batch failed; the worker handles it update by update");
                    tx.exec("ROLLBACK TO handling", [])
                        .and_then(|_| tx.exec("RELEASE handling", []))
                        .map_err(StoreError::sqlite("handling a batch"))?;
                    Ok(None)
                }
            }
        })
        .await?;
    crashpoint::hit(crashpoint::CrashPoint::JournalAfterCommit);
    crate::latency::mark(crate::latency::Step::Journaled, last);
    let Some(after) = handled else {
        wakes.worker.notify_one();
        return Ok(false);
    };
    crashpoint::hit(crashpoint::CrashPoint::HandleAfterCommit);
    crate::latency::mark(crate::latency::Step::Handled, last);
    after_commit(db, settings, wakes, after).await?;
    Ok(true)
}

/// Each entry's handling, in order, in the caller's transaction.
fn handle_entries(
    tx: &store::Connection,
    ctx: &HandlerCtx,
    entries: &[journal::Entry],
) -> Result<AfterCommit, StoreError> {
    let mut after = AfterCommit::default();
    for entry in entries {
        handlers::handle(tx, ctx, entry, &mut after)?;
    }
    crashpoint::hit(crashpoint::CrashPoint::HandleBeforeCommit);
    Ok(after)
}

fn handler_ctx(db: &Db, settings: &WorkerSettings) -> HandlerCtx {
    HandlerCtx {
        bot_username: settings.bot_username.clone(),
        pairing: settings.pairing,
        now_ms: db.now_ms(),
        clock: db.clock().clone(),
        epoch: settings.epoch,
        title_template: settings.title_template.clone(),
        config_path: settings.config_path.clone(),
        profile: settings.profile.clone(),
    }
}

/// The updates a transaction handles.
enum Pending {
    /// The next batch of pending updates, read in the handling transaction itself (one store
    /// round trip less on a message's way to pi).
    Read,
    /// This one update.
    One(journal::Entry),
}

/// Handles the updates and marks them handled in one transaction; `None` when none were
/// pending. Returns the last update id handled and how many were.
async fn handle_batch(
    db: &Db,
    settings: &WorkerSettings,
    pending: Pending,
) -> Result<Option<(i64, usize, AfterCommit)>, StoreError> {
    let ctx = handler_ctx(db, settings);
    // Not synced to disk before it returns: what a handler does reaches another machine only
    // through a later durable commit (the sender marks a row before calling Telegram, topics an
    // intent before creating one, a compaction is marked sent, the conductor a turn before pi
    // on another machine gets it), which syncs this one too; pi on this machine dies with it;
    // the rest is harmless to repeat (an abort bound to its turn, a model switch). Lost with
    // the machine, it is redone from the journal, which is on disk before the offset moves.
    db.write(Durability::Lazy, move |tx| {
        let batch = match pending {
            Pending::Read => journal::pending(tx, BATCH)?,
            Pending::One(entry) => vec![entry],
        };
        let Some(last) = batch.last().map(|e| e.update_id) else {
            return Ok(None);
        };
        let after = handle_entries(tx, &ctx, &batch)?;
        Ok(Some((last, batch.len(), after)))
    })
    .await
}

async fn handle_singly(
    db: &Db,
    settings: &WorkerSettings,
    batch: Vec<journal::Entry>,
) -> Result<AfterCommit, HubError> {
    let mut all = AfterCommit::default();
    for entry in batch {
        let id = entry.update_id;
        match handle_batch(db, settings, Pending::One(entry)).await {
            Ok(None) => {}
            Ok(Some((_, _, after))) => {
                all.outbox |= after.outbox;
                all.controls |= after.controls;
                all.turns |= after.turns;
                all.topics |= after.topics;
                all.inbound |= after.inbound;
                all.new_owner = after.new_owner.or(all.new_owner);
            }
            Err(e) => {
                // Recorded as handled with the failure, so it is neither lost silently nor
                // retried forever.
                let message = e.to_string();
                tracing::error!(update_id = id, error = %message, "an update could not be handled");
                let now = db.now_ms();
                db.write(Durability::OnDisk, move |tx| {
                    journal::mark_handled(tx, id, &journal::Outcome::Failed(message.clone()), now)?;
                    incidents::record(tx, now, "handle", &format!("update {id}: {message}"))
                })
                .await?;
            }
        }
    }
    Ok(all)
}

/// The owner lives in the store (it changes in the same transaction as the pairing update) and
/// is mirrored into `allowedUserId` so the config file stays the reference system's format.
async fn mirror_owner(db: &Db, settings: &WorkerSettings, owner: i64) -> Result<(), HubError> {
    let result = ConfigFile::load(&settings.config_path).and_then(|mut file| {
        file.set_allowed_user_id(&settings.profile, owner);
        file.save()
    });
    if let Err(e) = result {
        let message = format!("could not record the new owner in the config file: {e}");
        tracing::warn!("{message}");
        let now = db.now_ms();
        db.write(Durability::OnDisk, move |tx| {
            incidents::record(tx, now, "config", &message)
        })
        .await?;
    }
    Ok(())
}
