//! The outbox: every message the hub sends is a row that moves
//! `pending -> sending -> sent | ambiguous | failed` (and back to `pending` for a retry).
//!
//! A row keeps what it sends once, in `delivery`: the hub's delivery plan (JSON), alternatives
//! of messages tried in order, `alt` and `part` pointing at the message to send now. Each
//! message names its Bot API method (`method`) beside its parameters. The store reads only that
//! much of it (the current message, a repeat mark, the files it uploads); what the messages
//! are is the hub's (`hub::outgoing::outbound::Outgoing`).

use std::collections::BTreeMap;
use std::fmt;

use rusqlite::{Connection, Row, params};
use serde_json::Value;

use crate::Cached;
use crate::{Result, StoreError};

/// A row's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Waiting to be sent (maybe not before `not_before_ms`).
    Pending,
    /// Handed to Telegram; the outcome is not recorded yet.
    Sending,
    /// Telegram confirmed it.
    Sent,
    /// The outcome is unknown and the row is not repeated blindly; `handling` says why.
    Ambiguous,
    /// Telegram refused it for good.
    Failed,
}

impl State {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Ambiguous => "ambiguous",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pending" => Self::Pending,
            "sending" => Self::Sending,
            "sent" => Self::Sent,
            "ambiguous" => Self::Ambiguous,
            "failed" => Self::Failed,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown outbox state {other:?}"
                )));
            }
        })
    }

    /// Every state, for complete counts.
    pub const ALL: [State; 5] = [
        Self::Pending,
        Self::Sending,
        Self::Sent,
        Self::Ambiguous,
        Self::Failed,
    ];
}

impl rusqlite::types::ToSql for State {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for State {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        Self::parse(v.as_str()?)
            .map_err(|e| rusqlite::types::FromSqlError::Other(e.to_string().into()))
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message to send.
#[derive(Debug, Clone)]
pub struct NewRow<'a> {
    /// Target chat.
    pub chat_id: i64,
    /// Target topic.
    pub thread_id: Option<i64>,
    /// What it sends: the delivery plan (see [`single`] for one message).
    pub delivery: &'a Value,
    /// Why it is sent (`reply:help`, `notice:held`, ...).
    pub purpose: &'a str,
    /// The update that caused it; with `purpose`, at most one row per cause.
    pub source_update_id: Option<i64>,
    /// When the outcome of a send is unknown (a crash mid-send, a lost answer), send it again
    /// rather than risk losing it. Only for content that must arrive: final answers, and the
    /// hub's texts that are the only trace of a person's message (an interrupted turn's
    /// notice, a skipped prompt, the question a waiting message needs answered).
    pub resend_if_unknown: bool,
    /// The instance identity the message speaks for (replies to it route there).
    pub identity: Option<&'a str>,
    /// The turn it answers.
    pub turn_id: Option<i64>,
}

/// A stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    /// Id (also the send order).
    pub id: i64,
    /// Target chat.
    pub chat_id: i64,
    /// Target topic.
    pub thread_id: Option<i64>,
    /// The method of the message to send now (read from `delivery`; empty when it has none).
    pub method: String,
    /// The message to send now as stored (read from `delivery`, `Null` when it has none).
    pub params: Value,
    /// What it sends, as stored: the delivery plan.
    pub delivery: Value,
    /// Purpose.
    pub purpose: String,
    /// Cause.
    pub source_update_id: Option<i64>,
    /// Resend when the outcome is unknown.
    pub resend_if_unknown: bool,
    /// State.
    pub state: State,
    /// Send attempts so far.
    pub attempts: i64,
    /// Not before this time.
    pub not_before_ms: i64,
    /// `message_id` Telegram gave it.
    pub sent_message_id: Option<i64>,
    /// Last error text.
    pub last_error: Option<String>,
    /// What was done about an unknown or failed outcome.
    pub handling: Option<String>,
    /// The instance identity it speaks for.
    pub identity: Option<String>,
    /// The turn it answers.
    pub turn_id: Option<i64>,
    /// How often it was sent again after an unknown outcome (each a possible duplicate).
    pub resent: i64,
}

const COLUMNS: &str =
    "id, chat_id, thread_id, delivery, purpose, source_update_id, resend_if_unknown,
    state, attempts, not_before_ms, sent_message_id, last_error, handling, identity, turn_id,
    resent";

