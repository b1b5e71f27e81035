//! The hub socket (`hub.sock`): the extension's instances and the CLI connect here. Every
//! connection must prove the hub secret in its first line; each has its own reader and a
//! bounded writer, so a peer that stops reading is dropped instead of blocking anyone else.
//!
//! The per-connection protocol is also served over TLS to pi on other machines
//! ([`super::tcp`]): [`connection`] takes any byte stream, and a [`Peer::Remote`] may only be an
//! instance.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot, watch};
use wire::{
    ClientMsg, Disposition, EventKind, FILE_PART_BYTES, FilePart, Files, Hello, HubMsg, LineError,
    LineReader, PROTOCOL, Role, TurnId, encode, secrets_match,
};

use std::collections::HashMap;

use super::strangers::{Admission, Failure};
use super::uploads::Uploads;
use crate::pi::instance::{
    Answer, Attach, Command, ConductorMsg, GoneReason, InstanceId, LinkEvent, PromptFile, Reach,
    Request, ToolCall, Transport, Uploaded,
};

/// How long a new connection may take to say hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the last message before a close may take to be written.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The answer to `telegram_attach` naming paths from a pi on another machine.
const REMOTE_ATTACH: &str = "telegram_attach from a pi on another machine sends the files themselves, and this pi's extension sent paths on its own disk, which name nothing on the hub's: update the pi-telegram extension on this machine (pi install npm:pi-telegram), or send text with telegram_message";

/// Binds `hub.sock` with mode 0600, replacing a stale socket (the caller holds the profile
/// lock, so no other hub uses it).
///
/// The socket is bound under a temporary name and renamed into place: `bind(2)` creates the
/// file before `listen(2)` runs and before the mode is set, so a client that sees `hub.sock`
/// appear must never find it refusing connections or readable by others.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    for stale in [path, tmp.as_path()] {
        match std::fs::remove_file(stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let listener = UnixListener::bind(&tmp)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

/// What every connection needs from the hub.
#[derive(Clone)]
pub struct Shared {
    /// The hub secret every hello must carry.
    pub secret: Arc<String>,
    /// How long a write may block before the peer counts as not reading.
    pub write_timeout: Duration,
    pub conductor: mpsc::Sender<ConductorMsg>,
    /// This hub's release, in every welcome.
    pub version: Arc<str>,
    /// The state database's id, in every welcome (`Welcome::store_id`).
    pub store_id: Arc<str>,
    /// Where files a pi on another machine uploads go, and how large one may be.
    pub uploads: Arc<UploadSettings>,
}

/// Where files a pi on another machine uploads go ([`super::uploads`]).
#[derive(Debug, Clone)]
pub struct UploadSettings {
    /// The folder of the hub's outgoing copies.
    pub dir: std::path::PathBuf,
    /// `outboundMaxBytes`.
    pub max_bytes: u64,
}

/// Where a connection comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// `hub.sock`: a process of this machine's user.
    Local,
    /// The TLS listener: pi on another machine (only the instance role; its files are not on
    /// this disk).
    Remote(SocketAddr),
}

/// Accepts connections until `stop`.
pub async fn serve(listener: UnixListener, shared: Shared, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, Peer::Local, shared.clone(), None));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept on hub.sock failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// Writes lines in order; ends when a write blocks too long or fails.
async fn write_loop(
    mut wr: impl AsyncWrite + Unpin,
    mut lines: mpsc::Receiver<String>,
    timeout: Duration,
) {
    while let Some(line) = lines.recv().await {
        match tokio::time::timeout(timeout, wr.write_all(line.as_bytes())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "socket write failed");
                return;
            }
            Err(_) => {
                tracing::warn!("a client stopped reading from its hub connection; dropping it");
                return;
            }
        }
    }
    let _ = wr.shutdown().await;
}

/// The read half of any connection (Unix socket or TLS).
type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;

struct Conn {
    lines: LineReader<BufReader<ReadHalf>>,
    out: mpsc::Sender<String>,
    writer: tokio::task::JoinHandle<()>,
    /// The hub's release, for the welcome.
    version: Arc<str>,
    /// The state database's id, for the welcome.
    store_id: Arc<str>,
    /// Where a pi on another machine's uploads go.
    uploads: Arc<UploadSettings>,
}

