//! Turns: owner messages on their way into pi. `queued -> dispatched -> acked -> done`, or
//! `interrupted` (the instance went away mid-turn) / `cancelled`. Turn numbers are never reused;
//! the wire id is `t<number>`.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::Cached;
use crate::{Result, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TurnState {
    /// Waiting for its instance to be free (or, without identity, for any instance).
    Queued,
    /// Handed to an instance; not acknowledged yet.
    Dispatched,
    /// The instance has it.
    Acked,
    /// Answered.
    Done,
    /// The instance went away while it had the turn.
    Interrupted,
    /// Cancelled by the person.
    Cancelled,
}

impl TurnState {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Dispatched => "dispatched",
            Self::Acked => "acked",
            Self::Done => "done",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "queued" => Self::Queued,
            "dispatched" => Self::Dispatched,
            "acked" => Self::Acked,
            "done" => Self::Done,
            "interrupted" => Self::Interrupted,
            "cancelled" => Self::Cancelled,
            other => return Err(StoreError::Corrupt(format!("unknown turn state {other:?}"))),
        })
    }

    /// Every state.
    pub const ALL: [TurnState; 6] = [
        Self::Queued,
        Self::Dispatched,
        Self::Acked,
        Self::Done,
        Self::Interrupted,
        Self::Cancelled,
    ];
}

/// What a turn without an identity waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    /// It arrived while no pi was live (and the person was told so): the first pi that
    /// connects takes it.
    Any,
    /// The person was asked where it goes: only their tap assigns it.
    Choice,
}

impl Waits {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::Choice => "choice",
        }
    }

    fn parse(s: Option<&str>) -> Result<Option<Self>> {
        Ok(match s {
            None => None,
            Some("any") => Some(Self::Any),
            Some("choice") => Some(Self::Choice),
            Some(other) => {
                return Err(StoreError::Corrupt(format!("unknown turn wait {other:?}")));
            }
        })
    }
}

/// Where a new turn goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// That identity's pi (it waits for it while it is away).
    Identity(&'a str),
    /// No identity yet.
    Unassigned(Waits),
}

/// A waiting turn's lane: priority turns go first; each lane is first in, first out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The default.
    Normal,
    /// Ahead of every normal turn.
    Priority,
}

impl Lane {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Priority => "priority",
        }
    }

    fn parse(s: &str) -> Self {
        if s == "priority" {
            Self::Priority
        } else {
            Self::Normal
        }
    }
}

/// The `error` of a turn that was skipped (it is `cancelled` without a model turn).
pub const SKIPPED: &str = "skipped";

#[derive(Debug, Clone)]
pub struct NewTurn<'a> {
    /// The update that carried the message (at most one turn per update).
    pub source_update_id: Option<i64>,
    /// Chat to answer in.
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    /// The message to reply to.
    pub message_id: Option<i64>,
    /// Where it goes.
    pub target: Target<'a>,
    /// The prompt.
    pub text: &'a str,
    pub lane: Lane,
    /// `None`: ready for pi now. Otherwise it waits for its files or the rest of its group.
    pub prepare: Option<Prepare<'a>>,
    /// When the person sent it (Telegram's `date`, in ms); `None`: now.
    pub sent_ms: Option<i64>,
    /// Who wrote it, when not the owner (a member's user id).
    pub from_user: Option<i64>,
    /// Their name, as pi is told it.
    pub from_name: Option<&'a str>,
}

