//! Files replaced whole, so that a crash of the machine leaves the old file or the new one,
//! never an empty or half-written one: a temporary file beside the target, written and
//! synced, renamed over it, and the folder synced. A file read while it is replaced (pi
//! loading the extension) is read whole, in either version.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Links followed before a link chain counts as a loop (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Replaces `path` with `bytes` atomically and durably (see the module). A `path` that is a
/// symbolic link stays one: the file it leads to is replaced ([`write_target`]). The new file
/// gets `mode` when there was none, else the old file's permissions.
pub fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let target = write_target(path)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mode = match std::fs::metadata(&target) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => mode,
        Err(e) => return Err(e),
    };
    // Beside the file it replaces: a rename never crosses file systems. Named for this
    // process, so two writers never share one.
    let tmp = target.with_file_name(format!(
        ".{}.tmp{}",
        target
            .file_name()
            .map_or_else(|| "file".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let result = (|| {
        // A temporary file a crash left behind under this name is stale.
        if let Err(e) = std::fs::remove_file(&tmp)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(e);
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // The umask may have narrowed `mode`; the old file's permissions are kept as they were.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `dir` and its missing parents with `mode`, and syncs the folder that holds each one
/// it made: a new folder's entry is data of its parent, and a crash of the machine before that
/// parent is synced can take the folder and everything synced inside it.
pub fn create_dir_all(dir: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.exists()).collect();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)?;
    for made in missing {
        if let Some(parent) = made.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)?.sync_all()?;
        }
    }
    Ok(())
}

/// The file a write of `path` must replace: `path` itself, or, when it is a symbolic link,
/// the file at the end of its links (which need not exist yet). Renaming over the link
/// itself would replace the link with a regular file and leave its target stale.
pub fn write_target(path: &Path) -> std::io::Result<PathBuf> {
    let mut at = path.to_owned();
    for _ in 0..MAX_LINKS {
        let link = match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => std::fs::read_link(&at)?,
            Ok(_) => return Ok(at),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(at),
            Err(e) => return Err(e),
        };
        // A relative link is relative to the folder that holds it.
        at = match at.parent() {
            Some(dir) if link.is_relative() => dir.join(link),
            _ => link,
        };
    }
    Err(std::io::Error::other(format!(
        "{} leads through more than {MAX_LINKS} links",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn replaces_by_rename_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "old").unwrap();
        // The old file as whoever had it open sees it.
        let held = dir.path().join("held");
        std::fs::hard_link(&path, &held).unwrap();
        replace(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&held).unwrap(), "old");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_link_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        replace(&link, b"new", 0o600).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }
}
