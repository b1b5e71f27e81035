//! The hub's log: `tracing` events as JSON lines in `<profile>/logs/hub.jsonl`, capped by size
//! and rotated ([`rotate`]), plus the human format on stderr (capped too when it is a file,
//! [`capped`]), both at the same level
//! (`$PI_TELEGRAM_LOG`, else the command's default). `pi-telegram logs` reads it back
//! ([`read`]).
//!
//! What may be logged: at info and above, never a token or message text (ids, counts, kinds
//! and Telegram's error texts only); message content goes to debug, if anywhere.

pub mod capped;
pub(crate) mod layer;
pub mod read;
pub mod rotate;
pub mod time;

use std::path::PathBuf;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::paths::ProfilePaths;

/// The variable that sets the log level (an `EnvFilter` directive: `debug`, `hub=debug,info`).
pub const LEVEL_ENV: &str = "PI_TELEGRAM_LOG";

/// `<profile>/logs/`.
pub fn log_dir(paths: &ProfilePaths) -> PathBuf {
    paths.dir.join("logs")
}

/// The current log file, `<profile>/logs/hub.jsonl` (older ones: `hub.1.jsonl`, ...).
pub fn log_file(paths: &ProfilePaths) -> PathBuf {
    log_dir(paths).join("hub.jsonl")
}

/// Where events go.
#[derive(Debug, Clone)]
pub struct LogSetup {
    /// The level when `$PI_TELEGRAM_LOG` is not set.
    pub default_level: &'static str,
    /// The profile whose log file receives JSON lines (`serve`); `None`: stderr only.
    pub file: Option<ProfilePaths>,
    /// Size cap and files kept.
    pub rotation: rotate::Rotation,
}

fn filter(default_level: &str) -> EnvFilter {
    EnvFilter::try_from_env(LEVEL_ENV).unwrap_or_else(|_| EnvFilter::new(default_level))
}

/// Installs the global subscriber. A log file that cannot be opened is reported on stderr and
/// the process goes on without it.
pub fn init(setup: &LogSetup) {
    use std::io::IsTerminal;
    // Colours only for a person: a file (the extension's hub.log, a test's capture) gets text,
    // capped.
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(capped::Stderr::new())
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter(setup.default_level));
    let (file, problem) = match &setup.file {
        Some(paths) => {
            let path = log_file(paths);
            match rotate::RotatingFile::open(&path, setup.rotation) {
                Ok(f) => (
                    Some(layer::JsonLayer::new(f).with_filter(filter(setup.default_level))),
                    None,
                ),
                Err(e) => (None, Some((path, e))),
            }
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .init();
    if let Some((path, e)) = problem {
        tracing::warn!(path = %path.display(), error = %e, "cannot write the log file; logging to stderr only");
    }
}
