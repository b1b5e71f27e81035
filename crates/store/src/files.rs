//! Files that came with a turn (photos, documents, voice notes, ...). A handler records them in
//! the update's transaction; the inbound task downloads each one and settles it: `pending ->
//! saved | refused | failed`. The turn stays not ready until every file of it is settled.

use rusqlite::{Connection, Row, params};

use crate::Cached;
use crate::{Result, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// Not downloaded yet.
    Pending,
    /// Downloaded to `path`.
    Saved,
    /// Not downloaded on purpose (over a size limit); `error` says why.
    Refused,
    /// Could not be downloaded; `error` says why.
    Failed,
}

impl FileState {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Saved => "saved",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pending" => Self::Pending,
            "saved" => Self::Saved,
            "refused" => Self::Refused,
            "failed" => Self::Failed,
            other => return Err(StoreError::Corrupt(format!("unknown file state {other:?}"))),
        })
    }
}

/// Whose content a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The person's own message.
    Message,
    /// A message the person forwarded.
    Forward,
}

impl Origin {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Forward => "forward",
        }
    }

    fn parse(s: &str) -> Self {
        if s == "forward" {
            Self::Forward
        } else {
            Self::Message
        }
    }
}

/// A file to record.
#[derive(Debug, Clone)]
pub struct NewFile<'a> {
    /// The turn it belongs to.
    pub turn_id: i64,
    /// The update that carried it (with `seq`, at most one row per file of an update).
    pub source_update_id: Option<i64>,
    /// Its place in the update.
    pub seq: i64,
    /// Whose it is.
    pub origin: Origin,
    /// `photo`, `document`, `audio`, `voice`, `video`, `video_note`, `animation`, `sticker`.
    pub kind: &'a str,
    /// Telegram's file id.
    pub file_id: &'a str,
    /// Telegram's stable id.
    pub file_unique_id: Option<&'a str>,
    /// The name the sender gave it.
    pub name: Option<&'a str>,
    /// MIME type.
    pub mime: Option<&'a str>,
    /// Declared size in bytes.
    pub size: Option<i64>,
}

/// A stored file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub id: i64,
    pub turn_id: i64,
    pub source_update_id: Option<i64>,
    /// Place in its update.
    pub seq: i64,
    /// Whose it is.
    pub origin: Origin,
    pub kind: String,
    /// Telegram's file id.
    pub file_id: String,
    /// Telegram's stable id.
    pub file_unique_id: Option<String>,
    /// Name as sent.
    pub name: Option<String>,
    /// MIME type.
    pub mime: Option<String>,
    /// Declared size.
    pub size: Option<i64>,
    pub state: FileState,
    /// Where it was saved.
    pub path: Option<String>,
    /// Why it was refused or failed.
    pub error: Option<String>,
    /// What an inbound handler made of it (a transcript, extracted text).
    pub output: Option<String>,
    /// Download attempts so far.
    pub attempts: i64,
    /// Not retried before this time.
    pub not_before_ms: i64,
}

const COLUMNS: &str = "id, turn_id, source_update_id, seq, origin, kind, file_id, file_unique_id,
    name, mime, size, state, path, error, output, attempts, not_before_ms";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(File, String, String)> {
    Ok((
        File {
            id: r.get(0)?,
            turn_id: r.get(1)?,
            source_update_id: r.get(2)?,
            seq: r.get(3)?,
            origin: Origin::Message,
            kind: r.get(5)?,
            file_id: r.get(6)?,
            file_unique_id: r.get(7)?,
            name: r.get(8)?,
            mime: r.get(9)?,
            size: r.get(10)?,
            state: FileState::Pending,
            path: r.get(12)?,
            error: r.get(13)?,
            output: r.get(14)?,
            attempts: r.get(15)?,
            not_before_ms: r.get(16)?,
        },
        r.get(4)?,
        r.get(11)?,
    ))
}

