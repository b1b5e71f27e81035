//! Stale questions: "these prompts waited while the hub or their pi was away; run them now?".
//! One open question per pi and place (chat, topic) at a time; every prompt held while it is
//! open joins it (`turns.stale_question`), so the person answers once for all of them.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::Cached;
use crate::{Result, StoreError};

/// What became of a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Not answered yet: its prompts are held.
    Open,
    /// Run: its prompts were cleared to run.
    Run,
    /// Skip: its prompts were dropped.
    Skipped,
}

impl Answer {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Run => "run",
            Self::Skipped => "skipped",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "open" => Self::Open,
            "run" => Self::Run,
            "skipped" => Self::Skipped,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown stale question state {other:?}"
                )));
            }
        })
    }
}

/// A stored question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub id: i64,
    /// The pi its prompts wait for.
    pub identity: String,
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    pub answer: Answer,
    /// The outbox row of its message (its latest text).
    pub outbox_id: Option<i64>,
}

const COLUMNS: &str = "id, identity, chat_id, thread_id, state, outbox_id";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(Question, String)> {
    Ok((
        Question {
            id: r.get(0)?,
            identity: r.get(1)?,
            chat_id: r.get(2)?,
            thread_id: r.get(3)?,
            answer: Answer::Open,
            outbox_id: r.get(5)?,
        },
        r.get(4)?,
    ))
}

fn one(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Option<Question>> {
    let ctx = "reading a stale question";
    let found = conn
        .row(
            &format!("SELECT {COLUMNS} FROM stale_questions {filter}"),
            args,
            from_row,
        )
        .optional()
        .map_err(StoreError::sqlite(ctx))?;
    found
        .map(|(mut q, state)| {
            q.answer = Answer::parse(&state)?;
            Ok(q)
        })
        .transpose()
}

/// The open question of `identity` in this place, if any.
pub fn open_for(
    conn: &Connection,
    identity: &str,
    chat: i64,
    thread: Option<i64>,
) -> Result<Option<Question>> {
    one(
        conn,
        "WHERE state = 'open' AND identity = ?1 AND chat_id = ?2 AND thread_id IS ?3
         ORDER BY id DESC LIMIT 1",
        params![identity, chat, thread],
    )
}

/// A question by id.
pub fn get(conn: &Connection, id: i64) -> Result<Option<Question>> {
    one(conn, "WHERE id = ?1", [id])
}

/// A new open question; returns its id.
pub fn create(
    conn: &Connection,
    identity: &str,
    chat: i64,
    thread: Option<i64>,
    now_ms: i64,
) -> Result<i64> {
    conn.exec(
        "INSERT INTO stale_questions(identity, chat_id, thread_id, state, created_ms)
         VALUES (?1, ?2, ?3, 'open', ?4)",
        params![identity, chat, thread, now_ms],
    )
    .map_err(StoreError::sqlite("asking about stale prompts"))?;
    Ok(conn.last_insert_rowid())
}

/// The outbox row that carries the question's latest text.
pub fn set_outbox(conn: &Connection, id: i64, outbox_id: i64) -> Result<()> {
    conn.exec(
        "UPDATE stale_questions SET outbox_id = ?2 WHERE id = ?1",
        params![id, outbox_id],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording a stale question's message"))
}

/// Settles an open question. `false` when it was settled before (a second tap).
pub fn settle(conn: &Connection, id: i64, answer: Answer, now_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE stale_questions SET state = ?2, settled_ms = ?3 WHERE id = ?1 AND state = 'open'",
        params![id, answer.as_str(), now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("settling a stale question"))
}

/// How many questions are open (for `status`).
pub fn open_count(conn: &Connection) -> Result<i64> {
    conn.row(
        "SELECT count(*) FROM stale_questions WHERE state = 'open'",
        [],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("counting stale questions"))
}
