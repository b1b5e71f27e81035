//! Threaded Mode's tables: bindings (identity -> topic), intents (written before
//! `createForumTopic`), recovery evidence (not epoch-fenced), topic cleanups (with their proof),
//! and the slot cursor.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::Cached;
use crate::{Result, StoreError, kv};

/// Key of the slot cursor (the last letter handed out).
pub const CURSOR: &str = "threads.cursor";
/// Key of the mode (`threaded` or `classic`) the hub last determined.
pub const MODE: &str = "threads.mode";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingState {
    /// A live instance uses the topic.
    Active,
    /// The identity is known, no live instance; the topic is kept.
    Offline,
    /// Telegram says the topic is gone; a new one is provisioned through the safe path.
    Lost,
}

impl BindingState {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Offline => "offline",
            Self::Lost => "lost",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "active" => Self::Active,
            "offline" => Self::Offline,
            "lost" => Self::Lost,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown binding state {other:?}"
                )));
            }
        })
    }
}

/// identity -> topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub identity: String,
    pub chat_id: i64,
    /// Topic.
    pub thread_id: i64,
    /// Slot letter.
    pub slot: String,
    /// Topic title.
    pub title: String,
    pub state: BindingState,
    /// The live instance using it.
    pub instance_id: Option<String>,
    /// Working directory of the identity.
    pub cwd: String,
    /// Lease epoch that committed it.
    pub epoch: i64,
    pub created_ms: i64,
    /// Last change.
    pub updated_ms: i64,
    pub offline_since_ms: Option<i64>,
}

const BINDING_COLUMNS: &str = "identity, chat_id, thread_id, slot, title, state, instance_id, cwd, epoch, created_ms, updated_ms, offline_since_ms";

fn binding_row(r: &Row<'_>) -> rusqlite::Result<(Binding, String)> {
    Ok((
        Binding {
            identity: r.get(0)?,
            chat_id: r.get(1)?,
            thread_id: r.get(2)?,
            slot: r.get(3)?,
            title: r.get(4)?,
            state: BindingState::Active,
            instance_id: r.get(6)?,
            cwd: r.get(7)?,
            epoch: r.get(8)?,
            created_ms: r.get(9)?,
            updated_ms: r.get(10)?,
            offline_since_ms: r.get(11)?,
        },
        r.get(5)?,
    ))
}

fn select_bindings(
    conn: &Connection,
    filter: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Binding>> {
    let ctx = "reading bindings";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {BINDING_COLUMNS} FROM bindings {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, binding_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (mut b, state) = r.map_err(StoreError::sqlite(ctx))?;
        b.state = BindingState::parse(&state)?;
        Ok(b)
    })
    .collect()
}

/// The binding of an identity.
pub fn binding(conn: &Connection, identity: &str) -> Result<Option<Binding>> {
    Ok(select_bindings(conn, "WHERE identity = ?1", [identity])?.pop())
}

/// The binding of a topic.
pub fn binding_by_thread(
    conn: &Connection,
    chat_id: i64,
    thread_id: i64,
) -> Result<Option<Binding>> {
    Ok(select_bindings(
        conn,
        "WHERE chat_id = ?1 AND thread_id = ?2",
        [chat_id, thread_id],
    )?
    .pop())
}

/// Every binding, by slot.
pub fn bindings(conn: &Connection) -> Result<Vec<Binding>> {
    select_bindings(conn, "ORDER BY slot", [])
}

