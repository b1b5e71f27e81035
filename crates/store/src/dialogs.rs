//! pi's dialogs as the person's questions: a headless pi's `select`, `confirm`, `input` and
//! `editor` (pi's RPC extension-UI requests), and a pi with the extension waiting at its
//! terminal (`terminal`, told only). One row per dialog of one pi process (`instance_id`): a
//! new connection never answers an older one's dialog.
//!
//! `open -> answered -> delivered`: the person answered (a tap, a reply) in the handler's
//! transaction; the conductor handed it to pi. `open | answered -> timed_out | ended | gone`:
//! pi stopped waiting (its timeout), the dialog ended in pi (its run ended, the terminal
//! prompt closed), or the pi that asked is gone. Only `open` takes an answer.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use crate::Cached;
use crate::{Result, StoreError};

/// What pi asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of a list of options.
    Select,
    /// Yes or no.
    Confirm,
    /// A line of text.
    Input,
    /// A text, possibly prefilled.
    Editor,
    /// A pi with the extension waits at its terminal (the person is told; the answer is
    /// given there).
    Terminal,
}

impl Kind {
    /// Stored text (pi's method names, and `terminal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Select => "select",
            Self::Confirm => "confirm",
            Self::Input => "input",
            Self::Editor => "editor",
            Self::Terminal => "terminal",
        }
    }

    /// The kind pi names (`select`, ...); `None` for another.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "select" => Self::Select,
            "confirm" => Self::Confirm,
            "input" => Self::Input,
            "editor" => Self::Editor,
            "terminal" => Self::Terminal,
            _ => return None,
        })
    }

    /// Answered by a reply with text (rather than a button).
    pub fn takes_text(self) -> bool {
        matches!(self, Self::Input | Self::Editor)
    }
}

/// Where a dialog is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// pi waits; the person may answer.
    Open,
    /// The person answered; on its way to pi.
    Answered,
    /// pi has the answer.
    Delivered,
    /// pi stopped waiting (its timeout) before an answer reached it.
    TimedOut,
    /// The dialog ended in pi otherwise (its run ended, the terminal prompt closed).
    Ended,
    /// The pi that asked is gone.
    Gone,
}

impl State {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Answered => "answered",
            Self::Delivered => "delivered",
            Self::TimedOut => "timed_out",
            Self::Ended => "ended",
            Self::Gone => "gone",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "open" => Self::Open,
            "answered" => Self::Answered,
            "delivered" => Self::Delivered,
            "timed_out" => Self::TimedOut,
            "ended" => Self::Ended,
            "gone" => Self::Gone,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown dialog state {other:?}"
                )));
            }
        })
    }
}

/// A new dialog.
#[derive(Debug, Clone)]
pub struct NewDialog<'a> {
    pub identity: &'a str,
    /// The connection of the pi process that asked.
    pub instance_id: &'a str,
    /// pi's id of the request (its answer names it); empty for a terminal prompt.
    pub request_id: &'a str,
    pub kind: Kind,
    pub title: &'a str,
    /// What else pi gave: `options`, `message`, `placeholder`, `prefill`.
    pub body: &'a Value,
    pub asked_ms: i64,
    /// When pi stops waiting, if it said.
    pub expires_ms: Option<i64>,
    pub chat_id: i64,
    pub thread_id: Option<i64>,
}

/// A stored dialog.
#[derive(Debug, Clone, PartialEq)]
pub struct Dialog {
    pub id: i64,
    pub identity: String,
    pub instance_id: String,
    pub request_id: String,
    pub kind: Kind,
    pub title: String,
    pub body: Value,
    pub asked_ms: i64,
    pub expires_ms: Option<i64>,
    pub state: State,
    /// The person's answer (`{"value": ..}`, `{"confirmed": ..}`, `{"cancelled": true}`).
    pub answer: Option<Value>,
    pub chat_id: i64,
    pub thread_id: Option<i64>,
    /// The outbox row of its question.
    pub outbox_id: Option<i64>,
}

impl Dialog {
    /// The options of a `select`.
    pub fn options(&self) -> Vec<String> {
        self.body
            .get("options")
            .and_then(Value::as_array)
            .map(|o| {
                o.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A text field of the body (`message`, `placeholder`, `prefill`).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.body
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }
}

const COLUMNS: &str = "id, identity, instance_id, request_id, kind, title, body, asked_ms, \
                       expires_ms, state, answer, chat_id, thread_id, outbox_id";

type Raw = (Dialog, String, String, String, Option<String>);

fn from_row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        Dialog {
            id: r.get(0)?,
            identity: r.get(1)?,
            instance_id: r.get(2)?,
            request_id: r.get(3)?,
            kind: Kind::Terminal,
            title: r.get(5)?,
            body: Value::Null,
            asked_ms: r.get(7)?,
            expires_ms: r.get(8)?,
            state: State::Open,
            answer: None,
            chat_id: r.get(11)?,
            thread_id: r.get(12)?,
            outbox_id: r.get(13)?,
        },
        r.get(4)?,
        r.get(6)?,
        r.get(9)?,
        r.get(10)?,
    ))
}

