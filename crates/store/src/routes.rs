//! Which instance each bot message speaks for, so replies and button presses route by the
//! message they refer to. A route lives for the retention period after it was recorded or last
//! replied to (`used_ms`); a reply to a message whose route was pruned takes the normal route
//! (the topic's pi, the selection, or the person's choice). See [`crate::retention`].

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// Remembers that message `message_id` in `chat_id` came from `identity`'s turn.
pub fn record(
    conn: &Connection,
    chat_id: i64,
    message_id: i64,
    identity: &str,
    turn_id: Option<i64>,
    now_ms: i64,
) -> Result<()> {
    conn.exec(
        "INSERT INTO message_routes(chat_id, message_id, identity, turn_id, used_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(chat_id, message_id) DO UPDATE SET identity = excluded.identity,
            turn_id = excluded.turn_id, used_ms = excluded.used_ms",
        params![chat_id, message_id, identity, turn_id, now_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording a message route"))
}

/// The identity a message speaks for.
pub fn lookup(conn: &Connection, chat_id: i64, message_id: i64) -> Result<Option<String>> {
    conn.row(
        "SELECT identity FROM message_routes WHERE chat_id = ?1 AND message_id = ?2",
        params![chat_id, message_id],
        |r| r.get(0),
    )
    .optional()
    .map_err(StoreError::sqlite("reading a message route"))
}

/// The person replied to this message: its route is in use and stays another retention period.
pub fn used(conn: &Connection, chat_id: i64, message_id: i64, now_ms: i64) -> Result<()> {
    conn.exec(
        "UPDATE message_routes SET used_ms = max(coalesce(used_ms, ?3), ?3)
         WHERE chat_id = ?1 AND message_id = ?2",
        params![chat_id, message_id, now_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("marking a message route used"))
}
