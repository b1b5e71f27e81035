//! Headless pi instances the hub started (`spawn`, `/new` from Telegram): what a restarted hub
//! starts again, on the same pi session. A row is `running` from the request until the instance
//! exits by itself (`exited`), is closed by the person (`closed`) or cannot be started again
//! (`lost`: its folder vanished, pi refused); only `running` rows are started at the next start.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError};

/// The life of a spawned instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnState {
    /// Wanted: started again after a hub restart.
    Running,
    /// pi exited by itself.
    Exited,
    /// The person closed it.
    Closed,
    /// It could not be started again.
    Lost,
}

impl SpawnState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Exited => "exited",
            Self::Closed => "closed",
            Self::Lost => "lost",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "exited" => Self::Exited,
            "closed" => Self::Closed,
            "lost" => Self::Lost,
            _ => return None,
        })
    }
}

/// A spawned instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    pub id: i64,
    /// Its folder.
    pub cwd: String,
    /// Environment given at the request (how to find pi), as pairs.
    pub env: Vec<(String, String)>,
    /// pi's session file, once pi reported it.
    pub session_file: Option<String>,
    /// The hub instance of its current process.
    pub instance_id: Option<String>,
    pub state: SpawnState,
    /// Why it ended.
    pub detail: Option<String>,
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Spawned, String, String)> {
    Ok((
        Spawned {
            id: r.get(0)?,
            cwd: r.get(1)?,
            env: Vec::new(),
            session_file: r.get(3)?,
            instance_id: r.get(4)?,
            state: SpawnState::Running,
            detail: r.get(6)?,
        },
        r.get::<_, String>(2)?,
        r.get::<_, String>(5)?,
    ))
}

fn finish(raw: (Spawned, String, String)) -> Result<Spawned> {
    let (mut s, env, state) = raw;
    s.env = serde_json::from_str(&env)
        .map_err(|e| StoreError::Corrupt(format!("spawned {}: env: {e}", s.id)))?;
    s.state = SpawnState::parse(&state)
        .ok_or_else(|| StoreError::Corrupt(format!("spawned {}: state {state}", s.id)))?;
    Ok(s)
}

const COLUMNS: &str = "id, cwd, env, session_file, instance_id, state, detail";

/// Records a request to run pi in `cwd` (before it is started: a crash in between starts it at
/// the next start).
pub fn insert(conn: &Connection, cwd: &str, env: &[(String, String)], now: i64) -> Result<i64> {
    let env =
        serde_json::to_string(env).map_err(|e| StoreError::Corrupt(format!("spawned env: {e}")))?;
    conn.exec(
        "INSERT INTO spawned (cwd, env, state, created_ms, updated_ms)
         VALUES (?1, ?2, 'running', ?3, ?3)",
        params![cwd, env, now],
    )
    .map_err(StoreError::sqlite("recording a spawned instance"))?;
    Ok(conn.last_insert_rowid())
}

/// The instances to start again.
pub fn running(conn: &Connection) -> Result<Vec<Spawned>> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM spawned WHERE state = 'running' ORDER BY id"
        ))
        .map_err(StoreError::sqlite("reading spawned instances"))?;
    let rows = stmt
        .query_map([], row)
        .map_err(StoreError::sqlite("reading spawned instances"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("reading spawned instances"))?;
    rows.into_iter().map(finish).collect()
}

/// One row.
pub fn get(conn: &Connection, id: i64) -> Result<Option<Spawned>> {
    conn.row(
        &format!("SELECT {COLUMNS} FROM spawned WHERE id = ?1"),
        [id],
        row,
    )
    .optional()
    .map_err(StoreError::sqlite("reading a spawned instance"))?
    .map(finish)
    .transpose()
}

