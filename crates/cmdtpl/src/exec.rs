//! Running one command: direct exec in its own process group, stdin fed, stdout bounded,
//! stderr tail kept, timeout enforced by killing the whole group.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// How long to wait for a killed command to be reaped, and for the rest of its stderr.
const AFTER_KILL_GRACE: Duration = Duration::from_millis(500);

/// One command to run.
pub(crate) struct ExecRequest<'a> {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) stdin: Option<Vec<u8>>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_stdout: usize,
    pub(crate) stderr_tail: usize,
    pub(crate) cwd: Option<&'a Path>,
}

/// How the command ended.
pub(crate) enum Ended {
    Exited(ExitStatus),
    SpawnFailed(io::Error),
    TimedOut,
    StdoutTooLarge,
    Io(io::Error),
}

/// What happened.
pub(crate) struct ExecResult {
    pub(crate) pid: Option<u32>,
    pub(crate) ended: Ended,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr_tail: String,
    pub(crate) duration: Duration,
}

/// Kills the command's process group when dropped while armed: on timeout, on overflow, and
/// when the caller drops the run future (cancellation, an enclosing composition's timeout).
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn kill(&self) {
        if let Some(pgid) = self.0 {
            // ESRCH (nothing left in the group) is fine.
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Why the collection loop stopped early.
enum Stop {
    Timeout,
    Overflow,
    Io(io::Error),
}

/// Runs the command to completion (or to its kill).
pub(crate) async fn exec(req: ExecRequest<'_>) -> ExecResult {
    let started = Instant::now();
    let mut cmd = Command::new(&req.program);
    cmd.args(&req.args)
        .stdin(if req.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own group, so a timeout also reaches what it started (`sh -c 'a | b'`).
        .process_group(0);
    if let Some(dir) = req.cwd {
        cmd.current_dir(dir);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return ExecResult {
                pid: None,
                ended: Ended::SpawnFailed(e),
                stdout: Vec::new(),
                stderr_tail: String::new(),
                duration: started.elapsed(),
            };
        }
    };
    let pid = child.id();
    // The group id is the child's pid; never signal group 0/1 by mistake.
    let mut guard = GroupGuard(
        pid.and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p > 1)
            .and_then(Pid::from_raw),
    );

    let stdin_pipe = child.stdin.take();
    let data = req.stdin;
    let mut feed = pin!(async move {
        if let (Some(mut pipe), Some(data)) = (stdin_pipe, data) {
            // A command that does not read its stdin closes the pipe early: not an error.
            let _ = pipe.write_all(&data).await;
        }
    });
    let mut out_fut = pin!(read_limited(child.stdout.take(), req.max_stdout));
    let mut err_fut = pin!(read_tail(child.stderr.take(), req.stderr_tail));
    let mut deadline = pin!(async move {
        match req.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending::<()>().await,
        }
    });

    let mut stdout: Option<Vec<u8>> = None;
    let mut stderr: Option<String> = None;
    let mut status: Option<ExitStatus> = None;
    let mut fed = false;
    let stop = loop {
        if stdout.is_some() && stderr.is_some() && status.is_some() {
            break None;
        }
        tokio::select! {
            r = &mut out_fut, if stdout.is_none() => match r {
                Ok(Some(buf)) => stdout = Some(buf),
                Ok(None) => break Some(Stop::Overflow),
                Err(e) => break Some(Stop::Io(e)),
            },
            r = &mut err_fut, if stderr.is_none() => stderr = Some(r),
            () = &mut feed, if !fed => fed = true,
            r = child.wait(), if status.is_none() => match r {
                Ok(s) => status = Some(s),
                Err(e) => break Some(Stop::Io(e)),
            },
            () = &mut deadline => break Some(Stop::Timeout),
        }
    };

    let ended = match stop {
        None => match status {
            Some(s) => Ended::Exited(s),
            None => Ended::Io(io::Error::other("no exit status")),
        },
        Some(stop) => {
            guard.kill();
            let _ = child.start_kill();
            let _ = tokio::time::timeout(AFTER_KILL_GRACE, child.wait()).await;
            if stderr.is_none() {
                stderr = tokio::time::timeout(AFTER_KILL_GRACE, &mut err_fut)
                    .await
                    .ok();
            }
            match stop {
                Stop::Timeout => Ended::TimedOut,
                Stop::Overflow => Ended::StdoutTooLarge,
                Stop::Io(e) => Ended::Io(e),
            }
        }
    };
    // The command is over (and reaped): what it left running in the background on purpose,
    // after closing our pipes, is its business, as in a shell.
    guard.0 = None;
    let stdout = match ended {
        Ended::Exited(_) => stdout.unwrap_or_default(),
        _ => Vec::new(),
    };
    ExecResult {
        pid,
        ended,
        stdout,
        stderr_tail: stderr.unwrap_or_default(),
        duration: started.elapsed(),
    }
}

/// Reads everything, or `None` once more than `max` bytes arrived.
async fn read_limited(
    pipe: Option<impl AsyncRead + Unpin>,
    max: usize,
) -> io::Result<Option<Vec<u8>>> {
    let Some(pipe) = pipe else {
        return Ok(Some(Vec::new()));
    };
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut buf = Vec::new();
    pipe.take(limit).read_to_end(&mut buf).await?;
    Ok((buf.len() <= max).then_some(buf))
}

/// Reads to the end, keeping the last `keep` bytes as lossy UTF-8.
async fn read_tail(pipe: Option<impl AsyncRead + Unpin>, keep: usize) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut tail: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > keep.saturating_mul(2).max(8192) {
                    tail.drain(..tail.len() - keep);
                }
            }
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    String::from_utf8_lossy(&tail).into_owned()
}
