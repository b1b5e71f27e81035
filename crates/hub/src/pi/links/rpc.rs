//! Headless instances: the hub runs `pi --mode rpc` in a directory and speaks pi's RPC protocol
//! over the child's stdio. pi's dialogs become the person's questions (`pi::dialog`); the
//! child's exit is noticed.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command as Process};
use tokio::sync::{mpsc, oneshot};
use wire::{EventKind, LineError, LineReader, PiEvent, TurnId, TurnResult};

use std::collections::HashMap;

use crate::pi::instance::{
    Answer, Attach, Command, ConductorMsg, GoneReason, InstanceId, LinkEvent, Request, Transport,
};

/// Environment variable that tells the extension it runs inside a hub-spawned child (so it
/// stays inert instead of connecting the same pi twice).
pub const CHILD_ENV: &str = "PI_TELEGRAM_CHILD";

/// Environment variable with the token a child's tools connect with (role `tools`).
pub const CHILD_TOKEN_ENV: &str = "PI_TELEGRAM_CHILD_TOKEN";

/// The variables of a spawn request that say how to find pi (kept for restarts).
pub const REQUEST_ENV: [&str; 2] = ["PI_TELEGRAM_PI_BIN", "PATH"];

/// The extension children load (`-e`) for pi's Telegram tools, and the profile its tools
/// connect to, set once at start.
static CHILD_EXTENSION: std::sync::OnceLock<(PathBuf, String)> = std::sync::OnceLock::new();

/// Children load the extension at `entry` (its `dist/index.js`) for pi's Telegram tools, which
/// connect to this hub's `profile`.
pub fn set_child_extension(entry: PathBuf, profile: &str) {
    let _ = CHILD_EXTENSION.set((entry, profile.to_owned()));
}

fn new_token() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Not secret, only a name: the hub secret guards the socket.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = now.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The pi binary: `$PI_TELEGRAM_PI_BIN`, else `pi` from PATH.
pub fn pi_binary() -> PathBuf {
    std::env::var_os("PI_TELEGRAM_PI_BIN")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("pi"), PathBuf::from)
}

/// The pi binary a child runs, and where that choice came from (said in errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiBinary {
    /// The program (a path, or a name looked up on PATH).
    pub path: PathBuf,
    /// Where it came from: `PI_TELEGRAM_PI_BIN of the spawn request`, `"piBinary" in
    /// telegram.json`, `the hub's PATH`…
    pub source: String,
}

/// How to start one headless pi.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Its folder.
    pub cwd: String,
    /// Extra environment (the requester's PATH, say).
    pub env: Vec<(String, String)>,
    /// pi's session file to resume (`--session`); a fresh session when `None` or missing.
    pub session: Option<PathBuf>,
    /// The binary.
    pub bin: PiBinary,
}

/// A started child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// Its instance.
    pub id: InstanceId,
    /// pi's session file (from `get_state`).
    pub session_file: Option<String>,
}

/// Starts `pi --mode rpc` in the spec's folder and registers it. The child inherits the hub's
/// environment (plus the spec's), so `PI_CODING_AGENT_DIR` and pi's own settings apply.
pub async fn spawn(
    conductor: mpsc::Sender<ConductorMsg>,
    spec: SpawnSpec,
) -> Result<Started, String> {
    let token = new_token();
    // Told before the child exists: its extension may say hello before pi attaches.
    let _ = conductor
        .send(ConductorMsg::ExpectTools(token.clone()))
        .await;
    let result = start(conductor.clone(), spec, token.clone()).await;
    if result.is_err() {
        let _ = conductor.send(ConductorMsg::ForgetTools(token)).await;
    }
    result
}

