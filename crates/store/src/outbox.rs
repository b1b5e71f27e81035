//! The outbox: every message the hub sends is a row that moves
//! `pending -> sending -> sent | ambiguous | failed` (and back to `pending` for a retry).
//!
//! A row keeps what it sends once, in `delivery`: the hub's delivery plan (JSON), alternatives
//! of messages tried in order, `alt` and `part` pointing at the message to send now. Each
//! message names its Bot API method (`method`) beside its parameters. The store reads only that
//! much of it (the current message, a repeat mark, the files it uploads); what the messages
//! are is the hub's (`hub::outgoing::outbound::Outgoing`).

use std::collections::BTreeMap;
use std::fmt;

use rusqlite::{Connection, Row, params};
use serde_json::Value;

use crate::Cached;
use crate::{Result, StoreError};

/// A row's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Waiting to be sent (maybe not before `not_before_ms`).
    Pending,
    /// Handed to Telegram; the outcome is not recorded yet.
    Sending,
    /// Telegram confirmed it.
    Sent,
    /// The outcome is unknown and the row is not repeated blindly; `handling` says why.
    Ambiguous,
    /// Telegram refused it for good.
    Failed,
}

impl State {
    /// Stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Ambiguous => "ambiguous",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pending" => Self::Pending,
            "sending" => Self::Sending,
            "sent" => Self::Sent,
            "ambiguous" => Self::Ambiguous,
            "failed" => Self::Failed,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown outbox state {other:?}"
                )));
            }
        })
    }

    /// Every state, for complete counts.
    pub const ALL: [State; 5] = [
        Self::Pending,
        Self::Sending,
        Self::Sent,
        Self::Ambiguous,
        Self::Failed,
    ];
}

