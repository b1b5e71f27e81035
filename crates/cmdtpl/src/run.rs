//! Executing the template tree: `when`, `delay`, `retry` + `recover`, `timeout`, sequences with
//! stdin piping, failure scopes, and the final `output` selection.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::error::{RunError, RunErrorKind, TemplateError, exit_summary};
use crate::exec::{Ended, ExecRequest, exec};
use crate::model::{Body, Failure, Node, Num, Output, When};
use crate::outcome::{Outcome, OutputValue, RunOptions, StepReport};
use crate::placeholder::{Piece, Word, whole_placeholder};
use crate::resolve::Scope;
use crate::values::{Value, Values, text_is_truthy};

/// How a node ended.
enum Flow {
    /// It ran; its stdout.
    Done(Vec<u8>),
    /// `when` was false; its input passes through unchanged.
    Skipped(Option<Vec<u8>>),
    /// It failed. `abort` is set once a `failure: "root"` decided the whole run stops (a
    /// retrying ancestor still gets its attempts).
    Failed { abort: bool, cause: RunErrorKind },
}

/// What a node inherits from where it runs.
#[derive(Clone)]
struct Ctx<'a> {
    scope: Scope<'a>,
    label: Option<&'a str>,
    attempt: u32,
}

type BoxFut<'s, T> = Pin<Box<dyn Future<Output = T> + Send + 's>>;

struct Runner<'a> {
    opts: &'a RunOptions,
    /// The root node when it gets the appended file argument.
    append_to: Option<(&'a Node, &'a Path)>,
    steps: Vec<StepReport>,
    recovery_depth: u32,
}

/// Runs the tree rooted at `root`.
pub(crate) async fn run(
    root: &Node,
    values: &Values,
    stdin: Option<Vec<u8>>,
    opts: &RunOptions,
) -> Result<Outcome, RunError> {
    let append_to = opts
        .append_file_if_absent
        .as_deref()
        .filter(|_| wants_file_appended(root))
        .map(|p| (root, p));
    let mut runner = Runner {
        opts,
        append_to,
        steps: Vec::new(),
        recovery_depth: 0,
    };
    let ctx = Ctx {
        scope: Scope::new(values),
        label: None,
        attempt: 1,
    };
    let flow = runner.node(root, ctx, stdin).await;
    let steps = runner.steps;
    let fail = |kind: RunErrorKind, steps| Err(RunError { kind, steps });
    let out = match flow {
        Err(kind) | Ok(Flow::Failed { cause: kind, .. }) => return fail(kind, steps),
        Ok(Flow::Skipped(input)) => {
            return Ok(Outcome {
                output: OutputValue::Stdout(input.unwrap_or_default()),
                steps,
            });
        }
        Ok(Flow::Done(out)) => out,
    };
    let output = match &root.output {
        Output::Stdout => OutputValue::Stdout(out),
        Output::File { word, source } => {
            let scope = Scope::new(values).with(root.defaults.as_ref());
            let text = match scope.resolve_value(word, &root.at) {
                Ok(t) => t,
                Err(e) => return fail(e.into(), steps),
            };
            let mut path = PathBuf::from(text);
            if let Some(cwd) = &opts.cwd
                && path.is_relative()
            {
                path = cwd.join(path);
            }
            if !path.exists() {
                let kind = RunErrorKind::OutputMissing {
                    selector: source.clone(),
                    path,
                };
                return fail(kind, steps);
            }
            OutputValue::File(path)
        }
    };
    Ok(Outcome { output, steps })
}

/// The convenience rule: a single command (not a composition) that never mentions `{file}`.
fn wants_file_appended(root: &Node) -> bool {
    let Body::Command { words } = &root.body else {
        return false;
    };
    let in_words = words.iter().any(|w| w.mentions("file"));
    let in_defaults = root.defaults.iter().flatten().any(|(_, v)| match v {
        Value::Text(t) => whole_placeholder(t).is_some_and(|e| e.mentions("file")),
        Value::List(items) => items
            .iter()
            .any(|t| whole_placeholder(t).is_some_and(|e| e.mentions("file"))),
    });
    !in_words && !in_defaults
}

