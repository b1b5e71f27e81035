//! Owner messages kept for the pi instance that will take them.

use rusqlite::{Connection, params};

use crate::{Result, StoreError};

/// A kept message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The journaled update carrying it.
    pub update_id: i64,
    /// Chat.
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    /// Message id.
    pub message_id: i64,
    /// When it arrived.
    pub received_ms: i64,
}

/// Keeps a message.
pub fn insert(conn: &Connection, h: &Held) -> Result<()> {
    conn.execute(
        "INSERT INTO held(update_id, chat_id, thread_id, message_id, received_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![h.update_id, h.chat_id, h.thread_id, h.message_id, h.received_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("keeping a message"))
}

/// How many messages are kept.
pub fn count(conn: &Connection) -> Result<i64> {
    conn.query_row("SELECT count(*) FROM held", [], |r| r.get(0))
        .map_err(StoreError::sqlite("counting kept messages"))
}

/// Every kept message, oldest first.
pub fn list(conn: &Connection) -> Result<Vec<Held>> {
    let mut stmt = conn
        .prepare_cached("SELECT update_id, chat_id, thread_id, message_id, received_ms FROM held ORDER BY update_id")
        .map_err(StoreError::sqlite("reading kept messages"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Held {
                update_id: r.get(0)?,
                chat_id: r.get(1)?,
                thread_id: r.get(2)?,
                message_id: r.get(3)?,
                received_ms: r.get(4)?,
            })
        })
        .map_err(StoreError::sqlite("reading kept messages"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("reading kept messages"))
}
