//! stderr, capped when it is a regular file: the extension's `hub.log` (extension/lib/
//! hub-process.ts appends a hub's output to it, from every hub it starts), a shell's
//! `2>>file`. The JSON log bounds itself ([`super::rotate`]); nothing else bounds such a file,
//! so once a line would take it past [`STDERR_CAP`] it is emptied, with a line saying so, and
//! goes on: the newest lines (what the extension shows of a hub that exited) stay, and the
//! history is in the JSON log. A terminal, a pipe or journald is written as it is.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::sync::{Mutex, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

/// The size a regular file on stderr may reach.
pub const STDERR_CAP: u64 = 10 * 1024 * 1024;

/// The first line of a file that was emptied at its cap.
pub fn emptied_note(cap: u64) -> String {
    let size = match cap / (1024 * 1024) {
        0 => format!("{cap} bytes"),
        mib => format!("{mib} MiB"),
    };
    format!(
        "(this file reached {size} and was emptied; the hub's whole log is in <profile>/logs/hub.jsonl: `pi-telegram logs`)\n"
    )
}

/// A regular file written one whole line at a time, emptied when the next line would take it
/// past `cap`.
#[derive(Debug)]
pub struct CappedFile {
    file: File,
    cap: u64,
}

impl CappedFile {
    /// `file` (open for writing, appending or not) capped at `cap` bytes.
    pub fn new(file: File, cap: u64) -> Self {
        Self { file, cap }
    }

    /// Writes `line` (one call: lines of processes sharing the file do not interleave).
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        // The size from the file itself: other processes write to it too (a second hub that
        // found the lock taken, an older one still running).
        let size = self.file.metadata()?.len();
        if size > 0 && size.saturating_add(line.len() as u64) > self.cap {
            self.file.set_len(0)?;
            // Opened without O_APPEND (`2>file`), the offset would stay at the old end and the
            // next write leave a hole of that size.
            self.file.seek(SeekFrom::Start(0))?;
            self.file.write_all(emptied_note(self.cap).as_bytes())?;
        }
        self.file.write_all(line)
    }
}

/// The hub's stderr for `tracing`'s human format.
#[derive(Debug)]
pub struct Stderr {
    /// `Some` when stderr is a regular file (a copy of its descriptor).
    capped: Option<Mutex<CappedFile>>,
}

impl Stderr {
    /// Looks at what stderr is, once.
    pub fn new() -> Self {
        let regular = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.file_type().is_file()));
        Self {
            capped: regular.map(|f| Mutex::new(CappedFile::new(f, STDERR_CAP))),
        }
    }
}

impl Default for Stderr {
    fn default() -> Self {
        Self::new()
    }
}

/// One event's writer (`tracing` writes each formatted event with one `write_all`).
#[derive(Debug)]
pub struct StderrWriter<'a>(&'a Stderr);

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = StderrWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        StderrWriter(self)
    }
}

impl Write for StderrWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.0.capped {
            Some(file) => {
                file.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .write_line(buf)?;
                Ok(buf.len())
            }
            None => io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn line(n: usize) -> String {
        format!("line {n:04} xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")
    }

    #[test]
    fn a_file_is_emptied_at_its_cap_and_keeps_the_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.log");
        // Both ways a shell opens it: appending, and truncating with the offset its own.
        for append in [true, false] {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(!append)
                .append(append)
                .open(&path)
                .unwrap();
            let mut capped = CappedFile::new(file, 1000);
            for n in 0..200 {
                capped.write_line(line(n).as_bytes()).unwrap();
                assert!(std::fs::metadata(&path).unwrap().len() <= 1000);
            }
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with(&emptied_note(1000)), "{append}: {text}");
            assert!(text.ends_with(&line(199)), "{append}");
            assert!(!text.contains('\0'), "{append}: a hole");
        }
    }
}