/// Where a connection's lines go, to its writer. Handlers of an instance's messages take this
/// rather than the [`Conn`], whose reader is not `Sync`, so they may await.
type Out = mpsc::Sender<String>;

/// Sends a message; `false` when the peer is not keeping up (or gone).
fn send(out: &Out, msg: &HubMsg) -> bool {
    out.try_send(encode(msg)).is_ok()
}

impl Conn {
    /// Sends a message; `false` when the peer is not keeping up (or gone).
    fn send(&self, msg: &HubMsg) -> bool {
        send(&self.out, msg)
    }

    /// Sends a last message and closes after it is written.
    async fn close_with(self, msg: &HubMsg) {
        let _ = self.out.try_send(encode(msg));
        drop(self.out);
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.writer).await;
    }
}

/// What the peer and the log are told of a line that is no message: serde_json's words for a
/// syntax error, and only the place of a value of the wrong type (those words quote the value,
/// and the log holds no message text).
fn malformed(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Data => format!(
            "malformed line: a field is missing or of the wrong type (line {} column {})",
            e.line(),
            e.column()
        ),
        _ => format!("malformed line: {e}"),
    }
}

/// Refuses a connection's hello: says why to the client and in the log (the hub's own words,
/// never what the client sent), then closes. A stranger's refusal (`unproved`: no hello proved
/// the secret) is logged as their failures are, once and then summed up.
async fn refuse(
    conn: Conn,
    peer: Peer,
    unproved: Option<&Admission>,
    code: &'static str,
    message: String,
) {
    match (peer, unproved) {
        (_, Some(a)) => a.failed(Failure::Refused {
            code,
            reason: message.clone(),
        }),
        (Peer::Local, None) => {
            tracing::warn!(code, reason = %message, "refused a client's hello");
        }
        (Peer::Remote(addr), None) => {
            tracing::warn!(peer = %addr, code, reason = %message, "refused a remote client's hello");
        }
    }
    conn.close_with(&HubMsg::Refused {
        code: code.into(),
        message,
    })
    .await;
}

/// One connection, from its hello to its end. `unauthenticated` (the TLS listener's place for
/// a connection without a hello, [`super::strangers`]) is held until the hello is settled, and
/// sets its deadline.
pub async fn connection<S>(
    stream: S,
    peer: Peer,
    shared: Shared,
    unauthenticated: Option<Admission>,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let Shared {
        secret,
        write_timeout,
        conductor,
        version,
        store_id,
        uploads,
    } = shared;
    let (rd, wr) = tokio::io::split(stream);
    let (out, out_rx) = mpsc::channel(super::COMMAND_QUEUE);
    let writer = tokio::spawn(write_loop(wr, out_rx, write_timeout));
    let rd: ReadHalf = Box::new(rd);
    let mut conn = Conn {
        lines: LineReader::new(BufReader::new(rd)),
        out,
        writer,
        version,
        store_id,
        uploads,
    };
    let stranger = unauthenticated.as_ref();
    let (deadline, limit) = match stranger {
        Some(a) => (a.deadline(), a.limit()),
        None => (tokio::time::Instant::now() + HELLO_TIMEOUT, HELLO_TIMEOUT),
    };
    let first = match tokio::time::timeout_at(deadline, conn.lines.next_line()).await {
        Ok(Ok(Some(line))) => line,
        Ok(Ok(None)) => {
            if let Some(a) = stranger {
                a.failed(Failure::ClosedBeforeHello);
            }
            return;
        }
        Ok(Err(e)) => {
            let why = format!("unreadable first line: {e}");
            return refuse(conn, peer, stranger, "hello", why).await;
        }
        Err(_) => {
            let why = format!("no hello within {} seconds", limit.as_secs());
            return refuse(conn, peer, stranger, "hello", why).await;
        }
    };
    let hello = match wire::read_hello(&first) {
        Ok((hello, left_out)) => {
            if !left_out.is_empty() {
                // The rest still counts: a refusal would be repeated at every reconnect.
                tracing::warn!(fields = ?left_out, role = ?hello.role, "a hello had fields that could not be read; they were left out");
            }
            hello
        }
        Err(e) => return refuse(conn, peer, stranger, "hello", e.to_string()).await,
    };
    if hello.protocol != PROTOCOL {
        let message = format!(
            "this hub speaks protocol {PROTOCOL}; the client speaks {}: update pi-telegram and the extension to the same version",
            hello.protocol
        );
        return refuse(conn, peer, stranger, "protocol", message).await;
    }
    if !secrets_match(&hello.secret, &secret) {
        return refuse(conn, peer, stranger, "secret", "wrong hub secret".into()).await;
    }
    if let Some(theirs) = hello.version.as_deref()
        && theirs != &*conn.version
    {
        // The extension replaces a hub of another release when it can (its own binary is of
        // its release); until then both speak the same protocol.
        tracing::info!(client = theirs, hub = %conn.version, role = ?hello.role, "a client of another release connected");
    }
    drop(unauthenticated);
    match (hello.role, peer) {
        (Role::Instance, _) => instance(conn, hello, peer, conductor).await,
        // Spawning pi or resolving topics from another machine would hand it this machine's
        // processes and files; a headless child is always local.
        (Role::Control | Role::Tools, Peer::Remote(_)) => {
            let message = "only pi instances connect from other machines; run the pi-telegram CLI on the hub's machine".to_owned();
            refuse(conn, peer, None, "role", message).await;
        }
        (Role::Control, Peer::Local) => control(conn, conductor).await,
        (Role::Tools, Peer::Local) => tools(conn, hello, conductor).await,
    }
}