async fn start(
    conductor: mpsc::Sender<ConductorMsg>,
    spec: SpawnSpec,
    token: String,
) -> Result<Started, String> {
    let SpawnSpec {
        cwd,
        env,
        session,
        bin,
    } = spec;
    let dir = PathBuf::from(&cwd);
    if !dir.is_dir() {
        return Err(format!("{cwd} is not a directory"));
    }
    let mut child = spawn_child(&bin, &dir, env, session, &token)?;
    let pid = child.id().map(i64::from);
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("pi's stdio could not be opened".into());
    };
    drain_stderr(stderr);
    let mut rpc = Rpc { stdin, next_id: 0 };
    let mut reader = LineReader::new(BufReader::new(stdout));
    let state = first_state(&mut rpc, &mut reader, &mut child).await?;
    let session_file = state
        .get("sessionFile")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (commands, command_rx) = mpsc::channel(super::COMMAND_QUEUE);
    let current = Current {
        cwd: cwd.clone(),
        ..Current::default()
    };
    let attach = attach_of(&state, pid, cwd, commands, token);
    let (reply, id_rx) = oneshot::channel();
    conductor
        .send(ConductorMsg::Attach(attach, reply))
        .await
        .map_err(|_| "the hub is stopping".to_owned())?;
    let id = id_rx.await.map_err(|_| "the hub is stopping".to_owned())?;
    tokio::spawn(run(
        id.clone(),
        rpc,
        reader,
        child,
        command_rx,
        conductor,
        current,
    ));
    Ok(Started { id, session_file })
}

/// Starts the `pi --mode rpc` process, with the extension for pi's Telegram tools.
fn spawn_child(
    bin: &PiBinary,
    dir: &Path,
    env: Vec<(String, String)>,
    session: Option<PathBuf>,
    token: &str,
) -> Result<Child, String> {
    let mut process = Process::new(&bin.path);
    process.arg("--mode").arg("rpc");
    if let Some(file) = session.filter(|f| f.is_file()) {
        process.arg("--session").arg(file);
    }
    if let Some((entry, profile)) = CHILD_EXTENSION.get() {
        process
            .arg("-e")
            .arg(entry)
            .env("PI_TELEGRAM_PROFILE", profile);
    }
    process
        .current_dir(dir)
        .envs(env)
        .env(CHILD_ENV, "1")
        .env(CHILD_TOKEN_ENV, token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            format!(
                "could not start pi (\"{}\", from {}): {e}. The hub must find pi: put it on the \
                 hub's PATH, set PI_TELEGRAM_PI_BIN for the hub, or set \"piBinary\" in \
                 telegram.json",
                bin.path.display(),
                bin.source
            )
        })
}

/// Reads pi's stderr so it never blocks on a full pipe.
fn drain_stderr(stderr: tokio::process::ChildStderr) {
    // Diagnostics only; never parsed, never logged at info (it may contain content).
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "pi_stderr", "{line}");
        }
    });
}

/// The first exchange: pi's state, which also proves it speaks RPC.
async fn first_state(
    rpc: &mut Rpc,
    reader: &mut LineReader<BufReader<ChildStdout>>,
    child: &mut Child,
) -> Result<Value, String> {
    rpc.send(&json!({ "id": "hello", "type": "get_state" }))
        .await
        .map_err(|e| format!("pi did not start: {e}"))?;
    loop {
        match reader.next_line().await {
            Ok(Some(line)) => {
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if v.get("type").and_then(Value::as_str) == Some("response")
                    && v.get("id").and_then(Value::as_str) == Some("hello")
                {
                    return Ok(v.get("data").cloned().unwrap_or(Value::Null));
                }
            }
            Ok(None) => {
                let status = child
                    .wait()
                    .await
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                return Err(format!("pi exited at start ({status})"));
            }
            Err(e) => return Err(format!("pi's output is unreadable: {e}")),
        }
    }
}

/// What the conductor is told of a new child, from its first state.
fn attach_of(
    state: &Value,
    pid: Option<i64>,
    cwd: String,
    commands: mpsc::Sender<Command>,
    token: String,
) -> Attach {
    Attach {
        transport: Transport::Rpc,
        reach: crate::pi::instance::Reach::ThisMachine,
        pid,
        cwd,
        session_id: state
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned),
        session_name: state
            .get("sessionName")
            .and_then(Value::as_str)
            .map(str::to_owned),
        session_file: state
            .get("sessionFile")
            .and_then(Value::as_str)
            .map(str::to_owned),
        idle: !state
            .get("isStreaming")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        pending: state
            .get("pendingMessageCount")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            > 0,
        received: Vec::new(),
        completed: Vec::new(),
        store_id: None,
        commands,
        tools_token: Some(token),
    }
}

struct Rpc {
    stdin: ChildStdin,
    next_id: u64,
}

impl Rpc {
    async fn send(&mut self, v: &Value) -> std::io::Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }
}

