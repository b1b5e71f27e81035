//! Callback data is attacker-controlled and limited to 64 bytes, so buttons carry an opaque
//! short token; the action lives here, bound to the owner, with an expiry.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// Stores an action under `token`.
pub fn create(
    conn: &Connection,
    token: &str,
    owner: i64,
    action: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<()> {
    conn.exec(
        "INSERT INTO callbacks(token, owner, action, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![token, owner, action, now_ms, now_ms + ttl_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("storing a button"))?;
    conn.exec("DELETE FROM callbacks WHERE expires_ms < ?1", [now_ms])
        .map(drop)
        .map_err(StoreError::sqlite("expiring buttons"))
}

/// The action of `token` if it belongs to `owner` and has not expired.
pub fn lookup(conn: &Connection, token: &str, owner: i64, now_ms: i64) -> Result<Option<String>> {
    conn.row(
        "SELECT action FROM callbacks WHERE token = ?1 AND owner = ?2 AND expires_ms > ?3",
        params![token, owner, now_ms],
        |r| r.get(0),
    )
    .optional()
    .map_err(StoreError::sqlite("reading a button"))
}

/// Replaces the action behind `token` (a settled question's buttons only say how it was
/// settled, however often their data is sent again). `false` when there was no such token.
pub fn replace(conn: &Connection, token: &str, action: &str) -> Result<bool> {
    conn.exec(
        "UPDATE callbacks SET action = ?2 WHERE token = ?1",
        params![token, action],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("settling a button"))
}

/// Forgets every button bound to `user` (someone removed: their old buttons do nothing, even
/// if they are invited again). Returns how many there were.
pub fn forget_user(conn: &Connection, user: i64) -> Result<usize> {
    conn.exec("DELETE FROM callbacks WHERE owner = ?1", [user])
        .map_err(StoreError::sqlite("forgetting a person's buttons"))
}
