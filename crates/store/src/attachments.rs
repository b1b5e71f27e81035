//! Files pi sends during a Telegram turn (`telegram_attach`): they wait for the turn's answer
//! and are queued right after it, in the transaction that queues the answer.

use rusqlite::{Connection, params};

use crate::Cached;
use crate::{Result, StoreError};

/// A file waiting for its turn's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub id: i64,
    pub turn_id: i64,
    /// The copy to send.
    pub path: String,
    /// The name the person sees.
    pub name: String,
    /// MIME type.
    pub mime: Option<String>,
    /// Size in bytes.
    pub size: i64,
    pub caption: Option<String>,
}

/// A file to record.
#[derive(Debug, Clone)]
pub struct NewAttachment<'a> {
    pub turn_id: i64,
    /// The copy to send.
    pub path: &'a str,
    /// The name the person sees.
    pub name: &'a str,
    /// MIME type.
    pub mime: Option<&'a str>,
    /// Size in bytes.
    pub size: i64,
    pub caption: Option<&'a str>,
}

/// Records a file for turn `turn_id`'s answer.
pub fn create(conn: &Connection, a: &NewAttachment<'_>, now_ms: i64) -> Result<i64> {
    conn.exec(
        "INSERT INTO attachments(turn_id, path, name, mime, size, caption, state, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'waiting', ?7)",
        params![a.turn_id, a.path, a.name, a.mime, a.size, a.caption, now_ms],
    )
    .map_err(StoreError::sqlite("recording an attachment"))?;
    Ok(conn.last_insert_rowid())
}

/// The files waiting for turn `turn_id`'s answer, in order; they are marked queued.
pub fn take_waiting(conn: &Connection, turn_id: i64) -> Result<Vec<Attachment>> {
    let ctx = "reading attachments";
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, turn_id, path, name, mime, size, caption FROM attachments
             WHERE turn_id = ?1 AND state = 'waiting' ORDER BY id",
        )
        .map_err(StoreError::sqlite(ctx))?;
    let list = stmt
        .query_map([turn_id], |r| {
            Ok(Attachment {
                id: r.get(0)?,
                turn_id: r.get(1)?,
                path: r.get(2)?,
                name: r.get(3)?,
                mime: r.get(4)?,
                size: r.get(5)?,
                caption: r.get(6)?,
            })
        })
        .map_err(StoreError::sqlite(ctx))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite(ctx))?;
    conn.exec(
        "UPDATE attachments SET state = 'queued' WHERE turn_id = ?1 AND state = 'waiting'",
        [turn_id],
    )
    .map_err(StoreError::sqlite("queueing attachments"))?;
    Ok(list)
}