/// The wire form of a request, with its id.
fn request_msg(id: String, req: Request) -> HubMsg {
    match req {
        Request::Stats => HubMsg::GetStats { id },
        Request::Models => HubMsg::GetModels { id },
        Request::SetModel {
            provider,
            id: model_id,
        } => HubMsg::SetModel {
            id,
            provider,
            model_id,
        },
        Request::ThinkingLevels => HubMsg::GetThinkingLevels { id },
        Request::SetThinking(level) => HubMsg::SetThinkingLevel { id, level },
        Request::Commands => HubMsg::GetCommands { id },
        Request::Compact => HubMsg::Compact { id },
        Request::NewSession => HubMsg::NewSession { id },
        Request::Sessions => HubMsg::GetSessions { id },
        Request::SwitchSession(path) => HubMsg::SwitchSession { id, path },
    }
}

fn hub_msg(cmd: Command) -> HubMsg {
    match cmd {
        Command::Prompt {
            turn,
            text,
            context,
            images,
            ..
        } => HubMsg::Prompt {
            turn_id: turn,
            text,
            context,
            images,
        },
        Command::Abort => HubMsg::Abort { id: None },
        Command::Steer(text) => HubMsg::Steer { text },
        Command::DoneAck(turn) => HubMsg::DoneAck { turn_id: turn },
        Command::Notify { text, level } => HubMsg::Notify {
            text,
            level: level.into(),
        },
        Command::SetStatus(text) => HubMsg::SetStatus { text },
        Command::Close(message) => HubMsg::Error { message },
        // pi's extension API lets no extension answer another's dialog: the extension's pi
        // only says that it waits (`ui_prompt`), and never gets a dialog the hub could answer.
        Command::AnswerDialog { .. } => HubMsg::Unknown,
        // Answered by the connection loop, which keeps the pending requests.
        Command::Request(_, answer) => {
            let _ = answer.send(Err("not sent".into()));
            HubMsg::Unknown
        }
    }
}

/// What one message on an instance's connection leaves: the link goes on, or it ends and why.
type Step<T = ()> = ControlFlow<GoneReason, T>;

/// Says why the hub closes the link to the peer (where it can still read it) and returns the
/// reason for the conductor.
fn closing(out: &Out, message: String) -> GoneReason {
    send(
        out,
        &HubMsg::Error {
            message: message.clone(),
        },
    );
    GoneReason::Closed(message)
}