impl rusqlite::types::ToSql for State {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for State {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        Self::parse(v.as_str()?)
            .map_err(|e| rusqlite::types::FromSqlError::Other(e.to_string().into()))
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

stored_text_enum! {
    /// Why a row is sent, as its `purpose` column stores it: with `source_update_id` the key
    /// of at most one row per cause, so a text once written must be written the same way by
    /// every later release (tests and people reading the store go by it too).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Purpose {
        units {
            /// The answer to a button tap.
            AnswerCallback = "answer:callback",
            /// The answer to a stranger's tap (queued under the stranger's chat, sent after
            /// everything of the owner's).
            AnswerStranger = "answer:stranger",
            /// A message edited after a tap.
            EditCallback = "edit:callback",
            /// A message's buttons replaced.
            EditMarkup = "edit:markup",
            /// A message held for the first pi that connects.
            NoticeHeld = "notice:held",
            /// An attachment of a kind that is not passed on.
            ReplyAttachment = "reply:attachment",
            /// The choice of pi for a message.
            ReplyChooser = "reply:chooser",
            /// `/compact`'s question.
            ReplyCompact = "reply:compact",
            /// A control command's reply.
            ReplyControl = "reply:control",
            /// An edit's reply.
            ReplyEdit = "reply:edit",
            /// `/new`'s reply.
            ReplyNew = "reply:new",
            /// Paired.
            ReplyPaired = "reply:paired",
            /// What the bot says in a group about linking it and who may write there.
            ReplyGroup = "reply:group",
            /// The owner hears about the group: the question to link it, its un-linking.
            NoticeGroup = "notice:group",
            /// `/people` and what its buttons say.
            ReplyPeople = "reply:people",
            /// Joined with an invite, and the refusals of invite codes.
            ReplyJoined = "reply:joined",
            /// The owner hears that someone joined.
            NoticeJoined = "notice:joined",
            /// The person removed hears it.
            NoticeRemoved = "notice:removed",
            /// Pairing's questions and refusals.
            ReplyPairing = "reply:pairing",
            /// A message without text or media.
            ReplyTextOnly = "reply:text-only",
            /// A command nobody knows.
            ReplyUnknownCommand = "reply:unknown-command",
            /// A message that waits for a pi.
            ReplyWaits = "reply:waits",
            /// `/sessions` with no pi here.
            ReplySessions = "reply:sessions",
            /// `/close` with no pi here.
            ReplyClose = "reply:close",
            /// A reply to a dialog's question that cannot answer it.
            ReplyDialog = "reply:dialog",
            /// The menu's overview.
            ReplyMenuMain = "reply:menu:Menu",
            /// The menu's status.
            ReplyMenuStatus = "reply:menu:Status",
            /// The menu's models.
            ReplyMenuModel = "reply:menu:Model",
            /// The menu's thinking levels.
            ReplyMenuThinking = "reply:menu:Thinking",
            /// The menu's queue.
            ReplyMenuQueue = "reply:menu:Queue",
            /// The menu's settings.
            ReplyMenuSettings = "reply:menu:Settings",
            /// The menu's instances.
            ReplyMenuInstances = "reply:menu:Instances",
            /// The menu's help.
            ReplyMenuHelp = "reply:menu:Help",
        }
        /// `tools:<turn>:<at>`: the tools a turn used, as of pi's message at `at` (ms).
        Tools {
            /// The turn.
            turn: i64,
            /// The message's time.
            at: i64,
        },
        /// `tools:<turn>:last`: the tools of a turn's last message, with its answer.
        ToolsLast {
            /// The turn.
            turn: i64,
        },
        /// `thinking:<turn>:<at>`: pi's thinking, as of its message at `at`.
        Thinking {
            /// The turn.
            turn: i64,
            /// The message's time.
            at: i64,
        },
        /// `voice:<turn>:<n>`: the `n`th voice message pi wrote into a turn's answer.
        Voice {
            /// The turn.
            turn: i64,
            /// Its place among the answer's voices, from 0.
            n: usize,
        },
        /// `stale:<question>:<at>`: a stale question's message, as written at `at`.
        Stale {
            /// The question.
            question: i64,
            /// When this text of it was written.
            at: i64,
        },
        /// `compaction:<identity>:<at>`: pi compacts its context (or did), as written at `at`.
        Compaction {
            /// The pi.
            identity: String,
            /// When this text of it was written.
            at: i64,
        },
        /// `notice:retention:<at>`: topics offline past `threadRetentionDays`, offered for
        /// deletion, as written at `at`.
        NoticeRetention {
            /// When.
            at: i64,
        },
        /// `dialog:<id>:<at>`: the question of one of pi's dialogs, as written at `at`.
        Dialog {
            /// The dialog.
            id: i64,
            /// When this text of it was written.
            at: i64,
        },
        /// `control:<id>`: what a control said.
        Control {
            /// The control.
            id: i64,
        },
        /// `file:<id>`: a received file could not be passed on.
        File {
            /// The file.
            id: i64,
        },
        /// `file-late:<id>`: a file came after its prompt went to pi.
        FileLate {
            /// The file.
            id: i64,
        },
        /// `transcript:<id>`: a voice message's transcript.
        Transcript {
            /// The file.
            id: i64,
        },
        /// `commands:<generation>`: the bot's command list.
        Commands {
            /// Counts the lists published.
            generation: i64,
        },
        /// `skipped:<turn>`: a turn was dropped without a model turn.
        Skipped {
            /// The turn.
            turn: i64,
        },
        /// `voice-late:<row>`: the voice of a row could not be made in time.
        VoiceLate {
            /// The outbox row.
            row: i64,
        },
        /// `notice:connected:<instance>`.
        NoticeConnected {
            /// The instance's id.
            instance: String,
        },
        /// `notice:gone:<key>`.
        NoticeGone {
            /// The departure.
            key: String,
        },
        /// `notice:intent:<id>`: the question about a topic creation of unknown outcome.
        NoticeIntent {
            /// The intent.
            id: i64,
        },
        /// `notice:again:<turn>`: turns a hub crash cut off run again (pi had not started a
        /// tool).
        NoticeAgain {
            /// The (first) turn queued again.
            turn: i64,
        },
        /// `notice:interrupted:<turn>`.
        NoticeInterrupted {
            /// The (first) interrupted turn.
            turn: i64,
        },
        /// `notice:mode:<at>`: Threaded Mode went on or off.
        NoticeMode {
            /// When.
            at: i64,
        },
        /// `notice:moved:<identity>:<thread>`.
        NoticeMoved {
            /// The pi.
            identity: String,
            /// The topic it lives in now.
            thread: i64,
        },
        /// `notice:noslot:<at>`: no topic could be made for a pi.
        NoticeNoSlot {
            /// When.
            at: i64,
        },
        /// `notice:refused:<at>`: Telegram refused a pi a topic.
        NoticeRefused {
            /// When.
            at: i64,
        },
        /// `notice:back:<at>`: polling works again after an outage (the "Back after" line).
        NoticeBack {
            /// When.
            at: i64,
        },
        /// `notice:restored:<at>`: pis started again after a restart.
        NoticeRestored {
            /// When.
            at: i64,
        },
        /// `notice:thread:<instance>:<thread>`: a topic greets its pi.
        NoticeThread {
            /// The instance's id.
            instance: String,
            /// The topic.
            thread: i64,
        },
        /// `pin:<chat>:<message>`: a question that waits for the person, pinned.
        Pin {
            /// The chat.
            chat: i64,
            /// The question's message.
            message: i64,
        },
        /// `unpin:<chat>:<message>`: a settled question, unpinned.
        Unpin {
            /// The chat.
            chat: i64,
            /// The question's message.
            message: i64,
        },
        /// `answer:<turn>`, written in pieces.
        Answer {
            /// The turn.
            turn: i64,
        },
        /// `attach:<turn>`, written in pieces: files with a turn's answer.
        Attach {
            /// The turn.
            turn: i64,
        },
        /// `attach:<turn>:<at>`, written in pieces: files sent during a turn.
        AttachNow {
            /// The turn.
            turn: i64,
            /// When.
            at: i64,
        },
        /// `attach:<identity>:<at>`, written in pieces: files sent outside any turn.
        AttachOf {
            /// The pi.
            identity: String,
            /// When.
            at: i64,
        },
        /// `attach:<turn>:interrupted`, written in pieces: files of an interrupted turn.
        AttachInterrupted {
            /// The turn.
            turn: i64,
        },
        /// `commentary:<turn>:<at>`, written in pieces: text pi wrote before calling tools.
        Commentary {
            /// The turn.
            turn: i64,
            /// The message's time.
            at: i64,
        },
        /// `local:<identity>:<at>`, written in pieces: work that did not come from Telegram.
        Local {
            /// The pi.
            identity: String,
            /// The message's time.
            at: i64,
        },
        /// `message:<identity>:<at>`, written in pieces: a message pi sent by a tool.
        Message {
            /// The pi.
            identity: String,
            /// When.
            at: i64,
        },
        /// `<of>:<n>`: the `n`th row of a purpose written in pieces (the variants above whose
        /// text says so).
        Piece {
            /// What it is a piece of.
            of: Box<Purpose>,
            /// Its place, from 0.
            n: usize,
        },
        /// A text this release does not write (an older hub's), read back as it is.
        Other(String),
    }
}

impl Purpose {
    /// The `n`th row of this purpose written in pieces.
    pub fn piece(&self, n: usize) -> Self {
        Self::Piece {
            of: Box::new(self.clone()),
            n,
        }
    }