type Raw = (OutboxRow, String);

fn from_row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    let delivery: String = r.get(3)?;
    Ok((
        OutboxRow {
            id: r.get(0)?,
            chat_id: r.get(1)?,
            thread_id: r.get(2)?,
            method: String::new(),
            params: Value::Null,
            delivery: Value::Null,
            purpose: r.get(4)?,
            source_update_id: r.get(5)?,
            resend_if_unknown: r.get::<_, i64>(6)? != 0,
            state: r.get(7)?,
            attempts: r.get(8)?,
            not_before_ms: r.get(9)?,
            sent_message_id: r.get(10)?,
            last_error: r.get(11)?,
            handling: r.get(12)?,
            identity: r.get(13)?,
            turn_id: r.get(14)?,
            resent: r.get(15)?,
        },
        delivery,
    ))
}

fn finish((mut row, delivery): Raw) -> Result<OutboxRow> {
    row.delivery = serde_json::from_str(&delivery).map_err(|e| {
        StoreError::Corrupt(format!("outbox row {} has a bad delivery: {e}", row.id))
    })?;
    let current = current_of(&row.delivery).cloned().unwrap_or(Value::Null);
    row.method = current
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    row.params = current;
    Ok(row)
}

/// The message a delivery plan sends now: `alternatives[alt].messages[part]`.
fn current_of(delivery: &Value) -> Option<&Value> {
    let at = |k: &str| delivery.get(k).and_then(Value::as_u64);
    let (alt, part) = (at("alt")?, at("part")?);
    delivery
        .get("alternatives")?
        .get(usize::try_from(alt).ok()?)?
        .get("messages")?
        .get(usize::try_from(part).ok()?)
}

/// The delivery of a row that sends one message: `params` (a JSON object) with `method`.
/// The hub writes the same shape from its own types; tests and tools use this.
pub fn single(method: &str, params: &Value) -> Value {
    let mut message = params.clone();
    if let Some(o) = message.as_object_mut() {
        o.insert("method".into(), Value::String(method.to_owned()));
    }
    serde_json::json!({
        "alternatives": [{ "name": "message", "messages": [message] }],
        "alt": 0,
        "part": 0,
    })
}

/// The SQL path of a row's current message in its `delivery` (see [`current_of`]).
const CURRENT: &str = "printf('$.alternatives[%d].messages[%d]', json_extract(delivery, '$.alt'),
                               json_extract(delivery, '$.part'))";

/// Rows selected by `filter` (the part after `FROM outbox o`), decoded.
fn select(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Vec<OutboxRow>> {
    let ctx = "reading the outbox";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM outbox o {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| r.map_err(StoreError::sqlite(ctx)).and_then(finish))
        .collect()
}

/// Queues a message. Returns its id, or `None` when a row for the same cause and purpose
/// exists already (the handler ran before; nothing is queued twice).
pub fn enqueue(conn: &Connection, row: &NewRow<'_>, now_ms: i64) -> Result<Option<i64>> {
    let n = conn
        .exec(
            "INSERT INTO outbox(created_ms, updated_ms, chat_id, thread_id, delivery, purpose,
                                source_update_id, resend_if_unknown, state, identity, turn_id)
             VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9)
             ON CONFLICT DO NOTHING",
            params![
                now_ms,
                row.chat_id,
                row.thread_id,
                row.delivery.to_string(),
                row.purpose,
                row.source_update_id,
                i64::from(row.resend_if_unknown),
                row.identity,
                row.turn_id,
            ],
        )
        .map_err(StoreError::sqlite("queueing a message"))?;
    Ok((n == 1).then(|| conn.last_insert_rowid()))
}

/// A row by id.
pub fn get(conn: &Connection, id: i64) -> Result<Option<OutboxRow>> {
    Ok(select(conn, "WHERE id = ?1", [id])?.pop())
}

/// Parks a pending row while what it sends is made beside its conversation (a voice message
/// from a text-to-speech command), until [`replan`] releases it. Unlike a row [`hold`] parks,
/// it keeps its conversation's later rows back only a little: none of the hub's own (replies,
/// menus, notices: no identity), and pi's output for [`MAKING_HOLDS_MS`] after it was queued.
/// So a slow or hung command never stalls the chat, and order holds whenever it is quick.
pub fn park_making(conn: &Connection, id: i64) -> Result<()> {
    hold(conn, id, PARKED, MAKING)
}