/// Stores a new binding (the identity has none).
pub fn insert_binding(conn: &Connection, b: &Binding) -> Result<()> {
    conn.exec(
        &format!("INSERT INTO bindings({BINDING_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
        params![
            b.identity,
            b.chat_id,
            b.thread_id,
            b.slot,
            b.title,
            b.state.as_str(),
            b.instance_id,
            b.cwd,
            b.epoch,
            b.created_ms,
            b.updated_ms,
            b.offline_since_ms
        ],
    )
    .map(drop)
    .map_err(StoreError::sqlite("storing a binding"))
}

/// Changes a binding's state (and instance).
pub fn set_binding_state(
    conn: &Connection,
    identity: &str,
    state: BindingState,
    instance_id: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    let offline = (state == BindingState::Offline).then_some(now_ms);
    let n = conn
        .exec(
            "UPDATE bindings SET state = ?2, instance_id = ?3, updated_ms = ?4,
                    offline_since_ms = CASE WHEN ?2 = 'offline' THEN coalesce(offline_since_ms, ?5) ELSE NULL END
             WHERE identity = ?1",
            params![identity, state.as_str(), instance_id, now_ms, offline],
        )
        .map_err(StoreError::sqlite("updating a binding"))?;
    Ok(n == 1)
}

/// Removes a binding (its slot is free again).
pub fn delete_binding(conn: &Connection, identity: &str) -> Result<bool> {
    conn.exec("DELETE FROM bindings WHERE identity = ?1", [identity])
        .map(|n| n == 1)
        .map_err(StoreError::sqlite("removing a binding"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntentState {
    /// Its hub is creating the topic right now.
    InFlight,
    /// The outcome of `createForumTopic` is unknown; the person decides.
    Ambiguous,
}

impl IntentState {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InFlight => "in-flight",
            Self::Ambiguous => "ambiguous",
        }
    }
}

/// A durable intent to create a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    pub id: i64,
    pub identity: String,
    /// Instance it is for.
    pub instance_id: Option<String>,
    pub chat_id: i64,
    /// Working directory.
    pub cwd: String,
    /// Slot held.
    pub slot: String,
    pub title: String,
    /// Epoch of the hub that wrote it.
    pub epoch: i64,
    pub state: IntentState,
    /// Thread id, once known.
    pub thread_id: Option<i64>,
    pub created_ms: i64,
    /// Why it is ambiguous.
    pub detail: Option<String>,
}

const INTENT_COLUMNS: &str = "id, identity, instance_id, chat_id, cwd, slot, title, epoch, state, thread_id, created_ms, detail";

fn select_intents(
    conn: &Connection,
    filter: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Intent>> {
    let ctx = "reading intents";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {INTENT_COLUMNS} FROM intents {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, |r| {
            let state: String = r.get(8)?;
            Ok((
                Intent {
                    id: r.get(0)?,
                    identity: r.get(1)?,
                    instance_id: r.get(2)?,
                    chat_id: r.get(3)?,
                    cwd: r.get(4)?,
                    slot: r.get(5)?,
                    title: r.get(6)?,
                    epoch: r.get(7)?,
                    state: IntentState::InFlight,
                    thread_id: r.get(9)?,
                    created_ms: r.get(10)?,
                    detail: r.get(11)?,
                },
                state,
            ))
        })
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (mut i, state) = r.map_err(StoreError::sqlite(ctx))?;
        i.state = match state.as_str() {
            "in-flight" => IntentState::InFlight,
            "ambiguous" => IntentState::Ambiguous,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown intent state {other:?}"
                )));
            }
        };
        Ok(i)
    })
    .collect()
}

#[derive(Debug, Clone)]
pub struct NewIntent<'a> {
    pub identity: &'a str,
    pub instance_id: Option<&'a str>,
    pub chat_id: i64,
    /// Working directory.
    pub cwd: &'a str,
    pub slot: &'a str,
    pub title: &'a str,
    pub epoch: i64,
}

/// Writes an in-flight intent; returns its id.
pub fn insert_intent(conn: &Connection, i: &NewIntent<'_>, now_ms: i64) -> Result<i64> {
    conn.exec(
        "INSERT INTO intents(identity, instance_id, chat_id, cwd, slot, title, epoch, state, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'in-flight', ?8)",
        params![i.identity, i.instance_id, i.chat_id, i.cwd, i.slot, i.title, i.epoch, now_ms],
    )
    .map_err(StoreError::sqlite("writing an intent"))?;
    Ok(conn.last_insert_rowid())
}

/// The intent of an identity.
pub fn intent_for(conn: &Connection, identity: &str) -> Result<Option<Intent>> {
    Ok(select_intents(conn, "WHERE identity = ?1", [identity])?.pop())
}

/// An intent by id.
pub fn intent(conn: &Connection, id: i64) -> Result<Option<Intent>> {
    Ok(select_intents(conn, "WHERE id = ?1", [id])?.pop())
}

/// Every intent.
pub fn intents(conn: &Connection) -> Result<Vec<Intent>> {
    select_intents(conn, "ORDER BY id", [])
}

/// Marks an intent ambiguous (the topic may exist).
pub fn set_intent_ambiguous(conn: &Connection, id: i64, detail: &str) -> Result<()> {
    conn.exec(
        "UPDATE intents SET state = 'ambiguous', detail = ?2 WHERE id = ?1",
        params![id, detail],
    )
    .map(drop)
    .map_err(StoreError::sqlite("updating an intent"))
}

/// Removes an intent.
pub fn delete_intent(conn: &Connection, id: i64) -> Result<bool> {
    conn.exec("DELETE FROM intents WHERE id = ?1", [id])
        .map(|n| n == 1)
        .map_err(StoreError::sqlite("removing an intent"))
}

/// Recovery evidence: a topic a hub created after it lost the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The intent it belongs to.
    pub intent_id: i64,
    pub identity: String,
    /// Epoch of the hub that created the topic.
    pub epoch: i64,
    pub chat_id: i64,
    /// The topic.
    pub thread_id: i64,
    pub recorded_ms: i64,
}