async fn instance(conn: Conn, hello: Hello, peer: Peer, conductor: mpsc::Sender<ConductorMsg>) {
    let Some(cwd) = hello.state.cwd.clone().filter(|c| !c.is_empty()) else {
        return refuse(
            conn,
            peer,
            None,
            "hello",
            "an instance hello needs its cwd".into(),
        )
        .await;
    };
    let (commands, mut command_rx) = mpsc::channel(super::COMMAND_QUEUE);
    let attach = attach_of(hello, peer, cwd, commands);
    // Paths name nothing on the other side: files cross the connection as bytes.
    let bytes = attach.reach == Reach::OtherMachine;
    let files = if bytes { Files::Bytes } else { Files::Paths };
    let Some((mut conn, id)) = register(conn, &conductor, attach, files).await else {
        return;
    };
    let uploads = bytes.then(|| Uploads::new(conn.uploads.dir.clone(), conn.uploads.max_bytes));
    if let Peer::Remote(addr) = peer {
        tracing::info!(instance = %id, peer = %addr, "a pi on another machine connected");
    }
    let mut link = InstanceLink {
        id,
        conductor,
        pending: HashMap::new(),
        next_request: 0,
        uploads,
    };
    let gone = loop {
        let step = tokio::select! {
            line = conn.lines.next_line() => link.on_line(&conn.out, line).await,
            cmd = command_rx.recv() => link.on_command(&conn.out, cmd).await,
            _ = &mut conn.writer => Step::Break(GoneReason::ConnectionLost("pi stopped reading".into())),
        };
        if let Step::Break(gone) = step {
            break gone;
        }
    };
    tracing::info!(instance = %link.id, reason = ?gone, "instance link closed");
    let _ = link.report(LinkEvent::Gone(gone)).await;
    drop(conn.out);
}

/// What the conductor is told of a new instance, from its hello.
fn attach_of(hello: Hello, peer: Peer, cwd: String, commands: mpsc::Sender<Command>) -> Attach {
    let elsewhere = crate::machine::is_elsewhere(hello.machine.as_deref());
    if peer == Peer::Local && elsewhere {
        tracing::info!(
            pid = ?hello.state.pid,
            "a pi of another machine came by hub.sock (a forwarded socket): what it is told is on disk first"
        );
    }
    Attach {
        transport: Transport::Shim,
        reach: match peer {
            Peer::Local if !elsewhere => Reach::ThisMachine,
            Peer::Local | Peer::Remote(_) => Reach::OtherMachine,
        },
        store_id: hello.store_id,
        pid: hello.state.pid,
        cwd,
        session_id: hello.state.session_id,
        session_name: hello.state.session_name,
        session_file: hello.state.session_file,
        idle: hello.state.idle.unwrap_or(true),
        pending: hello.state.pending.unwrap_or(false),
        received: hello.received_turns,
        completed: hello.completed_turns,
        commands,
        tools_token: None,
    }
}

/// Registers the instance and welcomes it with its id; `None` when the hub is stopping.
async fn register(
    conn: Conn,
    conductor: &mpsc::Sender<ConductorMsg>,
    attach: Attach,
    files: Files,
) -> Option<(Conn, InstanceId)> {
    let (reply, id_rx) = oneshot::channel();
    if conductor
        .send(ConductorMsg::Attach(attach, reply))
        .await
        .is_err()
    {
        return None;
    }
    let Ok(id) = id_rx.await else {
        conn.close_with(&HubMsg::Error {
            message: "the hub is stopping".into(),
        })
        .await;
        return None;
    };
    conn.send(&HubMsg::Welcome {
        protocol: PROTOCOL,
        hub_pid: std::process::id(),
        instance_id: Some(id.0.clone()),
        hub_version: Some(conn.version.to_string()),
        store_id: Some(conn.store_id.to_string()),
        files,
    });
    Some((conn, id))
}

/// What a registered instance's connection keeps between messages.
struct InstanceLink {
    id: InstanceId,
    conductor: mpsc::Sender<ConductorMsg>,
    /// Requests waiting for pi's answer, by request id.
    pending: HashMap<String, Answer>,
    next_request: u64,
    /// A pi on another machine: its files come and go as bytes ([`Files::Bytes`]).
    uploads: Option<Uploads>,
}

