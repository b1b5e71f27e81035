//! pi instances the hub has seen: one row per connection (a new id every time), kept after they
//! leave so `status` and routing can name them.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::Cached;
use crate::{Result, StoreError};

/// What an instance is doing, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// Connected, waiting for a turn.
    Idle,
    /// Connected, working.
    Busy,
    /// Left (its row stays, so `status` and routing can name it).
    Gone,
}

impl InstanceState {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Busy => "busy",
            Self::Gone => "gone",
        }
    }

    /// From its stored text.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => Self::Idle,
            "busy" => Self::Busy,
            "gone" => Self::Gone,
            _ => return None,
        })
    }

    /// Busy or idle, as pi said.
    pub fn working(busy: bool) -> Self {
        if busy { Self::Busy } else { Self::Idle }
    }
}

impl rusqlite::types::ToSql for InstanceState {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for InstanceState {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = v.as_str()?;
        Self::parse(text).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("unknown instance state {text:?}").into())
        })
    }
}

/// How the hub reaches an instance, as stored (instances and the turns dispatched to them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// The extension over `hub.sock` (the person's own pi).
    Shim,
    /// A `pi --mode rpc` child of the hub.
    Rpc,
    /// The built-in echo agent (the demo without pi).
    Echo,
}

impl Transport {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shim => "shim",
            Self::Rpc => "rpc",
            Self::Echo => "echo",
        }
    }

    /// From its stored text.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "shim" => Self::Shim,
            "rpc" => Self::Rpc,
            "echo" => Self::Echo,
            _ => return None,
        })
    }
}

impl rusqlite::types::ToSql for Transport {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for Transport {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = v.as_str()?;
        Self::parse(text).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("unknown transport {text:?}").into())
        })
    }
}

/// Why an instance left. Stored as its [`detail`](Self::detail), the words `status` shows, so
/// a database read back gives the same text it always did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoneReason {
    /// The person ran `/telegram-disconnect`.
    Disconnected,
    /// pi is shutting down (or replacing its session).
    Shutdown,
    /// pi quit on purpose (`/quit`, Ctrl+D, SIGTERM): its process ends.
    Quit,
    /// The process exited (RPC children).
    Exited(String),
    /// The connection dropped without a goodbye.
    ConnectionLost(String),
    /// The hub closed it (protocol error, peer not reading, hub stopping).
    Closed(String),
    /// It was live when the hub stopped (recorded by the next hub; no link reports it).
    HubRestarted,
    /// Words an earlier hub stored that this one does not write (kept as they were, since the
    /// column has no constraint and refusing them would hide the whole row).
    Earlier(String),
}

impl GoneReason {
    /// Whether the pi process behind it is known to be gone (its turns cannot come back).
    pub fn process_gone(&self) -> bool {
        matches!(
            self,
            Self::Shutdown | Self::Quit | Self::Exited(_) | Self::Disconnected
        )
    }

    /// A short text for people: what happened, in plain words, without error details.
    pub fn describe(&self) -> String {
        match self {
            Self::Earlier(text) => text.clone(),
            _ => self.words().into(),
        }
    }

    /// The plain words of a variant; its detail goes after them in parentheses.
    fn words(&self) -> &'static str {
        match self {
            Self::Disconnected => "disconnected from Telegram (/telegram-disconnect)",
            Self::Shutdown => "pi closed its session",
            Self::Quit => "pi quit",
            Self::Exited(_) => "pi exited",
            Self::ConnectionLost(_) => "its connection to the hub was lost",
            Self::Closed(_) => "the hub closed its connection",
            Self::HubRestarted => "the hub restarted",
            Self::Earlier(_) => "",
        }
    }

    /// [`describe`](Self::describe) with the technical detail, for `status` and the log; the
    /// stored text.
    pub fn detail(&self) -> String {
        match self {
            Self::Disconnected
            | Self::Shutdown
            | Self::Quit
            | Self::HubRestarted
            | Self::Earlier(_) => self.describe(),
            Self::Exited(why) | Self::ConnectionLost(why) | Self::Closed(why) => {
                format!("{} ({why})", self.words())
            }
        }
    }

    /// From its stored text: the inverse of [`detail`](Self::detail), anything else kept as
    /// [`Earlier`](Self::Earlier).
    pub fn parse(text: &str) -> Self {
        for plain in [
            Self::Disconnected,
            Self::Shutdown,
            Self::Quit,
            Self::HubRestarted,
        ] {
            if text == plain.words() {
                return plain;
            }
        }
        let makers: [fn(String) -> Self; 3] = [Self::Exited, Self::ConnectionLost, Self::Closed];
        for make in makers {
            let words = make(String::new()).words();
            let why = text
                .strip_prefix(words)
                .and_then(|rest| rest.strip_prefix(" ("))
                .and_then(|rest| rest.strip_suffix(')'));
            if let Some(why) = why {
                return make(why.to_owned());
            }
        }
        Self::Earlier(text.to_owned())
    }
}

impl rusqlite::types::ToSql for GoneReason {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.detail().into())
    }
}

