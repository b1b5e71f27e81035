//! Files a pi on another machine sends for `telegram_attach` (wire `upload` pieces): written
//! piece by piece into the folder of the hub's outgoing copies, bounded by the file limit and
//! by how many a connection may hold at once (under way or waiting for their call), and removed
//! when the call has copied them or the connection ends (a crash leaves them to retention's
//! sweep of that folder).
//!
//! A bad piece (out of order, past the size it announced, over the limit, not base64) ends its
//! upload; the call that names it is then refused with the reason.

use std::collections::HashMap;
use std::path::PathBuf;

use base64::Engine as _;
use tokio::io::AsyncWriteExt;
use wire::{FILE_PART_BYTES, FilePart};

use crate::pi::instance::Uploaded;

/// Files one connection may hold on the hub's disk at a time (under way, or finished and not
/// yet taken by a call), at most.
const MAX_HELD: usize = 16;

/// One connection's uploads.
#[derive(Debug)]
pub struct Uploads {
    dir: PathBuf,
    max: u64,
    open: HashMap<String, Open>,
    ready: HashMap<String, Uploaded>,
    failed: HashMap<String, String>,
    next: u64,
}

#[derive(Debug)]
struct Open {
    file: tokio::fs::File,
    path: PathBuf,
    name: String,
    size: u64,
    written: u64,
}

impl Uploads {
    /// Uploads into `dir` (made 0700 when missing), each at most `max` bytes.
    pub fn new(dir: PathBuf, max: u64) -> Self {
        Self {
            dir,
            max,
            open: HashMap::new(),
            ready: HashMap::new(),
            failed: HashMap::new(),
            next: 0,
        }
    }

    /// Takes one piece. A piece that cannot be taken ends its upload (see the module).
    pub async fn part(&mut self, p: FilePart) {
        if self.failed.contains_key(&p.id) {
            return;
        }
        let id = p.id.clone();
        if let Err(why) = self.take_part(p).await {
            tracing::info!(upload = %id, error = %why, "an upload from a pi on another machine failed");
            if let Some(o) = self.open.remove(&id) {
                let _ = tokio::fs::remove_file(&o.path).await;
            }
            // Only the reasons a call may still ask about: a peer that keeps failing new ids
            // does not grow this without end.
            if self.failed.len() >= MAX_HELD * 4 {
                self.failed.clear();
            }
            self.failed.insert(id, why);
        }
    }

    async fn take_part(&mut self, p: FilePart) -> Result<(), String> {
        if self.ready.contains_key(&p.id) {
            return Err(format!("{} was uploaded twice under one id", p.name));
        }
        if !self.open.contains_key(&p.id) {
            let o = self.begin(&p).await?;
            self.open.insert(p.id.clone(), o);
        }
        let Some(o) = self.open.get_mut(&p.id) else {
            return Err("the upload was not begun".into());
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(p.data.as_bytes())
            .map_err(|e| format!("a piece of {} is not base64: {e}", o.name))?;
        if bytes.len() > FILE_PART_BYTES {
            return Err(format!(
                "a piece of {} is larger than {FILE_PART_BYTES} bytes",
                o.name
            ));
        }
        if p.offset != o.written || p.size != o.size {
            return Err(format!("a piece of {} came out of order", o.name));
        }
        let end = o.written + bytes.len() as u64;
        if end > o.size {
            return Err(format!(
                "{} holds more than the {} bytes it announced",
                o.name, o.size
            ));
        }
        o.file
            .write_all(&bytes)
            .await
            .map_err(|e| format!("{} could not be written on the hub: {e}", o.name))?;
        o.written = end;
        if p.done {
            if o.written != o.size {
                return Err(format!(
                    "{} ended after {} of its {} bytes",
                    o.name, o.written, o.size
                ));
            }
            if let Some(mut o) = self.open.remove(&p.id) {
                o.file
                    .flush()
                    .await
                    .map_err(|e| format!("{} could not be written on the hub: {e}", o.name))?;
                self.ready.insert(
                    p.id,
                    Uploaded {
                        path: o.path,
                        name: o.name,
                    },
                );
            }
        }
        Ok(())
    }

    async fn begin(&mut self, p: &FilePart) -> Result<Open, String> {
        if p.offset != 0 {
            return Err(format!("{} did not start at its beginning", p.name));
        }
        let name = p.name.trim();
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(format!("{:?} is not a file name", p.name));
        }
        if p.size > self.max {
            return Err(format!(
                "{name} is {}, over the {} limit for files sent to Telegram",
                crate::pi::inbound::prompt::human_size(i64::try_from(p.size).unwrap_or(i64::MAX)),
                crate::pi::inbound::limit_text(self.max)
            ));
        }
        if self.open.len() + self.ready.len() >= MAX_HELD {
            return Err(format!(
                "more than {MAX_HELD} files uploaded and not yet attached"
            ));
        }
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || crate::atomic::create_dir_all(&dir, 0o700))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot prepare the upload: {e}"))?;
        self.next += 1;
        let path = self.dir.join(format!(
            ".upload-{}-{}-{}",
            std::process::id(),
            crate::clock::system_now_ms(),
            self.next
        ));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await
            .map_err(|e| format!("cannot prepare the upload: {e}"))?;
        Ok(Open {
            file,
            path,
            name: name.to_owned(),
            size: p.size,
            written: 0,
        })
    }

    /// The finished uploads `ids` names, for a call; every one must be finished. They are the
    /// caller's now (it removes them once copied).
    pub fn take(&mut self, ids: &[String]) -> Result<Vec<Uploaded>, String> {
        for id in ids {
            if let Some(why) = self.failed.get(id) {
                return Err(why.clone());
            }
            if !self.ready.contains_key(id) {
                return Err(if self.open.contains_key(id) {
                    format!("upload {id} is not finished")
                } else {
                    format!("no upload {id} on this connection")
                });
            }
        }
        Ok(ids.iter().filter_map(|id| self.ready.remove(id)).collect())
    }
}

