//! Action comments pi wrote that the hub refused (`markup::Rejected`): logged, and the last
//! few kept for `pi-telegram status`. What is kept names where (turn, line) and what kind of
//! problem, never pi's words: the reasons are `Rejected::summary`'s fixed texts.

use serde::{Deserialize, Serialize};
use store::{Connection, StoreError, kv};

use crate::outgoing::markup::Rejected;

/// The kv key holding the last refusals (JSON, newest first).
pub const KEY: &str = "markup.rejected";
/// How many are kept.
pub const KEEP: usize = 5;

/// One refused action comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedComment {
    /// When (Unix ms).
    pub at_ms: i64,
    /// Where the text came from: `answer` or `telegram_message`.
    pub source: String,
    /// The turn whose answer held it.
    pub turn: Option<i64>,
    /// 1-based line of its `<!--` in pi's text.
    pub line: usize,
    /// `telegram_button` or `telegram_voice`.
    pub kind: String,
    /// What was wrong (a fixed text).
    pub reason: String,
}

/// Logs `rejected` and keeps them, with the older ones, up to [`KEEP`].
pub fn record(
    tx: &Connection,
    now: i64,
    source: &str,
    turn: Option<i64>,
    rejected: &[Rejected],
) -> Result<(), StoreError> {
    if rejected.is_empty() {
        return Ok(());
    }
    for r in rejected {
        tracing::warn!(
            source,
            turn,
            line = r.line,
            kind = %r.kind,
            reason = r.reason.class(),
            "an action comment was refused: it was removed and does nothing"
        );
        // The full account may quote the comment (pi's words): only at debug.
        tracing::debug!(source, turn, problem = %r, "the refused action comment");
    }
    let mut kept: Vec<RejectedComment> = rejected
        .iter()
        .rev()
        .map(|r| RejectedComment {
            at_ms: now,
            source: source.to_owned(),
            turn,
            line: r.line,
            kind: r.kind.to_string(),
            reason: r.reason.class().to_owned(),
        })
        .collect();
    kept.extend(recent(tx)?);
    kept.truncate(KEEP);
    let json = serde_json::to_string(&kept)
        .map_err(|e| StoreError::Corrupt(format!("{KEY} could not be written: {e}")))?;
    kv::set(tx, KEY, &json)
}

/// The kept refusals, newest first. A value that does not read (from some other version) is
/// none rather than an error: it only ever informs.
pub fn recent(conn: &Connection) -> Result<Vec<RejectedComment>, StoreError> {
    Ok(kv::get(conn, KEY)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outgoing::markup::extract;

    fn store() -> (tempfile::TempDir, store::Store) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store =
            store::Store::open(&dir.path().join("state.db")).unwrap_or_else(|e| panic!("{e}"));
        (dir, store)
    }

    #[test]
    fn keeps_the_last_few_newest_first_without_pis_words() {
        let (_dir, store) = store();
        let bad = extract(
            "Hi\n<!-- telegram_button {a|b|secret-style} -->\n- <!-- telegram_voice {x} -->\n",
        );
        assert_eq!(bad.rejected.len(), 2);
        let read = store
            .write(|tx| -> Result<_, StoreError> {
                record(tx, 10, "answer", Some(7), &bad.rejected)?;
                recent(tx)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read,
            [
                RejectedComment {
                    at_ms: 10,
                    source: "answer".into(),
                    turn: Some(7),
                    line: 3,
                    kind: "telegram_voice".into(),
                    reason: "not at the start of a top-level line".into(),
                },
                RejectedComment {
                    at_ms: 10,
                    source: "answer".into(),
                    turn: Some(7),
                    line: 2,
                    kind: "telegram_button".into(),
                    reason: "unknown style".into(),
                },
            ]
        );
        assert!(!format!("{read:?}").contains("secret-style"));
        let many = extract(&"<!-- telegram_button [] -->\n".repeat(KEEP + 2));
        let read = store
            .write(|tx| -> Result<_, StoreError> {
                record(tx, 20, "telegram_message", None, &many.rejected)?;
                recent(tx)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.len(), KEEP);
        assert!(
            read.iter()
                .all(|r| r.at_ms == 20 && r.reason == "empty matrix")
        );
        assert_eq!(read[0].line, KEEP + 2);
    }

    #[test]
    fn nothing_refused_writes_nothing_and_garbage_reads_as_none() {
        let (_dir, store) = store();
        let read = store
            .write(|tx| -> Result<_, StoreError> {
                record(tx, 1, "answer", None, &[])?;
                let none = kv::get(tx, KEY)?;
                kv::set(tx, KEY, "not json")?;
                Ok((none, recent(tx)?))
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read, (None, Vec::new()));
    }
}
