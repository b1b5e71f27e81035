//! Driving `pi --mode rpc` from a test: JSON lines in, JSON lines out, with hang guards.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A generous bound on waiting for pi: a guard against hangs, not a timing assertion.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Talking to `pi --mode rpc` failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Spawning pi or writing to its stdin failed.
    #[error("pi rpc I/O: {source}\npi stderr:\n{stderr}")]
    Io {
        /// The underlying error.
        source: std::io::Error,
        /// What pi wrote to stderr so far.
        stderr: String,
    },
    /// Nothing matching arrived in time.
    #[error("pi rpc: no {what} within {waited:?}\nrecords so far:\n{seen}\npi stderr:\n{stderr}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
        /// The records read while waiting, one per line.
        seen: String,
        /// What pi wrote to stderr so far.
        stderr: String,
    },
    /// pi closed stdout (exited) before a matching record arrived.
    #[error(
        "pi rpc: stdout closed while waiting for {what}\nrecords so far:\n{seen}\npi stderr:\n{stderr}"
    )]
    Closed {
        /// What was awaited.
        what: String,
        /// The records read while waiting, one per line.
        seen: String,
        /// What pi wrote to stderr.
        stderr: String,
    },
    /// A stdout line was not JSON: RPC stdout must carry only protocol records.
    #[error("pi rpc: stdout line is not JSON ({error}): {line}")]
    NotJson {
        line: String,
        /// The parse error.
        error: String,
    },
}

/// One stdout line: a record, or (line, parse error) when it is not JSON.
type LineResult = Result<Value, (String, String)>;

/// A running `pi --mode rpc` child. Dropping it kills pi if it is still running.
#[derive(Debug)]
pub struct PiRpc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<LineResult>,
    stderr: Arc<Mutex<String>>,
}

impl PiRpc {
    /// Spawns `cmd` (which should run `pi --mode rpc …`) with piped stdio, and reader threads
    /// that keep draining stdout and stderr: pi honours backpressure, so an unread pipe would
    /// stall it.
    pub fn spawn(mut cmd: Command) -> Result<Self, RpcError> {
        let io = |source| RpcError::Io {
            source,
            stderr: String::new(),
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr_pipe = child.stderr.take();

        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = stdout {
            thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    // Split on b'\n' only: pi's JSON may contain U+2028/2029, which some line
                    // readers treat as line ends.
                    match reader.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let text = String::from_utf8_lossy(&buf);
                    let text = text.trim_end_matches(['\n', '\r']);
                    if text.is_empty() {
                        continue;
                    }
                    let line: LineResult =
                        serde_json::from_str(text).map_err(|e| (text.to_owned(), e.to_string()));
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = stderr_pipe {
            let sink = stderr.clone();
            thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
                    s.push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            });
        }
        Ok(Self {
            child,
            stdin,
            lines,
            stderr,
        })
    }

