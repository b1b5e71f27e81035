//! The portable Command Template Standard: local commands described in JSON, run without a
//! shell, composed into sequences, with placeholders, timeouts, retries and cleanup.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cmdtpl::{OutputValue, RunOptions, Template, Values};
//!
//! let t = Template::parse(&serde_json::json!({
//!     "defaults": { "lang": "en" },
//!     "template": ["/opt/stt --file {file} --lang {lang}", "tr a-z A-Z"]
//! }))?;
//! let values = Values::new().with("file", "/tmp/voice 1.ogg");
//! let outcome = t.run(&values, None, &RunOptions::default()).await?;
//! if let OutputValue::Stdout(text) = outcome.output {
//!     println!("{}", String::from_utf8_lossy(&text));
//! }
//! # Ok(()) }
//! ```
//!
//! # Shapes
//!
//! [`Template::parse`] takes a JSON value:
//!
//! - a string: one command;
//! - an array: its elements (strings, arrays or objects) run one after another;
//! - an object node: `template` (a string or an array) plus optional fields —
//!   `label`, `when`, `args`, `defaults`, `timeout`, `delay`, `output`, `retry`, `failure`,
//!   `recover`. Any other key is an error ([`TemplateError::UnknownKey`]); hosts that keep their
//!   own keys (`type`, `mime`...) next to `template` use [`Template::parse_with_host_keys`].
//!
//! # Commands
//!
//! A command string is split into words like a simple shell would: whitespace separates words;
//! `'...'` is literal; `"..."` is literal except that `\"`, `\\`, `\{`, `\}`, `\$` and
//! `` \` `` lose their backslash; outside quotes `\x` is `x`; `''` is an empty word. Then
//! placeholders are substituted inside each word, then the first word is executed directly with
//! the others as its arguments. No shell is involved: a value such as `a b; rm -rf ~` stays one argument,
//! and `|`, `>`, `$VAR` or globs are plain text. An unquoted `~` or `~/...` as the executable
//! becomes `$HOME`; a relative executable containing `/` is resolved against
//! [`RunOptions::cwd`] when that is set.
//!
//! Each command runs in its own process group with stdin fed from the previous step (or the
//! caller; none means `/dev/null`), stdout captured up to [`RunOptions::max_stdout`] (more is a
//! failure), and the end of stderr kept for diagnostics. Exit code 0 is success; anything else,
//! a signal, a start failure, a timeout or too much stdout is a failure of that step.
//!
//! # Placeholders
//!
//! | form | meaning |
//! | --- | --- |
//! | `{name}` | the value; missing everywhere → [`TemplateError::Missing`] |
//! | `{name=text}` | `text` when no value is given (an empty value counts as given) |
//! | `{name??text}` | `text` when the value is missing or falsy |
//! | `{flag?yes:no}` | `yes` when `flag` is truthy, else `no` (`:no` may be left out) |
//! | `{items[2]}`, `{items[i]}` | one item of a list value (a missing item counts as missing) |
//!
//! Lookup order: runtime [`Values`], then the nearest `defaults` (a node's own over its
//! ancestors'), then the inline text, then the error. Falsy means: missing, `""`, `"0"`,
//! `"false"` (any case), or an empty list. Type annotations (`{timeout:int=60000}`,
//! `{mode:enum(a,b)=a}`, `args: ["file:path"]`) are accepted and ignored. A default that is
//! exactly one placeholder (`"prompt": "{prompts[i]}"`) is resolved in turn, at most
//! [`MAX_DEFAULT_DEPTH`] levels; runtime values are never resolved further. Braces that do not
//! form a valid placeholder are literal (`find -exec {} +`, `awk '{print $1}'`), and `\{`
//! is always literal.
//!
//! # Composition and failure
//!
//! In an array, each step's stdout is the next step's stdin and the last stdout is the result.
//! Nodes inherit `defaults` (merged, the node's own winning) and `failure`; they do not inherit
//! `timeout`, `delay` or `output`. `args` are declarations only: checked when parsing and
//! available through [`Template::args`], with no effect on execution (undeclared placeholders
//! work too).
//!
//! When a step fails, its own `failure` (or the nearest ancestor's) decides what the enclosing
//! array does:
//!
//! - `continue` (default): the failure is recorded in [`Outcome::steps`], the next step gets
//!   empty stdin, and the array carries on (and can still succeed);
//! - `branch`: the array stops and fails; its parent array then applies the failed array's own
//!   `failure` (so an array marked `branch` inside another array stops that one too; to stop
//!   only a group, mark its steps `branch` and leave the group at `continue`);
//! - `root`: the whole run stops, except that a retrying node on the way retries first.
//!
//! A failure that reaches the top (including a single command that fails) is a [`RunError`]
//! carrying the cause and all step reports. A run that succeeded despite `continue` failures
//! says so through [`Outcome::any_failed`].
//!
//! # Timing, retry, recover, output
//!
//! - `timeout` (ms, a number or a placeholder string; absent or `0`: none) bounds one attempt of
//!   the node: for a command, the process group is killed with `SIGKILL` and reaped; for an
//!   array, the whole array attempt is bounded and the running step is killed.
//!   [`RunOptions::default_timeout`] applies to commands without a `timeout` key.
//! - `delay` (ms) waits once before the node starts (before its first attempt).
//! - `retry` (attempts including the first; `0` counts as `1`) repeats the node while it fails.
//!   Each attempt gets the node's original stdin. Between attempts, `recover` (any template
//!   shape, run with no stdin, its output ignored) cleans up; its steps default to
//!   `failure: "branch"`, so any failing step fails the recovery, and a failed recovery ends
//!   the retries with [`RunErrorKind::Recover`].
//! - `when` (a boolean, `"flag"`, `"!flag"` or a placeholder expression such as
//!   `"{mode?yes:}"`) skips a node when falsy; a skipped node passes its stdin through.
//! - `output` on the top node: `"stdout"` (default), or a value name / placeholder text
//!   (`"ogg"`, `"{ogg}"`, `"{dir}/out.ogg"`) naming a file that must exist when the run ends;
//!   the result is then [`OutputValue::File`].
//!
//! # Not supported (rejected with [`TemplateError::Unsupported`])
//!
//! - `parallel: true` (concurrent branches and degraded joins); `parallel: false` is accepted;
//! - `repeat` and the repeat placeholders (`{index}`, `{_(index+1)}`...) it would define;
//! - `output` other than `"stdout"` below the top node.
//!
//! Also left out: `args` entries with `=default` (an error pointing at `defaults`), whole
//! list values as arguments (`{items}` is an error; pick items), `~user` expansion, and
//! anything the standard assigns to hosts (handler selection, recipes, async runs).
//!
//! # Choices where the standard is open
//!
//! - An unquoted word that is exactly one `{flag?yes:no}` and comes out empty is dropped, so
//!   `tool {verbose?-v:} {file}` works; every other empty word stays an empty argument.
//! - Placeholders are substituted inside quoted words too (`--text "{text}"` is the documented
//!   style); only `\{` keeps a literal brace.
//! - `when: "true"` / `"false"` are the constants, not flag names.
//! - The media convenience ([`RunOptions::append_file_if_absent`]) applies only when the whole
//!   template is one command (not a one-step array) and no placeholder there, nor a default of
//!   that node, refers to `file`.
//! - Configuration errors found at run time (a missing value, a `timeout` that resolves to
//!   text) stop the run whatever `failure` says: they are not runtime failures to tolerate.
//! - After a command exits, processes it left running in the background are not killed (shell
//!   behaviour); only a timeout, too much stdout or dropping the run future kills the group.
//! - No shell means no injection, but a value that becomes a word of its own can still start
//!   with `-` and be read by the program as an option (`say {text}` with a text `-o file`). A
//!   host names such values in [`RunOptions::operands`]; a word that begins with one of them
//!   and comes out starting with `-` is refused ([`RunErrorKind::OptionLike`], nothing is
//!   started) unless the template ends the options first with a literal `--` word
//!   (`say -- {text}`). Piping the value on stdin avoids the question altogether.
//!
//! # Trust
//!
//! Not a sandbox: commands run with the host's permissions. [`Template::risky`] lists shells,
//! eval modes and destructive commands over placeholder paths so hosts can log them.

