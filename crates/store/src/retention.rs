//! Retention: what recovery no longer needs leaves the state database, so its size follows the
//! traffic of the last period, not the traffic since the first start.
//!
//! Each call of [`prune`] removes at most one small batch of one table in the caller's
//! transaction; the hub commits every batch on its own (`hub::retention`), so the one writer is
//! never held for long and a crash between batches loses nothing: every batch is whole or not
//! at all, and no batch leaves a reference that recovery would follow to a missing row.
//!
//! The rules, per table (`before` = now - the age, at least [`MIN_AGE_MS`]):
//!
//! | table | goes | stays, whatever its age |
//! |---|---|---|
//! | `journal` | handled before `before` | unhandled entries (the worker's work) |
//! | `outbox` | `sent` or `failed`, last changed before `before` | `pending` (parked ones too), `sending`, `ambiguous` |
//! | `turns` (with their `files` and `attachments`) | `done`, `cancelled`, `interrupted`, finished before `before` | open turns (`queued`, `dispatched`, `acked`); a turn with a downloaded copy not removed yet (the inbound cleanup finds copies through its rows), with an outbox row that may still be sent, or with an open control |
//! | `message_routes` | recorded or last replied to before `before` | routes of open turns; routes from before schema 10 get a full period from the first pass |
//! | `callbacks` | expired (an expired button answers as an unknown one does) | unexpired buttons |
//! | `controls` | `done` before `before` | `pending`, `sent` |
//! | `instances` | gone before `before`, with a newer instance of the same identity | the newest instance of each identity (a returning pi's name and pid), instances of open turns, bindings or intents |
//! | `cleanups` | `done` before `before` | pending ones (the reconciler's work) |
//! | `flood_waits` | ended before `before` | running waits |
//!
//! Files the hub made to send (`telegram_attach`'s copies, spoken answers) are removed by the
//! hub once their row is settled, and by its retention when a crash left one behind; neither
//! removes a file that [`files_in_use`] names: one an unsent row still needs.
//!
//! Every finished state sets the time these rules read (`handled_ms`, `updated_ms`, `done_ms`);
//! a row without one is kept. Each batch finds its rows through a partial index on that time
//! (schema 10), so it costs what it removes.
//!
//! Counts that `status` reports (handled updates, turns and outbox rows by state, copies sent
//! again) keep what was pruned in `kv`, in the transaction that prunes.

use std::collections::BTreeSet;

use rusqlite::{Connection, params};

use crate::{Result, StoreError, kv};

/// The smallest age honoured, whatever is configured: the Threaded Mode reconciler leaves a
/// topic alone while a turn shows it was written in during the last 30 s
/// (`threads::reconcile::RECENTLY_OPEN_MS`), so such turns must outlive that window.
pub const MIN_AGE_MS: i64 = 60_000;

/// Rows per batch: small enough that a batch's transaction is short.
pub const BATCH: usize = 500;

/// A table retention prunes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// Handled updates.
    Journal,
    /// Sent and failed messages.
    Outbox,
    /// Finished turns, with their files and attachments.
    Turns,
    /// Reply routes no longer used.
    Routes,
    /// Expired buttons.
    Callbacks,
    /// Controls carried out.
    Controls,
    /// Instances long gone.
    Instances,
    /// Topic cleanups done.
    Cleanups,
    /// Flood waits that ended.
    FloodWaits,
}

impl Table {
    /// Every table, in the order a pass prunes them.
    pub const ALL: [Table; 9] = [
        Self::Journal,
        Self::Outbox,
        Self::Turns,
        Self::Routes,
        Self::Callbacks,
        Self::Controls,
        Self::Instances,
        Self::Cleanups,
        Self::FloodWaits,
    ];

    /// The table's name (logs).
    pub fn name(self) -> &'static str {
        match self {
            Self::Journal => "journal",
            Self::Outbox => "outbox",
            Self::Turns => "turns",
            Self::Routes => "message_routes",
            Self::Callbacks => "callbacks",
            Self::Controls => "controls",
            Self::Instances => "instances",
            Self::Cleanups => "cleanups",
            Self::FloodWaits => "flood_waits",
        }
    }
}

/// When a pass runs and what "old" means then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Horizon {
    pub now_ms: i64,
    /// Rows that finished before this are old.
    pub before_ms: i64,
}

impl Horizon {
    /// Rows older than `age_ms` at `now_ms` (an age under [`MIN_AGE_MS`] counts as that).
    pub fn new(now_ms: i64, age_ms: i64) -> Self {
        Self {
            now_ms,
            before_ms: now_ms.saturating_sub(age_ms.max(MIN_AGE_MS)),
        }
    }
}

