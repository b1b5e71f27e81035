//! The profile lock: one hub per profile. `hub.lock` is held with an exclusive advisory lock
//! (released by the OS when the process dies, however it dies) and holds the holder's pid.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds it.
    #[error("another hub is already serving this profile (pid {})", pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string()))]
    Held {
        /// Its pid, as written in the lock file.
        pid: Option<u32>,
    },
    /// The lock file could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct ProfileLock {
    file: File,
    path: PathBuf,
}

fn open(path: &Path) -> Result<File, LockError> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|source| LockError::Io {
            path: path.to_owned(),
            source,
        })
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

impl ProfileLock {
    /// Takes the lock and records our pid, or says who holds it.
    pub fn acquire(path: &Path) -> Result<Self, LockError> {
        let mut file = open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    pid: read_pid(&mut file),
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(LockError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        }
        let io = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(Self {
            file,
            path: path.to_owned(),
        })
    }

    /// Why this lock no longer guards its profile, if it does not: its file (or the folder
    /// holding it) was deleted, or replaced by another. The hub then serves a profile nobody can
    /// reach (the socket and the secret went with the folder), and a hub started for the
    /// profile meanwhile takes a new lock beside it.
    pub fn lost(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let ours = self.file.metadata().ok()?;
        match std::fs::metadata(&self.path) {
            Ok(now) if (now.dev(), now.ino()) == (ours.dev(), ours.ino()) => None,
            Ok(_) => Some(format!(
                "{} was replaced by another file",
                self.path.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let folder = self.path.parent().unwrap_or(&self.path);
                Some(if folder.exists() {
                    format!("{} was deleted", self.path.display())
                } else {
                    format!("the profile folder {} was deleted", folder.display())
                })
            }
            // Unreadable for now (a permission changed, a mount hiccup): not proof of anything.
            Err(_) => None,
        }
    }

    /// The pid of the hub holding the lock at `path`, or `None` when no hub runs.
    pub fn holder(path: &Path) -> Result<Option<u32>, LockError> {
        if !path.exists() {
            return Ok(None);
        }
        let mut file = open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(None),
            Err(TryLockError::WouldBlock) => Ok(Some(read_pid(&mut file).unwrap_or(0))),
            Err(TryLockError::Error(source)) => Err(LockError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_and_names_the_holder() -> Result<(), LockError> {
        let dir = tempfile::tempdir().map_err(|source| LockError::Io {
            path: "tmp".into(),
            source,
        })?;
        let path = dir.path().join("hub.lock");
        assert_eq!(ProfileLock::holder(&path)?, None);
        let held = ProfileLock::acquire(&path)?;
        match ProfileLock::acquire(&path) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        assert_eq!(ProfileLock::holder(&path)?, Some(std::process::id()));
        drop(held);
        assert_eq!(ProfileLock::holder(&path)?, None);
        Ok(())
    }

    #[test]
    fn a_lock_whose_file_or_folder_is_gone_says_so() -> Result<(), LockError> {
        let io = |source| LockError::Io {
            path: "tmp".into(),
            source,
        };
        let dir = tempfile::tempdir().map_err(io)?;
        let profile = dir.path().join("default");
        std::fs::create_dir(&profile).map_err(io)?;
        let path = profile.join("hub.lock");
        let held = ProfileLock::acquire(&path)?;
        assert_eq!(held.lost(), None);
        // Replaced: another file under the name (a second hub's, after a deletion).
        std::fs::remove_file(&path).map_err(io)?;
        assert!(
            held.lost()
                .is_some_and(|w| w.ends_with("hub.lock was deleted"))
        );
        std::fs::write(&path, "1\n").map_err(io)?;
        assert!(
            held.lost()
                .is_some_and(|w| w.ends_with("was replaced by another file"))
        );
        std::fs::remove_dir_all(&profile).map_err(io)?;
        let why = held.lost().unwrap_or_default();
        assert_eq!(
            why,
            format!("the profile folder {} was deleted", profile.display())
        );
        Ok(())
    }
}