/// What a turn that is not ready yet waits for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prepare<'a> {
    /// The group it gathers (an album, a forward and its comment, a split long text).
    pub group_key: Option<&'a str>,
    /// Until when the rest of the group can still arrive (0: only its files).
    pub gather_until_ms: i64,
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Turn number.
    pub id: i64,
    pub source_update_id: Option<i64>,
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    /// Message to reply to.
    pub message_id: Option<i64>,
    /// Target identity.
    pub identity: Option<String>,
    /// Prompt.
    pub text: String,
    pub state: TurnState,
    /// Instance it went to.
    pub instance_id: Option<String>,
    /// That instance's pid.
    pub instance_pid: Option<i64>,
    pub transport: Option<crate::instances::Transport>,
    /// Answer text.
    pub result_text: Option<String>,
    /// What it waited for before it had an identity (`None`: it was created with one).
    pub waits: Option<Waits>,
    /// Its lane while it waits.
    pub lane: Lane,
    /// Dropped without a model turn when dispatch reaches it.
    pub skip: bool,
    /// Ready for pi (its files are settled, its group complete).
    pub ready: bool,
    /// What pi gets after the person's words: attachments, the replied-to text, forwards.
    pub context: Option<String>,
    /// The group it gathers.
    pub group_key: Option<String>,
    /// Until when the rest of its group can arrive (0: not gathering).
    pub gather_until_ms: i64,
    /// When the hub made it.
    pub created_ms: i64,
    /// Who wrote it, when not the owner (a member's user id).
    pub from_user: Option<i64>,
    /// Their name, as pi is told it.
    pub from_name: Option<String>,
    /// When the person sent it (Telegram's date; the hub's time for older turns).
    pub sent_ms: i64,
    /// Held for the person's answer, or cleared to run although it waited long.
    pub held: Option<Held>,
    /// The question that holds (or held) it.
    pub stale_question: Option<i64>,
}

/// A prompt that waited too long while the hub or its pi was away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Asked about: dispatch passes it by until the person answers.
    Asked,
    /// The person said run it: dispatch takes it without asking again.
    Cleared,
}

impl Held {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Asked => "asked",
            Self::Cleared => "cleared",
        }
    }

    fn parse(s: Option<&str>) -> Result<Option<Self>> {
        Ok(match s {
            None => None,
            Some("asked") => Some(Self::Asked),
            Some("cleared") => Some(Self::Cleared),
            Some(other) => return Err(StoreError::Corrupt(format!("unknown turn hold {other:?}"))),
        })
    }
}

impl Turn {
    /// What pi gets: the person's words, then the context.
    pub fn prompt(&self) -> String {
        match self.context.as_deref().filter(|c| !c.trim().is_empty()) {
            Some(c) if self.text.trim().is_empty() => c.to_owned(),
            Some(c) => format!("{}\n\n{c}", self.text),
            None => self.text.clone(),
        }
    }
}

const COLUMNS: &str = "id, source_update_id, chat_id, thread_id, message_id, identity, text, state,
    instance_id, instance_pid, transport, result_text, waits, lane, skip, ready, context, group_key,
    gather_until_ms, created_ms, coalesce(sent_ms, created_ms), held, stale_question, from_user, from_name";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(Turn, String, Option<String>, Option<String>)> {
    Ok((
        Turn {
            id: r.get(0)?,
            source_update_id: r.get(1)?,
            chat_id: r.get(2)?,
            thread_id: r.get(3)?,
            message_id: r.get(4)?,
            identity: r.get(5)?,
            text: r.get(6)?,
            state: TurnState::Queued,
            instance_id: r.get(8)?,
            instance_pid: r.get(9)?,
            transport: r.get(10)?,
            result_text: r.get(11)?,
            waits: None,
            lane: Lane::parse(&r.get::<_, String>(13)?),
            skip: r.get::<_, i64>(14)? != 0,
            ready: r.get::<_, i64>(15)? != 0,
            context: r.get(16)?,
            group_key: r.get(17)?,
            gather_until_ms: r.get(18)?,
            created_ms: r.get(19)?,
            sent_ms: r.get(20)?,
            held: None,
            stale_question: r.get(22)?,
            from_user: r.get(23)?,
            from_name: r.get(24)?,
        },
        r.get(7)?,
        r.get(12)?,
        r.get(21)?,
    ))
}

fn select(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Vec<Turn>> {
    let ctx = "reading turns";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM turns {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (mut t, state, waits, held) = r.map_err(StoreError::sqlite(ctx))?;
        t.state = TurnState::parse(&state)?;
        t.waits = Waits::parse(waits.as_deref())?;
        t.held = Held::parse(held.as_deref())?;
        Ok(t)
    })
    .collect()
}