/// The turn pi is working on, and what its run said so far; the hub's requests waiting for
/// pi's answers.
#[derive(Default)]
struct Current {
    /// pi's folder.
    cwd: String,
    turn: Option<TurnId>,
    prompt_request: Option<String>,
    /// A run started since the prompt (`agent_start`): its end finishes the turn.
    running: bool,
    /// pi ran the prompt as one of its extensions' commands and no run started yet: done at
    /// this instant unless one starts (the command's own, whose answer is the turn's).
    handled_until: Option<tokio::time::Instant>,
    text: String,
    error: Option<String>,
    requests: HashMap<String, Pending>,
    /// A run is going on (`agent_start` without its `agent_settled`), the hub's or not.
    run_active: bool,
    /// pi's dialogs that wait for the person, by request id.
    dialogs: HashMap<String, WaitingDialog>,
    /// The usage of pi's latest model request (its latest assistant message), seen in its
    /// events: RPC's session stats give only totals. Unknown until pi makes one after the
    /// link started (a restarted pi on its old session too).
    latest_usage: Option<Value>,
}

/// A dialog pi waits on: until when, and whether a run asked it (its end ends the dialog).
struct WaitingDialog {
    deadline: Option<tokio::time::Instant>,
    in_run: bool,
}

/// The link gives up on a dialog this much before pi does: an answer that leaves the link
/// reaches pi before pi's own timeout, or is refused as too late.
const DIALOG_MARGIN: std::time::Duration = std::time::Duration::from_millis(300);

impl Current {
    /// The dialog whose deadline comes first.
    fn next_dialog_deadline(&self) -> Option<(tokio::time::Instant, String)> {
        self.dialogs
            .iter()
            .filter_map(|(id, d)| d.deadline.map(|at| (at, id.clone())))
            .min()
    }

    /// pi opened a dialog: it waits until its deadline, if it has one.
    fn dialog_opened(&mut self, asked: &crate::pi::dialog::Asked) {
        let deadline = asked.timeout_ms.map(|t| {
            let wait = std::time::Duration::from_millis(t).saturating_sub(DIALOG_MARGIN);
            tokio::time::Instant::now() + wait
        });
        let in_run = self.run_active;
        self.dialogs
            .insert(asked.request_id.clone(), WaitingDialog { deadline, in_run });
    }

    /// The run ended: the dialogs it asked are over (a run waits for its tools, and so for
    /// their dialogs: one still open was abandoned, by an abort or by its extension).
    fn run_ended(&mut self) -> Vec<LinkEvent> {
        self.run_active = false;
        let ended: Vec<String> = self
            .dialogs
            .iter()
            .filter(|(_, d)| d.in_run)
            .map(|(id, _)| id.clone())
            .collect();
        ended
            .into_iter()
            .map(|request_id| {
                self.dialogs.remove(&request_id);
                LinkEvent::DialogEnded {
                    request_id,
                    why: crate::pi::dialog::Ended::InPi,
                }
            })
            .collect()
    }

    /// The turn pi ran as a command with no run started since: done now, with no answer.
    fn handled(&mut self) -> Option<TurnResult> {
        self.handled_until = None;
        let turn = self.turn.take()?;
        Some(TurnResult {
            turn_id: turn,
            text: String::new(),
            aborted: false,
            error: None,
            handled: true,
        })
    }
}

/// How long after pi ran a prompt as a command it must stay without a run for the turn to be
/// done: a command that starts a run (`pi.sendUserMessage`) does so at once.
const COMMAND_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// A hub request in progress: the RPC commands still to send, and what the answers said.
struct Pending {
    answer: Answer,
    kind: Request,
    steps: Vec<Value>,
    acc: Value,
}

/// The RPC commands that answer a request, in order (their `data` objects are merged).
fn rpc_steps(req: &Request) -> Vec<Value> {
    match req {
        Request::Stats => vec![
            json!({ "type": "get_state" }),
            json!({ "type": "get_session_stats" }),
        ],
        Request::Models => vec![
            json!({ "type": "get_state" }),
            json!({ "type": "get_available_models" }),
        ],
        Request::SetModel { provider, id } => {
            vec![json!({ "type": "set_model", "provider": provider, "modelId": id })]
        }
        Request::ThinkingLevels => vec![
            json!({ "type": "get_state" }),
            json!({ "type": "get_available_thinking_levels" }),
        ],
        Request::SetThinking(level) => {
            vec![json!({ "type": "set_thinking_level", "level": level })]
        }
        Request::Commands => vec![json!({ "type": "get_commands" })],
        Request::Compact => vec![json!({ "type": "compact" })],
        Request::NewSession => vec![
            json!({ "type": "new_session" }),
            json!({ "type": "get_state" }),
        ],
        Request::Sessions => vec![json!({ "type": "get_state" })],
        Request::SwitchSession(path) => vec![
            json!({ "type": "switch_session", "sessionPath": path }),
            json!({ "type": "get_state" }),
        ],
    }
}

