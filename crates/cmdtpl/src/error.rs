//! Errors: [`TemplateError`] for what is wrong with a template or its values, [`RunError`] for a
//! run that failed.
//!
//! Every message starts with the node's location: `root` is the whole template, `root[1]` its
//! second composition step, `root[1].recover` that step's recover template, and so on.

use std::path::PathBuf;
use std::time::Duration;

use crate::outcome::StepReport;

/// How deep defaults that are single placeholders may refer to one another.
pub const MAX_DEFAULT_DEPTH: usize = 8;

/// A template that cannot be parsed, or a placeholder that cannot be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A JSON value of the wrong kind.
    #[error("{at}: `{key}` must be {expected}, found {found}")]
    WrongType {
        /// Node location.
        at: String,
        /// The field (`template` for the node itself).
        key: String,
        /// What the standard allows there.
        expected: &'static str,
        /// The JSON kind found.
        found: &'static str,
    },
    /// A key the standard does not define.
    #[error(
        "{at}: unknown key `{key}` (a command template node takes label, when, args, defaults, \
         timeout, delay, output, retry, failure, recover and template)"
    )]
    UnknownKey {
        /// Node location.
        at: String,
        key: String,
    },
    /// A standard feature this implementation does not provide.
    #[error("{at}: `{key}` is not supported by this implementation: {why}")]
    Unsupported {
        /// Node location.
        at: String,
        key: String,
        /// What is missing and what to do instead.
        why: &'static str,
    },
    /// An object node without `template`.
    #[error("{at}: missing `template`")]
    MissingTemplate {
        /// Node location.
        at: String,
    },
    /// A command string with no words.
    #[error("{at}: empty command")]
    EmptyCommand {
        /// Node location.
        at: String,
    },
    /// A composition array with no steps.
    #[error("{at}: empty composition (a `template` array needs at least one step)")]
    EmptyComposition {
        /// Node location.
        at: String,
    },
    /// A quote opened and never closed.
    #[error("{at}: unterminated {quote} quote in `{template}`")]
    UnterminatedQuote {
        /// Node location.
        at: String,
        /// `'` or `"`.
        quote: char,
        /// The command string.
        template: String,
    },
    /// A command string ending in a lone backslash.
    #[error("{at}: trailing backslash in `{template}`")]
    TrailingBackslash {
        /// Node location.
        at: String,
        /// The command string.
        template: String,
    },
    /// A field with a value outside what the standard allows.
    #[error("{at}: invalid `{key}`: {why}")]
    InvalidField {
        /// Node location.
        at: String,
        /// The field.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// A required placeholder with no runtime value, no default and no inline default.
    #[error("{at}: no value for placeholder `{name}` (not given at run time, no default)")]
    Missing {
        /// Node location.
        at: String,
        /// The placeholder name.
        name: String,
    },
    /// A list value used where one string is needed.
    #[error("{at}: placeholder `{name}` holds a list; select one item with `{{{name}[index]}}`")]
    ListValue {
        /// Node location.
        at: String,
        /// The placeholder name.
        name: String,
    },
    /// `{name[index]}` where `name` is a string, not a list.
    #[error("{at}: `{{{name}[...]}}` indexes `{name}`, which is not a list")]
    NotAList {
        /// Node location.
        at: String,
        /// The placeholder name.
        name: String,
    },
    /// `{name[var]}` where `var` is not a non-negative integer.
    #[error("{at}: index `{index}` of `{name}` is not a non-negative integer")]
    BadIndex {
        /// Node location.
        at: String,
        /// The placeholder name.
        name: String,
        /// The index value found.
        index: String,
    },
    /// Defaults that refer to each other too deeply (or in a cycle).
    #[error(
        "{at}: placeholder `{name}`: defaults refer to other placeholders more than \
         {MAX_DEFAULT_DEPTH} levels deep (a cycle?)"
    )]
    TooDeep {
        /// Node location.
        at: String,
        /// The placeholder being resolved when the limit was hit.
        name: String,
    },
    /// A placeholder-resolved number field that is not a non-negative integer.
    #[error("{at}: `{key}` resolved to `{value}`, which is not a non-negative integer")]
    NotANumber {
        /// Node location.
        at: String,
        /// `timeout`, `delay` or `retry`.
        key: String,
        /// The resolved text.
        value: String,
    },
}