/// Creates a turn; `None` when its update already made one.
pub fn create(conn: &Connection, t: &NewTurn<'_>, now_ms: i64) -> Result<Option<i64>> {
    let (identity, waits) = match t.target {
        Target::Identity(i) => (Some(i), None),
        Target::Unassigned(w) => (None, Some(w.as_str())),
    };
    let n = conn
        .exec(
            "INSERT INTO turns(source_update_id, chat_id, thread_id, message_id, identity, waits, text,
                               state, created_ms, lane, lane_seq, ready, group_key, gather_until_ms,
                               sent_ms, from_user, from_name)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9,
                     (SELECT coalesce(max(lane_seq), 0) + 1 FROM turns), ?10, ?11, ?12, ?13, ?14, ?15)
             ON CONFLICT DO NOTHING",
            params![t.source_update_id, t.chat_id, t.thread_id, t.message_id, identity, waits, t.text,
                    now_ms, t.lane.as_str(), i64::from(t.prepare.is_none()),
                    t.prepare.and_then(|p| p.group_key), t.prepare.map_or(0, |p| p.gather_until_ms),
                    t.sent_ms.unwrap_or(now_ms).min(now_ms), t.from_user, t.from_name],
        )
        .map_err(StoreError::sqlite("creating a turn"))?;
    Ok((n == 1).then(|| conn.last_insert_rowid()))
}

/// A turn by number.
pub fn get(conn: &Connection, id: i64) -> Result<Option<Turn>> {
    Ok(select(conn, "WHERE id = ?1", [id])?.pop())
}

/// Gives every turn that waits for any instance to `identity`. Returns how many. Turns that
/// wait for the person's choice are never given away here.
pub fn assign_unassigned(conn: &Connection, identity: &str) -> Result<usize> {
    conn.exec(
        "UPDATE turns SET identity = ?1 WHERE identity IS NULL AND waits = 'any' AND state = 'queued'",
        [identity],
    )
    .map_err(StoreError::sqlite("assigning turns"))
}

/// The person chose `identity` for a queued turn: one without identity, or one waiting for
/// `instead_of` (a pi that is away). `false` when it was taken already.
pub fn assign(
    conn: &Connection,
    id: i64,
    identity: &str,
    instead_of: Option<&str>,
) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET identity = ?2 WHERE id = ?1 AND state = 'queued'
           AND (identity IS NULL OR identity IS ?3)",
        params![id, identity, instead_of],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("assigning a turn"))
}

/// The next queued turn for `identity` that is ready: the priority lane first, each lane in
/// order (skipped turns included: dispatch drops them). A turn that is not ready yet (its files,
/// its group) does not hold up the ones behind it.
pub fn next_queued(conn: &Connection, identity: &str) -> Result<Option<Turn>> {
    // `state IN (...)` is the partial index `turns_open`'s own term: with it the planner reads
    // the identity's open turns through that index instead of every turn kept.
    Ok(select(
        conn,
        "WHERE state IN ('queued', 'dispatched', 'acked') AND identity = ?1 AND state = 'queued'
           AND ready = 1 AND held IS NOT 'asked'
         ORDER BY lane = 'priority' DESC, lane_seq LIMIT 1",
        [identity],
    )?
    .pop())
}

/// The identities that have a queued turn (ready or not, held or not): dispatch looks only at
/// these, so an idle pi with nothing waiting costs it nothing.
pub fn queued_identities(conn: &Connection) -> Result<Vec<String>> {
    let ctx = "reading which pi have waiting turns";
    let mut stmt = conn
        .prepare_cached(
            "SELECT DISTINCT identity FROM turns
             WHERE state IN ('queued', 'dispatched', 'acked') AND state = 'queued'
               AND identity IS NOT NULL",
        )
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([], |r| r.get(0))
        .map_err(StoreError::sqlite(ctx))?;
    rows.collect::<rusqlite::Result<Vec<String>>>()
        .map_err(StoreError::sqlite(ctx))
}