/// pi's RPC answers in the shapes the extension gives (docs/wire-protocol.md); the sessions
/// list is [`answer_sessions`]'s to answer, the models [`answer_models`]'s (this is their list
/// before the scope).
fn normalize(kind: &Request, acc: &Value) -> Value {
    let model = acc.get("model").map(|m| {
        json!({ "provider": m.get("provider").cloned().unwrap_or(Value::Null),
                "id": m.get("id").cloned().unwrap_or(Value::Null) })
    });
    match kind {
        Request::Stats => json!({
            "model": model,
            "thinking_level": acc.get("thinkingLevel"),
            "context": acc.get("contextUsage"),
            "cost": acc.get("cost"),
            "tokens": acc.get("tokens"),
            "latest": acc.get("latest"),
            "messages": acc.get("messageCount"),
        }),
        Request::Models => {
            let models: Vec<Value> = acc
                .get("models")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .map(|m| {
                            json!({ "provider": m.get("provider"), "id": m.get("id"),
                                    "name": m.get("name").or_else(|| m.get("id")) })
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({ "models": models, "current": model })
        }
        Request::ThinkingLevels => json!({
            "levels": acc.get("levels").cloned().unwrap_or_else(|| json!([])),
            "current": acc.get("thinkingLevel"),
        }),
        Request::NewSession | Request::SwitchSession(_) => json!({
            "cancelled": acc.get("cancelled").and_then(Value::as_bool).unwrap_or(false),
            "session_file": acc.get("sessionFile"),
        }),
        _ => acc.clone(),
    }
}

async fn run(
    id: InstanceId,
    mut rpc: Rpc,
    mut reader: LineReader<BufReader<ChildStdout>>,
    mut child: Child,
    mut commands: mpsc::Receiver<Command>,
    conductor: mpsc::Sender<ConductorMsg>,
    mut current: Current,
) {
    let report = |e: LinkEvent| ConductorMsg::Link(id.clone(), e);
    let gone = loop {
        tokio::select! {
            line = reader.next_line() => {
                let v = match parsed(&id, line) {
                    ControlFlow::Break(()) => break None,
                    ControlFlow::Continue(None) => continue,
                    ControlFlow::Continue(Some(v)) => v,
                };
                for event in translate(&mut rpc, &mut current, v).await {
                    if conductor.send(report(event)).await.is_err() {
                        break;
                    }
                }
            }
            () = tokio::time::sleep_until(current.handled_until.unwrap_or_else(tokio::time::Instant::now)), if current.handled_until.is_some() => {
                if let Some(done) = current.handled()
                    && conductor.send(report(LinkEvent::TurnDone(done))).await.is_err()
                {
                    break Some(GoneReason::Closed("the hub is stopping".into()));
                }
            }
            Some(request_id) = dialog_deadline(current.next_dialog_deadline()) => {
                current.dialogs.remove(&request_id);
                let ended = LinkEvent::DialogEnded { request_id, why: crate::pi::dialog::Ended::TimedOut };
                if conductor.send(report(ended)).await.is_err() {
                    break Some(GoneReason::Closed("the hub is stopping".into()));
                }
            }
            cmd = commands.recv() => match cmd {
                Some(cmd) => {
                    if let Some(why) = command(&mut rpc, &mut current, &conductor, &id, cmd).await {
                        close(rpc, &mut child).await;
                        let _ = conductor.send(report(LinkEvent::Gone(GoneReason::Closed(why)))).await;
                        return;
                    }
                }
                None => break Some(GoneReason::Closed("the hub is stopping".into())),
            },
        }
    };
    let reason = match gone {
        Some(r) => r,
        None => {
            let status = child
                .wait()
                .await
                .map(|s| s.to_string())
                .unwrap_or_else(|e| e.to_string());
            GoneReason::Exited(status)
        }
    };
    let _ = conductor.send(report(LinkEvent::Gone(reason))).await;
}

/// Waits for the first dialog's deadline; never, without one.
async fn dialog_deadline(next: Option<(tokio::time::Instant, String)>) -> Option<String> {
    match next {
        Some((at, id)) => {
            tokio::time::sleep_until(at).await;
            Some(id)
        }
        None => std::future::pending().await,
    }
}

/// A line of pi's output as JSON: `Break` at its end, `None` for a line that is skipped.
fn parsed(
    id: &InstanceId,
    line: Result<Option<String>, LineError>,
) -> ControlFlow<(), Option<Value>> {
    let line = match line {
        Ok(Some(l)) => l,
        Ok(None) => return ControlFlow::Break(()),
        Err(e) => {
            tracing::warn!(instance = %id, error = %e, "unreadable output from pi");
            return ControlFlow::Continue(None);
        }
    };
    match serde_json::from_str(&line) {
        Ok(v) => ControlFlow::Continue(Some(v)),
        Err(e) => {
            // A syntax error's words quote nothing of the line.
            tracing::warn!(instance = %id, error = %e, "a line from pi is not JSON; skipped");
            ControlFlow::Continue(None)
        }
    }
}

/// Carries out a command of the conductor; returns why when it closes the link.
async fn command(
    rpc: &mut Rpc,
    current: &mut Current,
    conductor: &mpsc::Sender<ConductorMsg>,
    id: &InstanceId,
    cmd: Command,
) -> Option<String> {
    match cmd {
        Command::Prompt {
            turn,
            text,
            context,
            images,
            ..
        } => {
            let request = rpc.id("prompt");
            // A new run: its text starts empty; pi's folder and the hub's requests in
            // flight (a menu asked meanwhile) stay.
            *current = Current {
                cwd: std::mem::take(&mut current.cwd),
                turn: Some(turn.clone()),
                prompt_request: Some(request.clone()),
                requests: std::mem::take(&mut current.requests),
                dialogs: std::mem::take(&mut current.dialogs),
                latest_usage: current.latest_usage.take(),
                ..Current::default()
            };
            let message = format!("{context}{text}");
            let mut prompt = json!({ "id": request, "type": "prompt", "message": message });
            if !images.is_empty() {
                prompt["images"] = json!(images);
            }
            if let Err(e) = rpc.send(&prompt).await {
                let refused = LinkEvent::PromptRefused {
                    turn,
                    error: e.to_string(),
                };
                let _ = conductor
                    .send(ConductorMsg::Link(id.clone(), refused))
                    .await;
            }
        }
        Command::Abort => {
            let request = rpc.id("abort");
            let _ = rpc.send(&json!({ "id": request, "type": "abort" })).await;
        }
        Command::Steer(message) => {
            let request = rpc.id("steer");
            let _ = rpc
                .send(&json!({ "id": request, "type": "steer", "message": message }))
                .await;
        }
        Command::Request(kind, answer) => {
            let mut steps = rpc_steps(&kind);
            steps.reverse();
            let Some(mut first) = steps.pop() else {
                let _ = answer.send(Ok(Value::Null));
                return None;
            };
            let request = rpc.id("req");
            first["id"] = json!(request);
            if rpc.send(&first).await.is_ok() {
                let pending = Pending {
                    answer,
                    kind,
                    steps,
                    acc: json!({}),
                };
                current.requests.insert(request, pending);
            } else {
                let _ = answer.send(Err("pi is not reading its input".into()));
            }
        }
        Command::AnswerDialog { request_id, answer } => {
            // Only while pi waits: after its deadline the conductor was told it ended.
            if current.dialogs.remove(&request_id).is_some() {
                let line = crate::pi::dialog::response(&request_id, &answer);
                let _ = rpc.send(&line).await;
            }
        }
        Command::Close(why) => return Some(why),
        // Headless: nothing to show, nothing to forget.
        Command::DoneAck(_) | Command::Notify { .. } | Command::SetStatus(_) => {}
    }
    None
}

/// Stops the child: closing stdin is pi's orderly shutdown; it is killed if it lingers.
async fn close(rpc: Rpc, child: &mut Child) {
    drop(rpc);
    let status = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
    if status.is_err() {
        let _ = child.kill().await;
    }
}

/// pi's saved sessions of `cwd`, read from its session files (RPC has no command that lists
/// them), answered from a task of their own: the files are read off the runtime, and a slow
/// disk holds neither this link's task (pi's events) nor a runtime thread.
fn answer_sessions(p: Pending, cwd: &str) {
    let cwd = cwd.to_owned();
    let current = p.acc.get("sessionFile").cloned().unwrap_or(Value::Null);
    tokio::spawn(async move {
        let sessions = tokio::task::spawn_blocking(move || {
            crate::paths::AgentDir::from_env()
                .map(|a| crate::pi::sessions::list(&cwd, a.path()))
                .unwrap_or_default()
        })
        .await
        .map_err(|e| format!("reading pi's session files failed: {e}"));
        let _ = p
            .answer
            .send(sessions.map(|s| json!({ "sessions": s, "current": current })));
    });
}

/// The models pi has enabled (`enabledModels`, read as pi reads it: `pi::scope`), or every
/// available one when none are: answered from a task of its own, the settings read off the
/// runtime, like [`answer_sessions`].
fn answer_models(p: Pending, cwd: &str) {
    let cwd = std::path::PathBuf::from(cwd);
    tokio::spawn(async move {
        let all = normalize(&p.kind, &p.acc);
        let answer = tokio::task::spawn_blocking(move || {
            let patterns = crate::paths::AgentDir::from_env()
                .ok()
                .and_then(|a| crate::pi::scope::enabled_patterns(a.path(), &cwd));
            scoped_answer(all, patterns.as_deref())
        })
        .await
        .map_err(|e| format!("reading pi's settings failed: {e}"));
        let _ = p.answer.send(answer);
    });
}

/// `all` (the normalized `get_models` answer) with its list cut to what `patterns` enable;
/// `scoped` says whether it was, `available` how many there are in all.
fn scoped_answer(mut all: Value, patterns: Option<&[String]>) -> Value {
    let listed: Vec<Value> = all
        .get("models")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let models: Vec<crate::pi::scope::Model> = listed
        .iter()
        .map(|m| {
            let s = |k: &str| {
                m.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            crate::pi::scope::Model {
                provider: s("provider"),
                id: s("id"),
                name: s("name"),
            }
        })
        .collect();
    let scoped = patterns
        .map(|p| crate::pi::scope::resolve(p, &models))
        .unwrap_or_default();
    all["available"] = json!(listed.len());
    all["scoped"] = json!(!scoped.is_empty());
    if !scoped.is_empty() {
        all["models"] = Value::Array(scoped.into_iter().map(|i| listed[i].clone()).collect());
    }
    all
}

/// One RPC output line into link events (and answers to UI requests and hub requests).
async fn translate(rpc: &mut Rpc, current: &mut Current, v: Value) -> Vec<LinkEvent> {
    if v.get("type").and_then(Value::as_str) != Some("response") {
        return pi_event(current, PiEvent(v));
    }
    let request = v
        .get("id")
        .and_then(Value::as_str)
        .and_then(|i| current.requests.remove(i));
    match request {
        Some(p) => {
            request_step(rpc, current, p, &v).await;
            Vec::new()
        }
        None => prompt_response(current, &v).into_iter().collect(),
    }
}

/// pi answered a step of a hub request: the next step is sent, or the request is answered.
async fn request_step(rpc: &mut Rpc, current: &mut Current, mut p: Pending, v: &Value) {
    if v.get("success").and_then(Value::as_bool) != Some(true) {
        let error = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("pi refused")
            .to_owned();
        let _ = p.answer.send(Err(error));
        return;
    }
    if let (Some(acc), Some(Value::Object(data))) = (p.acc.as_object_mut(), v.get("data")) {
        for (k, val) in data {
            acc.insert(k.clone(), val.clone());
        }
    }
    match p.steps.pop() {
        Some(mut next) => {
            let request = rpc.id("req");
            next["id"] = json!(request);
            if rpc.send(&next).await.is_ok() {
                current.requests.insert(request, p);
            } else {
                let _ = p.answer.send(Err("pi is not reading its input".into()));
            }
        }
        None if matches!(p.kind, Request::Sessions) => answer_sessions(p, &current.cwd),
        None if matches!(p.kind, Request::Models) => answer_models(p, &current.cwd),
        None => {
            if matches!(p.kind, Request::Stats)
                && let (Some(acc), Some(latest)) = (p.acc.as_object_mut(), &current.latest_usage)
            {
                acc.insert("latest".into(), latest.clone());
            }
            let _ = p.answer.send(Ok(normalize(&p.kind, &p.acc)));
        }
    }
}

/// pi's answer to the prompt of the current turn (other answers are not the link's).
fn prompt_response(current: &mut Current, v: &Value) -> Option<LinkEvent> {
    let ours = v
        .get("id")
        .and_then(Value::as_str)
        .is_some_and(|i| current.prompt_request.as_deref() == Some(i));
    if !ours {
        return None;
    }
    current.prompt_request = None;
    let turn = current.turn.clone()?;
    if v.get("success").and_then(Value::as_bool) == Some(true) {
        // A pi command (an extension's `/name`) runs without an agent run: unless it starts
        // one, no `agent_settled` will come, and the turn is done after a moment (`run`).
        let handled = v.pointer("/data/disposition").and_then(Value::as_str) == Some("handled");
        if handled && !current.running {
            current.handled_until = Some(tokio::time::Instant::now() + COMMAND_SETTLE);
        }
        return Some(LinkEvent::Acked { turn });
    }
    current.turn = None;
    let error = v
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("pi refused the prompt")
        .to_owned();
    Some(LinkEvent::PromptRefused { turn, error })
}

/// An event of pi's run: the current turn's text and end, busy/idle, and pi's dialogs.
fn pi_event(current: &mut Current, event: PiEvent) -> Vec<LinkEvent> {
    let mut out = Vec::new();
    match event.kind() {
        EventKind::ExtensionUiRequest => {
            // A dialog blocks pi until it is answered: the person is asked. pi's other UI
            // calls (notify, status, widgets) have nobody to show them to.
            if let Some(asked) = crate::pi::dialog::from_rpc(&event.0) {
                current.dialog_opened(&asked);
                out.push(LinkEvent::Dialog(asked));
            }
            return out;
        }
        EventKind::AgentStart => {
            current.run_active = true;
            if current.turn.is_some() {
                current.running = true;
                current.handled_until = None;
            }
            out.push(LinkEvent::State {
                idle: Some(false),
                pending: None,
            });
        }
        EventKind::QueueUpdate => out.push(LinkEvent::State {
            idle: None,
            pending: Some(event.queued_count() > 0),
        }),
        EventKind::MessageEnd => {
            if event.assistant_message().is_some()
                && let Some(usage) = event.message().and_then(|m| m.get("usage"))
            {
                current.latest_usage = Some(usage.clone());
            }
            if let Some((text, stop, error)) = event.assistant_message() {
                current.text = text;
                current.error = if stop.as_deref() == Some("error") {
                    error.or(Some("model error".into()))
                } else {
                    None
                };
            }
        }
        _ => {}
    }
    let settled = event.kind() == EventKind::AgentSettled;
    if settled {
        out.extend(current.run_ended());
    }
    let aborted = event.aborted();
    out.push(LinkEvent::Pi {
        turn: current.turn.clone(),
        event,
    });
    if settled {
        if let Some(turn) = current.turn.take() {
            out.push(LinkEvent::TurnDone(TurnResult {
                turn_id: turn,
                text: std::mem::take(&mut current.text),
                aborted,
                error: current.error.take(),
                handled: false,
            }));
        }
        out.push(LinkEvent::State {
            idle: Some(true),
            pending: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn all() -> Value {
        let models: Vec<Value> = ["a/one", "a/two", "b/one"]
            .iter()
            .map(|m| {
                let (p, id) = m.split_once('/').unwrap();
                json!({ "provider": p, "id": id, "name": id, "contextWindow": 1000 })
            })
            .collect();
        normalize(
            &Request::Models,
            &json!({ "models": models, "model": { "provider": "a", "id": "two", "x": 1 } }),
        )
    }

    #[test]
    fn the_model_list_is_the_enabled_models_or_all_when_none_match() {
        let scoped = scoped_answer(all(), Some(&["b/*".to_owned(), "two".to_owned()]));
        assert_eq!(
            scoped,
            json!({
                "models": [
                    { "provider": "b", "id": "one", "name": "one" },
                    { "provider": "a", "id": "two", "name": "two" },
                ],
                "current": { "provider": "a", "id": "two" },
                "scoped": true,
                "available": 3,
            })
        );
        for none in [None, Some(&["nothing*".to_owned()][..])] {
            let v = scoped_answer(all(), none);
            assert_eq!(v["scoped"], json!(false));
            assert_eq!(v["models"].as_array().unwrap().len(), 3);
        }
    }
}