    /// The stored text.
    pub fn text(&self) -> std::borrow::Cow<'static, str> {
        match self {
            Self::Tools { turn, at } => format!("tools:{turn}:{at}").into(),
            Self::ToolsLast { turn } => format!("tools:{turn}:last").into(),
            Self::Thinking { turn, at } => format!("thinking:{turn}:{at}").into(),
            Self::Voice { turn, n } => format!("voice:{turn}:{n}").into(),
            Self::Control { id } => format!("control:{id}").into(),
            Self::Stale { question, at } => format!("stale:{question}:{at}").into(),
            Self::Dialog { id, at } => format!("dialog:{id}:{at}").into(),
            Self::Compaction { identity, at } => format!("compaction:{identity}:{at}").into(),
            Self::NoticeRetention { at } => format!("notice:retention:{at}").into(),
            Self::File { id } => format!("file:{id}").into(),
            Self::FileLate { id } => format!("file-late:{id}").into(),
            Self::Transcript { id } => format!("transcript:{id}").into(),
            Self::Commands { generation } => format!("commands:{generation}").into(),
            Self::Skipped { turn } => format!("skipped:{turn}").into(),
            Self::VoiceLate { row } => format!("voice-late:{row}").into(),
            Self::NoticeConnected { instance } => format!("notice:connected:{instance}").into(),
            Self::NoticeGone { key } => format!("notice:gone:{key}").into(),
            Self::NoticeIntent { id } => format!("notice:intent:{id}").into(),
            Self::NoticeAgain { turn } => format!("notice:again:{turn}").into(),
            Self::NoticeInterrupted { turn } => format!("notice:interrupted:{turn}").into(),
            Self::NoticeMode { at } => format!("notice:mode:{at}").into(),
            Self::NoticeMoved { identity, thread } => {
                format!("notice:moved:{identity}:{thread}").into()
            }
            Self::NoticeNoSlot { at } => format!("notice:noslot:{at}").into(),
            Self::NoticeRefused { at } => format!("notice:refused:{at}").into(),
            Self::NoticeBack { at } => format!("notice:back:{at}").into(),
            Self::NoticeRestored { at } => format!("notice:restored:{at}").into(),
            Self::NoticeThread { instance, thread } => {
                format!("notice:thread:{instance}:{thread}").into()
            }
            Self::Pin { chat, message } => format!("pin:{chat}:{message}").into(),
            Self::Unpin { chat, message } => format!("unpin:{chat}:{message}").into(),
            Self::Answer { turn } => format!("answer:{turn}").into(),
            Self::Attach { turn } => format!("attach:{turn}").into(),
            Self::AttachNow { turn, at } => format!("attach:{turn}:{at}").into(),
            Self::AttachOf { identity, at } => format!("attach:{identity}:{at}").into(),
            Self::AttachInterrupted { turn } => format!("attach:{turn}:interrupted").into(),
            Self::Commentary { turn, at } => format!("commentary:{turn}:{at}").into(),
            Self::Local { identity, at } => format!("local:{identity}:{at}").into(),
            Self::Message { identity, at } => format!("message:{identity}:{at}").into(),
            Self::Piece { of, n } => format!("{}:{n}", of.text()).into(),
            Self::Other(text) => text.clone().into(),
            unit => unit.unit_text().unwrap_or_default().into(),
        }
    }

    /// From its stored text; a text this release does not write is [`Purpose::Other`], so
    /// every text reads back as it was written.
    pub fn parse(text: &str) -> Self {
        let parsed = Self::unit(text)
            .or_else(|| Self::with_fields(text))
            .or_else(|| {
                let (of, n) = text.rsplit_once(':')?;
                Some(Self::base(of)?.piece(n.parse().ok()?))
            });
        // Only a parse that writes the same text back counts (`control:007` is no text this
        // release writes).
        match parsed {
            Some(p) if p.text() == text => p,
            _ => Self::Other(text.to_owned()),
        }
    }

    /// A variant with fields that is written whole (not in pieces).
    fn with_fields(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(':')?;
        Some(match kind {
            "tools" => match rest.strip_suffix(":last") {
                Some(turn) => Self::ToolsLast { turn: num(turn)? },
                None => {
                    let (turn, at) = two(rest)?;
                    Self::Tools { turn, at }
                }
            },
            "thinking" => {
                let (turn, at) = two(rest)?;
                Self::Thinking { turn, at }
            }
            "voice" => {
                let (turn, n) = rest.split_once(':')?;
                Self::Voice {
                    turn: num(turn)?,
                    n: n.parse().ok()?,
                }
            }
            "control" => Self::Control { id: num(rest)? },
            "stale" => {
                let (question, at) = two(rest)?;
                Self::Stale { question, at }
            }
            "dialog" => {
                let (id, at) = two(rest)?;
                Self::Dialog { id, at }
            }
            "compaction" => {
                let (identity, at) = named(rest)?;
                Self::Compaction { identity, at }
            }
            "file" => Self::File { id: num(rest)? },
            "file-late" => Self::FileLate { id: num(rest)? },
            "transcript" => Self::Transcript { id: num(rest)? },
            "commands" => Self::Commands {
                generation: num(rest)?,
            },
            "skipped" => Self::Skipped { turn: num(rest)? },
            "voice-late" => Self::VoiceLate { row: num(rest)? },
            "pin" => {
                let (chat, message) = two(rest)?;
                Self::Pin { chat, message }
            }
            "unpin" => {
                let (chat, message) = two(rest)?;
                Self::Unpin { chat, message }
            }
            "notice" => Self::notice(rest)?,
            _ => return None,
        })
    }

