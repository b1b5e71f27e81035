//! The profile lease: every hub start takes a new, larger epoch. Steps that must not be done by
//! a hub that lost the lease check, inside their committing transaction, that their epoch is
//! still the current one.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// A lease epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub i64);

/// The current holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub epoch: Epoch,
    pub holder_pid: i64,
    /// Since.
    pub acquired_ms: i64,
}

/// Takes the lease with a new epoch.
pub fn acquire(conn: &Connection, pid: i64, now_ms: i64) -> Result<Epoch> {
    conn.exec(
        "INSERT INTO lease(id, epoch, holder_pid, acquired_ms) VALUES (1, 1, ?1, ?2)
         ON CONFLICT(id) DO UPDATE SET epoch = epoch + 1, holder_pid = excluded.holder_pid,
            acquired_ms = excluded.acquired_ms",
        params![pid, now_ms],
    )
    .map_err(StoreError::sqlite("taking the lease"))?;
    current(conn)?
        .map(|l| l.epoch)
        .ok_or_else(|| StoreError::Corrupt("lease vanished".into()))
}

/// The current lease.
pub fn current(conn: &Connection) -> Result<Option<Lease>> {
    conn.row(
        "SELECT epoch, holder_pid, acquired_ms FROM lease WHERE id = 1",
        [],
        |r| {
            Ok(Lease {
                epoch: Epoch(r.get(0)?),
                holder_pid: r.get(1)?,
                acquired_ms: r.get(2)?,
            })
        },
    )
    .optional()
    .map_err(StoreError::sqlite("reading the lease"))
}

/// Whether `epoch` is still current (call inside the committing transaction).
pub fn is_current(conn: &Connection, epoch: Epoch) -> Result<bool> {
    Ok(current(conn)?.is_some_and(|l| l.epoch == epoch))
}