/// The `handling` of a row being made ([`park_making`]); [`parked_with`] finds them.
pub const MAKING: &str = "synthesizing a voice message";

/// How long a row being made ([`park_making`]) keeps pi's later output in its conversation
/// back. A spoken answer of a few sentences is made in a second or two by the usual local
/// engines and cloud voices, so this keeps the order pi wrote in whenever the voice is made
/// as usual; when it is not, the next answer is at most this late.
pub const MAKING_HOLDS_MS: i64 = 5_000;

/// `not_before_ms` of a parked row.
const PARKED: i64 = i64::MAX;

/// The next row of each conversation, if due at `now_ms`. Rows of one conversation (a chat's
/// main thread, or one topic) go out in order; conversations do not wait for each other, so a
/// topic whose rows are parked never holds up the main chat. A row being made
/// ([`park_making`]) is no head: the hub's own rows behind it go on, pi's after
/// [`MAKING_HOLDS_MS`], and it takes its place when it is released.
pub fn heads(conn: &Connection, now_ms: i64) -> Result<Vec<OutboxRow>> {
    // `state IN ('pending', 'sending')` is the partial index `outbox_open`'s own term: with it
    // the planner reads the open rows through that index instead of every row the outbox keeps.
    select(
        conn,
        &format!(
            "WHERE state IN ('pending', 'sending') AND state = 'pending' AND not_before_ms <= ?1
               AND {}
             ORDER BY id",
            heads_its_conversation()
        ),
        params![now_ms, MAKING_HOLDS_MS],
    )
}

/// The SQL condition that open row `o` heads its conversation at `?1` (ms; `?2` is
/// [`MAKING_HOLDS_MS`]): it is the oldest open row of its chat and topic, leaving out rows
/// being made and, for a row of the hub's own (no identity), pi's rows that one of them still
/// holds; and a row of pi's is not held by a row being made before it.
fn heads_its_conversation() -> String {
    let held = |x: &str| {
        format!(
            "EXISTS (SELECT 1 FROM outbox v WHERE v.chat_id = {x}.chat_id
                       AND v.thread_id IS {x}.thread_id AND v.state IN ('pending', 'sending')
                       AND {} AND v.id < {x}.id AND v.created_ms > ?1 - ?2)",
            making("v")
        )
    };
    format!(
        "o.id = (SELECT min(id) FROM outbox i WHERE i.chat_id = o.chat_id
                 AND i.thread_id IS o.thread_id AND i.state IN ('pending', 'sending')
                 AND NOT {making_i}
                 AND (o.identity IS NOT NULL OR i.identity IS NULL OR NOT {held_i}))
         AND (o.identity IS NULL OR NOT {held_o})",
        making_i = making("i"),
        held_i = held("i"),
        held_o = held("o"),
    )
}

/// The SQL condition that row `alias` is being made ([`park_making`]).
fn making(alias: &str) -> String {
    format!(
        "({alias}.state = 'pending' AND {alias}.not_before_ms = {PARKED}
          AND {alias}.handling = '{MAKING}')"
    )
}

/// The earliest `not_before_ms` after `after_ms` of a row that [`heads`] can pick (the oldest
/// open row of its chat and topic), for sleeping until something is due. Rows due already are
/// the caller's (it saw them among the heads: sent, or held back by pacing, whose wait it
/// knows); a due row behind a head that waits is not due. Counting either made the sender wake
/// every millisecond (found by `crates/hub/tests/simulation.rs`).
///
/// The end of a [`park_making`] row's hold counts too (pi's rows behind it may go then).
pub fn next_due_ms(conn: &Connection, after_ms: i64) -> Result<Option<i64>> {
    // Through `outbox_open` (see [`heads`]).
    conn.row(
        &format!(
            "SELECT min(t) FROM (
               SELECT min(not_before_ms) AS t FROM outbox o WHERE state IN ('pending', 'sending')
                 AND state = 'pending' AND not_before_ms > ?1 AND {heads}
               UNION ALL
               SELECT min(v.created_ms + ?2) FROM outbox v
                 WHERE v.state IN ('pending', 'sending') AND {making_v}
                   AND v.created_ms + ?2 > ?1)",
            heads = heads_its_conversation(),
            making_v = making("v"),
        ),
        params![after_ms, MAKING_HOLDS_MS],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("reading the outbox"))
}

