//! The one-time pairing code that makes a person the owner (`/start CODE`).

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// A pairing code's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingState {
    /// Waiting for `/start CODE`.
    Open,
    /// Someone paired with it.
    Used,
    /// Too many wrong attempts.
    Dead,
}

/// The current pairing code (only its hash is stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// SHA-256 of the code, hex.
    pub code_hash: String,
    /// Created.
    pub created_ms: i64,
    /// Valid until.
    pub expires_ms: i64,
    /// Wrong attempts left before the code dies.
    pub attempts_left: i64,
    /// State.
    pub state: PairingState,
}

/// Replaces any pairing code with a fresh one.
pub fn open(
    conn: &Connection,
    code_hash: &str,
    now_ms: i64,
    ttl_ms: i64,
    attempts: i64,
) -> Result<()> {
    conn.exec(
        "INSERT INTO pairing(id, code_hash, created_ms, expires_ms, attempts_left, state)
         VALUES (1, ?1, ?2, ?3, ?4, 'open')
         ON CONFLICT(id) DO UPDATE SET code_hash = excluded.code_hash, created_ms = excluded.created_ms,
            expires_ms = excluded.expires_ms, attempts_left = excluded.attempts_left, state = 'open'",
        params![code_hash, now_ms, now_ms + ttl_ms, attempts],
    )
    .map(drop)
    .map_err(StoreError::sqlite("opening a pairing code"))
}

/// The current code, if any was ever created.
pub fn current(conn: &Connection) -> Result<Option<Pairing>> {
    let row = conn
        .row(
            "SELECT code_hash, created_ms, expires_ms, attempts_left, state FROM pairing WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get::<_, String>(4)?)),
        )
        .optional()
        .map_err(StoreError::sqlite("reading the pairing code"))?;
    row.map(
        |(code_hash, created_ms, expires_ms, attempts_left, state)| {
            let state = match state.as_str() {
                "open" => PairingState::Open,
                "used" => PairingState::Used,
                "dead" => PairingState::Dead,
                other => return Err(StoreError::Corrupt(format!("pairing state {other:?}"))),
            };
            Ok(Pairing {
                code_hash,
                created_ms,
                expires_ms,
                attempts_left,
                state,
            })
        },
    )
    .transpose()
}

/// Counts a wrong attempt; the code dies at zero. Returns the attempts left.
pub fn record_wrong(conn: &Connection) -> Result<i64> {
    conn.exec(
        "UPDATE pairing SET attempts_left = max(attempts_left - 1, 0),
                state = CASE WHEN attempts_left - 1 <= 0 THEN 'dead' ELSE state END
         WHERE id = 1 AND state = 'open'",
        [],
    )
    .map_err(StoreError::sqlite("counting a wrong pairing code"))?;
    Ok(current(conn)?.map_or(0, |p| p.attempts_left))
}

/// The code was used.
pub fn mark_used(conn: &Connection) -> Result<()> {
    conn.exec("UPDATE pairing SET state = 'used' WHERE id = 1", [])
        .map(drop)
        .map_err(StoreError::sqlite("closing the pairing code"))
}
