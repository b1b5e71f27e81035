//! The one-time pairing code that makes a person the owner (`/start CODE`). Wrong codes are
//! counted per sender: each sender has their own attempts with a code, so nobody's guesses
//! spend anybody else's, and a code ends only by its use or its expiry.

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
    /// Too many wrong attempts (a code's state before wrong attempts were counted per sender,
    /// schema version 11; no code dies so now).
    Dead,
}

/// The current pairing code (only its hash is stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// SHA-256 of the code, hex.
    pub code_hash: String,
    pub created_ms: i64,
    /// Valid until.
    pub expires_ms: i64,
    /// Wrong attempts each sender may make with this code (stored as `attempts_left`, the
    /// attempts left of the code itself before schema version 11).
    pub attempts_per_sender: i64,
    pub state: PairingState,
}

/// Replaces any pairing code with a fresh one, on which every sender has `attempts` wrong
/// attempts again.
pub fn open(
    conn: &Connection,
    code_hash: &str,
    now_ms: i64,
    ttl_ms: i64,
    attempts: i64,
) -> Result<()> {
    forget_attempts(conn)?;
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
        |(code_hash, created_ms, expires_ms, attempts_per_sender, state)| {
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
                attempts_per_sender,
                state,
            })
        },
    )
    .transpose()
}

/// Counts a wrong attempt of `user` on the open code. Returns the attempts `user` has left
/// with it (never below zero: further attempts are counted, and refused by [`attempts_left`]).
pub fn record_wrong(conn: &Connection, user: i64, now_ms: i64) -> Result<i64> {
    conn.exec(
        "INSERT INTO pairing_attempts(user_id, wrong, first_ms, last_ms) VALUES (?1, 1, ?2, ?2)
         ON CONFLICT(user_id) DO UPDATE SET wrong = wrong + 1, last_ms = excluded.last_ms",
        params![user, now_ms],
    )
    .map_err(StoreError::sqlite("counting a wrong pairing code"))?;
    attempts_left(conn, user)
}

/// The wrong attempts `user` may still make with the current code (0: refused).
pub fn attempts_left(conn: &Connection, user: i64) -> Result<i64> {
    conn.row(
        "SELECT max(p.attempts_left - coalesce(
                    (SELECT wrong FROM pairing_attempts WHERE user_id = ?1), 0), 0)
         FROM pairing p WHERE p.id = 1",
        [user],
        |r| r.get(0),
    )
    .optional()
    .map(Option::unwrap_or_default)
    .map_err(StoreError::sqlite("reading a sender's pairing attempts"))
}

/// What the senders did with the current code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Wrong codes sent, in all.
    pub wrong: i64,
    /// Senders who sent at least one.
    pub senders: i64,
    /// Senders who used up their attempts (refused, and no longer answered).
    pub refused: i64,
}

/// [`Attempts`] for the current code.
pub fn attempts(conn: &Connection) -> Result<Attempts> {
    conn.row(
        "SELECT coalesce(sum(a.wrong), 0), count(*),
                coalesce(sum(a.wrong >= (SELECT attempts_left FROM pairing WHERE id = 1)), 0)
         FROM pairing_attempts a",
        [],
        |r| {
            Ok(Attempts {
                wrong: r.get(0)?,
                senders: r.get(1)?,
                refused: r.get(2)?,
            })
        },
    )
    .map_err(StoreError::sqlite("counting pairing attempts"))
}

fn forget_attempts(conn: &Connection) -> Result<()> {
    conn.exec("DELETE FROM pairing_attempts", [])
        .map(drop)
        .map_err(StoreError::sqlite("forgetting pairing attempts"))
}

/// The code was used (nobody's attempts matter any more).
pub fn mark_used(conn: &Connection) -> Result<()> {
    forget_attempts(conn)?;
    conn.exec("UPDATE pairing SET state = 'used' WHERE id = 1", [])
        .map(drop)
        .map_err(StoreError::sqlite("closing the pairing code"))
}
