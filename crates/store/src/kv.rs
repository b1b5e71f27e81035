//! Small named values: the poll offset, the owner, the bot's identity, notice episodes.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// Key of the next `getUpdates` offset.
pub const OFFSET: &str = "poll.offset";
/// Key of the owner's user id.
pub const OWNER: &str = "owner.user_id";
/// Key of the bot's user id (the state belongs to this bot).
pub const BOT_ID: &str = "bot.id";
/// Key of the bot's username (from the last `getMe`).
pub const BOT_USERNAME: &str = "bot.username";
/// Key of `getMe.has_topics_enabled` (from the last `getMe`).
pub const BOT_TOPICS: &str = "bot.has_topics_enabled";
/// Key of who started the running (or last) hub: `service`, `extension` or `shell`.
pub const HUB_STARTED_BY: &str = "hub.started_by";
/// The running (else the last) hub's release.
pub const HUB_VERSION: &str = "hub.version";
/// The running (else the last) hub's executable.
pub const HUB_BINARY: &str = "hub.binary";
/// Key of when the running (or last) hub started (Unix ms).
pub const HUB_STARTED_MS: &str = "hub.started_ms";

/// Key of the state database's own id, made once with it (`Welcome::store_id`).
pub const STORE_ID: &str = "store.id";

/// Reads a value.
pub fn get(conn: &Connection, key: &str) -> Result<Option<String>> {
    conn.row("SELECT value FROM kv WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .map_err(StoreError::sqlite(format!("reading {key}")))
}

/// Writes a value.
pub fn set(conn: &Connection, key: &str, value: &str) -> Result<()> {
    conn.exec(
        "INSERT INTO kv(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )
    .map(drop)
    .map_err(StoreError::sqlite(format!("writing {key}")))
}

/// Removes a value.
pub fn delete(conn: &Connection, key: &str) -> Result<()> {
    conn.exec("DELETE FROM kv WHERE key = ?1", [key])
        .map(drop)
        .map_err(StoreError::sqlite(format!("removing {key}")))
}

/// Reads an integer value.
pub fn get_i64(conn: &Connection, key: &str) -> Result<Option<i64>> {
    match get(conn, key)? {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| StoreError::Corrupt(format!("{key} is not a number: {v:?}"))),
    }
}

/// Writes an integer value.
pub fn set_i64(conn: &Connection, key: &str, value: i64) -> Result<()> {
    set(conn, key, &value.to_string())
}
