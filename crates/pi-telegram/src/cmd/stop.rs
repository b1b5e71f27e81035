//! `pi-telegram stop`: the marker first, so no extension starts the hub again, then SIGTERM to
//! the hub holding the profile lock and a wait until it let go.

use std::time::{Duration, Instant};

use hub::HubError;
use hub::lifecycle::{mark_stopped, marker_path};
use hub::lock::ProfileLock;
use hub::paths::ProfilePaths;

/// What `stop` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    /// No hub was running (the marker is left anyway, so no extension starts one).
    NotRunning,
    /// The hub with this pid stopped.
    Stopped { pid: u32 },
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
    use hub::lifecycle::stopped;

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
}
