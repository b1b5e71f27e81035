//! A throwaway pi environment: agent dir, sessions dir and work dir in one tempdir.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use crate::locate::{PiMissing, pi_bin};
use crate::rpc::{PiRpc, RpcError};

/// Setting up a [`PiEnv`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PiEnvError {
    /// pi is not installed.
    #[error(transparent)]
    PiMissing(#[from] PiMissing),
    /// Creating the directories or writing pi's config failed.
    #[error("setting up the pi test environment: {0}")]
    Io(#[from] std::io::Error),
}

/// An isolated pi set-up pointing at a fake LLM: everything lives in one tempdir, removed on
/// drop.
///
/// * `agent/`: `PI_CODING_AGENT_DIR`, with `models.json` and `settings.json` from
///   [`fake_llm::write_pi_agent_config`];
/// * `sessions/`: `PI_CODING_AGENT_SESSION_DIR`;
/// * `work/`: the cwd pi runs in.
#[derive(Debug)]
pub struct PiEnv {
    pi: PathBuf,
    llm_base_url: String,
    agent_dir: PathBuf,
    session_dir: PathBuf,
    work_dir: PathBuf,
    // Last, so the paths above are never used after the directory is gone.
    root: TempDir,
}

impl PiEnv {
    /// A fresh environment for the pi from [`pi_bin`], using the fake LLM at `llm_base_url`
    /// (`http://127.0.0.1:PORT/v1`, e.g. [`fake_llm::FakeLlm::base_url`]).
    pub fn new(llm_base_url: &str) -> Result<Self, PiEnvError> {
        Self::with_pi(pi_bin()?, llm_base_url)
    }

    /// Like [`PiEnv::new`] with an explicit pi binary.
    pub fn with_pi(pi: PathBuf, llm_base_url: &str) -> Result<Self, PiEnvError> {
        let root = tempfile::Builder::new().prefix("pi-testkit-").tempdir()?;
        let agent_dir = root.path().join("agent");
        let session_dir = root.path().join("sessions");
        let work_dir = root.path().join("work");
        for dir in [&agent_dir, &session_dir, &work_dir] {
            std::fs::create_dir_all(dir)?;
        }
        fake_llm::write_pi_agent_config(&agent_dir, llm_base_url)?;
        Ok(Self {
            pi,
            llm_base_url: llm_base_url.to_owned(),
            agent_dir,
            session_dir,
            work_dir,
            root,
        })
    }

    /// The pi binary.
    pub fn pi(&self) -> &Path {
        &self.pi
    }

    /// The fake LLM's base URL the config points at.
    pub fn llm_base_url(&self) -> &str {
        &self.llm_base_url
    }

    /// The tempdir holding everything.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// `PI_CODING_AGENT_DIR`.
    pub fn agent_dir(&self) -> &Path {
        &self.agent_dir
    }

    /// `PI_CODING_AGENT_SESSION_DIR`.
    pub fn session_dir(&self) -> &Path {
        &self.session_dir
    }

    /// The cwd of the commands from [`PiEnv::command`].
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The environment pi needs to run offline in this set-up.
    pub fn envs(&self) -> Vec<(String, String)> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            ("PI_CODING_AGENT_DIR".into(), path(&self.agent_dir)),
            (
                "PI_CODING_AGENT_SESSION_DIR".into(),
                path(&self.session_dir),
            ),
            // Without it pi tries to download fd and ripgrep and refresh model catalogs.
            ("PI_OFFLINE".into(), "1".into()),
            ("PI_SKIP_VERSION_CHECK".into(), "1".into()),
            ("PI_TELEMETRY".into(), "0".into()),
        ]
    }

    /// `pi ARGS` with [`PiEnv::envs`] and cwd [`PiEnv::work_dir`]. Stdio is the `Command`
    /// default; set it as the test needs.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(&self.pi);
        cmd.args(args).envs(self.envs()).current_dir(&self.work_dir);
        cmd
    }

    /// Spawns `pi --mode rpc ARGS` (e.g. `["--no-session"]`) with piped stdio.
    pub fn spawn_rpc<I, S>(&self, args: I) -> Result<PiRpc, RpcError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(["--mode", "rpc"]);
        cmd.args(args);
        PiRpc::spawn(cmd)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn layout_and_envs() {
        let env = PiEnv::with_pi(PathBuf::from("/bin/true"), "http://127.0.0.1:9/v1").unwrap();
        assert!(env.agent_dir().join("models.json").is_file());
        assert!(env.agent_dir().join("settings.json").is_file());
        assert!(env.session_dir().is_dir());
        assert!(env.work_dir().is_dir());
        let envs = env.envs();
        let get = |k: &str| {
            envs.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("PI_CODING_AGENT_DIR"), env.agent_dir().to_str());
        assert_eq!(get("PI_OFFLINE"), Some("1"));
        let cmd = env.command(["--version"]);
        assert_eq!(cmd.get_current_dir(), Some(env.work_dir()));
        assert_eq!(cmd.get_program(), "/bin/true");

        let root = env.root().to_path_buf();
        drop(env);
        assert!(!root.exists());
    }
}
