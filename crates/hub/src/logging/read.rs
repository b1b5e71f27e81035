//! `pi-telegram logs`: the rotated files in order, oldest first, as text or as the JSON lines
//! they are, filtered by time, and followed across rotations.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::rotate::numbered;

/// What to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogsOptions {
    /// Print the JSON lines as they are.
    pub json: bool,
    /// Only lines at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Keep printing new lines.
    pub follow: bool,
}

/// The log files that exist, oldest first (the current file last).
pub fn files(current: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = (1..100)
        .map(|n| numbered(current, n))
        .take_while(|p| p.exists())
        .collect();
    out.reverse();
    if current.exists() {
        out.push(current.to_owned());
    }
    out
}

/// The time of a JSON line, if it has one.
fn line_ms(v: &Value) -> Option<i64> {
    v.get("timestamp")
        .and_then(Value::as_str)
        .and_then(super::time::parse_rfc3339)
}

/// One line as it is printed, or `None` when `--since` leaves it out.
pub fn present(line: &str, opts: &LogsOptions) -> Option<String> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.is_empty() {
        return None;
    }
    // Only objects are log records; anything else is shown as written.
    let parsed: Option<Value> = serde_json::from_str(line).ok().filter(Value::is_object);
    if let Some(since) = opts.since_ms {
        // A line without a readable time cannot be placed: it is left out of a time window.
        match parsed.as_ref().and_then(line_ms) {
            Some(ms) if ms >= since => {}
            _ => return None,
        }
    }
    if opts.json {
        return Some(line.to_owned());
    }
    Some(match parsed {
        Some(v) => human(&v),
        None => line.to_owned(),
    })
}

/// `2026-11-30T18:03:04.123Z  INFO hub::serve: starting the hub profile=default`.
pub fn human(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut out = format!(
        "{} {:>5} {}: {}",
        s("timestamp"),
        s("level"),
        s("target"),
        s("message")
    );
    if let Some(fields) = v.get("fields").and_then(Value::as_object) {
        for (k, val) in fields {
            match val {
                Value::String(text) => out.push_str(&format!(" {k}={text}")),
                other => out.push_str(&format!(" {k}={other}")),
            }
        }
    }
    out
}

/// Prints the log (and, with `follow`, new lines until the output closes). A closed output
/// (`logs | head`) ends it quietly.
pub fn print(current: &Path, opts: &LogsOptions, out: &mut dyn Write) -> std::io::Result<()> {
    match print_inner(current, opts, out) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

fn print_inner(current: &Path, opts: &LogsOptions, out: &mut dyn Write) -> std::io::Result<()> {
    let all = files(current);
    // Everything but the current file is complete.
    for path in all.iter().filter(|p| p.as_path() != current) {
        // A rotation since the listing may have moved the oldest file away.
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let reader = BufReader::new(file);
        for line in reader.split(b'\n') {
            emit(&line?, opts, out)?;
        }
    }
    let mut tail = Tail::open(current)?;
    tail.drain(opts, out)?;
    out.flush()?;
    if !opts.follow {
        // A partial last line (the hub writes whole lines, so only a torn write) still shows.
        return tail.finish(opts, out);
    }
    loop {
        std::thread::sleep(Duration::from_millis(200));
        tail.drain(opts, out)?;
        if tail.rotated(current) {
            // The rest of the old file first, then the new one from its start.
            tail.drain(opts, out)?;
            tail.finish(opts, out)?;
            tail = Tail::open(current)?;
            tail.drain(opts, out)?;
        }
        out.flush()?;
    }
}

fn emit(bytes: &[u8], opts: &LogsOptions, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(text) = present(&String::from_utf8_lossy(bytes), opts) {
        writeln!(out, "{text}")?;
    }
    Ok(())
}

/// The current file, read as it grows.
struct Tail {
    file: Option<File>,
    ino: Option<u64>,
    pos: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn open(path: &Path) -> std::io::Result<Self> {
        match File::open(path) {
            Ok(file) => {
                let ino = Some(file.metadata()?.ino());
                Ok(Self {
                    file: Some(file),
                    ino,
                    pos: 0,
                    partial: Vec::new(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                file: None,
                ino: None,
                pos: 0,
                partial: Vec::new(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Whether the path now names another file (rotated) or a file appeared.
    fn rotated(&self, path: &Path) -> bool {
        let now = std::fs::metadata(path).map(|m| m.ino()).ok();
        now.is_some() && now != self.ino
    }

    /// Prints the whole lines added since the last call.
    fn drain(&mut self, opts: &LogsOptions, out: &mut dyn Write) -> std::io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        file.seek(SeekFrom::Start(self.pos))?;
        let mut buf = Vec::new();
        let n = file.read_to_end(&mut buf)?;
        self.pos += n as u64;
        self.partial.extend_from_slice(&buf);
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            emit(&line, opts, out)?;
        }
        Ok(())
    }

    fn finish(&mut self, opts: &LogsOptions, out: &mut dyn Write) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.partial);
        if !rest.is_empty() {
            emit(&rest, opts, out)?;
        }
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn human_lines_and_filters() {
        let line = r#"{"timestamp":"2026-11-30T18:03:04.123Z","level":"INFO","target":"hub::serve","message":"bot ready","fields":{"bot_id":7,"username":"b"}}"#;
        let opts = LogsOptions::default();
        assert_eq!(
            present(line, &opts).unwrap(),
            "2026-11-30T18:03:04.123Z  INFO hub::serve: bot ready bot_id=7 username=b"
        );
        let json = LogsOptions { json: true, ..opts };
        assert_eq!(present(line, &json).unwrap(), line);
        let late = LogsOptions {
            since_ms: super::super::time::parse_rfc3339("2026-11-30T18:03:05Z"),
            ..opts
        };
        assert_eq!(present(line, &late), None);
        assert_eq!(present("not json", &late), None);
        assert_eq!(present("not json", &opts).unwrap(), "not json");
    }

    #[test]
    fn files_come_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let cur = dir.path().join("hub.jsonl");
        for n in [0, 1, 2] {
            std::fs::write(numbered(&cur, n), format!("{n}\n")).unwrap();
        }
        let mut out = Vec::new();
        print(&cur, &LogsOptions::default(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "2\n1\n0\n");
    }
}