impl InstanceLink {
    /// Tells the conductor; `false` when it is gone (the hub is stopping).
    async fn report(&self, event: LinkEvent) -> bool {
        self.conductor
            .send(ConductorMsg::Link(self.id.clone(), event))
            .await
            .is_ok()
    }

    /// A line from pi, or the end of its connection.
    async fn on_line(&mut self, out: &Out, line: Result<Option<String>, LineError>) -> Step {
        let line = match line {
            Ok(Some(l)) => l,
            Ok(None) => return Step::Break(GoneReason::ConnectionLost("closed by pi".into())),
            Err(LineError::TooLong(n)) => {
                return Step::Break(closing(
                    out,
                    format!("a line longer than {n} bytes: closing"),
                ));
            }
            Err(e) => return Step::Break(GoneReason::ConnectionLost(e.to_string())),
        };
        let msg = match serde_json::from_str::<ClientMsg>(&line) {
            Ok(m) => m,
            Err(e) => return Step::Break(closing(out, malformed(&e))),
        };
        if let Some(event) = self.on_message(out, msg).await?
            && !self.report(event).await
        {
            return Step::Break(GoneReason::Closed("the hub is stopping".into()));
        }
        Step::Continue(())
    }

    /// What a message from pi is for the conductor; `None` for those answered here.
    async fn on_message(&mut self, out: &Out, msg: ClientMsg) -> Step<Option<LinkEvent>> {
        let event = match msg {
            ClientMsg::Ack {
                turn_id,
                disposition: Disposition::Finished,
            } => LinkEvent::AnsweredBefore { turn: turn_id },
            ClientMsg::Ack { turn_id, .. } => LinkEvent::Acked { turn: turn_id },
            ClientMsg::TurnDone(r) => {
                crate::latency::mark(crate::latency::Step::Settled, &r.turn_id.0);
                LinkEvent::TurnDone(r)
            }
            ClientMsg::State(s) => LinkEvent::State {
                idle: s.idle,
                pending: s.pending,
            },
            ClientMsg::Event { turn_id, event } => {
                // Busy/idle from the events themselves, so a lost `state` cannot wedge
                // dispatch.
                let state = match event.kind() {
                    EventKind::AgentStart => Some(false),
                    EventKind::AgentSettled => Some(true),
                    _ => None,
                };
                if let Some(idle) = state {
                    let _ = self
                        .report(LinkEvent::State {
                            idle: Some(idle),
                            pending: None,
                        })
                        .await;
                }
                LinkEvent::Pi {
                    turn: turn_id,
                    event,
                }
            }
            ClientMsg::UiPrompt { waiting, title, .. } => {
                LinkEvent::TerminalPrompt { waiting, title }
            }
            ClientMsg::Bye { reason } => {
                return Step::Break(match reason.as_str() {
                    "disconnect" => GoneReason::Disconnected,
                    // pi's own quit (an older extension says "shutdown" for it too).
                    "quit" => GoneReason::Quit,
                    _ => GoneReason::Shutdown,
                });
            }
            ClientMsg::Hello(_) => {
                return Step::Break(closing(out, "a second hello on one connection".into()));
            }
            ClientMsg::Response {
                id,
                ok,
                data,
                error,
            } => {
                if let Some(answer) = self.pending.remove(&id) {
                    let _ = answer.send(if ok {
                        Ok(data.unwrap_or(serde_json::Value::Null))
                    } else {
                        Err(error.unwrap_or_else(|| "pi refused".into()))
                    });
                }
                return Step::Continue(None);
            }
            ClientMsg::ToolCall {
                id: rid,
                tool,
                args,
                turn_id,
            } => {
                let uploaded = match &mut self.uploads {
                    Some(uploads) if tool == "telegram_attach" => {
                        // A path from another machine names nothing here (or something
                        // else): only what it uploaded on this connection goes.
                        match uploaded_of(uploads, &args) {
                            Ok(files) => files,
                            Err(why) => {
                                send(out, &response(rid, Err(why)));
                                return Step::Continue(None);
                            }
                        }
                    }
                    _ => Vec::new(),
                };
                let id = self.id.clone();
                let call = Call {
                    request: rid,
                    tool,
                    args,
                    turn: turn_id,
                    uploaded,
                };
                tool_call(&self.conductor, out, id, call);
                return Step::Continue(None);
            }
            ClientMsg::Upload(part) => {
                match &mut self.uploads {
                    Some(uploads) => uploads.part(part).await,
                    None => {
                        tracing::info!(instance = %self.id, "an upload from a pi that shares the hub's disk: ignored")
                    }
                }
                return Step::Continue(None);
            }
            ClientMsg::Spawn { .. }
            | ClientMsg::Instances { .. }
            | ClientMsg::Stats { .. }
            | ClientMsg::ResolveIntent { .. }
            | ClientMsg::Unknown => return Step::Continue(None),
        };
        Step::Continue(Some(event))
    }