    fn notice(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(':')?;
        Some(match kind {
            "connected" => Self::NoticeConnected {
                instance: rest.to_owned(),
            },
            "gone" => Self::NoticeGone {
                key: rest.to_owned(),
            },
            "intent" => Self::NoticeIntent { id: num(rest)? },
            "again" => Self::NoticeAgain { turn: num(rest)? },
            "interrupted" => Self::NoticeInterrupted { turn: num(rest)? },
            "mode" => Self::NoticeMode { at: num(rest)? },
            "noslot" => Self::NoticeNoSlot { at: num(rest)? },
            "refused" => Self::NoticeRefused { at: num(rest)? },
            "back" => Self::NoticeBack { at: num(rest)? },
            "retention" => Self::NoticeRetention { at: num(rest)? },
            "restored" => Self::NoticeRestored { at: num(rest)? },
            "moved" => {
                let (identity, thread) = named(rest)?;
                Self::NoticeMoved { identity, thread }
            }
            "thread" => {
                let (instance, thread) = named(rest)?;
                Self::NoticeThread { instance, thread }
            }
            _ => return None,
        })
    }

    /// A variant written in pieces, without its piece.
    fn base(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(':')?;
        Some(match kind {
            "answer" => Self::Answer { turn: num(rest)? },
            "attach" => {
                if let Some(turn) = rest.strip_suffix(":interrupted") {
                    Self::AttachInterrupted { turn: num(turn)? }
                } else if let Some(turn) = num(rest) {
                    Self::Attach { turn }
                } else {
                    let (who, at) = named(rest)?;
                    match num(&who) {
                        Some(turn) => Self::AttachNow { turn, at },
                        None => Self::AttachOf { identity: who, at },
                    }
                }
            }
            "commentary" => {
                let (turn, at) = two(rest)?;
                Self::Commentary { turn, at }
            }
            "local" => {
                let (identity, at) = named(rest)?;
                Self::Local { identity, at }
            }
            "message" => {
                let (identity, at) = named(rest)?;
                Self::Message { identity, at }
            }
            _ => return None,
        })
    }
}

fn num(text: &str) -> Option<i64> {
    text.parse().ok()
}

/// `<n>:<m>`.
fn two(text: &str) -> Option<(i64, i64)> {
    let (a, b) = text.split_once(':')?;
    Some((num(a)?, num(b)?))
}

/// `<name>:<n>`, the name being anything (an identity may hold a `:`).
fn named(text: &str) -> Option<(String, i64)> {
    let (name, n) = text.rsplit_once(':')?;
    Some((name.to_owned(), num(n)?))
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// A message to send.
#[derive(Debug, Clone)]
pub struct NewRow<'a> {
    /// Target chat.
    pub chat_id: i64,
    /// Target topic.
    pub thread_id: Option<i64>,
    /// What it sends: the delivery plan (see [`single`] for one message).
    pub delivery: &'a Value,
    /// Why it is sent.
    pub purpose: &'a Purpose,
    /// The update that caused it; with `purpose`, at most one row per cause.
    pub source_update_id: Option<i64>,
    /// When the outcome of a send is unknown (a crash mid-send, a lost answer), send it again
    /// rather than risk losing it. Only for content that must arrive: final answers, and the
    /// hub's texts that are the only trace of a person's message (an interrupted turn's
    /// notice, a skipped prompt, the question a waiting message needs answered).
    pub resend_if_unknown: bool,
    /// The instance identity the message speaks for (replies to it route there).
    pub identity: Option<&'a str>,
    /// The turn it answers.
    pub turn_id: Option<i64>,
}

/// A stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    /// Id (also the send order).
    pub id: i64,
    /// Target chat.
    pub chat_id: i64,
    /// Target topic.
    pub thread_id: Option<i64>,
    /// What it sends, as stored: the delivery plan.
    pub delivery: Value,
    /// Purpose.
    pub purpose: Purpose,
    /// Cause.
    pub source_update_id: Option<i64>,
    /// Resend when the outcome is unknown.
    pub resend_if_unknown: bool,
    /// State.
    pub state: State,
    /// Send attempts so far.
    pub attempts: i64,
    /// Not before this time.
    pub not_before_ms: i64,
    /// `message_id` Telegram gave it.
    pub sent_message_id: Option<i64>,
    /// Last error text.
    pub last_error: Option<String>,
    /// What was done about an unknown or failed outcome.
    pub handling: Option<String>,
    /// The instance identity it speaks for.
    pub identity: Option<String>,
    /// The turn it answers.
    pub turn_id: Option<i64>,
    /// How often it was sent again after an unknown outcome (each a possible duplicate).
    pub resent: i64,
}

const COLUMNS: &str =
    "id, chat_id, thread_id, delivery, purpose, source_update_id, resend_if_unknown,
    state, attempts, not_before_ms, sent_message_id, last_error, handling, identity, turn_id,
    resent";

type Raw = (OutboxRow, String);

fn from_row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    let delivery: String = r.get(3)?;
    Ok((
        OutboxRow {
            id: r.get(0)?,
            chat_id: r.get(1)?,
            thread_id: r.get(2)?,
            delivery: Value::Null,
            purpose: r.get(4)?,
            source_update_id: r.get(5)?,
            resend_if_unknown: r.get::<_, i64>(6)? != 0,
            state: r.get(7)?,
            attempts: r.get(8)?,
            not_before_ms: r.get(9)?,
            sent_message_id: r.get(10)?,
            last_error: r.get(11)?,
            handling: r.get(12)?,
            identity: r.get(13)?,
            turn_id: r.get(14)?,
            resent: r.get(15)?,
        },
        delivery,
    ))
}

fn finish((mut row, delivery): Raw) -> Result<OutboxRow> {
    row.delivery = serde_json::from_str(&delivery).map_err(|e| {
        StoreError::Corrupt(format!("outbox row {} has a bad delivery: {e}", row.id))
    })?;
    Ok(row)
}

impl OutboxRow {
    /// The message to send now as stored (`Null` when the plan points at none).
    pub fn params(&self) -> &Value {
        current_of(&self.delivery).unwrap_or(&Value::Null)
    }