/// Prunes one batch (at most `limit` rows) of `table` in the caller's transaction. Returns how
/// many rows it changed; fewer than `limit` means nothing more is old at this horizon. For
/// routes, stamping a route from before schema 10 with the time it was first seen counts too.
pub fn prune(conn: &Connection, table: Table, at: Horizon, limit: usize) -> Result<usize> {
    let limit = limit as i64;
    match table {
        Table::Journal => journal(conn, at, limit),
        Table::Outbox => outbox(conn, at, limit),
        Table::Turns => turns(conn, at, limit),
        Table::Routes => routes(conn, at, limit),
        Table::Callbacks => delete(
            conn,
            "callbacks",
            "DELETE FROM callbacks WHERE rowid IN (SELECT rowid FROM callbacks
               WHERE expires_ms < ?1 ORDER BY expires_ms LIMIT ?2)",
            params![at.now_ms, limit],
        ),
        Table::Controls => delete(
            conn,
            "controls",
            "DELETE FROM controls WHERE id IN (SELECT id FROM controls
               WHERE state = 'done' AND done_ms < ?1 ORDER BY done_ms LIMIT ?2)",
            params![at.before_ms, limit],
        ),
        Table::Instances => delete(
            conn,
            "instances",
            "DELETE FROM instances WHERE rowid IN (SELECT i.rowid FROM instances i
               WHERE i.state = 'gone' AND coalesce(i.gone_ms, i.connected_ms) < ?1
                 AND EXISTS (SELECT 1 FROM instances n WHERE n.identity = i.identity
                             AND (n.connected_ms > i.connected_ms
                                  OR (n.connected_ms = i.connected_ms AND n.id > i.id)))
                 AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.instance_id = i.id
                                 AND t.state IN ('queued', 'dispatched', 'acked'))
                 AND NOT EXISTS (SELECT 1 FROM bindings b WHERE b.instance_id = i.id)
                 AND NOT EXISTS (SELECT 1 FROM intents x WHERE x.instance_id = i.id)
               ORDER BY i.connected_ms LIMIT ?2)",
            params![at.before_ms, limit],
        ),
        Table::Cleanups => delete(
            conn,
            "cleanups",
            "DELETE FROM cleanups WHERE id IN (SELECT id FROM cleanups
               WHERE state = 'done' AND coalesce(done_ms, created_ms) < ?1 ORDER BY id LIMIT ?2)",
            params![at.before_ms, limit],
        ),
        Table::FloodWaits => delete(
            conn,
            "flood_waits",
            "DELETE FROM flood_waits WHERE rowid IN (SELECT rowid FROM flood_waits
               WHERE until_ms < ?1 LIMIT ?2)",
            params![at.before_ms, limit],
        ),
    }
}

/// The files unsent rows still need: every `path` in the delivery (every message of it) of a
/// `pending` or `sending` outbox row (the files it uploads, now or in a later message), and the
/// copies of attachments waiting for the answer of a turn still open. `ambiguous` rows are not
/// sent again, nor are the attachments of a turn that finished without taking them, so they
/// need none.
pub fn files_in_use(conn: &Connection) -> Result<BTreeSet<String>> {
    let ctx = "reading the files unsent rows need";
    conn.prepare_cached(
        "SELECT t.atom FROM outbox o, json_tree(o.delivery) t
           WHERE o.state IN ('pending', 'sending') AND t.key = 'path' AND t.type = 'text'
         UNION
         SELECT a.path FROM attachments a JOIN turns t ON t.id = a.turn_id
           WHERE a.state = 'waiting' AND t.state IN ('queued', 'dispatched', 'acked')",
    )
    .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
    .map_err(StoreError::sqlite(ctx))
}

fn delete(conn: &Connection, table: &str, sql: &str, args: impl rusqlite::Params) -> Result<usize> {
    conn.prepare_cached(sql)
        .and_then(|mut s| s.execute(args))
        .map_err(StoreError::sqlite(format!("pruning {table}")))
}

/// Adds `n` to the counter `key` (what `status` counts although the rows are gone).
fn count(conn: &Connection, key: &str, n: i64) -> Result<()> {
    if n != 0 {
        let total = kv::get_i64(conn, key)?.unwrap_or(0) + n;
        kv::set_i64(conn, key, total)?;
    }
    Ok(())
}

/// The counter of pruned rows of `table` in `state`.
pub(crate) fn pruned_key(table: &str, state: &str) -> String {
    format!("pruned.{table}.{state}")
}