fn transition(
    conn: &Connection,
    id: i64,
    from: State,
    sql_set: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<()> {
    let sql = format!(
        "UPDATE outbox SET {sql_set} WHERE id = ?1 AND state = '{}'",
        from.as_str()
    );
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id];
    all.extend_from_slice(args);
    let n = conn
        .exec(&sql, all.as_slice())
        .map_err(StoreError::sqlite("updating the outbox"))?;
    if n != 1 {
        return Err(StoreError::Corrupt(format!(
            "outbox row {id} is not {from}"
        )));
    }
    Ok(())
}

/// Holds a pending row until `not_before_ms` (a far future value parks it until released).
pub fn hold(conn: &Connection, id: i64, not_before_ms: i64, handling: &str) -> Result<()> {
    conn.exec(
        "UPDATE outbox SET not_before_ms = ?2, handling = ?3 WHERE id = ?1 AND state = 'pending'",
        params![id, not_before_ms, handling],
    )
    .map(drop)
    .map_err(StoreError::sqlite("holding an outbox row"))
}

/// `pending -> sending`, counting the attempt. Committed before the call is made.
pub fn mark_sending(conn: &Connection, id: i64, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Pending,
        "state = 'sending', attempts = attempts + 1, updated_ms = ?2",
        &[&now_ms],
    )
}

/// `sending -> sent`.
pub fn mark_sent(conn: &Connection, id: i64, message_id: Option<i64>, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'sent', sent_message_id = ?2, updated_ms = ?3",
        &[&message_id, &now_ms],
    )
}

/// `sending -> pending`, now, addressed to the main chat instead of its topic (the person
/// closed the topic: the message must still arrive).
pub fn move_to_main_chat(conn: &Connection, id: i64, error: &str, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        &format!(
            "state = 'pending', not_before_ms = 0, thread_id = NULL,
             delivery = json_remove(delivery, {CURRENT} || '.message_thread_id',
                                    {CURRENT} || '.reply_parameters'),
             last_error = ?2, handling = 'sent to the main chat: its topic is closed', updated_ms = ?3"
        ),
        &[&error, &now_ms],
    )
}

/// `sending -> pending` to try again at `not_before_ms`.
pub fn mark_retry(
    conn: &Connection,
    id: i64,
    not_before_ms: i64,
    error: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'pending', not_before_ms = ?2, last_error = ?3, updated_ms = ?4",
        &[&not_before_ms, &error, &now_ms],
    )
}

/// `sending -> pending` with the next message of its plan (the next part, or the first of the
/// next alternative after a refusal), sent at once: `delivery` points at it. One row stays one
/// place in its conversation's order, however many messages it becomes.
pub fn advance(
    conn: &Connection,
    id: i64,
    delivery: &Value,
    handling: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'pending', not_before_ms = 0, delivery = ?2,
         handling = coalesce(?3, handling), updated_ms = ?4",
        &[&delivery.to_string(), &handling, &now_ms],
    )
}

/// `sending -> pending` after an unknown outcome, for a row that must arrive: it is sent again at
/// `not_before_ms` and counted as a possible duplicate.
pub fn mark_resend(
    conn: &Connection,
    id: i64,
    not_before_ms: i64,
    error: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'pending', not_before_ms = ?2, last_error = ?3, updated_ms = ?4,
         resent = resent + 1, handling = 'sent again: the outcome of a send was unknown',
         delivery = json_set(delivery, '$.repeat', json_extract(delivery, '$.part'))",
        &[&not_before_ms, &error, &now_ms],
    )
}

/// How many copies were sent again after an unknown outcome, in all (pruned rows included).
pub fn resent_total(conn: &Connection) -> Result<i64> {
    let here: i64 = conn
        .row("SELECT coalesce(sum(resent), 0) FROM outbox", [], |r| {
            r.get(0)
        })
        .map_err(StoreError::sqlite("counting resent messages"))?;
    Ok(here + crate::retention::pruned(conn, "outbox", "resent")?)
}

/// `sending -> ambiguous`: the outcome is unknown and the row is not repeated.
pub fn mark_ambiguous(
    conn: &Connection,
    id: i64,
    error: &str,
    handling: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'ambiguous', last_error = ?2, handling = ?3, updated_ms = ?4",
        &[&error, &handling, &now_ms],
    )
}

