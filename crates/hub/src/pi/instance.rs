//! One `Instance` abstraction over every transport: a pi process the hub can prompt, whether it
//! is the person's pi with the extension (socket), a headless `pi --mode rpc` child, or the
//! built-in echo agent. Links translate their transport into [`LinkEvent`]s and carry out
//! [`Command`]s; the conductor only ever sees these types.

use std::fmt;

use tokio::sync::{mpsc, oneshot};
use wire::{PiEvent, TurnId, TurnResult};

/// An instance id (`i<n>`): new for every connection, never reused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(pub String);

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

// Both are stored, so the store owns their text; a renamed variant is a compile error here.
pub use store::instances::{GoneReason, Transport};

pub use crate::db::Reach;

/// What the hub asks an instance and waits for the answer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Model, thinking level, context use and cost, as far as pi reports them.
    Stats,
    /// The models it can use, and the current one.
    Models,
    /// Switch to a model.
    SetModel {
        provider: String,
        /// Model id.
        id: String,
    },
    /// The thinking levels of the current model, and the current level.
    ThinkingLevels,
    /// Set the thinking level.
    SetThinking(String),
    /// Its commands: prompt templates, extension commands, skills.
    Commands,
    /// Compact the session (answers when the compaction is over).
    Compact,
    /// Start a fresh pi session.
    NewSession,
    /// The saved sessions of its folder, and the current one.
    Sessions,
    /// Resume a saved session (a file `Sessions` listed).
    SwitchSession(String),
}

/// Where the answer to a [`Request`] goes.
pub type Answer = oneshot::Sender<Result<serde_json::Value, String>>;

/// What the hub asks of an instance.
#[derive(Debug)]
pub enum Command {
    /// Run a turn.
    Prompt {
        turn: TurnId,
        /// The prompt.
        text: String,
        /// The lines pi gets before it (`pi::preamble`), or nothing.
        context: String,
        /// Images that go with it.
        images: Vec<wire::ImagePart>,
        /// The files the person sent with it, as the prompt names them (a pi on another
        /// machine gets their bytes first).
        files: Vec<PromptFile>,
    },
    /// Abort the current run.
    Abort,
    /// Words for the run pi is doing now (pi's steering: after its current tool calls, before
    /// its next model call).
    Steer(String),
    /// The turn's result is durable: the instance may forget it.
    DoneAck(TurnId),
    /// Show a notification in pi.
    Notify {
        text: String,
        /// `info`, `warning`, `error`.
        level: &'static str,
    },
    /// Footer status.
    SetStatus(Option<String>),
    /// Close the link (the reason is shown where possible).
    Close(String),
    /// Ask something and wait for the answer.
    Request(Request, Answer),
    /// The person's answer to one of pi's dialogs (sent only while pi still waits for it).
    AnswerDialog {
        /// pi's id of the request.
        request_id: String,
        /// `{"value"}`, `{"confirmed"}` or `{"cancelled"}` (`pi::dialog::response`).
        answer: serde_json::Value,
    },
}

/// A link reporting about its instance.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEvent {
    /// A prompt was received.
    Acked { turn: TurnId },
    /// pi had this prompt already, answered it, and that answer was acknowledged by a hub
    /// whose record of it is lost (a crash of the hub's machine): no answer comes again.
    AnsweredBefore { turn: TurnId },
    /// A prompt could not be started (the turn was not received).
    PromptRefused {
        turn: TurnId,
        /// Why.
        error: String,
    },
    /// A turn settled.
    TurnDone(TurnResult),
    /// pi's idle/pending state.
    State {
        idle: Option<bool>,
        /// Messages pending in pi.
        pending: Option<bool>,
    },
    /// A pi event (previews use these later).
    Pi {
        /// The hub turn it belongs to.
        turn: Option<TurnId>,
        event: PiEvent,
    },
    /// pi opened a dialog and waits for the person (a headless pi).
    Dialog(crate::pi::dialog::Asked),
    /// A dialog ended in pi without an answer, or an answer came after pi stopped waiting.
    DialogEnded {
        /// pi's id of the request.
        request_id: String,
        why: crate::pi::dialog::Ended,
    },
    /// A pi with the extension started or stopped waiting for the person at its terminal.
    TerminalPrompt {
        waiting: bool,
        /// The prompt's title, when pi gives one.
        title: Option<String>,
    },
    /// The instance left.
    Gone(GoneReason),
}