/// The pruned rows of `table` in `state` so far.
pub(crate) fn pruned(conn: &Connection, table: &str, state: &str) -> Result<i64> {
    Ok(kv::get_i64(conn, &pruned_key(table, state))?.unwrap_or(0))
}

fn journal(conn: &Connection, at: Horizon, limit: i64) -> Result<usize> {
    let n = delete(
        conn,
        "the journal",
        "DELETE FROM journal WHERE update_id IN (SELECT update_id FROM journal
           WHERE handled_ms IS NOT NULL AND handled_ms < ?1 ORDER BY handled_ms LIMIT ?2)",
        params![at.before_ms, limit],
    )?;
    count(conn, crate::journal::PRUNED, n as i64)?;
    Ok(n)
}

fn outbox(conn: &Connection, at: Horizon, limit: i64) -> Result<usize> {
    let ctx = "pruning the outbox";
    let old: Vec<(i64, String, i64)> = conn
        .prepare_cached(
            "SELECT id, state, resent FROM outbox
             WHERE state IN ('sent', 'failed') AND updated_ms < ?1 ORDER BY updated_ms LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![at.before_ms, limit], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect()
        })
        .map_err(StoreError::sqlite(ctx))?;
    let mut del = conn
        .prepare_cached("DELETE FROM outbox WHERE id = ?1")
        .map_err(StoreError::sqlite(ctx))?;
    let (mut sent, mut failed, mut resent) = (0, 0, 0);
    for (id, state, r) in &old {
        del.execute([id]).map_err(StoreError::sqlite(ctx))?;
        if state == "sent" {
            sent += 1;
        } else {
            failed += 1;
        }
        resent += r;
    }
    count(conn, &pruned_key("outbox", "sent"), sent)?;
    count(conn, &pruned_key("outbox", "failed"), failed)?;
    count(conn, &pruned_key("outbox", "resent"), resent)?;
    Ok(old.len())
}

fn turns(conn: &Connection, at: Horizon, limit: i64) -> Result<usize> {
    let ctx = "pruning turns";
    let old: Vec<(i64, String)> = conn
        .prepare_cached(
            "SELECT id, state FROM turns t
             WHERE state IN ('done', 'cancelled', 'interrupted') AND done_ms < ?1
               AND NOT EXISTS (SELECT 1 FROM files f WHERE f.turn_id = t.id
                               AND f.state = 'saved' AND f.path IS NOT NULL)
               AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.turn_id = t.id
                               AND o.state IN ('pending', 'sending'))
               AND NOT EXISTS (SELECT 1 FROM controls c WHERE c.turn_id = t.id
                               AND c.state != 'done')
             ORDER BY done_ms LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![at.before_ms, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(StoreError::sqlite(ctx))?;
    // A turn's files and attachments go with it: nothing reads them once it is finished, and
    // none is left behind pointing at a missing turn.
    for sql in [
        "DELETE FROM files WHERE turn_id = ?1",
        "DELETE FROM attachments WHERE turn_id = ?1",
        "DELETE FROM turns WHERE id = ?1",
    ] {
        let mut stmt = conn.prepare_cached(sql).map_err(StoreError::sqlite(ctx))?;
        for (id, _) in &old {
            stmt.execute([id]).map_err(StoreError::sqlite(ctx))?;
        }
    }
    for state in ["done", "cancelled", "interrupted"] {
        let n = old.iter().filter(|(_, s)| s == state).count() as i64;
        count(conn, &pruned_key("turns", state), n)?;
    }
    Ok(old.len())
}

fn routes(conn: &Connection, at: Horizon, limit: i64) -> Result<usize> {
    // Routes recorded before schema 10 have no time: they count from the first pass that sees
    // them, so none goes before a full period has passed.
    let stamped = delete(
        conn,
        "message routes",
        "UPDATE message_routes SET used_ms = ?1 WHERE rowid IN (SELECT rowid FROM message_routes
           WHERE used_ms IS NULL LIMIT ?2)",
        params![at.now_ms, limit],
    )?;
    let pruned = delete(
        conn,
        "message routes",
        "DELETE FROM message_routes WHERE rowid IN (SELECT r.rowid FROM message_routes r
           WHERE r.used_ms < ?1
             AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = r.turn_id
                             AND t.state IN ('queued', 'dispatched', 'acked'))
           ORDER BY r.used_ms LIMIT ?2)",
        params![at.before_ms, limit],
    )?;
    Ok(stamped + pruned)
}
