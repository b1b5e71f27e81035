//! Who runs the hub and how it stops: the starter recorded at start (service, extension or a
//! shell), `pi-telegram stop`, and the stop marker (`hub.stopped`) that keeps a pi's extension
//! from starting the hub again right after a person stopped it on purpose.
//!
//! The marker is written by `stop` and by Ctrl-C (SIGINT) on a foreground `serve`; SIGTERM from
//! a service manager or a system shutdown leaves none. Any hub that starts removes it: starting
//! one is as deliberate as stopping it. The extension starts a hub while the marker exists only
//! for `/telegram-connect`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::HubError;
use crate::lock::ProfileLock;
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
        StartedBy::Service => crate::service::journal_hint(paths),
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
    let tmp = path.with_extension("stopped.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
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

/// What `stop` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    /// No hub was running (the marker is left anyway, so no extension starts one).
    NotRunning,
    /// The hub with this pid stopped.
    Stopped {
        /// Its pid.
        pid: u32,
    },
}

/// `pi-telegram stop`: leaves the marker, asks the running hub to stop (SIGTERM: the same
/// clean shutdown as a service stop) and waits until it released the profile lock.
pub fn stop(paths: &ProfilePaths, wait: Duration) -> Result<StopOutcome, HubError> {
    mark_stopped(paths, "stop").map_err(HubError::io(format!(
        "writing {}",
        marker_path(paths).display()
    )))?;
    let pid = match running_pid(paths)? {
        None => return Ok(StopOutcome::NotRunning),
        Some(None) => {
            return Err(HubError::Usage(format!(
                "a hub holds {} but its pid is not recorded there; stop it yourself",
                paths.lock_file().display()
            )));
        }
        Some(Some(pid)) => pid,
    };
    signal_term(pid)?;
    let deadline = Instant::now() + wait;
    loop {
        // A CLI wait off every message path: polling the lock is fine here.
        std::thread::sleep(Duration::from_millis(50));
        if running_pid(paths)?.is_none() {
            return Ok(StopOutcome::Stopped { pid });
        }
        if Instant::now() >= deadline {
            return Err(HubError::Usage(format!(
                "the hub (pid {pid}) did not stop within {} s; it may still be finishing a call",
                wait.as_secs()
            )));
        }
    }
}

/// `None`: no hub holds the lock; `Some(pid)`: one does (its pid when recorded).
pub fn running_pid(paths: &ProfilePaths) -> Result<Option<Option<u32>>, HubError> {
    Ok(ProfileLock::holder(&paths.lock_file())?.map(|pid| (pid != 0).then_some(pid)))
}

fn signal_term(pid: u32) -> Result<(), HubError> {
    let raw = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| HubError::Usage(format!("{pid} is not a process id")))?;
    rustix::process::kill_process(raw, rustix::process::Signal::TERM)
        .map_err(|e| HubError::io(format!("signalling the hub (pid {pid})"))(e.into()))
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
    fn stop_without_a_hub_leaves_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ProfilePaths {
            dir: dir.path().join("p"),
        };
        assert_eq!(
            stop(&paths, Duration::from_secs(1)).unwrap(),
            StopOutcome::NotRunning
        );
        assert!(stopped(&paths).is_some());
        // A lock file nobody holds is not a running hub.
        drop(ProfileLock::acquire(&paths.lock_file()).unwrap());
        assert_eq!(running_pid(&paths).unwrap(), None);
        let held = ProfileLock::acquire(&paths.lock_file()).unwrap();
        assert_eq!(running_pid(&paths).unwrap(), Some(Some(std::process::id())));
        drop(held);
    }

    #[test]
    fn starters_parse() {
        for s in [StartedBy::Service, StartedBy::Extension, StartedBy::Shell] {
            assert_eq!(StartedBy::parse(s.as_str()), Some(s));
        }
        assert_eq!(StartedBy::parse("cron"), None);
    }
}
