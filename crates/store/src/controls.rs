//! Controls: what the person asked of a pi beyond prompts (abort, compact, open a menu, switch
//! the model...). A handler records one in the transaction that handles the update; the
//! conductor carries it out and marks it done in the transaction that records what the bot
//! says about it. `pending -> done`, or `pending -> sent -> done` for an effect that must not be
//! repeated blindly (a compaction).

use rusqlite::{Connection, Row, params};
use serde_json::Value;

use crate::Cached;
use crate::{Result, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlState {
    /// Not carried out yet.
    Pending,
    /// Handed to pi; its outcome is not recorded yet.
    Sent,
    /// Carried out.
    Done,
}

impl ControlState {
    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pending" => Self::Pending,
            "sent" => Self::Sent,
            "done" => Self::Done,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown control state {other:?}"
                )));
            }
        })
    }
}

#[derive(Debug, Clone)]
pub struct NewControl<'a> {
    /// The update that asked for it (with `kind`, at most one control per update).
    pub source_update_id: Option<i64>,
    /// What it is (`abort`, `compact`, `menu`, ...).
    pub kind: &'a str,
    /// The instance it acts on.
    pub identity: Option<&'a str>,
    /// The turn it is about (an abort aborts only that turn).
    pub turn_id: Option<i64>,
    /// Where to answer.
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    /// The message to edit (a menu) or reply to.
    pub message_id: Option<i64>,
    /// Its parameters.
    pub params: &'a Value,
}

/// A stored control.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    pub id: i64,
    /// The update that asked for it.
    pub source_update_id: Option<i64>,
    pub kind: String,
    /// Instance.
    pub identity: Option<String>,
    pub turn_id: Option<i64>,
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    pub message_id: Option<i64>,
    /// Parameters.
    pub params: Value,
    pub state: ControlState,
    /// When it was recorded.
    pub created_ms: i64,
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<(Control, String, String)> {
    Ok((
        Control {
            id: r.get(0)?,
            source_update_id: r.get(1)?,
            kind: r.get(2)?,
            identity: r.get(3)?,
            turn_id: r.get(4)?,
            chat_id: r.get(5)?,
            thread_id: r.get(6)?,
            message_id: r.get(7)?,
            params: Value::Null,
            state: ControlState::Pending,
            created_ms: r.get(10)?,
        },
        r.get(8)?,
        r.get(9)?,
    ))
}

/// Records a control. `None` when its update recorded one of this kind already.
pub fn create(conn: &Connection, c: &NewControl<'_>, now_ms: i64) -> Result<Option<i64>> {
    let n = conn
        .exec(
            "INSERT INTO controls(source_update_id, kind, identity, turn_id, chat_id, thread_id,
                                  message_id, params, state, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9) ON CONFLICT DO NOTHING",
            params![
                c.source_update_id,
                c.kind,
                c.identity,
                c.turn_id,
                c.chat_id,
                c.thread_id,
                c.message_id,
                c.params.to_string(),
                now_ms
            ],
        )
        .map_err(StoreError::sqlite("recording a control"))?;
    Ok((n == 1).then(|| conn.last_insert_rowid()))
}

/// Controls not done yet, oldest first.
pub fn open(conn: &Connection) -> Result<Vec<Control>> {
    let ctx = "reading controls";
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, source_update_id, kind, identity, turn_id, chat_id, thread_id, message_id,
                    params, state, created_ms FROM controls WHERE state != 'done' ORDER BY id",
        )
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([], from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (mut c, params, state) = r.map_err(StoreError::sqlite(ctx))?;
        c.params = serde_json::from_str(&params)
            .map_err(|e| StoreError::Corrupt(format!("control {} has bad params: {e}", c.id)))?;
        c.state = ControlState::parse(&state)?;
        Ok(c)
    })
    .collect()
}

/// `pending -> sent`: handed to pi. `false` when it was not pending.
pub fn mark_sent(conn: &Connection, id: i64) -> Result<bool> {
    conn.exec(
        "UPDATE controls SET state = 'sent' WHERE id = ?1 AND state = 'pending'",
        [id],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("updating a control"))
}

/// Marks a control done. `false` when it was done already.
pub fn mark_done(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE controls SET state = 'done', done_ms = ?2 WHERE id = ?1 AND state != 'done'",
        params![id, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("updating a control"))
}