/// `sending -> failed`: Telegram refused it for good.
pub fn mark_failed(
    conn: &Connection,
    id: i64,
    error: &str,
    handling: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'failed', last_error = ?2, handling = ?3, updated_ms = ?4",
        &[&error, &handling, &now_ms],
    )
}

/// After a restart: rows left `sending` by a crash have an unknown outcome. Rows that must
/// arrive go back to `pending` (a possible duplicate is the lesser evil); the others become
/// `ambiguous`. Returns `(resent, ambiguous)` counts.
pub fn recover_interrupted(conn: &Connection, now_ms: i64) -> Result<(usize, usize)> {
    let resent = conn
        .exec(
            "UPDATE outbox SET state = 'pending', handling = 'resent: the hub stopped during the send',
                    resent = resent + 1, updated_ms = ?1,
                    delivery = json_set(delivery, '$.repeat', json_extract(delivery, '$.part'))
             WHERE state = 'sending' AND resend_if_unknown = 1",
            [now_ms],
        )
        .map_err(StoreError::sqlite("recovering the outbox"))?;
    let ambiguous = conn
        .exec(
            "UPDATE outbox SET state = 'ambiguous',
                    handling = 'not resent: the hub stopped during the send, it may have arrived',
                    updated_ms = ?1 WHERE state = 'sending'",
            [now_ms],
        )
        .map_err(StoreError::sqlite("recovering the outbox"))?;
    Ok((resent, ambiguous))
}

/// Rows per state (every state present, zero included); `sent` and `failed` include the rows
/// retention pruned since.
pub fn counts(conn: &Connection) -> Result<BTreeMap<State, i64>> {
    let mut out: BTreeMap<State, i64> = State::ALL.iter().map(|s| (*s, 0)).collect();
    let mut stmt = conn
        .prepare_cached("SELECT state, count(*) FROM outbox GROUP BY state")
        .map_err(StoreError::sqlite("counting the outbox"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(StoreError::sqlite("counting the outbox"))?;
    for row in rows {
        let (state, n) = row.map_err(StoreError::sqlite("counting the outbox"))?;
        out.insert(State::parse(&state)?, n);
    }
    for state in [State::Sent, State::Failed] {
        let pruned = crate::retention::pruned(conn, "outbox", state.as_str())?;
        *out.entry(state).or_default() += pruned;
    }
    Ok(out)
}

/// Every row (tests and status; the outbox of a hub is small).
pub fn all(conn: &Connection) -> Result<Vec<OutboxRow>> {
    select(conn, "ORDER BY id", [])
}

/// Pending rows parked (see [`hold`]) with `handling`, oldest first.
pub fn parked_with(conn: &Connection, handling: &str) -> Result<Vec<OutboxRow>> {
    // The open rows only, through `outbox_open` (see [`heads`]).
    select(
        conn,
        "WHERE state IN ('pending', 'sending') AND state = 'pending'
           AND not_before_ms = 9223372036854775807 AND handling = ?1
         ORDER BY id",
        [handling],
    )
}

/// A parked row gets what it is sent as now (its delivery) and is released.
pub fn replan(
    conn: &Connection,
    id: i64,
    delivery: &Value,
    handling: &str,
    now_ms: i64,
) -> Result<bool> {
    conn.exec(
        "UPDATE outbox SET not_before_ms = 0, delivery = ?2, handling = ?3, updated_ms = ?4
         WHERE id = ?1 AND state = 'pending'",
        params![id, delivery.to_string(), handling, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("replanning an outbox row"))
}

/// Rows of `identity` in `chat` that wait (`not_before_ms = waiting_ms`) for a new topic go to
/// topic `thread` now, their current message with them.
pub fn retarget_waiting(
    conn: &Connection,
    identity: &str,
    chat: i64,
    thread: i64,
    waiting_ms: i64,
) -> Result<usize> {
    conn.exec(
        &format!(
            "UPDATE outbox SET thread_id = ?3,
                    delivery = json_set(delivery, {CURRENT} || '.message_thread_id', ?3),
                    not_before_ms = 0, handling = 'delivered to the new thread'
             WHERE state = 'pending' AND identity = ?1 AND chat_id = ?2 AND not_before_ms = ?4"
        ),
        params![identity, chat, thread, waiting_ms],
    )
    .map_err(StoreError::sqlite("retargeting waiting messages"))
}