    /// The method of the message to send now (empty when the plan points at none).
    pub fn method(&self) -> &str {
        self.params()
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// The message a delivery plan sends now: `alternatives[alt].messages[part]`.
fn current_of(delivery: &Value) -> Option<&Value> {
    let at = |k: &str| delivery.get(k).and_then(Value::as_u64);
    let (alt, part) = (at("alt")?, at("part")?);
    delivery
        .get("alternatives")?
        .get(usize::try_from(alt).ok()?)?
        .get("messages")?
        .get(usize::try_from(part).ok()?)
}

/// The delivery of a row that sends one message: `params` (a JSON object) with `method`.
/// The hub writes the same shape from its own types; tests and tools use this.
pub fn single(method: &str, params: &Value) -> Value {
    let mut message = params.clone();
    if let Some(o) = message.as_object_mut() {
        o.insert("method".into(), Value::String(method.to_owned()));
    }
    serde_json::json!({
        "alternatives": [{ "name": "message", "messages": [message] }],
        "alt": 0,
        "part": 0,
    })
}

/// The SQL path of a row's current message in its `delivery` (see [`current_of`]).
const CURRENT: &str = "printf('$.alternatives[%d].messages[%d]', json_extract(delivery, '$.alt'),
                               json_extract(delivery, '$.part'))";

/// Rows selected by `filter` (the part after `FROM outbox o`), decoded.
fn select(conn: &Connection, filter: &str, args: impl rusqlite::Params) -> Result<Vec<OutboxRow>> {
    let ctx = "reading the outbox";
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM outbox o {filter}"))
        .map_err(StoreError::sqlite(ctx))?;
    let rows = stmt
        .query_map(args, from_row)
        .map_err(StoreError::sqlite(ctx))?;
    rows.map(|r| r.map_err(StoreError::sqlite(ctx)).and_then(finish))
        .collect()
}

/// Queues a message. Returns its id, or `None` when a row for the same cause and purpose
/// exists already (the handler ran before; nothing is queued twice).
pub fn enqueue(conn: &Connection, row: &NewRow<'_>, now_ms: i64) -> Result<Option<i64>> {
    let n = conn
        .exec(
            "INSERT INTO outbox(created_ms, updated_ms, chat_id, thread_id, delivery, purpose,
                                source_update_id, resend_if_unknown, state, identity, turn_id)
             VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9)
             ON CONFLICT DO NOTHING",
            params![
                now_ms,
                row.chat_id,
                row.thread_id,
                row.delivery.to_string(),
                row.purpose,
                row.source_update_id,
                i64::from(row.resend_if_unknown),
                row.identity,
                row.turn_id,
            ],
        )
        .map_err(StoreError::sqlite("queueing a message"))?;
    Ok((n == 1).then(|| conn.last_insert_rowid()))
}

/// The rows of `purpose` queued without a cause (`source_update_id` null: the lookup is the
/// unique index `outbox_one_per_cause`'s), oldest first.
pub fn of_purpose(conn: &Connection, purpose: &Purpose) -> Result<Vec<OutboxRow>> {
    select(
        conn,
        "WHERE source_update_id IS NULL AND purpose = ?1 ORDER BY id",
        params![purpose],
    )
}

/// Whether a message is still on its way into topic `thread_id` of `chat_id` (pending or
/// being sent): a topic is not deleted under it.
pub fn on_its_way(conn: &Connection, chat_id: i64, thread_id: i64) -> Result<bool> {
    conn.row(
        "SELECT EXISTS(SELECT 1 FROM outbox WHERE state IN ('pending', 'sending')
             AND chat_id = ?1 AND thread_id = ?2)",
        params![chat_id, thread_id],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("reading the outbox of a topic"))
}

/// A row by id.
pub fn get(conn: &Connection, id: i64) -> Result<Option<OutboxRow>> {
    Ok(select(conn, "WHERE id = ?1", [id])?.pop())
}

/// Parks a pending row while what it sends is made beside its conversation (a voice message
/// from a text-to-speech command), until [`replan`] releases it. Unlike a row [`hold`] parks,
/// it keeps its conversation's later rows back only a little: none of the hub's own (replies,
/// menus, notices: no identity), and pi's output for [`MAKING_HOLDS_MS`] after it was queued.
/// So a slow or hung command never stalls the chat, and order holds whenever it is quick.
pub fn park_making(conn: &Connection, id: i64) -> Result<()> {
    hold(conn, id, PARKED, MAKING)
}

/// The `handling` of a row being made ([`park_making`]); [`parked_with`] finds them.
pub const MAKING: &str = "synthesizing a voice message";

/// How long a row being made ([`park_making`]) keeps pi's later output in its conversation
/// back. A spoken answer of a few sentences is made in a second or two by the usual local
/// engines and cloud voices, so this keeps the order pi wrote in whenever the voice is made
/// as usual; when it is not, the next answer is at most this late.
pub const MAKING_HOLDS_MS: i64 = 5_000;

/// `not_before_ms` of a parked row.
const PARKED: i64 = i64::MAX;

/// The next row of each conversation, if due at `now_ms`. Rows of one conversation (a chat's
/// main thread, or one topic) go out in order; conversations do not wait for each other, so a
/// topic whose rows are parked never holds up the main chat. A row being made
/// ([`park_making`]) is no head: the hub's own rows behind it go on, pi's after
/// [`MAKING_HOLDS_MS`], and it takes its place when it is released.
pub fn heads(conn: &Connection, now_ms: i64) -> Result<Vec<OutboxRow>> {
    // `state IN ('pending', 'sending')` is the partial index `outbox_open`'s own term: with it
    // the planner reads the open rows through that index instead of every row the outbox keeps.
    select(
        conn,
        &format!(
            "WHERE state IN ('pending', 'sending') AND state = 'pending' AND not_before_ms <= ?1
               AND {}
             ORDER BY id",
            heads_its_conversation()
        ),
        params![now_ms, MAKING_HOLDS_MS],
    )
}