    /// What pi wrote to stderr so far (diagnostics only; never protocol).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// pi's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command as a JSON line.
    pub fn send(&mut self, command: &Value) -> Result<(), RpcError> {
        let mut line = command.to_string();
        line.push('\n');
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "stdin already closed",
            )),
        };
        written.map_err(|source| RpcError::Io {
            source,
            stderr: self.stderr(),
        })
    }

    /// The next stdout record.
    pub fn recv(&mut self, timeout: Duration) -> Result<Value, RpcError> {
        let mut seen = Vec::new();
        self.recv_until(timeout, "any record", |_| true, &mut seen)
    }

    /// Reads records until one satisfies `done`, and returns them all (the match last).
    pub fn read_until(
        &mut self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&Value) -> bool,
    ) -> Result<Vec<Value>, RpcError> {
        let mut seen = Vec::new();
        let last = self.recv_until(timeout, what, &mut done, &mut seen)?;
        seen.push(last);
        Ok(seen)
    }

    /// Reads until the event `{"type": event_type}`, returning every record up to it.
    pub fn read_until_event(
        &mut self,
        event_type: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, RpcError> {
        self.read_until(timeout, &format!("{event_type:?} event"), |v| {
            v.get("type").and_then(Value::as_str) == Some(event_type)
        })
    }

    /// Sends `command` with the string `id` added, and reads until its `response` (events that
    /// arrive first are returned too, the response last).
    pub fn request(
        &mut self,
        id: &str,
        mut command: Value,
        timeout: Duration,
    ) -> Result<Vec<Value>, RpcError> {
        if let Some(obj) = command.as_object_mut() {
            obj.insert("id".into(), Value::String(id.to_owned()));
        }
        self.send(&command)?;
        self.read_until(timeout, &format!("response to id {id:?}"), |v| {
            v.get("type").and_then(Value::as_str) == Some("response")
                && v.get("id").and_then(Value::as_str) == Some(id)
        })
    }

    fn recv_until(
        &mut self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&Value) -> bool,
        seen: &mut Vec<Value>,
    ) -> Result<Value, RpcError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(Ok(record)) => {
                    if done(&record) {
                        return Ok(record);
                    }
                    seen.push(record);
                }
                Ok(Err((line, error))) => return Err(RpcError::NotJson { line, error }),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(RpcError::Timeout {
                        what: what.to_owned(),
                        waited: timeout,
                        seen: render(seen),
                        stderr: self.stderr(),
                    });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RpcError::Closed {
                        what: what.to_owned(),
                        seen: render(seen),
                        stderr: self.stderr(),
                    });
                }
            }
        }
    }

    /// Closes stdin (pi's orderly shutdown) and waits for pi to exit, killing it after
    /// `timeout`. Records not yet read are discarded.
    pub fn close(mut self, timeout: Duration) -> Result<ExitStatus, RpcError> {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = self.child.kill();
                    return Err(RpcError::Timeout {
                        what: "exit after stdin closed".into(),
                        waited: timeout,
                        seen: String::new(),
                        stderr: self.stderr(),
                    });
                }
                Err(source) => {
                    return Err(RpcError::Io {
                        source,
                        stderr: self.stderr(),
                    });
                }
            }
        }
    }
}

impl Drop for PiRpc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Records as JSON lines, each cut to a readable length, for error messages.
fn render(records: &[Value]) -> String {
    records
        .iter()
        .map(|r| {
            let s = r.to_string();
            match s.char_indices().nth(300) {
                Some((cut, _)) => format!("{}…", &s[..cut]),
                None => s,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of a pi message (`message_end.message`, `get_messages` items, …): its `content`
/// string, or the concatenated `text` parts of its content array.
pub fn message_text(message: &Value) -> String {
    // pi's content has the same shape as the OpenAI content fake-llm reads.
    fake_llm::plan::text_of(message.get("content"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn text_of_messages() {
        assert_eq!(
            message_text(&json!({ "role": "assistant", "content": [
                { "type": "text", "text": "a" },
                { "type": "toolCall", "name": "bash" },
                { "type": "text", "text": "b" },
            ]})),
            "ab"
        );
        assert_eq!(message_text(&json!({ "content": "plain" })), "plain");
        assert_eq!(message_text(&json!({})), "");
    }

    /// The plumbing, with `cat` standing in for pi: it echoes each command back as a record.
    #[test]
    fn request_and_close_with_a_stand_in() {
        let mut rpc = PiRpc::spawn(Command::new("cat")).unwrap();
        let records = rpc
            .request(
                "x",
                json!({ "type": "response", "command": "echo" }),
                DEFAULT_TIMEOUT,
            )
            .unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0]["id"], "x");
        rpc.send(&json!({ "type": "agent_settled" })).unwrap();
        let settled = rpc
            .read_until_event("agent_settled", DEFAULT_TIMEOUT)
            .unwrap();
        assert_eq!(settled.len(), 1);
        assert!(rpc.close(DEFAULT_TIMEOUT).unwrap().success());
    }

    #[test]
    fn timeouts_and_closed_stdout_are_errors() {
        let mut rpc = PiRpc::spawn(Command::new("cat")).unwrap();
        rpc.send(&json!({ "type": "other" })).unwrap();
        let err = rpc
            .read_until_event("agent_settled", Duration::from_millis(200))
            .unwrap_err();
        match err {
            RpcError::Timeout { seen, .. } => assert!(seen.contains("other"), "{seen}"),
            other => panic!("{other}"),
        }

        let mut rpc = PiRpc::spawn(Command::new("true")).unwrap();
        assert!(matches!(
            rpc.recv(DEFAULT_TIMEOUT),
            Err(RpcError::Closed { .. })
        ));
    }

    #[test]
    fn non_json_stdout_is_an_error() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo not-json"]);
        let mut rpc = PiRpc::spawn(cmd).unwrap();
        assert!(matches!(
            rpc.recv(DEFAULT_TIMEOUT),
            Err(RpcError::NotJson { .. })
        ));
    }
}