    /// A command of the conductor (`None`: the conductor is gone).
    async fn on_command(&mut self, out: &Out, cmd: Option<Command>) -> Step {
        // A pi on another machine gets the files a prompt names before the prompt, in order:
        // whole by the time it reads the prompt.
        if let Some(Command::Prompt { turn, files, .. }) = &cmd
            && self.uploads.is_some()
            && let Err(why) = send_files(out, turn, files).await
        {
            return Step::Break(GoneReason::Closed(why));
        }
        match cmd {
            Some(Command::Close(why)) => Step::Break(closing(out, why)),
            Some(Command::Request(req, answer)) => {
                self.next_request += 1;
                let rid = format!("r{}", self.next_request);
                if send(out, &request_msg(rid.clone(), req)) {
                    self.pending.insert(rid, answer);
                } else {
                    let _ = answer.send(Err("pi is not reading its connection".into()));
                }
                Step::Continue(())
            }
            Some(cmd) => {
                if send(out, &hub_msg(cmd)) {
                    Step::Continue(())
                } else {
                    Step::Break(GoneReason::Closed(
                        "pi is not reading its connection".into(),
                    ))
                }
            }
            None => Step::Break(GoneReason::Closed("the hub is stopping".into())),
        }
    }
}

/// The files a `telegram_attach` of a pi on another machine names by `args.uploads`.
fn uploaded_of(uploads: &mut Uploads, args: &serde_json::Value) -> Result<Vec<Uploaded>, String> {
    let ids: Vec<String> = args
        .get("uploads")
        .and_then(serde_json::Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(serde_json::Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        return Err(REMOTE_ATTACH.into());
    }
    uploads.take(&ids)
}

/// Streams `files` to pi as [`HubMsg::File`] pieces, waiting for room on the connection (a
/// file is up to the inbound limit; the writer's timeout ends a peer that stops reading). A
/// file that cannot be read is left out: pi's prompt still names it.
async fn send_files(out: &Out, turn: &TurnId, files: &[PromptFile]) -> Result<(), String> {
    use base64::Engine as _;
    use tokio::io::AsyncReadExt;
    for (n, f) in files.iter().enumerate() {
        let opened = match tokio::fs::File::open(&f.path).await {
            Ok(file) => file.metadata().await.map(|m| (file, m.len())),
            Err(e) => Err(e),
        };
        let (mut file, size) = match opened {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(error = %e, "a file for a pi on another machine could not be read");
                continue;
            }
        };
        let id = format!("{}-{n}", turn.0);
        let mut offset = 0u64;
        let mut buf = vec![0u8; FILE_PART_BYTES];
        loop {
            // The size it had when opened; whole pieces but the last (a short read is not the
            // end).
            let want = buf
                .len()
                .min(usize::try_from(size - offset).unwrap_or(usize::MAX));
            let mut filled = 0;
            while filled < want {
                match file.read(&mut buf[filled..want]).await {
                    Ok(0) => break,
                    Ok(k) => filled += k,
                    Err(e) => {
                        tracing::warn!(error = %e, "a file for a pi on another machine could not be read");
                        return Ok(());
                    }
                }
            }
            let done = filled < want || offset + filled as u64 >= size;
            let part = FilePart {
                id: id.clone(),
                name: f.name.clone(),
                size,
                offset,
                data: base64::engine::general_purpose::STANDARD.encode(&buf[..filled]),
                done,
                path: Some(f.path.display().to_string()),
            };
            out.send(encode(&HubMsg::File(part)))
                .await
                .map_err(|_| "pi is not reading its connection".to_owned())?;
            offset += filled as u64;
            if done {
                break;
            }
        }
    }
    Ok(())
}