impl rusqlite::types::FromSql for GoneReason {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        Ok(Self::parse(v.as_str()?))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRow {
    /// Instance id (`i<n>`).
    pub id: String,
    /// Identity: what lets a returning pi take its place (by default the cwd).
    pub identity: String,
    /// How the hub reaches it.
    pub transport: Transport,
    /// Process id.
    pub pid: Option<i64>,
    /// Working directory.
    pub cwd: String,
    /// Name shown to the person (the project).
    pub label: String,
    /// pi session id.
    pub session_id: Option<String>,
    /// Idle, busy or gone.
    pub state: InstanceState,
    /// Connected at.
    pub connected_ms: i64,
    /// Left at.
    pub gone_ms: Option<i64>,
    /// Why it left.
    pub gone_reason: Option<GoneReason>,
}

const COLUMNS: &str = "id, identity, transport, pid, cwd, label, session_id, state, connected_ms, gone_ms, gone_reason";

fn from_row(r: &Row<'_>) -> rusqlite::Result<InstanceRow> {
    Ok(InstanceRow {
        id: r.get(0)?,
        identity: r.get(1)?,
        transport: r.get(2)?,
        pid: r.get(3)?,
        cwd: r.get(4)?,
        label: r.get(5)?,
        session_id: r.get(6)?,
        state: r.get(7)?,
        connected_ms: r.get(8)?,
        gone_ms: r.get(9)?,
        gone_reason: r.get(10)?,
    })
}

fn select(
    conn: &Connection,
    filter: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<InstanceRow>> {
    let ctx = "reading instances";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM instances {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite(ctx))
}

/// Records a connected instance.
pub fn insert(conn: &Connection, row: &InstanceRow) -> Result<()> {
    conn.exec(
        "INSERT INTO instances(id, identity, transport, pid, cwd, label, session_id, state, connected_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![row.id, row.identity, row.transport, row.pid, row.cwd, row.label, row.session_id, row.state, row.connected_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("recording an instance"))
}

/// Updates a live instance's state (`idle`/`busy`).
pub fn set_state(conn: &Connection, id: &str, state: InstanceState) -> Result<()> {
    conn.exec(
        "UPDATE instances SET state = ?2 WHERE id = ?1 AND state != 'gone'",
        params![id, state],
    )
    .map(drop)
    .map_err(StoreError::sqlite("updating an instance"))
}

/// Marks an instance gone.
pub fn mark_gone(conn: &Connection, id: &str, reason: &GoneReason, now_ms: i64) -> Result<()> {
    conn.exec(
        "UPDATE instances SET state = 'gone', gone_ms = ?2, gone_reason = ?3 WHERE id = ?1 AND state != 'gone'",
        params![id, now_ms, reason],
    )
    .map(drop)
    .map_err(StoreError::sqlite("updating an instance"))
}

/// At hub start every instance of the previous hub is gone (their connections died with it).
pub fn mark_all_gone(conn: &Connection, reason: GoneReason, now_ms: i64) -> Result<usize> {
    conn.exec(
        "UPDATE instances SET state = 'gone', gone_ms = ?1, gone_reason = ?2 WHERE state != 'gone'",
        params![now_ms, reason],
    )
    .map_err(StoreError::sqlite("updating instances"))
}

/// Live instances, oldest first.
pub fn live(conn: &Connection) -> Result<Vec<InstanceRow>> {
    select(conn, "WHERE state != 'gone' ORDER BY connected_ms, id", [])
}

/// The newest instance of `identity`, live or gone.
pub fn last_of(conn: &Connection, identity: &str) -> Result<Option<InstanceRow>> {
    Ok(select(
        conn,
        "WHERE identity = ?1 ORDER BY connected_ms DESC, id DESC LIMIT 1",
        [identity],
    )?
    .pop())
}

/// When instance `id` connected.
pub fn connected_ms(conn: &Connection, id: &str) -> Result<Option<i64>> {
    conn.row(
        "SELECT connected_ms FROM instances WHERE id = ?1",
        [id],
        |r| r.get(0),
    )
    .optional()
    .map_err(StoreError::sqlite("reading an instance"))
}

/// When a pi of `identity` last went away at or before `at_ms`, if one ever did.
pub fn left_before(conn: &Connection, identity: &str, at_ms: i64) -> Result<Option<i64>> {
    conn.row(
        "SELECT max(gone_ms) FROM instances WHERE identity = ?1 AND gone_ms <= ?2",
        params![identity, at_ms],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("reading when a pi left"))
}

/// The most recent instances (live ones and the last that left), newest first.
pub fn recent(conn: &Connection, n: i64) -> Result<Vec<InstanceRow>> {
    select(
        conn,
        "ORDER BY (state != 'gone') DESC, connected_ms DESC LIMIT ?1",
        [n],
    )
}

/// The next instance number (`i<n>`), never reused.
pub fn next_number(conn: &Connection) -> Result<i64> {
    let n = crate::kv::get_i64(conn, "instances.next")?.unwrap_or(1);
    crate::kv::set_i64(conn, "instances.next", n + 1)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_reasons_read_back_as_written() {
        let all = [
            GoneReason::Disconnected,
            GoneReason::Shutdown,
            GoneReason::Exited("exit status: 1".into()),
            GoneReason::ConnectionLost("reset (os error 104)".into()),
            GoneReason::Closed(String::new()),
            GoneReason::HubRestarted,
        ];
        for r in all {
            assert_eq!(GoneReason::parse(&r.detail()), r);
        }
        // The words of earlier hubs stay what they were.
        for text in ["the connection was lost (eof)", "exited", "pi exited (", ""] {
            assert_eq!(GoneReason::parse(text).detail(), text);
        }
    }

    #[test]
    fn transports_read_back_as_written() {
        for t in [Transport::Shim, Transport::Rpc, Transport::Echo] {
            assert_eq!(Transport::parse(t.as_str()), Some(t));
        }
        assert_eq!(Transport::parse("tcp"), None);
    }
}