fn select(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Vec<File>> {
    let ctx = "reading files";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM files {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| {
        let (mut f, origin, state) = r.map_err(StoreError::sqlite(ctx))?;
        f.origin = Origin::parse(&origin);
        f.state = FileState::parse(&state)?;
        Ok(f)
    })
    .collect()
}

/// Records a file; `None` when its update recorded it already.
pub fn create(conn: &Connection, f: &NewFile<'_>, now_ms: i64) -> Result<Option<i64>> {
    let n = conn
        .exec(
            "INSERT INTO files(turn_id, source_update_id, seq, origin, kind, file_id,
                               file_unique_id, name, mime, size, state, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending', ?11)
             ON CONFLICT DO NOTHING",
            params![
                f.turn_id,
                f.source_update_id,
                f.seq,
                f.origin.as_str(),
                f.kind,
                f.file_id,
                f.file_unique_id,
                f.name,
                f.mime,
                f.size,
                now_ms
            ],
        )
        .map_err(StoreError::sqlite("recording a file"))?;
    Ok((n == 1).then(|| conn.last_insert_rowid()))
}

/// The files of a turn, in the order they came.
pub fn of_turn(conn: &Connection, turn_id: i64) -> Result<Vec<File>> {
    select(conn, "WHERE turn_id = ?1 ORDER BY id", [turn_id])
}

/// A file by id.
pub fn get(conn: &Connection, id: i64) -> Result<Option<File>> {
    Ok(select(conn, "WHERE id = ?1", [id])?.pop())
}

/// `pending -> saved`. `false` when it was settled already.
pub fn mark_saved(conn: &Connection, id: i64, path: &str, size: i64, now_ms: i64) -> Result<bool> {
    conn.exec(
        "UPDATE files SET state = 'saved', path = ?2, size = ?3, done_ms = ?4
         WHERE id = ?1 AND state = 'pending'",
        params![id, path, size, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("settling a file"))
}

/// `pending -> refused | failed`, with the reason. `false` when it was settled already.
pub fn mark_not_saved(
    conn: &Connection,
    id: i64,
    state: FileState,
    why: &str,
    now_ms: i64,
) -> Result<bool> {
    debug_assert!(matches!(state, FileState::Refused | FileState::Failed));
    conn.exec(
        "UPDATE files SET state = ?2, error = ?3, done_ms = ?4 WHERE id = ?1 AND state = 'pending'",
        params![id, state.as_str(), why, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("settling a file"))
}

/// A download attempt failed for a reason that may pass: try again at `not_before_ms`.
pub fn retry_later(conn: &Connection, id: i64, why: &str, not_before_ms: i64) -> Result<()> {
    conn.exec(
        "UPDATE files SET attempts = attempts + 1, error = ?2, not_before_ms = ?3
         WHERE id = ?1 AND state = 'pending'",
        params![id, why, not_before_ms],
    )
    .map(drop)
    .map_err(StoreError::sqlite("delaying a file"))
}

/// Stores what an inbound handler made of a saved file.
pub fn set_output(conn: &Connection, id: i64, output: &str) -> Result<()> {
    conn.exec(
        "UPDATE files SET output = ?2 WHERE id = ?1",
        params![id, output],
    )
    .map(drop)
    .map_err(StoreError::sqlite("storing a file's handler output"))
}

/// Saved files whose turn is finished and that were saved before `before_ms` (for cleanup).
pub fn saved_before(conn: &Connection, before_ms: i64) -> Result<Vec<File>> {
    select(
        conn,
        "WHERE state = 'saved' AND path IS NOT NULL AND done_ms < ?1
           AND turn_id IN (SELECT id FROM turns WHERE state != 'queued')",
        [before_ms],
    )
}

/// Forgets the path of a file whose copy was removed.
pub fn forget_path(conn: &Connection, id: i64) -> Result<()> {
    conn.exec("UPDATE files SET path = NULL WHERE id = ?1", [id])
        .map(drop)
        .map_err(StoreError::sqlite("forgetting a file's copy"))
}
