//! Reading files the hub does not control (pi's session files, telegram.json, what a template
//! wrote, files pi attaches): only regular files, and never an `open` that waits. Opening a
//! FIFO for reading blocks until a writer comes, and a device may never end; either, met on
//! the way of a person's action, froze that action (and the runtime thread it ran on).
//!
//! A path is looked at before it is opened (nothing that is not a regular file is opened at
//! all), opened with `O_NONBLOCK` (a FIFO swapped in between the look and the open does not
//! block the open) and checked again on the open file (what was opened is what is read).
//! These calls block on the disk like any file call: from async code, run them off the
//! runtime (`tokio::task::spawn_blocking`).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether `meta` is a regular file, as an error saying what it is otherwise (callers name
/// the path).
fn must_be_regular(meta: &std::fs::Metadata) -> io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let what = if meta.is_dir() {
        "it is a folder"
    } else {
        "it is not a regular file (a FIFO, a device or a socket)"
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, what))
}

/// Opens `path` (following links) for reading, only if it is a regular file.
pub fn open(path: &Path) -> io::Result<File> {
    must_be_regular(&std::fs::metadata(path)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    // Reads of a regular file ignore O_NONBLOCK; what matters is that this is one.
    must_be_regular(&file.metadata()?)?;
    Ok(file)
}

/// The first `max` bytes of the regular file at `path`.
pub fn read_up_to(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path)?.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole regular file at `path` as text (`InvalidData` when it is not UTF-8).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Removes `path` if it is a regular file; a link is not followed (nor removed): what is
/// removed is never a file elsewhere. `false` when there was no regular file to remove.
pub fn remove(path: &Path) -> io::Result<bool> {
    let gone = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => std::fs::remove_file(path),
        Ok(_) => return Ok(false),
        Err(e) => Err(e),
    };
    match gone {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "hello world").unwrap();
        assert_eq!(read_to_string(&file).unwrap(), "hello world");
        assert_eq!(read_up_to(&file, 5).unwrap(), b"hello");
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(
            read_to_string(&link).unwrap(),
            "hello world",
            "links are followed"
        );

        let fifo = dir.path().join("x.jsonl");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        // With no writer, a plain open would wait here for ever.
        let err = read_to_string(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(read_up_to(dir.path(), 1).is_err(), "a folder");
        assert_eq!(
            open(&dir.path().join("none")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );

        // Removing: regular files only, links neither followed nor removed.
        assert!(!remove(&link).unwrap());
        assert!(link.exists() && file.exists());
        assert!(!remove(&fifo).unwrap());
        assert!(remove(&file).unwrap());
        assert!(!file.exists());
        assert!(!remove(&file).unwrap(), "gone already");
    }
}