/// Records evidence (deliberately outside epoch fencing).
pub fn record_evidence(conn: &Connection, e: &Evidence) -> Result<()> {
    conn.exec(
        "INSERT INTO evidence(intent_id, identity, epoch, chat_id, thread_id, recorded_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(intent_id) DO UPDATE SET thread_id = excluded.thread_id",
        params![e.intent_id, e.identity, e.epoch, e.chat_id, e.thread_id, e.recorded_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording evidence"))
}

/// Evidence for an identity (oldest first) or all of it.
pub fn evidence(conn: &Connection, identity: Option<&str>) -> Result<Vec<Evidence>> {
    let ctx = "reading evidence";
    let sql = match identity {
        Some(_) => {
            "SELECT intent_id, identity, epoch, chat_id, thread_id, recorded_ms FROM evidence WHERE identity = ?1 ORDER BY intent_id"
        }
        None => {
            "SELECT intent_id, identity, epoch, chat_id, thread_id, recorded_ms FROM evidence WHERE ?1 IS NULL ORDER BY intent_id"
        }
    };
    let mut stmt = conn.prepare_cached(sql).map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([identity], |r| {
            Ok(Evidence {
                intent_id: r.get(0)?,
                identity: r.get(1)?,
                epoch: r.get(2)?,
                chat_id: r.get(3)?,
                thread_id: r.get(4)?,
                recorded_ms: r.get(5)?,
            })
        })
        .map_err(StoreError::sqlite(ctx))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite(ctx))
}

/// Removes evidence once adopted or cleaned up.
pub fn delete_evidence(conn: &Connection, intent_id: i64) -> Result<()> {
    conn.exec("DELETE FROM evidence WHERE intent_id = ?1", [intent_id])
        .map(drop)
        .map_err(StoreError::sqlite("removing evidence"))
}

/// A topic to delete, with the proof that allows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleanup {
    pub id: i64,
    pub chat_id: i64,
    /// Topic.
    pub thread_id: i64,
    /// `disconnected:<identity>`, `replaced:<identity>`, `moved:<identity>`, `duplicate:<intent>`.
    pub proof: String,
    /// Attempts so far.
    pub attempts: i64,
    /// Not before.
    pub next_ms: i64,
    pub last_error: Option<String>,
}

/// Queues a cleanup (once per topic).
pub fn add_cleanup(
    conn: &Connection,
    chat_id: i64,
    thread_id: i64,
    proof: &str,
    now_ms: i64,
) -> Result<()> {
    conn.exec(
        "INSERT INTO cleanups(chat_id, thread_id, proof, state, created_ms) VALUES (?1, ?2, ?3, 'pending', ?4)
         ON CONFLICT DO NOTHING",
        params![chat_id, thread_id, proof, now_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("queueing a cleanup"))
}

/// Pending cleanups, due ones first.
pub fn pending_cleanups(conn: &Connection) -> Result<Vec<Cleanup>> {
    let ctx = "reading cleanups";
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, chat_id, thread_id, proof, attempts, next_ms, last_error FROM cleanups
             WHERE state = 'pending' ORDER BY next_ms, id",
        )
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Cleanup {
                id: r.get(0)?,
                chat_id: r.get(1)?,
                thread_id: r.get(2)?,
                proof: r.get(3)?,
                attempts: r.get(4)?,
                next_ms: r.get(5)?,
                last_error: r.get(6)?,
            })
        })
        .map_err(StoreError::sqlite(ctx))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite(ctx))
}

/// A cleanup is finished (the topic is gone, or must not be touched: `note` says which).
pub fn finish_cleanup(conn: &Connection, id: i64, note: Option<&str>, now_ms: i64) -> Result<()> {
    conn.exec(
        "UPDATE cleanups SET state = 'done', done_ms = ?2, last_error = coalesce(?3, last_error) WHERE id = ?1",
        params![id, now_ms, note],
    )
    .map(drop)
    .map_err(StoreError::sqlite("finishing a cleanup"))
}

/// A cleanup failed; try again at `next_ms`.
pub fn retry_cleanup(conn: &Connection, id: i64, next_ms: i64, error: &str) -> Result<()> {
    conn.exec(
        "UPDATE cleanups SET attempts = attempts + 1, next_ms = ?2, last_error = ?3 WHERE id = ?1",
        params![id, next_ms, error],
    )
    .map(drop)
    .map_err(StoreError::sqlite("rescheduling a cleanup"))
}

/// Slots held by bindings or intents.
pub fn held_slots(conn: &Connection) -> Result<Vec<String>> {
    let ctx = "reading slots";
    let mut stmt = conn
        .prepare_cached("SELECT slot FROM bindings UNION SELECT slot FROM intents ORDER BY 1")
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map([], |r| r.get(0))
        .map_err(StoreError::sqlite(ctx))?;
    rows.collect::<rusqlite::Result<Vec<String>>>()
        .map_err(StoreError::sqlite(ctx))
}

/// The slot cursor.
pub fn cursor(conn: &Connection) -> Result<Option<String>> {
    kv::get(conn, CURSOR)
}

/// Moves the slot cursor.
pub fn set_cursor(conn: &Connection, slot: &str) -> Result<()> {
    kv::set(conn, CURSOR, slot)
}

/// Whether the person wrote in this topic since `since_ms` (a topic observed open recently is
/// never deleted).
pub fn active_since(
    conn: &Connection,
    chat_id: i64,
    thread_id: i64,
    since_ms: i64,
) -> Result<bool> {
    conn.row(
        "SELECT EXISTS(SELECT 1 FROM turns WHERE chat_id = ?1 AND thread_id = ?2 AND created_ms >= ?3)",
        params![chat_id, thread_id, since_ms],
        |r| r.get(0),
    )
    .optional()
    .map(|v| v.unwrap_or(false))
    .map_err(StoreError::sqlite("reading topic activity"))
}