/// Queued turns numbered after `after` that answer a message: `(turn, chat, message)`, oldest
/// first. For what is new since a last look, without reading every waiting turn again.
pub fn queued_after(conn: &Connection, after: i64) -> Result<Vec<(i64, i64, i64)>> {
    let ctx = "reading new waiting turns";
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, chat_id, message_id FROM turns
             WHERE id > ?1 AND state = 'queued' AND message_id IS NOT NULL ORDER BY id",
        )
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([after], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| r.map_err(StoreError::sqlite(ctx))).collect()
}

/// The state of every turn numbered `from` to `to`: two columns a row, for a look at many
/// turns at once.
pub fn states_between(conn: &Connection, from: i64, to: i64) -> Result<Vec<(i64, TurnState)>> {
    let ctx = "reading turn states";
    let mut stmt = conn
        .prepare_cached("SELECT id, state FROM turns WHERE id BETWEEN ?1 AND ?2 ORDER BY id")
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([from, to], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (id, state) = r.map_err(StoreError::sqlite(ctx))?;
        Ok((id, TurnState::parse(&state)?))
    })
    .collect()
}

/// The turns waiting for `identity`, in the order dispatch takes them.
pub fn queue_of(conn: &Connection, identity: &str) -> Result<Vec<Turn>> {
    select(
        conn,
        "WHERE state IN ('queued', 'dispatched', 'acked') AND identity = ?1 AND state = 'queued'
         ORDER BY lane = 'priority' DESC, lane_seq",
        [identity],
    )
}

/// The turn made from message `message_id` of `chat`.
pub fn by_message(conn: &Connection, chat: i64, message_id: i64) -> Result<Option<Turn>> {
    Ok(select(
        conn,
        "WHERE chat_id = ?1 AND message_id = ?2 ORDER BY id DESC LIMIT 1",
        [chat, message_id],
    )?
    .pop())
}

/// Moves a waiting turn to the tail of `lane` (nothing if it is there already). `false` when
/// it is not waiting.
pub fn set_lane(conn: &Connection, id: i64, lane: Lane) -> Result<bool> {
    if let Some(t) = get(conn, id)?.filter(|t| t.state == TurnState::Queued)
        && t.lane == lane
    {
        return Ok(true);
    }
    conn.exec(
        "UPDATE turns SET lane = ?2, lane_seq = (SELECT coalesce(max(lane_seq), 0) + 1 FROM turns)
         WHERE id = ?1 AND state = 'queued'",
        params![id, lane.as_str()],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("moving a turn"))
}

/// Marks a waiting turn to be skipped (or kept again); its place does not change. `false`
/// when it is not waiting.
pub fn set_skip(conn: &Connection, id: i64, skip: bool) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET skip = ?2 WHERE id = ?1 AND state = 'queued'",
        params![id, i64::from(skip)],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("skipping a turn"))
}

/// Drops a waiting turn that was skipped: `cancelled` as [`SKIPPED`], without a model turn.
pub fn drop_skipped(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Queued],
        "state = 'cancelled', error = ?2, done_ms = ?3",
        &[&SKIPPED, &now_ms],
    )
}

/// Removes a waiting turn (the person chose to): `cancelled`.
pub fn cancel(conn: &Connection, id: i64, why: &str, now_ms: i64) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Queued],
        "state = 'cancelled', error = ?2, done_ms = ?3",
        &[&why, &now_ms],
    )
}

/// The turns `user` wrote that have not reached pi (someone removed: these go).
pub fn waiting_from(conn: &Connection, user: i64) -> Result<Vec<Turn>> {
    select(
        conn,
        "WHERE from_user = ?1 AND state = 'queued' ORDER BY id",
        [user],
    )
}

