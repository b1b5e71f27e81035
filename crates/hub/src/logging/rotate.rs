//! A log file capped by size: `hub.jsonl` grows to [`Rotation::max_bytes`], then becomes
//! `hub.1.jsonl` (the older ones move up one, the oldest beyond [`Rotation::files`] goes).
//! tracing-appender rotates by time only; a hub that runs for months needs a bound on disk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How large the log grows and how many files are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The current file is rotated once it reaches this size.
    pub max_bytes: u64,
    /// Files kept, the current one included (at least 1).
    pub files: usize,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            max_bytes: 10 * 1024 * 1024,
            files: 5,
        }
    }
}

/// `hub.jsonl` -> `hub.<n>.jsonl` (n = 0 is the file itself).
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    if n == 0 {
        return path.to_owned();
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("hub");
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}.{n}.{ext}"),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// The open log file.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: File,
    /// Bytes in the file (as far as this process knows).
    size: u64,
    /// Its inode, to notice when someone else rotated or removed it.
    ino: u64,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    // Debug logs may hold message text: only the person may read them.
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl RotatingFile {
    /// Opens (creating) `path` for appending, its folder with mode 0700.
    pub fn open(path: &Path, rotation: Rotation) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            // Often the profile's folder, made here first (the log opens before `serve` runs).
            crate::atomic::create_dir_all(dir, 0o700)?;
        }
        let file = open_append(path)?;
        let meta = file.metadata()?;
        Ok(Self {
            path: path.to_owned(),
            rotation: Rotation {
                files: rotation.files.max(1),
                ..rotation
            },
            file,
            size: meta.len(),
            ino: meta.ino(),
        })
    }

    /// Appends one whole line (the caller ends it with `\n`), rotating afterwards when the file
    /// is full. A line is written with one call, so lines never interleave.
    pub fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.reopen_if_moved()?;
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        if self.size >= self.rotation.max_bytes {
            self.rotate()?;
        }
        Ok(())
    }

    /// Another process (a second `serve` that found the lock taken, or logrotate) may have
    /// moved the file: write to the one at the path again.
    fn reopen_if_moved(&mut self) -> std::io::Result<()> {
        let current = std::fs::metadata(&self.path).map(|m| m.ino()).ok();
        if current != Some(self.ino) {
            self.file = open_append(&self.path)?;
            let meta = self.file.metadata()?;
            self.size = meta.len();
            self.ino = meta.ino();
        }
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let keep = self.rotation.files;
        // The oldest goes; each other moves up one.
        let _ = std::fs::remove_file(numbered(&self.path, keep - 1));
        for n in (1..keep.saturating_sub(1)).rev() {
            let from = numbered(&self.path, n);
            if from.exists() {
                std::fs::rename(&from, numbered(&self.path, n + 1))?;
            }
        }
        if keep > 1 {
            std::fs::rename(&self.path, numbered(&self.path, 1))?;
        } else {
            std::fs::remove_file(&self.path)?;
        }
        self.file = open_append(&self.path)?;
        let meta = self.file.metadata()?;
        self.size = meta.len();
        self.ino = meta.ino();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_a_bounded_number_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/hub.jsonl");
        let mut f = RotatingFile::open(
            &path,
            Rotation {
                max_bytes: 100,
                files: 3,
            },
        )
        .unwrap();
        for i in 0..40 {
            f.write_line(format!("{{\"n\":{i:03},\"pad\":\"xxxxxxxxxx\"}}\n").as_bytes())
                .unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["hub.1.jsonl", "hub.2.jsonl", "hub.jsonl"]);
        for name in &names {
            let len = std::fs::metadata(path.with_file_name(name)).unwrap().len();
            assert!(len < 130, "{name}: {len}");
        }
        // The newest line is in the current file (or the last one rotated), the oldest gone.
        let all: String = [2, 1, 0]
            .iter()
            .map(|n| std::fs::read_to_string(numbered(&path, *n)).unwrap())
            .collect();
        assert!(all.contains("\"n\":039") && !all.contains("\"n\":000"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_file_moved_away_by_someone_else_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.jsonl");
        let mut f = RotatingFile::open(&path, Rotation::default()).unwrap();
        f.write_line(b"one\n").unwrap();
        std::fs::rename(&path, dir.path().join("elsewhere")).unwrap();
        f.write_line(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    }
}
