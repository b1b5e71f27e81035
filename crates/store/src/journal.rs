//! The inbound journal: every update stored before its offset is confirmed, handled in order,
//! marked handled in the same transaction as its effects.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError, kv};

/// A journaled update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `update_id`.
    pub update_id: i64,
    /// The update's kind (`message`, `callback_query`, ...).
    pub kind: String,
    /// The update exactly as Telegram sent it.
    pub raw: String,
    /// When it was journaled.
    pub received_ms: i64,
}

/// An update to journal.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    /// `update_id`.
    pub update_id: i64,
    /// Its kind.
    pub kind: &'a str,
    /// Its JSON.
    pub raw: &'a str,
}

/// Stores a `getUpdates` batch and the offset that confirms it, in the caller's transaction:
/// the offset only moves together with the updates it confirms. Returns how many were new
/// (an update already journaled is kept as it was).
pub fn append_batch(
    conn: &Connection,
    batch: &[Incoming<'_>],
    new_offset: i64,
    now_ms: i64,
) -> Result<usize> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO journal(update_id, kind, raw, received_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(update_id) DO NOTHING",
        )
        .map_err(StoreError::sqlite("journaling updates"))?;
    let mut added = 0;
    for u in batch {
        added += stmt
            .execute(params![u.update_id, u.kind, u.raw, now_ms])
            .map_err(StoreError::sqlite("journaling updates"))?;
    }
    let current = kv::get_i64(conn, kv::OFFSET)?.unwrap_or(i64::MIN);
    if new_offset > current {
        kv::set_i64(conn, kv::OFFSET, new_offset)?;
    }
    Ok(added)
}

/// The next `getUpdates` offset, if any update was ever journaled.
pub fn offset(conn: &Connection) -> Result<Option<i64>> {
    kv::get_i64(conn, kv::OFFSET)
}

/// Up to `limit` unhandled updates, oldest first.
pub fn pending(conn: &Connection, limit: usize) -> Result<Vec<Entry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT update_id, kind, raw, received_ms FROM journal
             WHERE handled_ms IS NULL ORDER BY update_id LIMIT ?1",
        )
        .map_err(StoreError::sqlite("reading the journal"))?;
    let rows = stmt
        .query_map([limit as i64], |r| {
            Ok(Entry {
                update_id: r.get(0)?,
                kind: r.get(1)?,
                raw: r.get(2)?,
                received_ms: r.get(3)?,
            })
        })
        .map_err(StoreError::sqlite("reading the journal"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("reading the journal"))
}

/// Marks an update handled with its outcome. Handling one twice is a broken invariant and an
/// error (the caller's transaction then rolls back).
pub fn mark_handled(conn: &Connection, update_id: i64, outcome: &str, now_ms: i64) -> Result<()> {
    let changed = conn
        .exec(
            "UPDATE journal SET handled_ms = ?2, outcome = ?3 WHERE update_id = ?1 AND handled_ms IS NULL",
            params![update_id, now_ms, outcome],
        )
        .map_err(StoreError::sqlite("marking an update handled"))?;
    if changed != 1 {
        return Err(StoreError::Corrupt(format!(
            "update {update_id} is not pending in the journal (handled twice?)"
        )));
    }
    Ok(())
}

/// How an update was handled: `(handled_ms, outcome)`, `None` while pending or unknown.
pub fn outcome(conn: &Connection, update_id: i64) -> Result<Option<(i64, String)>> {
    conn.row(
        "SELECT handled_ms, outcome FROM journal WHERE update_id = ?1 AND handled_ms IS NOT NULL",
        [update_id],
        |r| {
            Ok((
                r.get(0)?,
                r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        },
    )
    .optional()
    .map_err(StoreError::sqlite("reading an outcome"))
}

/// `(pending, handled)`; `handled` includes entries pruned since.
pub fn counts(conn: &Connection) -> Result<(i64, i64)> {
    let (pending, handled): (i64, i64) = conn
        .row(
            "SELECT count(*) FILTER (WHERE handled_ms IS NULL), count(*) FILTER (WHERE handled_ms IS NOT NULL) FROM journal",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(StoreError::sqlite("counting the journal"))?;
    let pruned = kv::get_i64(conn, PRUNED)?.unwrap_or(0);
    Ok((pending, handled + pruned))
}

/// Handled entries pruned so far (`retention`), still counted as handled.
pub(crate) const PRUNED: &str = "journal.pruned_handled";

/// The first unhandled update after `update_id`, if it is journaled already (a handler may
/// look one step ahead: a comment the person sent right before a forward).
pub fn next_after(conn: &Connection, update_id: i64) -> Result<Option<Entry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT update_id, kind, raw, received_ms FROM journal
             WHERE handled_ms IS NULL AND update_id > ?1 ORDER BY update_id LIMIT 1",
        )
        .map_err(StoreError::sqlite("reading the journal"))?;
    let mut rows = stmt
        .query_map([update_id], |r| {
            Ok(Entry {
                update_id: r.get(0)?,
                kind: r.get(1)?,
                raw: r.get(2)?,
                received_ms: r.get(3)?,
            })
        })
        .map_err(StoreError::sqlite("reading the journal"))?;
    rows.next()
        .transpose()
        .map_err(StoreError::sqlite("reading the journal"))
}