/// The turn update `update_id` made, if any.
pub fn by_source_update(conn: &Connection, update_id: i64) -> Result<Option<Turn>> {
    Ok(select(
        conn,
        "WHERE source_update_id = ?1 ORDER BY id LIMIT 1",
        [update_id],
    )?
    .into_iter()
    .next())
}

/// The last turn of `identity` that reached pi (answered, failed or interrupted), for
/// `/retry`.
pub fn last_run_of(conn: &Connection, identity: &str) -> Result<Option<Turn>> {
    Ok(select(
        conn,
        "WHERE identity = ?1 AND state IN ('done', 'failed', 'interrupted') ORDER BY id DESC LIMIT 1",
        [identity],
    )?
    .into_iter()
    .next())
}

/// A waiting turn's new text (the person edited their message). `false` when pi has it.
pub fn edit_text(conn: &Connection, id: i64, text: &str) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET text = ?2 WHERE id = ?1 AND state = 'queued'",
        params![id, text],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("editing a turn"))
}

/// Turns handed to an instance and not finished (dispatched or acked), oldest first.
pub fn outstanding(conn: &Connection) -> Result<Vec<Turn>> {
    select(
        conn,
        "WHERE state IN ('dispatched', 'acked') ORDER BY id",
        [],
    )
}

/// Queued turns per identity (`None`: waiting for any instance).
pub fn queued_counts(conn: &Connection) -> Result<Vec<(Option<String>, i64)>> {
    let mut stmt = conn
        .prepare_cached("SELECT identity, count(*) FROM turns WHERE state = 'queued' GROUP BY identity ORDER BY identity")
        .map_err(StoreError::sqlite("counting turns"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(StoreError::sqlite("counting turns"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("counting turns"))
}

/// Queued turns that wait for the person's choice.
pub fn awaiting_choice(conn: &Connection) -> Result<i64> {
    conn.row(
        "SELECT count(*) FROM turns WHERE state = 'queued' AND identity IS NULL AND waits = 'choice'",
        [],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("counting turns"))
}

/// Turns per state; finished states include the turns retention pruned since.
pub fn counts(conn: &Connection) -> Result<Vec<(TurnState, i64)>> {
    let mut stmt = conn
        .prepare_cached("SELECT state, count(*) FROM turns GROUP BY state")
        .map_err(StoreError::sqlite("counting turns"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(StoreError::sqlite("counting turns"))?;
    let mut out: Vec<(TurnState, i64)> = TurnState::ALL.iter().map(|s| (*s, 0)).collect();
    for row in rows {
        let (state, n) = row.map_err(StoreError::sqlite("counting turns"))?;
        let state = TurnState::parse(&state)?;
        if let Some(slot) = out.iter_mut().find(|(s, _)| *s == state) {
            slot.1 = n;
        }
    }
    for (state, n) in &mut out {
        if matches!(
            state,
            TurnState::Done | TurnState::Cancelled | TurnState::Interrupted
        ) {
            *n += crate::retention::pruned(conn, "turns", state.as_str())?;
        }
    }
    Ok(out)
}

fn transition(
    conn: &Connection,
    id: i64,
    from: &[TurnState],
    set: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<bool> {
    let states: Vec<String> = from.iter().map(|s| format!("'{}'", s.as_str())).collect();
    let sql = format!(
        "UPDATE turns SET {set} WHERE id = ?1 AND state IN ({})",
        states.join(", ")
    );
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id];
    all.extend_from_slice(args);
    let n = conn
        .exec(&sql, all.as_slice())
        .map_err(StoreError::sqlite("updating a turn"))?;
    Ok(n == 1)
}

/// `queued -> dispatched` to an instance. Committed before the prompt is written, so a crash
/// right after leaves evidence that it may have been delivered.
pub fn mark_dispatched(
    conn: &Connection,
    id: i64,
    instance_id: &str,
    pid: Option<i64>,
    transport: crate::instances::Transport,
    now_ms: i64,
) -> Result<()> {
    if !transition(
        conn,
        id,
        &[TurnState::Queued],
        "state = 'dispatched', instance_id = ?2, instance_pid = ?3, transport = ?4, dispatched_ms = ?5",
        &[&instance_id, &pid, &transport, &now_ms],
    )? {
        return Err(StoreError::Corrupt(format!("turn {id} is not queued")));
    }
    Ok(())
}

/// `dispatched -> acked`. `false` when it was not dispatched (a late or repeated ack).
pub fn mark_acked(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Dispatched],
        "state = 'acked', acked_ms = ?2",
        &[&now_ms],
    )
}

/// An open turn becomes `done` with its result. `false` when it was already finished (a
/// result reported twice is stored once).
pub fn mark_done(
    conn: &Connection,
    id: i64,
    text: &str,
    aborted: bool,
    error: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    transition(
        conn,
        id,
        &[
            TurnState::Queued,
            TurnState::Dispatched,
            TurnState::Acked,
            TurnState::Interrupted,
        ],
        "state = 'done', result_text = ?2, aborted = ?3, error = ?4, done_ms = ?5",
        &[&text, &i64::from(aborted), &error, &now_ms],
    )
}

/// An outstanding turn whose instance went away: `interrupted`.
pub fn mark_interrupted(conn: &Connection, id: i64, why: &str, now_ms: i64) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Dispatched, TurnState::Acked],
        "state = 'interrupted', error = ?2, done_ms = ?3",
        &[&why, &now_ms],
    )
}