/// The SQL condition that open row `o` heads its conversation at `?1` (ms; `?2` is
/// [`MAKING_HOLDS_MS`]): it is the oldest open row of its chat and topic, leaving out rows
/// being made and, for a row of the hub's own (no identity), pi's rows that one of them still
/// holds; and a row of pi's is not held by a row being made before it.
fn heads_its_conversation() -> String {
    let held = |x: &str| {
        format!(
            "EXISTS (SELECT 1 FROM outbox v WHERE v.chat_id = {x}.chat_id
                       AND v.thread_id IS {x}.thread_id AND v.state IN ('pending', 'sending')
                       AND {} AND v.id < {x}.id AND v.created_ms > ?1 - ?2)",
            making("v")
        )
    };
    format!(
        "o.id = (SELECT min(id) FROM outbox i WHERE i.chat_id = o.chat_id
                 AND i.thread_id IS o.thread_id AND i.state IN ('pending', 'sending')
                 AND NOT {making_i}
                 AND (o.identity IS NOT NULL OR i.identity IS NULL OR NOT {held_i}))
         AND (o.identity IS NULL OR NOT {held_o})",
        making_i = making("i"),
        held_i = held("i"),
        held_o = held("o"),
    )
}

/// The SQL condition that row `alias` is being made ([`park_making`]).
fn making(alias: &str) -> String {
    format!(
        "({alias}.state = 'pending' AND {alias}.not_before_ms = {PARKED}
          AND {alias}.handling = '{MAKING}')"
    )
}

/// The last row before `id` in its conversation (chat `chat_id`, topic `thread_id`) that is
/// `sending`, if any: none should be when `id` is claimed ([`heads`] keeps the order).
pub fn sending_before(
    conn: &Connection,
    chat_id: i64,
    thread_id: Option<i64>,
    id: i64,
) -> Result<Option<i64>> {
    // Through `outbox_open` (see [`heads`]).
    conn.row(
        "SELECT max(id) FROM outbox WHERE state IN ('pending', 'sending') AND state = 'sending'
           AND chat_id = ?1 AND thread_id IS ?2 AND id < ?3",
        params![chat_id, thread_id, id],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("reading the outbox"))
}

/// The earliest `not_before_ms` after `after_ms` of a row that [`heads`] can pick (the oldest
/// open row of its chat and topic), for sleeping until something is due. Rows due already are
/// the caller's (it saw them among the heads: sent, or held back by pacing, whose wait it
/// knows); a due row behind a head that waits is not due. Counting either made the sender wake
/// every millisecond (found by `crates/hub/tests/simulation.rs`).
///
/// The end of a [`park_making`] row's hold counts too (pi's rows behind it may go then).
pub fn next_due_ms(conn: &Connection, after_ms: i64) -> Result<Option<i64>> {
    // Through `outbox_open` (see [`heads`]).
    conn.row(
        &format!(
            "SELECT min(t) FROM (
               SELECT min(not_before_ms) AS t FROM outbox o WHERE state IN ('pending', 'sending')
                 AND state = 'pending' AND not_before_ms > ?1 AND {heads}
               UNION ALL
               SELECT min(v.created_ms + ?2) FROM outbox v
                 WHERE v.state IN ('pending', 'sending') AND {making_v}
                   AND v.created_ms + ?2 > ?1)",
            heads = heads_its_conversation(),
            making_v = making("v"),
        ),
        params![after_ms, MAKING_HOLDS_MS],
        |r| r.get(0),
    )
    .map_err(StoreError::sqlite("reading the outbox"))
}

fn transition(
    conn: &Connection,
    id: i64,
    from: State,
    sql_set: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<()> {
    let sql = format!(
        "UPDATE outbox SET {sql_set} WHERE id = ?1 AND state = '{}'",
        from.as_str()
    );
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id];
    all.extend_from_slice(args);
    let n = conn
        .exec(&sql, all.as_slice())
        .map_err(StoreError::sqlite("updating the outbox"))?;
    if n != 1 {
        return Err(StoreError::Corrupt(format!(
            "outbox row {id} is not {from}"
        )));
    }
    Ok(())
}

/// Holds a pending row until `not_before_ms` (a far future value parks it until released).
pub fn hold(conn: &Connection, id: i64, not_before_ms: i64, handling: &str) -> Result<()> {
    conn.exec(
        "UPDATE outbox SET not_before_ms = ?2, handling = ?3 WHERE id = ?1 AND state = 'pending'",
        params![id, not_before_ms, handling],
    )
    .map(drop)
    .map_err(StoreError::sqlite("holding an outbox row"))
}

/// `pending -> sending`, counting the attempt. Committed before the call is made.
pub fn mark_sending(conn: &Connection, id: i64, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Pending,
        "state = 'sending', attempts = attempts + 1, updated_ms = ?2",
        &[&now_ms],
    )
}

/// `sending -> sent`.
pub fn mark_sent(conn: &Connection, id: i64, message_id: Option<i64>, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'sent', sent_message_id = ?2, updated_ms = ?3",
        &[&message_id, &now_ms],
    )
}

/// `sending -> pending`, now, addressed to the main chat instead of its topic (the person
/// closed the topic: the message must still arrive).
pub fn move_to_main_chat(conn: &Connection, id: i64, error: &str, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        &format!(
            "state = 'pending', not_before_ms = 0, thread_id = NULL,
             delivery = json_remove(delivery, {CURRENT} || '.message_thread_id',
                                    {CURRENT} || '.reply_parameters'),
             last_error = ?2, handling = 'sent to the main chat: its topic is closed', updated_ms = ?3"
        ),
        &[&error, &now_ms],
    )
}

