//! Run options and results.

use std::path::PathBuf;
use std::time::Duration;

/// Default [`RunOptions::max_stdout`]: 16 MiB.
pub const DEFAULT_MAX_STDOUT: usize = 16 * 1024 * 1024;

/// Default [`RunOptions::stderr_tail`]: 8 KiB.
pub const DEFAULT_STDERR_TAIL: usize = 8 * 1024;

/// How to run a template.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Most bytes one command may write to stdout; more is a failure of that step (the command
    /// is killed). Default [`DEFAULT_MAX_STDOUT`].
    pub max_stdout: usize,
    /// How many bytes from the end of each command's stderr are kept for diagnostics; the rest
    /// is read and dropped. Default [`DEFAULT_STDERR_TAIL`].
    pub stderr_tail: usize,
    /// Timeout for commands whose node has no `timeout` key (an explicit `"timeout": 0` still
    /// means none). Default `None`: unbounded, as the standard says.
    pub default_timeout: Option<Duration>,
    /// Working directory for the commands; relative command paths containing a `/` and a
    /// relative `output` file are resolved against it. Default: the caller's.
    pub cwd: Option<PathBuf>,
    /// The media-handler convenience: when the template is a single command (not a
    /// composition) and never mentions `{file}`, this path is appended as its last argument.
    /// `recover` templates never get it.
    pub append_file_if_absent: Option<PathBuf>,
    /// Names of values that are data, never options (words a host passes on from someone it
    /// does not control, such as the text to speak). A command word that begins with one of
    /// them and comes out starting with `-` would reach the program as an option; unless an
    /// earlier word of that command is exactly `--` (the end of its options), the command is
    /// not started and the run fails with [`crate::RunErrorKind::OptionLike`]. The value can
    /// always be read from stdin instead. Default: none.
    pub operands: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            max_stdout: DEFAULT_MAX_STDOUT,
            stderr_tail: DEFAULT_STDERR_TAIL,
            default_timeout: None,
            cwd: None,
            append_file_if_absent: None,
            operands: Vec::new(),
        }
    }
}

/// The result of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputValue {
    /// The final stdout (the default `output`).
    Stdout(Vec<u8>),
    /// The file selected by `output` (e.g. `"ogg"`); it existed when the run ended.
    File(PathBuf),
}

/// A successful run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The selected result.
    pub output: OutputValue,
    /// Every command that ran, in order (retries and `recover` commands included).
    pub steps: Vec<StepReport>,
}

impl Outcome {
    /// Whether some step failed and the run went on anyway (`failure: "continue"`). Hosts that
    /// treat a composed handler as one unit (any failed step → try the next handler) check this.
    pub fn any_failed(&self) -> bool {
        self.steps.iter().any(|s| s.failed)
    }
}

/// What one command (or one timed-out composition) did, for logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepReport {
    /// Node location (`root`, `root[1]`, `root[0].recover`...).
    pub at: String,
    /// The node's `label`, or the nearest labelled ancestor's.
    pub label: Option<String>,
    /// The command line as run (lossy UTF-8). Runtime values appear here: mind secrets in logs.
    pub argv: Vec<String>,
    /// The process id, if it started.
    pub pid: Option<u32>,
    /// The exit code, if it exited (not when it was killed or never started).
    pub exit_code: Option<i32>,
    /// Wall time from start to end.
    pub duration: Duration,
    /// The end of stderr (at most [`RunOptions::stderr_tail`] bytes, lossy UTF-8).
    pub stderr_tail: String,
    /// Whether this step failed.
    pub failed: bool,
    /// Why it failed, in words (exit code, timeout, spawn error...).
    pub error: Option<String>,
    /// 1-based attempt of the nearest retrying node (1 without retry).
    pub attempt: u32,
    /// Whether it ran as part of a `recover` template.
    pub recovery: bool,
}
