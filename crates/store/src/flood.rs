//! Flood waits (`429 retry after N`), persisted so a restart honours a running penalty.

use rusqlite::{Connection, params};

use crate::Cached;
use crate::{Result, StoreError};

/// A recorded flood wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloodWait {
    /// `global` or `chat:<id>`.
    pub scope: String,
    /// Ends at.
    pub until_ms: i64,
    /// The `retry_after` Telegram gave.
    pub retry_after_s: i64,
    /// When it was recorded.
    pub recorded_ms: i64,
}

/// Records a wait (keeps the later end when one is running).
pub fn record(
    conn: &Connection,
    scope: &str,
    until_ms: i64,
    retry_after_s: i64,
    now_ms: i64,
) -> Result<()> {
    conn.exec(
        "INSERT INTO flood_waits(scope, until_ms, retry_after_s, recorded_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(scope) DO UPDATE SET
            retry_after_s = CASE WHEN excluded.until_ms > until_ms THEN excluded.retry_after_s ELSE retry_after_s END,
            recorded_ms = CASE WHEN excluded.until_ms > until_ms THEN excluded.recorded_ms ELSE recorded_ms END,
            until_ms = max(until_ms, excluded.until_ms)",
        params![scope, until_ms, retry_after_s, now_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording a flood wait"))
}

/// Waits still running at `now_ms`.
pub fn active(conn: &Connection, now_ms: i64) -> Result<Vec<FloodWait>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT scope, until_ms, retry_after_s, recorded_ms FROM flood_waits WHERE until_ms > ?1 ORDER BY scope",
        )
        .map_err(StoreError::sqlite("reading flood waits"))?;
    let rows = stmt
        .query_map([now_ms], |r| {
            Ok(FloodWait {
                scope: r.get(0)?,
                until_ms: r.get(1)?,
                retry_after_s: r.get(2)?,
                recorded_ms: r.get(3)?,
            })
        })
        .map_err(StoreError::sqlite("reading flood waits"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("reading flood waits"))
}