/// A run that failed: the cause, and every step that ran before it stopped.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct RunError {
    /// Why the run failed.
    #[source]
    pub kind: RunErrorKind,
    /// The steps that ran, in order (including the failed one), for logs.
    pub steps: Vec<StepReport>,
}

/// Why a run (or one of its nodes) failed.
#[derive(Debug, thiserror::Error)]
pub enum RunErrorKind {
    /// A placeholder could not be resolved, or a placeholder-valued field is invalid. These
    /// are configuration errors: they stop the whole run whatever `failure` says.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The command could not be started (not found, not executable...).
    #[error("{at}: cannot start `{program}`: {source}")]
    Spawn {
        /// Node location.
        at: String,
        /// The executable.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The command ended unsuccessfully: non-zero exit or killed by a signal.
    #[error("{at}: `{program}` {}{}", describe_exit(*.code, *.signal), stderr_suffix(.stderr_tail))]
    Exit {
        /// Node location.
        at: String,
        /// The executable.
        program: String,
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Signal number, if a signal ended it.
        signal: Option<i32>,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The node ran longer than its `timeout`; its processes were killed.
    #[error("{at}: {} timed out after {} ms and was killed", program.as_deref().map_or_else(|| "composition".to_owned(), |p| format!("`{p}`")), after.as_millis())]
    Timeout {
        /// Node location.
        at: String,
        /// The executable, or `None` when a whole composition node timed out.
        program: Option<String>,
        /// The timeout.
        after: Duration,
    },
    /// A value named in [`crate::RunOptions::operands`] would have reached the command as an
    /// option (its word starts with `-` and no `--` comes before it); nothing was started.
    #[error(
        "{at}: `{program}` would take the value of `{{{name}}}` as an option (it starts with \
         `-`); put `--` before `{{{name}}}` in the template, or read the text from stdin"
    )]
    OptionLike {
        /// Node location.
        at: String,
        /// The executable.
        program: String,
        /// The placeholder whose value starts the word.
        name: String,
    },
    /// The command wrote more than the stdout limit; it was killed.
    #[error("{at}: `{program}` wrote more than {limit} bytes to stdout and was killed")]
    StdoutTooLarge {
        /// Node location.
        at: String,
        /// The executable.
        program: String,
        /// [`crate::RunOptions::max_stdout`].
        limit: usize,
    },
    /// Talking to the command's pipes or waiting for it failed.
    #[error("{at}: I/O error with `{program}`: {source}")]
    Io {
        /// Node location.
        at: String,
        /// The executable.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `recover` template failed between retry attempts; retries stopped.
    #[error("{at}: recover failed, retries stopped: {source}")]
    Recover {
        /// Location of the retried node.
        at: String,
        /// Why recovery failed.
        #[source]
        source: Box<RunErrorKind>,
    },
    /// The `output` selector names a file that does not exist after the run.
    #[error("output `{selector}` selects `{}`, which does not exist after the run", path.display())]
    OutputMissing {
        /// The selector as written.
        selector: String,
        /// The resolved path.
        path: PathBuf,
    },
}

impl RunError {
    /// The error without what the command wrote to stderr, which may quote its input (a
    /// transcript, the text to speak): for logs that must not hold message content.
    pub fn without_output(&self) -> String {
        self.kind.without_output()
    }
}

impl RunErrorKind {
    /// See [`RunError::without_output`].
    pub fn without_output(&self) -> String {
        match self {
            Self::Exit {
                at,
                program,
                code,
                signal,
                ..
            } => format!("{at}: `{program}` {}", describe_exit(*code, *signal)),
            Self::Recover { at, source } => {
                format!(
                    "{at}: recover failed, retries stopped: {}",
                    source.without_output()
                )
            }
            other => other.to_string(),
        }
    }
}

fn describe_exit(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        (None, None) => "ended unsuccessfully".to_owned(),
    }
}

fn stderr_suffix(tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        // The last line is usually the one that says what went wrong.
        let last = tail.lines().last().unwrap_or(tail);
        format!(": {last}")
    }
}

pub(crate) fn exit_summary(code: Option<i32>, signal: Option<i32>) -> String {
    describe_exit(code, signal)
}
