//! pi's saved sessions of a folder, read from pi's session files (for headless instances; a pi
//! with the extension lists its own). The answer has the shape of the extension's
//! `get_sessions` (docs/wire-protocol.md): newest first, at most [`MAX_LISTED`].
//!
//! Where pi keeps them: `$PI_CODING_AGENT_SESSION_DIR` (all folders together; each file's
//! header names its folder), else `<agent-dir>/sessions/--<folder with / as ->--/`.
//!
//! Only regular files are read, never with an `open` that waits (a FIFO named `*.jsonl` there
//! froze the listing, [`crate::regular`]); [`list`] blocks on the disk: run it off the runtime.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// How many sessions a list holds (the menu pages them): with [`FIRST_MESSAGE_CHARS`] the
/// answer stays well under the wire's line limit.
pub const MAX_LISTED: usize = 500;
/// How much of a first message a list carries (the menu shows less).
pub const FIRST_MESSAGE_CHARS: usize = 1000;
/// How much of a session file is read for its first message and name.
const SCAN_BYTES: u64 = 256 * 1024;

/// One saved session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// Its file.
    pub path: String,
    /// The name set with `/name`, if any.
    pub name: Option<String>,
    /// The first thing the person asked.
    pub first_message: String,
    /// Last written (Unix ms).
    pub modified_ms: i64,
}

/// The folder pi stores `cwd`'s sessions in (and whether it mixes folders).
pub fn session_dir(cwd: &str, agent_dir: &Path) -> (PathBuf, bool) {
    if let Some(dir) = std::env::var_os("PI_CODING_AGENT_SESSION_DIR").filter(|d| !d.is_empty()) {
        return (PathBuf::from(dir), true);
    }
    let safe = cwd.trim_start_matches('/').replace(['/', '\\', ':'], "-");
    (
        agent_dir.join("sessions").join(format!("--{safe}--")),
        false,
    )
}

/// `cwd`'s sessions, newest first. Blocks on the disk.
pub fn list(cwd: &str, agent_dir: &Path) -> Vec<SessionInfo> {
    let (dir, mixed) = session_dir(cwd, agent_dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<SessionInfo> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| read_info(&p, cwd, mixed))
        .collect();
    found.sort_by(|a, b| b.modified_ms.cmp(&a.modified_ms).then(b.path.cmp(&a.path)));
    found.truncate(MAX_LISTED);
    found
}

fn read_info(path: &Path, cwd: &str, mixed: bool) -> Option<SessionInfo> {
    let file = crate::regular::open(path).ok()?;
    let modified_ms = file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut lines = BufReader::new(std::io::Read::take(file, SCAN_BYTES)).lines();
    let header: Value = serde_json::from_str(&lines.next()?.ok()?).ok()?;
    if header.get("type").and_then(Value::as_str) != Some("session") {
        return None;
    }
    if mixed && header.get("cwd").and_then(Value::as_str) != Some(cwd) {
        return None;
    }
    let mut name = None;
    let mut first_message = String::new();
    for line in lines.map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue; // the last line may be cut by the scan limit
        };
        match v.get("type").and_then(Value::as_str) {
            Some("session_info") => {
                name = v.get("name").and_then(Value::as_str).map(str::to_owned);
            }
            Some("message") if first_message.is_empty() => {
                let m = &v["message"];
                if m.get("role").and_then(Value::as_str) == Some("user") {
                    first_message = text_of(&m["content"]);
                }
            }
            _ => {}
        }
    }
    if let Some((cut, _)) = first_message.char_indices().nth(FIRST_MESSAGE_CHARS) {
        first_message.truncate(cut);
    }
    Some(SessionInfo {
        path: path.display().to_string(),
        name,
        first_message,
        modified_ms,
    })
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, lines: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn lists_a_folders_sessions_newest_first_with_their_first_message() {
        let agent = tempfile::tempdir().unwrap();
        let (dir, mixed) = session_dir("/w/a b", agent.path());
        if mixed {
            return; // PI_CODING_AGENT_SESSION_DIR set around the tests
        }
        assert!(dir.ends_with("sessions/--w-a b--"));
        write(
            &dir,
            "1.jsonl",
            &[
                r#"{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/w/a b"}"#,
                r#"{"type":"message","id":"1","message":{"role":"user","content":"fix the tests"}}"#,
            ],
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(
            &dir,
            "2.jsonl",
            &[
                r#"{"type":"session","version":3,"id":"y","timestamp":"t","cwd":"/w/a b"}"#,
                r#"{"type":"message","id":"1","message":{"role":"user","content":[{"type":"text","text":"write docs"}]}}"#,
                r#"{"type":"session_info","id":"2","name":"Docs"}"#,
            ],
        );
        write(&dir, "broken.jsonl", &["not json"]);
        // Neither a FIFO (an open would wait for a writer) nor a folder is read.
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.join("x.jsonl"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        std::fs::create_dir(dir.join("d.jsonl")).unwrap();
        let found = list("/w/a b", agent.path());
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].first_message, "write docs");
        assert_eq!(found[0].name.as_deref(), Some("Docs"));
        assert_eq!(found[1].first_message, "fix the tests");
    }
}
