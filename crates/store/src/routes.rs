//! Which instance each bot message speaks for, so replies and button presses route by the
//! message they refer to.

use rusqlite::{Connection, OptionalExtension, params};

use crate::{Result, StoreError};

/// Remembers that message `message_id` in `chat_id` came from `identity`'s turn.
pub fn record(
    conn: &Connection,
    chat_id: i64,
    message_id: i64,
    identity: &str,
    turn_id: Option<i64>,
) -> Result<()> {
    conn.execute(
        "INSERT INTO message_routes(chat_id, message_id, identity, turn_id) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(chat_id, message_id) DO UPDATE SET identity = excluded.identity, turn_id = excluded.turn_id",
        params![chat_id, message_id, identity, turn_id],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording a message route"))
}

/// The identity a message speaks for.
pub fn lookup(conn: &Connection, chat_id: i64, message_id: i64) -> Result<Option<String>> {
    conn.query_row(
        "SELECT identity FROM message_routes WHERE chat_id = ?1 AND message_id = ?2",
        params![chat_id, message_id],
        |r| r.get(0),
    )
    .optional()
    .map_err(StoreError::sqlite("reading a message route"))
}