fn finish((mut d, kind, body, state, answer): Raw) -> Result<Dialog> {
    d.kind = Kind::parse(&kind)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown dialog kind {kind:?}")))?;
    d.state = State::parse(&state)?;
    d.body = serde_json::from_str(&body).unwrap_or(Value::Null);
    d.answer = answer.and_then(|a| serde_json::from_str(&a).ok());
    Ok(d)
}

fn some(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Vec<Dialog>> {
    let ctx = "reading dialogs";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM dialogs {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| finish(r.map_err(StoreError::sqlite(ctx))?))
        .collect()
}

fn one(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Option<Dialog>> {
    let ctx = "reading a dialog";
    conn.row(
        &format!("SELECT {COLUMNS} FROM dialogs {filter}"),
        args,
        from_row,
    )
    .optional()
    .map_err(StoreError::sqlite(ctx))?
    .map(finish)
    .transpose()
}

/// Records a dialog pi opened; its id. A second report of the same request of the same pi
/// process returns the first one's id.
pub fn create(conn: &Connection, d: &NewDialog<'_>) -> Result<i64> {
    conn.exec(
        "INSERT INTO dialogs(identity, instance_id, request_id, kind, title, body, asked_ms,
                             expires_ms, state, chat_id, thread_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'open', ?9, ?10)
         ON CONFLICT(instance_id, request_id) DO NOTHING",
        params![
            d.identity,
            d.instance_id,
            d.request_id,
            d.kind.as_str(),
            d.title,
            d.body.to_string(),
            d.asked_ms,
            d.expires_ms,
            d.chat_id,
            d.thread_id,
        ],
    )
    .map_err(StoreError::sqlite("recording pi's dialog"))?;
    conn.row(
        "SELECT id FROM dialogs WHERE instance_id = ?1 AND request_id = ?2",
        params![d.instance_id, d.request_id],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("recording pi's dialog"))
}

/// A dialog by id.
pub fn get(conn: &Connection, id: i64) -> Result<Option<Dialog>> {
    one(conn, "WHERE id = ?1", [id])
}

/// A dialog of a pi process by pi's request id.
pub fn by_request(
    conn: &Connection,
    instance_id: &str,
    request_id: &str,
) -> Result<Option<Dialog>> {
    one(
        conn,
        "WHERE instance_id = ?1 AND request_id = ?2",
        params![instance_id, request_id],
    )
}

/// The open dialog (input, editor, or a select) whose question is message `message_id` of
/// `chat`: a reply to it is its answer.
pub fn open_replied(conn: &Connection, chat: i64, message_id: i64) -> Result<Option<Dialog>> {
    one(
        conn,
        "WHERE state = 'open' AND kind IN ('input', 'editor', 'select') AND chat_id = ?1
           AND outbox_id IN (SELECT id FROM outbox WHERE chat_id = ?1 AND sent_message_id = ?2)
         ORDER BY id DESC LIMIT 1",
        params![chat, message_id],
    )
}

/// Dialogs not settled (open or answered), oldest first.
pub fn unsettled(conn: &Connection) -> Result<Vec<Dialog>> {
    some(conn, "WHERE state IN ('open', 'answered') ORDER BY id", [])
}

/// The open dialogs of one pi process, oldest first.
pub fn open_of(conn: &Connection, instance_id: &str) -> Result<Vec<Dialog>> {
    some(
        conn,
        "WHERE state = 'open' AND instance_id = ?1 ORDER BY id",
        [instance_id],
    )
}

/// The outbox row that carries the question.
pub fn set_outbox(conn: &Connection, id: i64, outbox_id: i64) -> Result<()> {
    conn.exec(
        "UPDATE dialogs SET outbox_id = ?2 WHERE id = ?1",
        params![id, outbox_id],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording a dialog's question"))
}

/// The person's answer to an open dialog. `false` when it was not open (answered before, or
/// over): nothing changes.
pub fn answer(conn: &Connection, id: i64, answer: &Value, now_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE dialogs SET state = 'answered', answer = ?2, settled_ms = ?3
         WHERE id = ?1 AND state = 'open'",
        params![id, answer.to_string(), now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("recording the answer to a dialog"))
}

/// Ends a dialog that is in one of `from` as `to`. `false` when it was in none of them.
pub fn end(conn: &Connection, id: i64, from: &[State], to: State, now_ms: i64) -> Result<bool> {
    let from: Vec<String> = from.iter().map(|s| format!("'{}'", s.as_str())).collect();
    conn.exec(
        &format!(
            "UPDATE dialogs SET state = ?2, settled_ms = coalesce(settled_ms, ?3)
             WHERE id = ?1 AND state IN ({})",
            from.join(", ")
        ),
        params![id, to.as_str(), now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("ending a dialog"))
}

/// How many dialogs wait for the person (for `status`).
pub fn open_count(conn: &Connection) -> Result<i64> {
    conn.row(
        "SELECT count(*) FROM dialogs WHERE state = 'open'",
        [],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("counting dialogs"))
}