/// `sending -> pending` to try again at `not_before_ms`.
pub fn mark_retry(
    conn: &Connection,
    id: i64,
    not_before_ms: i64,
    error: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'pending', not_before_ms = ?2, last_error = ?3, updated_ms = ?4",
        &[&not_before_ms, &error, &now_ms],
    )
}

/// `sending -> pending` with the next message of its plan (the next part, or the first of the
/// next alternative after a refusal), sent at once: `delivery` points at it. One row stays one
/// place in its conversation's order, however many messages it becomes.
pub fn advance(
    conn: &Connection,
    id: i64,
    delivery: &Value,
    handling: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'pending', not_before_ms = 0, delivery = ?2,
         handling = coalesce(?3, handling), updated_ms = ?4",
        &[&delivery.to_string(), &handling, &now_ms],
    )
}

/// `sending -> pending` after an unknown outcome, for a row that must arrive: it is sent again at
/// `not_before_ms` and, when it is a message a person sees (not a bot-wide call of chat 0, a
/// command list), counted as a possible duplicate.
pub fn mark_resend(
    conn: &Connection,
    id: i64,
    not_before_ms: i64,
    error: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'pending', not_before_ms = ?2, last_error = ?3, updated_ms = ?4,
         resent = resent + (chat_id <> 0), handling = 'sent again: the outcome of a send was unknown',
         delivery = json_set(delivery, '$.repeat', json_extract(delivery, '$.part'))",
        &[&not_before_ms, &error, &now_ms],
    )
}

/// How many copies a person may see twice were sent again after an unknown outcome, in all
/// (pruned rows included). A bot-wide call sent again (chat 0: `setMyCommands`) shows the
/// person nothing twice and is not counted.
pub fn resent_total(conn: &Connection) -> Result<i64> {
    let here: i64 = conn
        .row("SELECT coalesce(sum(resent), 0) FROM outbox", [], |r| {
            r.get(0)
        })
        .map_err(StoreError::sqlite("counting resent messages"))?;
    Ok(here + crate::retention::pruned(conn, "outbox", "resent")?)
}

/// `sending -> ambiguous`: the outcome is unknown and the row is not repeated.
pub fn mark_ambiguous(
    conn: &Connection,
    id: i64,
    error: &str,
    handling: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'ambiguous', last_error = ?2, handling = ?3, updated_ms = ?4",
        &[&error, &handling, &now_ms],
    )
}

/// `sending -> failed`: Telegram refused it for good.
pub fn mark_failed(
    conn: &Connection,
    id: i64,
    error: &str,
    handling: &str,
    now_ms: i64,
) -> Result<()> {
    transition(
        conn,
        id,
        State::Sending,
        "state = 'failed', last_error = ?2, handling = ?3, updated_ms = ?4",
        &[&error, &handling, &now_ms],
    )
}

/// `pending -> failed` without a call: what it would do is no longer wanted (a pin of a
/// question settled before it was pinned).
pub fn drop_pending(conn: &Connection, id: i64, handling: &str, now_ms: i64) -> Result<()> {
    transition(
        conn,
        id,
        State::Pending,
        "state = 'failed', handling = ?2, updated_ms = ?3",
        &[&handling, &now_ms],
    )
}

/// After a restart: rows left `sending` by a crash have an unknown outcome. Rows that must
/// arrive go back to `pending` (a possible duplicate is the lesser evil); the others become
/// `ambiguous`. Returns `(resent, ambiguous)` counts; `resent` counts the messages a person may
/// see twice, not bot-wide calls (chat 0: the command list), which are sent again uncounted.
pub fn recover_interrupted(conn: &Connection, now_ms: i64) -> Result<(usize, usize)> {
    let resent: i64 = conn
        .row(
            "SELECT count(*) FROM outbox
             WHERE state = 'sending' AND resend_if_unknown = 1 AND chat_id <> 0",
            [],
            |r| r.get(0),
        )
        .map_err(StoreError::sqlite("recovering the outbox"))?;
    conn.exec(
        "UPDATE outbox SET state = 'pending', handling = 'resent: the hub stopped during the send',
                resent = resent + (chat_id <> 0), updated_ms = ?1,
                delivery = json_set(delivery, '$.repeat', json_extract(delivery, '$.part'))
         WHERE state = 'sending' AND resend_if_unknown = 1",
        [now_ms],
    )
    .map_err(StoreError::sqlite("recovering the outbox"))?;
    let resent = usize::try_from(resent).unwrap_or(0);
    let ambiguous = conn
        .exec(
            "UPDATE outbox SET state = 'ambiguous',
                    handling = 'not resent: the hub stopped during the send, it may have arrived',
                    updated_ms = ?1 WHERE state = 'sending'",
            [now_ms],
        )
        .map_err(StoreError::sqlite("recovering the outbox"))?;
    Ok((resent, ambiguous))
}