impl Drop for Uploads {
    fn drop(&mut self) {
        // The connection ended: what no call took is nobody's.
        for path in self
            .open
            .values()
            .map(|o| &o.path)
            .chain(self.ready.values().map(|u| &u.path))
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn part(id: &str, size: u64, offset: u64, bytes: &[u8], done: bool) -> FilePart {
        FilePart {
            id: id.into(),
            name: "report.txt".into(),
            size,
            offset,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
            done,
            path: None,
        }
    }

    #[tokio::test]
    async fn pieces_in_order_make_the_file_and_a_call_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut u = Uploads::new(dir.path().join("out"), 100);
        u.part(part("u1", 11, 0, b"hello ", false)).await;
        assert!(u.take(&["u1".into()]).unwrap_err().contains("not finished"));
        u.part(part("u1", 11, 6, b"world", true)).await;
        let got = u.take(&["u1".into()]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "report.txt");
        assert_eq!(std::fs::read(&got[0].path).unwrap(), b"hello world");
        assert!(u.take(&["u1".into()]).unwrap_err().contains("no upload"));
    }

    #[tokio::test]
    async fn a_bad_piece_ends_its_upload_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut u = Uploads::new(out.clone(), 100);
        // Past what it announced.
        u.part(part("big", 4, 0, b"12345", true)).await;
        assert!(u.take(&["big".into()]).unwrap_err().contains("more than"));
        // Over the limit.
        u.part(part("huge", 101, 0, b"x", false)).await;
        assert!(u.take(&["huge".into()]).unwrap_err().contains("over the"));
        // Out of order.
        u.part(part("gap", 10, 0, b"ab", false)).await;
        u.part(part("gap", 10, 5, b"cd", false)).await;
        assert!(
            u.take(&["gap".into()])
                .unwrap_err()
                .contains("out of order")
        );
        // Ended short.
        u.part(part("short", 10, 0, b"ab", true)).await;
        assert!(
            u.take(&["short".into()])
                .unwrap_err()
                .contains("ended after")
        );
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn a_connection_holds_at_most_sixteen_files_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut u = Uploads::new(dir.path().join("out"), 100);
        for n in 0..MAX_HELD {
            u.part(part(&format!("f{n}"), 1, 0, b"x", true)).await;
        }
        u.part(part("one-more", 1, 0, b"x", true)).await;
        assert!(
            u.take(&["one-more".into()])
                .unwrap_err()
                .contains("not yet attached")
        );
        // A call takes some: room again.
        assert_eq!(u.take(&["f0".into(), "f1".into()]).unwrap().len(), 2);
        u.part(part("later", 1, 0, b"x", true)).await;
        assert_eq!(u.take(&["later".into()]).unwrap().len(), 1);
    }

    #[tokio::test]
    async fn what_no_call_took_goes_with_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut u = Uploads::new(out.clone(), 100);
        u.part(part("a", 2, 0, b"ab", true)).await;
        u.part(part("b", 4, 0, b"ab", false)).await;
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 2);
        drop(u);
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }
}