/// An outstanding turn is carried on by a new connection of the same process: its results come
/// through `instance_id` now.
pub fn adopt(conn: &Connection, id: i64, instance_id: &str) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Dispatched, TurnState::Acked],
        "instance_id = ?2",
        &[&instance_id],
    )
}

/// A dispatched turn the instance never received goes back to the queue.
pub fn requeue(conn: &Connection, id: i64) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Dispatched],
        "state = 'queued', instance_id = NULL, instance_pid = NULL, transport = NULL, dispatched_ms = NULL",
        &[],
    )
}

/// An outstanding turn whose pi is known not to have acted on it (a hub crash cut it off before
/// pi started anything) goes back to the queue, in its place (its number), to run again. Its
/// dispatch time stays: a queued turn that has one is such a turn ([`cut_off`]).
pub fn run_again(conn: &Connection, id: i64) -> Result<bool> {
    transition(
        conn,
        id,
        &[TurnState::Dispatched, TurnState::Acked],
        "state = 'queued', instance_id = NULL, instance_pid = NULL, transport = NULL, acked_ms = NULL",
        &[],
    )
}

/// `identity`'s turn that a hub crash cut off and [`run_again`] queued, not yet sent again: for
/// the person it is still the running one (an `/abort` stops it).
pub fn cut_off(conn: &Connection, identity: &str) -> Result<Option<Turn>> {
    Ok(select(
        conn,
        "WHERE state = 'queued' AND identity = ?1 AND dispatched_ms IS NOT NULL ORDER BY id LIMIT 1",
        [identity],
    )?
    .pop())
}

/// When the turn was dispatched (`None`: it was not, or is queued again).
pub fn dispatched_ms(conn: &Connection, id: i64) -> Result<Option<i64>> {
    conn.row("SELECT dispatched_ms FROM turns WHERE id = ?1", [id], |r| {
        r.get::<_, Option<i64>>(0)
    })
    .optional()
    .map(Option::flatten)
    .map_err(StoreError::sqlite("reading a turn's dispatch time"))
}

/// Turns that wait for their files or their group, oldest first.
pub fn preparing(conn: &Connection) -> Result<Vec<Turn>> {
    select(conn, "WHERE state = 'queued' AND ready = 0 ORDER BY id", [])
}

/// The turn still gathering the group `key`, if any.
pub fn gathering(conn: &Connection, key: &str) -> Result<Option<Turn>> {
    Ok(select(
        conn,
        "WHERE group_key = ?1 AND state = 'queued' AND ready = 0 AND gather_until_ms > 0
         ORDER BY id DESC LIMIT 1",
        [key],
    )?
    .pop())
}