/// Rows per state (every state present, zero included); `sent` and `failed` include the rows
/// retention pruned since.
pub fn counts(conn: &Connection) -> Result<BTreeMap<State, i64>> {
    let mut out: BTreeMap<State, i64> = State::ALL.iter().map(|s| (*s, 0)).collect();
    let mut stmt = conn
        .prepare_cached("SELECT state, count(*) FROM outbox GROUP BY state")
        .map_err(StoreError::sqlite("counting the outbox"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(StoreError::sqlite("counting the outbox"))?;
    for row in rows {
        let (state, n) = row.map_err(StoreError::sqlite("counting the outbox"))?;
        out.insert(State::parse(&state)?, n);
    }
    for state in [State::Sent, State::Failed] {
        let pruned = crate::retention::pruned(conn, "outbox", state.as_str())?;
        *out.entry(state).or_default() += pruned;
    }
    Ok(out)
}

/// Every row (tests and status; the outbox of a hub is small).
pub fn all(conn: &Connection) -> Result<Vec<OutboxRow>> {
    select(conn, "ORDER BY id", [])
}

/// Pending rows parked (see [`hold`]) with `handling`, oldest first.
pub fn parked_with(conn: &Connection, handling: &str) -> Result<Vec<OutboxRow>> {
    // The open rows only, through `outbox_open` (see [`heads`]).
    select(
        conn,
        "WHERE state IN ('pending', 'sending') AND state = 'pending'
           AND not_before_ms = 9223372036854775807 AND handling = ?1
         ORDER BY id",
        [handling],
    )
}

/// Gives a row no send was ever tried on another delivery. `false` when one was tried (it may
/// have arrived) or it is gone. The sender marks a row `sending` in the transaction that picks
/// it, so a pending row is never in flight.
pub fn rewrite_pending(conn: &Connection, id: i64, delivery: &Value) -> Result<bool> {
    conn.exec(
        "UPDATE outbox SET delivery = ?2 WHERE id = ?1 AND state = 'pending' AND attempts = 0",
        params![id, delivery.to_string()],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("rewriting an outbox row"))
}

/// A parked row gets what it is sent as now (its delivery) and is released.
pub fn replan(
    conn: &Connection,
    id: i64,
    delivery: &Value,
    handling: &str,
    now_ms: i64,
) -> Result<bool> {
    conn.exec(
        "UPDATE outbox SET not_before_ms = 0, delivery = ?2, handling = ?3, updated_ms = ?4
         WHERE id = ?1 AND state = 'pending'",
        params![id, delivery.to_string(), handling, now_ms],
    )
    .map(|n| n == 1)
    .map_err(StoreError::sqlite("replanning an outbox row"))
}

/// Rows of `identity` in `chat` that wait (`not_before_ms = waiting_ms`) for a new topic go to
/// topic `thread` now, their current message with them.
pub fn retarget_waiting(
    conn: &Connection,
    identity: &str,
    chat: i64,
    thread: i64,
    waiting_ms: i64,
) -> Result<usize> {
    conn.exec(
        &format!(
            "UPDATE outbox SET thread_id = ?3,
                    delivery = json_set(delivery, {CURRENT} || '.message_thread_id', ?3),
                    not_before_ms = 0, handling = 'delivered to the new thread'
             WHERE state = 'pending' AND identity = ?1 AND chat_id = ?2 AND not_before_ms = ?4"
        ),
        params![identity, chat, thread, waiting_ms],
    )
    .map_err(StoreError::sqlite("retargeting waiting messages"))
}

#[cfg(test)]
mod tests {
    use super::Purpose;

    #[test]
    fn every_purpose_reads_back_as_written() {
        let answer = Purpose::Answer { turn: 7 };
        let mut written: Vec<Purpose> = Purpose::UNITS.to_vec();
        written.extend([
            Purpose::Tools { turn: 7, at: 1_700 },
            Purpose::ToolsLast { turn: 7 },
            Purpose::Thinking { turn: 7, at: 1_700 },
            Purpose::Voice { turn: 7, n: 1 },
            Purpose::Control { id: 3 },
            Purpose::Stale {
                question: 3,
                at: 1_700,
            },
            Purpose::Dialog { id: 3, at: 1_700 },
            Purpose::Compaction {
                identity: "pi:a".into(),
                at: 1_700,
            },
            Purpose::NoticeRetention { at: 1_700 },
            Purpose::File { id: 3 },
            Purpose::FileLate { id: 3 },
            Purpose::Transcript { id: 3 },
            Purpose::Commands { generation: 2 },
            Purpose::Skipped { turn: 7 },
            Purpose::VoiceLate { row: 12 },
            Purpose::NoticeConnected {
                instance: "i-1".into(),
            },
            Purpose::NoticeGone {
                key: "i-1:exit".into(),
            },
            Purpose::NoticeIntent { id: 4 },
            Purpose::NoticeAgain { turn: 7 },
            Purpose::NoticeInterrupted { turn: 7 },
            Purpose::NoticeMode { at: 1_700 },
            Purpose::NoticeMoved {
                identity: "pi:a".into(),
                thread: 9,
            },
            Purpose::NoticeNoSlot { at: 1_700 },
            Purpose::Pin {
                chat: -100_123,
                message: 5,
            },
            Purpose::Unpin {
                chat: 9,
                message: 5,
            },
            Purpose::NoticeRefused { at: 1_700 },
            Purpose::NoticeBack { at: 1_700 },
            Purpose::NoticeRestored { at: 1_700 },
            Purpose::NoticeThread {
                instance: "i-1".into(),
                thread: 9,
            },
            answer.piece(0),
            Purpose::Attach { turn: 7 }.piece(1),
            Purpose::AttachNow { turn: 7, at: 1_700 }.piece(0),
            Purpose::AttachOf {
                identity: "pi:a".into(),
                at: 1_700,
            }
            .piece(0),
            Purpose::AttachInterrupted { turn: 7 }.piece(2),
            Purpose::Commentary { turn: 7, at: 1_700 }.piece(0),
            Purpose::Local {
                identity: "pi:a".into(),
                at: 1_700,
            }
            .piece(3),
            Purpose::Message {
                identity: "pi:a".into(),
                at: 1_700,
            }
            .piece(0),
        ]);
        for p in &written {
            let text = p.to_string();
            assert_eq!(&Purpose::parse(&text), p, "{text}");
        }
        assert_eq!(answer.piece(0).to_string(), "answer:7:0");
        assert_eq!(Purpose::ReplyMenuHelp.to_string(), "reply:menu:Help");
        // Texts of older hubs, and ones no parse writes back the same, stay as they are.
        for text in [
            "reply:help",
            "answer:7",
            "control:007",
            "tools:7:last:0",
            "",
        ] {
            assert_eq!(Purpose::parse(text), Purpose::Other(text.into()), "{text}");
            assert_eq!(Purpose::parse(text).to_string(), text);
        }
    }
}
