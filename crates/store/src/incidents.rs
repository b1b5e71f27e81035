//! Recent errors worth showing in `pi-telegram status` (never message content, never tokens).

use rusqlite::{Connection, params};

use crate::Cached;
use crate::{Result, StoreError};

/// How many incidents are kept.
pub const KEEP: i64 = 50;

/// One incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    /// When.
    pub at_ms: i64,
    /// Where (`poll`, `send`, ...).
    pub context: String,
    /// What.
    pub message: String,
}

/// Records an incident, keeping the last [`KEEP`].
pub fn record(conn: &Connection, at_ms: i64, context: &str, message: &str) -> Result<()> {
    conn.exec(
        "INSERT INTO incidents(at_ms, context, message) VALUES (?1, ?2, ?3)",
        params![at_ms, context, message],
    )
    .map_err(StoreError::sqlite("recording an incident"))?;
    conn.exec(
        "DELETE FROM incidents WHERE id <= (SELECT max(id) FROM incidents) - ?1",
        [KEEP],
    )
    .map(drop)
    .map_err(StoreError::sqlite("trimming incidents"))
}

/// The last `n` incidents, newest first.
pub fn recent(conn: &Connection, n: i64) -> Result<Vec<Incident>> {
    let mut stmt = conn
        .prepare_cached("SELECT at_ms, context, message FROM incidents ORDER BY id DESC LIMIT ?1")
        .map_err(StoreError::sqlite("reading incidents"))?;
    let rows = stmt
        .query_map([n], |r| {
            Ok(Incident {
                at_ms: r.get(0)?,
                context: r.get(1)?,
                message: r.get(2)?,
            })
        })
        .map_err(StoreError::sqlite("reading incidents"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("reading incidents"))
}