/// A gathering turn takes another part: its text becomes `text`, and the group may go on
/// until `until_ms` (0: the group is complete).
pub fn gather(conn: &Connection, id: i64, text: &str, until_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET text = ?2, gather_until_ms = ?3
         WHERE id = ?1 AND state = 'queued' AND ready = 0",
        params![id, text, until_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("gathering a turn"))
}

/// A prepared turn is ready for pi, with what pi gets after the person's words.
pub fn set_ready(conn: &Connection, id: i64, context: Option<&str>) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET ready = 1, context = ?2, gather_until_ms = 0
         WHERE id = ?1 AND state = 'queued' AND ready = 0",
        params![id, context],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("readying a turn"))
}

/// Adds a block to what pi gets after the person's words (a reply's quote, a forward).
pub fn append_context(conn: &Connection, id: i64, block: &str) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET context = CASE WHEN context IS NULL OR context = '' THEN ?2
                                         ELSE context || char(10) || char(10) || ?2 END
         WHERE id = ?1 AND state = 'queued'",
        params![id, block],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("adding to a turn's context"))
}

/// A waiting turn gathers again (its comment was sent before forwards that arrived later):
/// not ready, in group `key`, until `until_ms`. `false` when it is not waiting any more.
pub fn regather(conn: &Connection, id: i64, key: &str, until_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET ready = 0, group_key = ?2, gather_until_ms = ?3
         WHERE id = ?1 AND state = 'queued'",
        params![id, key, until_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("regathering a turn"))
}

/// Holds queued turn `id` for stale question `question` (dispatch passes it by). `false` when
/// it is not queued any more.
pub fn hold_for(conn: &Connection, id: i64, question: i64) -> Result<bool> {
    conn.exec(
        "UPDATE turns SET held = 'asked', stale_question = ?2 WHERE id = ?1 AND state = 'queued'",
        params![id, question],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("holding a turn"))
}

/// The queued turns question `question` holds, oldest first.
pub fn held_by(conn: &Connection, question: i64) -> Result<Vec<Turn>> {
    select(
        conn,
        "WHERE stale_question = ?1 AND state = 'queued' AND held = 'asked' ORDER BY lane_seq",
        [question],
    )
}

/// The turns question `question` holds run now, without being asked about again. Returns how
/// many.
pub fn clear_held(conn: &Connection, question: i64) -> Result<usize> {
    conn.exec(
        "UPDATE turns SET held = 'cleared'
         WHERE stale_question = ?1 AND state = 'queued' AND held = 'asked'",
        [question],
    )
    .map_err(StoreError::sqlite("clearing held turns"))
}

/// How many queued turns are held for the person's answer.
pub fn held_count(conn: &Connection) -> Result<i64> {
    conn.row(
        "SELECT count(*) FROM turns WHERE state = 'queued' AND held = 'asked'",
        [],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("counting held turns"))
}

/// The number of the newest turn (0 before the first): a mark that tells the turns made
/// after it from those made before.
pub fn last_id(conn: &Connection) -> Result<i64> {
    conn.row("SELECT coalesce(max(id), 0) FROM turns", [], |r| r.get(0))
        .map_err(StoreError::sqlite("reading the newest turn"))
}

/// Whether turn `id` ended cut short: answered after an abort (`aborted`) or interrupted.
/// `None` while an instance has it (dispatched, acked); a turn waiting in the queue, or one the
/// store does not have, was not cut short.
pub fn cut_short(conn: &Connection, id: i64) -> Result<Option<bool>> {
    let row: Option<(String, Option<i64>)> = conn
        .row(
            "SELECT state, aborted FROM turns WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(StoreError::sqlite("reading how a turn ended"))?;
    let Some((state, aborted)) = row else {
        return Ok(Some(false));
    };
    Ok(match state.as_str() {
        "dispatched" | "acked" => None,
        "interrupted" => Some(true),
        "done" => Some(aborted == Some(1)),
        _ => Some(false),
    })
}