/// A tool call as the link hands it on.
struct Call {
    request: String,
    tool: String,
    args: serde_json::Value,
    turn: Option<Option<TurnId>>,
    uploaded: Vec<Uploaded>,
}

/// Carries out a tool call in a task of its own (a file copy or a send must not hold the
/// connection) and answers it on `out`.
fn tool_call(
    conductor: &mpsc::Sender<ConductorMsg>,
    out: &mpsc::Sender<String>,
    instance: InstanceId,
    c: Call,
) {
    let (conductor, out) = (conductor.clone(), out.clone());
    tokio::spawn(async move {
        let (reply, answered) = oneshot::channel();
        let Call {
            request,
            tool,
            args,
            turn,
            uploaded,
        } = c;
        let call = ToolCall {
            tool,
            args,
            turn,
            uploaded,
            reply,
        };
        let result = if conductor
            .send(ConductorMsg::Tool(instance, call))
            .await
            .is_err()
        {
            Err("the hub is stopping".to_owned())
        } else {
            answered
                .await
                .unwrap_or_else(|_| Err("the hub is stopping".into()))
        };
        let msg = response(request, result.map(|text| json!({ "text": text })));
        let _ = out.send(encode(&msg)).await;
    });
}

/// A headless child's tools: they connect with the token the hub gave the child and call
/// tools for that instance; nothing else.
async fn tools(mut conn: Conn, hello: Hello, conductor: mpsc::Sender<ConductorMsg>) {
    let Some(token) = hello.token.clone() else {
        let message = "a tools hello needs the token".into();
        return refuse(conn, Peer::Local, None, "token", message).await;
    };
    let (reply, rx) = oneshot::channel();
    let id = match conductor.send(ConductorMsg::ToolsHello(token, reply)).await {
        Ok(()) => rx.await.ok().flatten(),
        Err(_) => None,
    };
    let Some(id) = id else {
        let message = "no headless pi has this token".into();
        return refuse(conn, Peer::Local, None, "token", message).await;
    };
    conn.send(&HubMsg::Welcome {
        protocol: PROTOCOL,
        hub_pid: std::process::id(),
        instance_id: Some(id.0.clone()),
        hub_version: Some(conn.version.to_string()),
        store_id: Some(conn.store_id.to_string()),
        files: Files::Paths,
    });
    loop {
        tokio::select! {
            line = conn.lines.next_line() => {
                let Ok(Some(line)) = line else { break };
                match serde_json::from_str::<ClientMsg>(&line) {
                    // The child's turn is the instance's: a child says nothing of it.
                    Ok(ClientMsg::ToolCall { id: rid, tool, args, .. }) => {
                        let call = Call { request: rid, tool, args, turn: None, uploaded: Vec::new() };
                        tool_call(&conductor, &conn.out, id.clone(), call);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        conn.send(&HubMsg::Error { message: malformed(&e) });
                        break;
                    }
                }
            }
            _ = &mut conn.writer => break,
        }
    }
    drop(conn.out);
}

/// Asks the conductor something whose answer may be a failure.
async fn ask<T>(
    conductor: &mpsc::Sender<ConductorMsg>,
    msg: impl FnOnce(oneshot::Sender<Result<T, String>>) -> ConductorMsg,
) -> Result<T, String> {
    let (reply, rx) = oneshot::channel();
    if conductor.send(msg(reply)).await.is_err() {
        return Err("the hub is stopping".into());
    }
    rx.await
        .unwrap_or_else(|_| Err("the hub is stopping".into()))
}

/// The answer to control request `id`.
fn response(id: String, result: Result<serde_json::Value, String>) -> HubMsg {
    match result {
        Ok(data) => HubMsg::Response {
            id,
            ok: true,
            data: Some(data),
            error: None,
        },
        Err(e) => HubMsg::Response {
            id,
            ok: false,
            data: None,
            error: Some(e),
        },
    }
}