mod error;
mod exec;
mod model;
mod outcome;
mod parse;
mod placeholder;
mod resolve;
mod risk;
mod run;
mod split;
mod values;

use std::str::FromStr;

pub use error::{MAX_DEFAULT_DEPTH, RunError, RunErrorKind, TemplateError};
pub use model::{ArgDecl, Failure};
pub use outcome::{
    DEFAULT_MAX_STDOUT, DEFAULT_STDERR_TAIL, Outcome, OutputValue, RunOptions, StepReport,
};
pub use values::{Value, Values};

use model::{Body, Node};
use parse::{Place, parse_node};

/// A parsed command template, ready to run any number of times.
#[derive(Clone, Debug)]
pub struct Template {
    root: Node,
}

impl Template {
    /// Parses a template: a command string, a composition array, or an object node. Every key
    /// is checked; see the crate docs for what is rejected.
    pub fn parse(value: &serde_json::Value) -> Result<Self, TemplateError> {
        Self::parse_with_host_keys(value, &[])
    }

    /// Like [`Template::parse`], but keys in `host_keys` on the top-level object are skipped
    /// instead of rejected (a handler entry such as `{"type": "voice", "template": ...}`).
    pub fn parse_with_host_keys(
        value: &serde_json::Value,
        host_keys: &[&str],
    ) -> Result<Self, TemplateError> {
        let place = Place {
            root: true,
            host_keys,
            inherited: Failure::Continue,
        };
        Ok(Self {
            root: parse_node(value, "root".to_owned(), place)?,
        })
    }

    /// Runs the template with `values`, feeding `stdin` (if any) to the first command.
    ///
    /// Dropping the returned future kills the running command's process group.
    pub async fn run(
        &self,
        values: &Values,
        stdin: Option<Vec<u8>>,
        opts: &RunOptions,
    ) -> Result<Outcome, RunError> {
        run::run(&self.root, values, stdin, opts).await
    }

    /// Warnings about high-risk shapes (shells, `-c`/`-e` eval modes, `rm`/`mv`/`cp`/`rsync`
    /// over placeholder or broad paths, shell syntax that will not be interpreted), each
    /// prefixed with the node location. For logging; nothing is blocked.
    pub fn risky(&self) -> Vec<String> {
        risk::risky(&self.root)
    }

    /// The top-level `label`.
    pub fn label(&self) -> Option<&str> {
        self.root.label.as_deref()
    }

    /// The top-level `args` declarations.
    pub fn args(&self) -> Option<&[ArgDecl]> {
        self.root.args.as_deref()
    }

    /// Whether the template is one command rather than a composition.
    pub fn is_single_command(&self) -> bool {
        matches!(self.root.body, Body::Command { .. })
    }

    /// Whether any command (`recover` included) has a placeholder referring to `name`.
    pub fn mentions(&self, name: &str) -> bool {
        let mut found = false;
        self.root.walk(&mut |n| {
            if let Body::Command { words } = &n.body {
                found |= words.iter().any(|w| w.mentions(name));
            }
        });
        found
    }
}

/// The compact form: one command string.
impl FromStr for Template {
    type Err = TemplateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(&serde_json::Value::String(s.to_owned()))
    }
}