impl<'a> Runner<'a> {
    /// One node: `when`, `delay`, then the retry loop around its body.
    fn node<'s>(
        &'s mut self,
        node: &'a Node,
        parent: Ctx<'a>,
        input: Option<Vec<u8>>,
    ) -> BoxFut<'s, Result<Flow, RunErrorKind>> {
        Box::pin(async move {
            let at = node.at.as_str();
            let scope = parent.scope.with(node.defaults.as_ref());
            let label = node.label.as_deref().or(parent.label);
            if let Some(w) = &node.when
                && !when(w, &scope, at)?
            {
                return Ok(Flow::Skipped(input));
            }
            if let Some(d) = &node.delay {
                let ms = number(d, &scope, at, "delay")?;
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
            }
            let attempts = match &node.retry {
                Some(r) => number(r, &scope, at, "retry")?.max(1),
                None => 1,
            };
            let timeout = match &node.timeout {
                Some(t) => Some(number(t, &scope, at, "timeout")?)
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis),
                None if matches!(node.body, Body::Command { .. }) => self.opts.default_timeout,
                None => None,
            };
            let mut attempt: u64 = 1;
            loop {
                let ctx = Ctx {
                    scope: scope.clone(),
                    label,
                    attempt: if attempts > 1 {
                        u32::try_from(attempt).unwrap_or(u32::MAX)
                    } else {
                        parent.attempt
                    },
                };
                let flow = self.body(node, &ctx, input.clone(), timeout).await?;
                let Flow::Failed { abort, cause } = flow else {
                    return Ok(flow);
                };
                if attempt >= attempts {
                    return Ok(Flow::Failed { abort, cause });
                }
                if let Some(rec) = &node.recover {
                    self.recovery_depth += 1;
                    let r = self.node(rec, ctx, None).await;
                    self.recovery_depth -= 1;
                    if let Flow::Failed {
                        abort: rec_abort,
                        cause: rec_cause,
                    } = r?
                    {
                        return Ok(Flow::Failed {
                            abort: abort || rec_abort,
                            cause: RunErrorKind::Recover {
                                at: node.at.clone(),
                                source: Box::new(rec_cause),
                            },
                        });
                    }
                }
                attempt += 1;
            }
        })
    }

    /// One attempt of a node's body, under its timeout.
    async fn body(
        &mut self,
        node: &'a Node,
        ctx: &Ctx<'a>,
        input: Option<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Result<Flow, RunErrorKind> {
        match &node.body {
            Body::Command { words } => self.command(node, words, ctx, input, timeout).await,
            Body::Sequence(children) => {
                let Some(limit) = timeout else {
                    return self.sequence(children, ctx, input).await;
                };
                let started = Instant::now();
                // On expiry the running step's future is dropped, which kills its process group.
                match tokio::time::timeout(limit, self.sequence(children, ctx, input)).await {
                    Ok(r) => r,
                    Err(_) => {
                        self.steps.push(StepReport {
                            at: node.at.clone(),
                            label: ctx.label.map(str::to_owned),
                            argv: Vec::new(),
                            pid: None,
                            exit_code: None,
                            duration: started.elapsed(),
                            stderr_tail: String::new(),
                            failed: true,
                            error: Some(format!(
                                "composition timed out after {} ms",
                                limit.as_millis()
                            )),
                            attempt: ctx.attempt,
                            recovery: self.recovery_depth > 0,
                        });
                        Ok(Flow::Failed {
                            abort: false,
                            cause: RunErrorKind::Timeout {
                                at: node.at.clone(),
                                program: None,
                                after: limit,
                            },
                        })
                    }
                }
            }
        }
    }

    /// Sequential composition: stdout → next stdin; each failed step's `failure` decides.
    async fn sequence(
        &mut self,
        children: &'a [Node],
        ctx: &Ctx<'a>,
        input: Option<Vec<u8>>,
    ) -> Result<Flow, RunErrorKind> {
        let mut cur = input;
        for child in children {
            match self.node(child, ctx.clone(), cur.take()).await? {
                Flow::Done(out) => cur = Some(out),
                Flow::Skipped(passed) => cur = passed,
                Flow::Failed { abort: true, cause } => {
                    return Ok(Flow::Failed { abort: true, cause });
                }
                Flow::Failed {
                    abort: false,
                    cause,
                } => match child.failure {
                    // Already recorded in the step reports; the failed step's stdout is cleared.
                    Failure::Continue => cur = Some(Vec::new()),
                    Failure::Branch => {
                        return Ok(Flow::Failed {
                            abort: false,
                            cause,
                        });
                    }
                    Failure::Root => return Ok(Flow::Failed { abort: true, cause }),
                },
            }
        }
        Ok(Flow::Done(cur.unwrap_or_default()))
    }

    /// One command.
    async fn command(
        &mut self,
        node: &'a Node,
        words: &'a [Word],
        ctx: &Ctx<'a>,
        input: Option<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Result<Flow, RunErrorKind> {
        let at = node.at.as_str();
        let mut program: Option<OsString> = None;
        let mut args: Vec<OsString> = Vec::new();
        // Past a literal `--` every argument is an operand for the program.
        let mut options_ended = false;
        let mut option_like: Option<String> = None;
        for w in words {
            let Some(text) = ctx.scope.resolve_word(w, at)? else {
                continue;
            };
            match program {
                None => program = Some(self.program(w, text)),
                Some(_) => {
                    // A lone `-` is an operand (stdin) to every option parser.
                    if option_like.is_none()
                        && !options_ended
                        && text.starts_with('-')
                        && text != "-"
                    {
                        option_like = self.operand_first(w, &ctx.scope, at);
                    }
                    options_ended |= w.literal().as_deref() == Some("--");
                    args.push(text.into());
                }
            }
        }
        let Some(program) = program else {
            return Err(TemplateError::EmptyCommand { at: at.to_owned() }.into());
        };
        if let Some(name) = option_like {
            // Never started: the value (the text to speak, say) would have been read as an
            // option. Recorded as a failed step like a command that could not start.
            let program = program.to_string_lossy().into_owned();
            let cause = RunErrorKind::OptionLike {
                at: at.to_owned(),
                program: program.clone(),
                name,
            };
            self.steps.push(StepReport {
                at: at.to_owned(),
                label: ctx.label.map(str::to_owned),
                argv: vec![program],
                pid: None,
                exit_code: None,
                duration: Duration::ZERO,
                stderr_tail: String::new(),
                failed: true,
                error: Some(cause.to_string()),
                attempt: ctx.attempt,
                recovery: self.recovery_depth > 0,
            });
            return Ok(Flow::Failed {
                abort: false,
                cause,
            });
        }
        if let Some((root, file)) = self.append_to
            && std::ptr::eq(root, node)
        {
            args.push(file.as_os_str().to_owned());
        }
        let argv: Vec<String> = std::iter::once(&program)
            .chain(&args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let name = argv.first().cloned().unwrap_or_default();
        let r = exec(ExecRequest {
            program,
            args,
            stdin: input,
            timeout,
            max_stdout: self.opts.max_stdout,
            stderr_tail: self.opts.stderr_tail,
            cwd: self.opts.cwd.as_deref(),
        })
        .await;
        let mut report = StepReport {
            at: at.to_owned(),
            label: ctx.label.map(str::to_owned),
            argv,
            pid: r.pid,
            exit_code: None,
            duration: r.duration,
            stderr_tail: r.stderr_tail,
            failed: true,
            error: None,
            attempt: ctx.attempt,
            recovery: self.recovery_depth > 0,
        };
        let (error, cause) = match r.ended {
            Ended::Exited(status) if status.success() => {
                report.exit_code = status.code();
                report.failed = false;
                self.steps.push(report);
                return Ok(Flow::Done(r.stdout));
            }
            Ended::Exited(status) => {
                use std::os::unix::process::ExitStatusExt;
                report.exit_code = status.code();
                let (code, signal) = (status.code(), status.signal());
                (
                    exit_summary(code, signal),
                    RunErrorKind::Exit {
                        at: at.to_owned(),
                        program: name,
                        code,
                        signal,
                        stderr_tail: report.stderr_tail.clone(),
                    },
                )
            }
            Ended::SpawnFailed(source) => (
                format!("cannot start: {source}"),
                RunErrorKind::Spawn {
                    at: at.to_owned(),
                    program: name,
                    source,
                },
            ),
            Ended::TimedOut => {
                let after = timeout.unwrap_or_default();
                (
                    format!("timed out after {} ms, killed", after.as_millis()),
                    RunErrorKind::Timeout {
                        at: at.to_owned(),
                        program: Some(name),
                        after,
                    },
                )
            }
            Ended::StdoutTooLarge => (
                format!("stdout over {} bytes, killed", self.opts.max_stdout),
                RunErrorKind::StdoutTooLarge {
                    at: at.to_owned(),
                    program: name,
                    limit: self.opts.max_stdout,
                },
            ),
            Ended::Io(source) => (
                format!("I/O error: {source}"),
                RunErrorKind::Io {
                    at: at.to_owned(),
                    program: name,
                    source,
                },
            ),
        };
        report.error = Some(error);
        self.steps.push(report);
        Ok(Flow::Failed {
            abort: false,
            cause,
        })
    }

    /// The operand value ([`RunOptions::operands`]) the word's text begins with, if it begins
    /// with one (the first piece that is not empty is that value's placeholder).
    fn operand_first(&self, word: &Word, scope: &Scope<'_>, at: &str) -> Option<String> {
        for piece in &word.pieces {
            match piece {
                Piece::Lit(s) if s.is_empty() => {}
                Piece::Lit(_) => return None,
                Piece::Ph(e) => {
                    if scope.resolve_expr(e, at, 0).ok()?.is_empty() {
                        continue;
                    }
                    return self.opts.operands.iter().find(|n| e.mentions(n)).cloned();
                }
            }
        }
        None
    }

    /// The executable: `~` expanded, a relative path with a `/` resolved against `cwd`.
    fn program(&self, word: &Word, text: String) -> OsString {
        let expanded: PathBuf = match (word.tilde, std::env::var_os("HOME")) {
            (true, Some(home)) if text == "~" => PathBuf::from(home),
            (true, Some(home)) => match text.strip_prefix("~/") {
                Some(rest) => Path::new(&home).join(rest),
                None => PathBuf::from(text),
            },
            _ => PathBuf::from(text),
        };
        match &self.opts.cwd {
            Some(cwd) if expanded.is_relative() && expanded.components().count() > 1 => {
                cwd.join(expanded).into_os_string()
            }
            _ => expanded.into_os_string(),
        }
    }
}

/// Evaluates `when`.
fn when(w: &When, scope: &Scope<'_>, at: &str) -> Result<bool, TemplateError> {
    match w {
        When::Const(b) => Ok(*b),
        When::Flag { name, negate } => Ok(scope.flag(name, at)? != *negate),
        When::Expr(word) => Ok(text_is_truthy(&scope.resolve_value(word, at)?)),
    }
}

/// Evaluates a millisecond / count field.
fn number(n: &Num, scope: &Scope<'_>, at: &str, key: &str) -> Result<u64, TemplateError> {
    match n {
        Num::Fixed(v) => Ok(*v),
        Num::Expr(word) => {
            let text = scope.resolve_value(word, at)?;
            text.trim().parse().map_err(|_| TemplateError::NotANumber {
                at: at.to_owned(),
                key: key.to_owned(),
                value: text,
            })
        }
    }
}