async fn control(mut conn: Conn, conductor: mpsc::Sender<ConductorMsg>) {
    conn.send(&HubMsg::Welcome {
        protocol: PROTOCOL,
        hub_pid: std::process::id(),
        instance_id: None,
        hub_version: Some(conn.version.to_string()),
        store_id: Some(conn.store_id.to_string()),
        files: Files::Paths,
    });
    loop {
        let line = match conn.lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(LineError::TooLong(n)) => {
                // Said before the close, as on instance connections.
                conn.send(&HubMsg::Error {
                    message: format!("a line longer than {n} bytes: closing"),
                });
                break;
            }
            Err(e) => {
                tracing::debug!(error = %e, "control connection failed");
                break;
            }
        };
        let answer = match serde_json::from_str::<ClientMsg>(&line) {
            Ok(ClientMsg::Spawn { id, cwd, env }) => {
                let env = env
                    .into_iter()
                    .filter(|(k, _)| super::rpc::REQUEST_ENV.contains(&k.as_str()))
                    .collect();
                let result = ask(&conductor, |reply| ConductorMsg::Spawn(cwd, env, reply)).await;
                response(id, result.map(|i| json!({ "instance_id": i.0 })))
            }
            Ok(ClientMsg::ResolveIntent {
                id,
                intent_id,
                create,
            }) => {
                let result = ask(&conductor, |reply| {
                    ConductorMsg::ResolveIntent(intent_id, create, reply)
                })
                .await;
                response(id, result)
            }
            Ok(ClientMsg::Stats { id }) => told(&conductor, id, ConductorMsg::Stats).await,
            Ok(ClientMsg::Instances { id }) => told(&conductor, id, ConductorMsg::List).await,
            Ok(_) => continue,
            Err(e) => {
                conn.send(&HubMsg::Error {
                    message: malformed(&e),
                });
                break;
            }
        };
        if !conn.send(&answer) {
            break;
        }
    }
    drop(conn.out);
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, conn.writer).await;
}

/// What the conductor tells when asked with `ask`, as the response to request `id`.
async fn told(
    conductor: &mpsc::Sender<ConductorMsg>,
    id: String,
    ask: fn(oneshot::Sender<Value>) -> ConductorMsg,
) -> HubMsg {
    let (reply, rx) = oneshot::channel();
    let data = match conductor.send(ask(reply)).await {
        Ok(()) => rx.await.ok(),
        Err(_) => None,
    };
    HubMsg::Response {
        id,
        ok: data.is_some(),
        data,
        error: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::{Peer, attach_of, bind};
    use crate::db::Reach;

    /// A pi whose hello names another machine is told only what is on disk, though it came
    /// by `hub.sock` (a socket forwarded over SSH); one naming this machine, or none (an older
    /// extension), is this machine's.
    #[test]
    fn reach_follows_the_machine_the_hello_names() {
        let reach = |machine: Option<&str>, peer: Peer| {
            let hello: wire::Hello = serde_json::from_value(serde_json::json!({
                "protocol": 1, "role": "instance", "machine": machine
            }))
            .unwrap();
            let (tx, _rx) = tokio::sync::mpsc::channel(1);
            attach_of(hello, peer, "/w".into(), tx).reach
        };
        let here = crate::machine::this_machine();
        assert_eq!(reach(None, Peer::Local), Reach::ThisMachine);
        assert_eq!(reach(Some(here), Peer::Local), Reach::ThisMachine);
        assert_eq!(
            reach(Some("host:elsewhere"), Peer::Local),
            Reach::OtherMachine
        );
        let remote = Peer::Remote("10.0.0.5:1".parse().unwrap());
        assert_eq!(reach(Some(here), remote), Reach::OtherMachine);
    }

    #[tokio::test]
    async fn the_socket_appears_listening_private_and_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.sock");
        // A stale socket from a hub that died: nothing listens on it.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(std::os::unix::net::UnixStream::connect(&path).is_err());

        let _listener = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::os::unix::net::UnixStream::connect(&path).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("hub.sock")]);
    }
}
