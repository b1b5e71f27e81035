//! Who runs the hub and how it stops: the starter recorded at start (service, extension or a
//! shell), the installed service a hub defers to, and the stop marker (`hub.stopped`) that keeps a pi's extension
//! from starting the hub again right after a person stopped it on purpose.
//!
//! The marker is written by `stop` and by Ctrl-C (SIGINT) on a foreground `serve`; SIGTERM from
//! a service manager or a system shutdown leaves none. Any hub that starts removes it: starting
//! one is as deliberate as stopping it. The extension starts a hub while the marker exists only
//! for `/telegram-connect`.

use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::HubError;
use crate::paths::ProfilePaths;

/// The environment variable a starter sets so the hub knows who started it.
pub const STARTED_BY_ENV: &str = "PI_TELEGRAM_STARTED_BY";

/// Who started the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartedBy {
    /// A `systemd --user` unit or a launchd agent (`pi-telegram service install`).
    Service,
    /// A pi's extension, in the background.
    Extension,
    /// A person, in a terminal (or a script).
    Shell,
}

impl StartedBy {
    /// From [`STARTED_BY_ENV`]; a shell when unset or unknown.
    pub fn from_env() -> Self {
        match std::env::var(STARTED_BY_ENV).as_deref() {
            Ok("service") => Self::Service,
            Ok("extension") => Self::Extension,
            _ => Self::Shell,
        }
    }

    /// The stored and printed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Extension => "extension",
            Self::Shell => "shell",
        }
    }

    /// Parses [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "service" => Some(Self::Service),
            "extension" => Some(Self::Extension),
            "shell" => Some(Self::Shell),
            _ => None,
        }
    }
}

/// Where the log of a hub started by `by` goes: always the JSON log (`pi-telegram logs`), and
/// its stderr where the starter put it.
pub fn log_location(by: StartedBy, paths: &ProfilePaths) -> String {
    let json = crate::logging::log_file(paths).display().to_string();
    let stderr = match by {
        StartedBy::Extension => paths.log_file().display().to_string(),
        StartedBy::Service => journal_hint(paths),
        StartedBy::Shell => "the terminal that started it".into(),
    };
    format!("{json} (pi-telegram logs); stderr: {stderr}")
}

/// Why the hub was stopped on purpose (the marker's content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopMarker {
    /// When (Unix ms).
    pub at_ms: i64,
    /// `stop` (the command) or `interrupt` (Ctrl-C on a foreground serve).
    pub how: String,
}

/// `hub.stopped`.
pub fn marker_path(paths: &ProfilePaths) -> PathBuf {
    paths.dir.join("hub.stopped")
}

/// Leaves the marker (atomically; the folder is created if needed).
pub fn mark_stopped(paths: &ProfilePaths, how: &str) -> std::io::Result<()> {
    paths.ensure()?;
    let marker = StopMarker {
        at_ms: crate::clock::system_now_ms(),
        how: how.to_owned(),
    };
    let text = serde_json::to_string(&marker).map_err(std::io::Error::other)?;
    let path = marker_path(paths);
    // Read by every start and by the extension: replaced whole, so a power loss leaves it
    // as it was or as written.
    crate::atomic::replace(&path, text.as_bytes(), 0o600)
}

/// The marker, if a person stopped the hub on purpose since the last start.
pub fn stopped(paths: &ProfilePaths) -> Option<StopMarker> {
    let text = std::fs::read_to_string(marker_path(paths)).ok()?;
    // An unreadable marker still says "stopped on purpose".
    Some(serde_json::from_str(&text).unwrap_or(StopMarker {
        at_ms: 0,
        how: "stop".into(),
    }))
}

/// Removes the marker (a hub is starting).
pub fn clear_stopped(paths: &ProfilePaths) -> std::io::Result<()> {
    match std::fs::remove_file(marker_path(paths)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The service `pi-telegram service install` left, which a hub started by an extension starts
/// instead of running beside it.
/// Which service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// `systemd --user`.
    Systemd,
    /// launchd (a LaunchAgent).
    Launchd,
}

impl Manager {
    /// The manager of this system.
    pub fn here() -> Self {
        if cfg!(target_os = "macos") {
            Self::Launchd
        } else {
            Self::Systemd
        }
    }
}

/// What `install` left in the profile folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub manager: Manager,
    /// The unit name or launchd label.
    pub name: String,
    /// The unit or plist file.
    pub file: PathBuf,
}

pub fn service_marker(paths: &ProfilePaths) -> PathBuf {
    paths.dir.join("service.json")
}

/// The installed service of a profile, if any.
pub fn installed(paths: &ProfilePaths) -> Option<Installed> {
    let text = std::fs::read_to_string(service_marker(paths)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Where a service-run hub's output goes, for `status`.
pub fn journal_hint(paths: &ProfilePaths) -> String {
    match installed(paths) {
        Some(Installed {
            manager: Manager::Systemd,
            name,
            ..
        }) => format!("journalctl --user -u {name}"),
        Some(Installed {
            manager: Manager::Launchd,
            ..
        }) => paths.log_file().display().to_string(),
        None => "the service manager's log".into(),
    }
}

/// Runs the service manager (`systemctl`, `launchctl`; `PI_TELEGRAM_SYSTEMCTL` /
/// `PI_TELEGRAM_LAUNCHCTL` replace them, for tests and unusual systems).
pub fn manager_cmd(manager: Manager, args: &[&str]) -> Result<std::process::Output, HubError> {
    let (var, default, prefix): (&str, &str, &[&str]) = match manager {
        Manager::Systemd => ("PI_TELEGRAM_SYSTEMCTL", "systemctl", &["--user"]),
        Manager::Launchd => ("PI_TELEGRAM_LAUNCHCTL", "launchctl", &[]),
    };
    let bin = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    Command::new(&bin)
        .args(prefix)
        .args(args)
        .output()
        .map_err(HubError::io(format!(
            "running {bin} (is this system using {default}?)"
        )))
}

pub fn checked(manager: Manager, args: &[&str]) -> Result<String, HubError> {
    let out = manager_cmd(manager, args)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() {
        Ok(text)
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        Err(HubError::Usage(format!(
            "`{} {}` failed ({}): {}",
            match manager {
                Manager::Systemd => "systemctl --user",
                Manager::Launchd => "launchctl",
            },
            args.join(" "),
            out.status,
            if err.is_empty() { text } else { err }
        )))
    }
}

pub fn gui_domain() -> String {
    format!("gui/{}", rustix::process::getuid().as_raw())
}

/// Starts an installed service (what `serve` does instead of running a second hub beside it).
pub fn start(found: &Installed) -> Result<(), HubError> {
    match found.manager {
        Manager::Systemd => {
            checked(
                found.manager,
                &["start", &format!("{}.service", found.name)],
            )?;
        }
        Manager::Launchd => {
            checked(
                found.manager,
                &["kickstart", &format!("{}/{}", gui_domain(), found.name)],
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_round_trips_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ProfilePaths {
            dir: dir.path().join("p"),
        };
        assert_eq!(stopped(&paths), None);
        clear_stopped(&paths).unwrap();
        mark_stopped(&paths, "interrupt").unwrap();
        assert_eq!(stopped(&paths).map(|m| m.how), Some("interrupt".into()));
        clear_stopped(&paths).unwrap();
        assert_eq!(stopped(&paths), None);
    }

    #[test]
    fn starters_parse() {
        for s in [StartedBy::Service, StartedBy::Extension, StartedBy::Shell] {
            assert_eq!(StartedBy::parse(s.as_str()), Some(s));
        }
        assert_eq!(StartedBy::parse("cron"), None);
    }
}