/// The running row whose current process is `instance_id`.
pub fn by_instance(conn: &Connection, instance_id: &str) -> Result<Option<Spawned>> {
    conn.row(
        &format!("SELECT {COLUMNS} FROM spawned WHERE instance_id = ?1 AND state = 'running'"),
        [instance_id],
        row,
    )
    .optional()
    .map_err(StoreError::sqlite("reading a spawned instance"))?
    .map(finish)
    .transpose()
}

/// Whether the person closed the pi that ran as instance `instance_id`.
pub fn closed_by_person(conn: &Connection, instance_id: &str) -> Result<bool> {
    conn.row(
        "SELECT EXISTS(SELECT 1 FROM spawned WHERE instance_id = ?1 AND state = 'closed')",
        [instance_id],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("reading a spawned instance"))
}

/// pi started: its instance and session file.
pub fn started(
    conn: &Connection,
    id: i64,
    instance_id: &str,
    session_file: Option<&str>,
    now: i64,
) -> Result<()> {
    conn.exec(
        "UPDATE spawned SET instance_id = ?2, session_file = COALESCE(?3, session_file),
             updated_ms = ?4 WHERE id = ?1",
        params![id, instance_id, session_file, now],
    )
    .map_err(StoreError::sqlite("recording a started instance"))?;
    Ok(())
}

/// pi now works on another session (a new or resumed one).
pub fn set_session(
    conn: &Connection,
    instance_id: &str,
    session_file: &str,
    now: i64,
) -> Result<()> {
    conn.exec(
        "UPDATE spawned SET session_file = ?2, updated_ms = ?3
         WHERE instance_id = ?1 AND state = 'running'",
        params![instance_id, session_file, now],
    )
    .map_err(StoreError::sqlite("recording a session"))?;
    Ok(())
}

/// Ends a row (only a running one); `false` when it was not running.
pub fn end(conn: &Connection, id: i64, state: SpawnState, detail: &str, now: i64) -> Result<bool> {
    let n = conn
        .exec(
            "UPDATE spawned SET state = ?2, detail = ?3, updated_ms = ?4
             WHERE id = ?1 AND state = 'running'",
            params![id, state.as_str(), detail, now],
        )
        .map_err(StoreError::sqlite("ending a spawned instance"))?;
    Ok(n == 1)
}

/// Forgets a request whose first start failed (the person was told at once).
pub fn delete(conn: &Connection, id: i64) -> Result<()> {
    conn.exec("DELETE FROM spawned WHERE id = ?1", [id])
        .map_err(StoreError::sqlite("forgetting a spawned instance"))?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Store;

    #[test]
    fn a_row_lives_from_request_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        store
            .write(|tx| {
                let env = vec![("PATH".to_owned(), "/bin".to_owned())];
                let a = insert(tx, "/w/a", &env, 1)?;
                let b = insert(tx, "/w/b", &[], 1)?;
                started(tx, a, "i1", Some("/s/a.jsonl"), 2)?;
                started(tx, b, "i2", None, 2)?;
                let all = running(tx)?;
                assert_eq!(all.len(), 2);
                assert_eq!(all[0].env, env);
                assert_eq!(all[0].session_file.as_deref(), Some("/s/a.jsonl"));
                set_session(tx, "i1", "/s/a2.jsonl", 3)?;
                assert_eq!(
                    by_instance(tx, "i1")?.unwrap().session_file.as_deref(),
                    Some("/s/a2.jsonl")
                );
                // A restart keeps the session when the new process reports none yet.
                started(tx, a, "i3", None, 4)?;
                assert_eq!(
                    get(tx, a)?.unwrap().session_file.as_deref(),
                    Some("/s/a2.jsonl")
                );
                assert!(end(tx, b, SpawnState::Lost, "folder gone", 5)?);
                assert!(!end(tx, b, SpawnState::Closed, "again", 6)?, "only once");
                assert_eq!(get(tx, b)?.unwrap().state, SpawnState::Lost);
                assert_eq!(running(tx)?.len(), 1);
                assert_eq!(by_instance(tx, "i2")?, None);
                Ok::<_, StoreError>(())
            })
            .unwrap();
    }
}