/// A new instance asking to be registered.
#[derive(Debug)]
pub struct Attach {
    pub transport: Transport,
    /// Which machine it runs on.
    pub reach: Reach,
    /// Process id.
    pub pid: Option<i64>,
    /// Working directory.
    pub cwd: String,
    /// pi session id.
    pub session_id: Option<String>,
    /// pi session name.
    pub session_name: Option<String>,
    /// pi's session file (how to go on with it in a terminal once this pi is gone).
    pub session_file: Option<String>,
    pub idle: bool,
    /// Messages pending in pi.
    pub pending: bool,
    /// Turns this process received (reconnects after a hub restart).
    pub received: Vec<TurnId>,
    /// Turns that finished while the hub was away.
    pub completed: Vec<TurnResult>,
    /// The state database those turns are of, when the client says (`Hello::store_id`).
    pub store_id: Option<String>,
    /// Where the conductor sends commands.
    pub commands: mpsc::Sender<Command>,
    /// A headless child's token: its tools connect with it (role `tools`).
    pub tools_token: Option<String>,
}

/// One of pi's Telegram tools was called by the model of an instance; the answer is what the
/// model sees (an error is a tool error).
#[derive(Debug)]
pub struct ToolCall {
    /// `telegram_attach`, `telegram_message`.
    pub tool: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// What pi says of the call's run: a turn, a run typed in pi (`Some(None)`), or nothing.
    pub turn: Option<Option<TurnId>>,
    /// `telegram_attach` from a pi on another machine: the files it uploaded, on the hub's
    /// disk (the link made them; never a path pi named). The call removes them once copied.
    pub uploaded: Vec<Uploaded>,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<String, String>>,
}

/// A file the person sent, on the hub's disk, as a prompt names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptFile {
    /// Where the hub saved it (the path in the prompt).
    pub path: std::path::PathBuf,
    /// Its name as sent.
    pub name: String,
}

/// A file a pi on another machine uploaded ([`crate::pi::links::uploads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// Where the link wrote it.
    pub path: std::path::PathBuf,
    /// Its name on pi's machine.
    pub name: String,
}

/// Everything that reaches the conductor.
#[derive(Debug)]
pub enum ConductorMsg {
    /// Register an instance; the reply carries its id.
    Attach(Attach, oneshot::Sender<InstanceId>),
    /// An instance reports.
    Link(InstanceId, LinkEvent),
    /// The CLI asks for a headless instance in `cwd`.
    Spawn(
        String,
        Vec<(String, String)>,
        oneshot::Sender<Result<InstanceId, String>>,
    ),
    /// An instance's model called a tool.
    Tool(InstanceId, ToolCall),
    /// A child's tools connect with their token: which instance is it?
    ToolsHello(String, oneshot::Sender<Option<InstanceId>>),
    /// A child with this tools token is being started: its tools hello waits for its attach.
    ExpectTools(String),
    /// That child did not start: a tools hello waiting for it is refused.
    ForgetTools(String),
    /// A control's task is over (`store::controls` id).
    ControlSettled(i64),
    /// The CLI asks for the live instances.
    List(oneshot::Sender<serde_json::Value>),
    /// The hub's counters, for `ClientMsg::Stats`.
    Stats(oneshot::Sender<serde_json::Value>),
    /// The CLI settles a topic intent (`true`: create anyway). The reply says what it was.
    ResolveIntent(
        i64,
        bool,
        oneshot::Sender<Result<serde_json::Value, String>>,
    ),
}
