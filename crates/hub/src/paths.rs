//! Where everything lives: `<agent-dir>` (pi's rule: `$PI_CODING_AGENT_DIR`, else
//! `~/.pi/agent`), the config file, and each profile's private folder.

use std::fmt;
use std::path::{Path, PathBuf};

/// A profile name: `[a-z0-9]{1,32}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProfileName(String);

/// Why a profile name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile names are 1-32 lowercase letters or digits; {0:?} is not one")]
pub struct BadProfileName(pub String);

impl ProfileName {
    /// The profile used when none is named.
    pub fn default_profile() -> Self {
        Self("default".into())
    }

    /// Validates a name.
    pub fn new(name: &str) -> Result<Self, BadProfileName> {
        let ok = (1..=32).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if ok {
            Ok(Self(name.to_owned()))
        } else {
            Err(BadProfileName(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// pi's agent directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDir(PathBuf);

impl AgentDir {
    /// `$PI_CODING_AGENT_DIR`, else `$HOME/.pi/agent`.
    pub fn from_env() -> Result<Self, std::io::Error> {
        if let Some(dir) = std::env::var_os("PI_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
            return Ok(Self(PathBuf::from(dir)));
        }
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "neither PI_CODING_AGENT_DIR nor HOME is set: cannot find pi's agent directory",
                )
            })?;
        Ok(Self(PathBuf::from(home).join(".pi").join("agent")))
    }

    /// An explicit directory (tests).
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `<agent-dir>/telegram.json`.
    pub fn config_file(&self) -> PathBuf {
        self.0.join("telegram.json")
    }

    /// The files of one profile.
    pub fn profile(&self, name: &ProfileName) -> ProfilePaths {
        ProfilePaths {
            dir: self.0.join("telegram").join(name.as_str()),
        }
    }
}

/// A profile's private folder (0700) and the files in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilePaths {
    /// `<agent-dir>/telegram/<profile>/`.
    pub dir: PathBuf,
}

impl ProfilePaths {
    /// `state.db`.
    pub fn state_db(&self) -> PathBuf {
        self.dir.join("state.db")
    }
    /// `hub.lock`: held by the running hub; holds its pid.
    pub fn lock_file(&self) -> PathBuf {
        self.dir.join("hub.lock")
    }
    /// `hub.sock`.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("hub.sock")
    }
    /// `hub.secret`.
    pub fn secret(&self) -> PathBuf {
        self.dir.join("hub.secret")
    }
    /// `hub.log`.
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("hub.log")
    }
    /// `remote.pem`: the self-signed certificate and key of the hub's TLS listener (0600).
    pub fn remote_identity(&self) -> PathBuf {
        self.dir.join("remote.pem")
    }

    /// Creates the folder (and its parents) with mode 0700, tightening an existing one.
    pub fn ensure(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        crate::atomic::create_dir_all(&self.dir, 0o700)?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names() {
        assert!(ProfileName::new("default").is_ok());
        assert!(ProfileName::new("work2").is_ok());
        for bad in ["", "Work", "a-b", "../x", &"a".repeat(33)] {
            assert!(ProfileName::new(bad).is_err(), "{bad}");
        }
    }
}
