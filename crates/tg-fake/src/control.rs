//! The control side: act as the person, read what the person sees, inspect requests, inject
//! faults, move the clock, reset. [`Control`] is the in-process handle; [`routes`] serves the
//! same operations under `/__control/` for scripts outside the project.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tg_model::{entities, rich};

use crate::api::media::guess_mime;
use crate::api::topics;
use crate::config::DEFAULT_USER_ID;
use crate::faults::{FaultRule, FaultSpec};
use crate::flood::{FloodConfig, Scope};
use crate::log::RequestEntry;
use crate::shared::Shared;
use crate::world::{
    ActionEvent, CallbackAnswer, Chat, DraftEvent, MediaKind, Message, Sender, Topic, TopicState,
    World,
};

/// Drafts disappear from the chat this long after their last update.
pub const DRAFT_LIFETIME_MS: u64 = 30_000;
/// A chat action shows this long unless a message ends it.
pub const ACTION_LIFETIME_MS: u64 = 5_000;

/// Why a control call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ControlError {
    /// HTTP status for the control API.
    pub status: u16,
    /// What went wrong.
    pub message: String,
}

impl ControlError {
    fn bad(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            message: message.into(),
        }
    }
    fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: 404,
            message: message.into(),
        }
    }
    fn conflict(message: impl Into<String>) -> Self {
        Self {
            status: 409,
            message: message.into(),
        }
    }
}

impl IntoResponse for ControlError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(json!({ "error": self.message }))).into_response()
    }
}

/// Result of a control call.
pub type ControlResult<T> = Result<T, ControlError>;

/// The person sends a text message (a command when it starts with `/`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SendText {
    pub text: String,
    /// Topic to send in; none for the main chat.
    #[serde(default)]
    pub thread_id: Option<i64>,
    /// Sender; default the configured person (1001). An unknown id creates a new person.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Message replied to.
    #[serde(default)]
    pub reply_to_message_id: Option<i64>,
    /// Explicit entities; by default Telegram's automatic detection runs (commands, URLs, ...).
    #[serde(default)]
    pub entities: Option<Value>,
    /// Make it a forwarded message.
    #[serde(default)]
    pub forward: Option<Forward>,
    /// Bot token; default the first bot.
    #[serde(default)]
    pub token: Option<String>,
    /// When the person wrote it (Unix seconds; default now): a message written while the bot's
    /// hub was away reaches it with its own, earlier date.
    #[serde(default)]
    pub date: Option<i64>,
    /// A group to write in (a member's message there); none for the sender's private chat.
    #[serde(default)]
    pub chat_id: Option<i64>,
    /// In a group: sent by an admin who remains anonymous (`sender_chat` is the group).
    #[serde(default)]
    pub anonymous: bool,
}

/// The bot is added to a supergroup.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NewGroup {
    /// Its chat id (negative, as Telegram's: `-100…`).
    pub chat_id: i64,
    pub title: String,
    /// A forum: topics instead of one thread.
    #[serde(default)]
    pub forum: bool,
    /// Its members besides the bot (people, by user id; new ones are created).
    #[serde(default)]
    pub members: Vec<i64>,
    /// The bot is an administrator.
    #[serde(default)]
    pub bot_admin: bool,
    /// The bot's right to manage topics.
    #[serde(default)]
    pub can_manage_topics: bool,
    /// Who added the bot (default the configured person).
    #[serde(default)]
    pub added_by: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
}

/// Where a forwarded message came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Forward {
    /// Original sender, a known or new person.
    #[serde(default)]
    pub from_user_id: Option<i64>,
    /// Original sender who hides their account.
    #[serde(default)]
    pub sender_name: Option<String>,
    /// Original date (default now).
    #[serde(default)]
    pub date: Option<i64>,
}

/// A message the person sent, as the control API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// The update created, if `allowed_updates` let it be created.
    pub update_id: Option<i64>,
    /// The message id in the chat.
    pub message_id: i64,
    pub chat_id: i64,
}

/// A file the person sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MediaItem {
    /// photo, document, voice, audio, video, animation.
    pub kind: MediaKind,
    /// Content, base64.
    pub data_base64: String,
    /// File name.
    #[serde(default)]
    pub filename: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
}

/// The person sends a file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendMedia {
    /// The file.
    #[serde(flatten)]
    pub item: MediaItem,
    /// Topic.
    #[serde(default)]
    pub thread_id: Option<i64>,
    /// Sender.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Message replied to.
    #[serde(default)]
    pub reply_to_message_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
    /// A group to send it in; none for the sender's private chat.
    #[serde(default)]
    pub chat_id: Option<i64>,
}

/// The person sends an album: several files in one media group, one update each.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendMediaGroup {
    /// The files (2-10).
    pub items: Vec<MediaItem>,
    /// Topic.
    #[serde(default)]
    pub thread_id: Option<i64>,
    /// Sender.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
}

/// The person edits one of their messages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EditText {
    /// Their message.
    pub message_id: i64,
    /// New text.
    pub text: String,
    /// Sender.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
}

/// The person presses an inline button.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Press {
    /// Message carrying the button.
    pub message_id: i64,
    /// The button's `callback_data`.
    pub data: String,
    /// Presser.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
    /// The group the message is in; none for the presser's private chat.
    #[serde(default)]
    pub chat_id: Option<i64>,
}

/// Result of a button press.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pressed {
    /// The update created, if allowed.
    pub update_id: Option<i64>,
    /// The callback query id to answer.
    pub callback_query_id: String,
}

/// The person sets (or clears, with no emoji) a reaction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct React {
    /// Message reacted to.
    pub message_id: i64,
    /// Emoji; none or empty clears.
    #[serde(default)]
    pub emoji: Option<String>,
    /// Who reacts.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
}

/// The person creates a topic in the Telegram UI.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    /// Creator.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
}

/// A topic the person created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedTopic {
    /// Its `message_thread_id`.
    pub thread_id: i64,
    /// The update carrying its `forum_topic_created` message, if allowed.
    pub update_id: Option<i64>,
}

/// Runtime settings to change; absent fields stay.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SettingsChange {
    /// Threaded Mode (`getMe.has_topics_enabled`).
    #[serde(default)]
    pub has_topics_enabled: Option<bool>,
    /// `getMe.allows_users_to_create_topics`.
    #[serde(default)]
    pub allows_users_to_create_topics: Option<bool>,
    /// Strict parameter checking.
    #[serde(default)]
    pub strict: Option<bool>,
    /// The flood model.
    #[serde(default)]
    pub flood: Option<FloodConfig>,
    /// Bot token (topic settings are per bot).
    #[serde(default)]
    pub token: Option<String>,
}

/// The person blocks or unblocks the bot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Block {
    /// Blocked or not.
    pub blocked: bool,
    /// Who.
    #[serde(default)]
    pub user_id: Option<i64>,
    /// Bot token.
    #[serde(default)]
    pub token: Option<String>,
}

/// A file as the transcript shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaView {
    pub kind: MediaKind,
    /// `file_id`.
    pub file_id: String,
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    /// Size in bytes.
    pub size: usize,
}

/// One message as the person sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    pub message_id: i64,
    /// Sent by the bot (else by a person).
    pub from_bot: bool,
    /// Topic, or none for the main chat.
    pub thread_id: Option<i64>,
    /// What reads as text: the text, the caption, or a rich message's plain text.
    pub text: Option<String>,
    /// Entities of `text` (text messages) or of the caption.
    pub entities: Vec<Value>,
    /// `RichMessage` for rich messages.
    pub rich: Option<Value>,
    /// Inline keyboard.
    pub reply_markup: Option<Value>,
    /// Deleted (still listed so tests can see deletions).
    pub deleted: bool,
    /// Edited at least once.
    pub edited: bool,
    /// Unix time.
    pub date: i64,
    /// Attached file.
    pub media: Option<MediaView>,
    /// Replied message.
    pub reply_to_message_id: Option<i64>,
    /// Service message kind (`forum_topic_created`, ...).
    pub service: Option<String>,
    /// Album.
    pub media_group_id: Option<String>,
    pub forwarded: bool,
    /// Reactions the bot set.
    pub bot_reactions: Vec<Value>,
    /// Pinned now.
    #[serde(default)]
    pub pinned: bool,
    /// Earlier versions, oldest first.
    pub history: Vec<Value>,
}

/// A draft with whether it is on screen now.
#[derive(Debug, Clone, Serialize)]
pub struct DraftView {
    #[serde(flatten)]
    pub draft: DraftEvent,
    /// The latest state of its `draft_id`, younger than 30 s, and no bot message in its thread
    /// since.
    pub visible: bool,
}

/// A chat action with whether the indicator shows now.
#[derive(Debug, Clone, Serialize)]
pub struct ActionView {
    #[serde(flatten)]
    pub action: ActionEvent,
    /// Younger than 5 s and no bot message in its thread since.
    pub visible: bool,
}

/// Everything the person sees in one chat.
#[derive(Debug, Clone, Serialize)]
pub struct ChatView {
    pub chat_id: i64,
    pub messages: Vec<TranscriptEntry>,
    /// Drafts streamed.
    pub drafts: Vec<DraftView>,
    pub chat_actions: Vec<ActionView>,
    /// Callback answers (toasts and alerts).
    pub callback_answers: Vec<CallbackAnswer>,
    pub topics: Vec<Topic>,
    /// The person blocked the bot.
    pub blocked: bool,
}

/// A file the bot uploaded, for inspection.
#[derive(Debug, Clone, Serialize)]
pub struct UploadView {
    /// `file_id`.
    pub file_id: String,
    pub kind: MediaKind,
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    pub size: usize,
    /// Uploaded by the bot (else sent by a person).
    pub from_bot: bool,
}

/// In-process control handle (cheap to clone).
#[derive(Debug, Clone)]
pub struct Control {
    shared: Arc<Shared>,
}

fn bot_of(w: &World, token: Option<&str>) -> ControlResult<usize> {
    match token {
        None => Ok(0),
        Some(t) => w
            .bot_index(t)
            .ok_or_else(|| ControlError::not_found("no bot with that token")),
    }
}

fn decode(data: &str) -> ControlResult<bytes::Bytes> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map(bytes::Bytes::from)
        .map_err(|e| ControlError::bad(format!("data_base64 is not base64: {e}")))
}

/// Checks that a person may post to `thread` (none: main chat).
fn check_person_thread(w: &World, bot: usize, chat: i64, thread: Option<i64>) -> ControlResult<()> {
    let Some(t) = thread.filter(|t| *t != 0) else {
        return Ok(());
    };
    let b = &w.bots[bot];
    if !b.chats.get(&chat).is_some_and(|c| c.has_topics(b)) {
        return Err(ControlError::conflict("Threaded Mode is off for this bot"));
    }
    match b
        .chats
        .get(&chat)
        .and_then(|c| c.topics.get(&t))
        .map(|t| t.state)
    {
        Some(TopicState::Open) => Ok(()),
        Some(TopicState::Closed) => Err(ControlError::conflict("the topic is closed")),
        Some(TopicState::Deleted) => Err(ControlError::not_found("the topic was deleted")),
        None => Err(ControlError::not_found("no such topic")),
    }
}

/// Stores a person's message and queues its `message` update.
fn person_message(w: &mut World, bot: usize, uid: i64, msg: Message) -> ControlResult<Sent> {
    message_in(w, bot, uid, uid, msg)
}

/// Stores `uid`'s message in `chat` (their private chat, or a group they are in) and queues
/// its `message` update.
fn message_in(
    w: &mut World,
    bot: usize,
    uid: i64,
    chat: i64,
    mut msg: Message,
) -> ControlResult<Sent> {
    w.person(uid);
    if chat != uid {
        let member = w.bots[bot]
            .chats
            .get(&chat)
            .and_then(|c| c.group.as_ref())
            .map(|g| g.members.contains(&uid));
        match member {
            None => return Err(ControlError::not_found("the bot is in no such group")),
            Some(false) => return Err(ControlError::conflict("that person is not in the group")),
            Some(true) => {}
        }
    }
    msg.thread_id = msg.thread_id.filter(|t| *t != 0);
    check_person_thread(w, bot, chat, msg.thread_id)?;
    if let Some(r) = msg.reply_to {
        let exists = w.bots[bot]
            .chats
            .get(&chat)
            .is_some_and(|c| c.live_message(r).is_some());
        if !exists {
            return Err(ControlError::not_found(
                "the message replied to does not exist",
            ));
        }
    }
    if !matches!(msg.sender, Some(Sender::Anonymous(_))) {
        msg.sender = Some(Sender::Person(uid));
    }
    let now = w.clock.now_unix();
    msg.date = if msg.date > 0 { msg.date.min(now) } else { now };
    msg.at_ms = w.clock.now_ms();
    let id = w.bots[bot].chat_mut(chat).add_message(msg);
    let payload = w.stored_message_json(bot, chat, id);
    let update_id = w.bots[bot].push_update("message", payload);
    Ok(Sent {
        update_id,
        message_id: id,
        chat_id: chat,
    })
}

fn transcript_entry(b: &crate::world::Bot, m: &Message) -> TranscriptEntry {
    let media = m.media.as_ref().map(|(kind, id)| {
        let f = b.file(id);
        MediaView {
            kind: *kind,
            file_id: id.clone(),
            file_name: f.and_then(|f| f.file_name.clone()),
            mime_type: f.and_then(|f| f.mime_type.clone()),
            size: f.map_or(0, |f| f.bytes.len()),
        }
    });
    let text = m
        .text
        .clone()
        .or_else(|| m.caption.clone())
        .or_else(|| m.rich.as_ref().map(rich::plain_text));
    let entities = if m.text.is_some() {
        m.entities.clone()
    } else {
        m.caption_entities.clone()
    };
    TranscriptEntry {
        message_id: m.id,
        from_bot: m.sender == Some(Sender::Bot),
        thread_id: m.thread_id,
        text,
        entities,
        rich: m.rich.clone(),
        reply_markup: m
            .reply_markup
            .clone()
            .filter(|r| r.get("inline_keyboard").is_some()),
        deleted: m.deleted,
        edited: m.edit_date.is_some(),
        date: m.date,
        media,
        reply_to_message_id: m.reply_to,
        service: m.service.as_ref().map(|(k, _)| k.clone()),
        media_group_id: m.media_group_id.clone(),
        forwarded: m.forward_origin.is_some(),
        bot_reactions: m.bot_reactions.clone(),
        pinned: m.pinned,
        history: m.history.clone(),
    }
}

/// Which messages a transcript shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadFilter {
    /// Every message.
    All,
    /// Only the main chat (no topic).
    Main,
    /// One topic.
    Thread(i64),
}

fn chat_view(c: &Chat, b: &crate::world::Bot, now_ms: u64) -> ChatView {
    let drafts =
        c.drafts
            .iter()
            .map(|d| {
                let superseded = c.drafts.iter().any(|o| {
                    o.seq > d.seq && o.draft_id == d.draft_id && o.thread_id == d.thread_id
                });
                let visible = !superseded
                    && d.at_ms + DRAFT_LIFETIME_MS > now_ms
                    && !c.bot_message_after(d.thread_id, d.seq);
                DraftView {
                    draft: d.clone(),
                    visible,
                }
            })
            .collect();
    let chat_actions = c
        .actions
        .iter()
        .map(|a| ActionView {
            action: a.clone(),
            visible: a.at_ms + ACTION_LIFETIME_MS > now_ms
                && !c.bot_message_after(a.thread_id, a.seq),
        })
        .collect();
    ChatView {
        chat_id: c.id,
        messages: c
            .messages
            .values()
            .map(|m| transcript_entry(b, m))
            .collect(),
        drafts,
        chat_actions,
        callback_answers: c.callback_answers.clone(),
        topics: c.topics.values().cloned().collect(),
        blocked: c.blocked,
    }
}

impl Control {
    /// A handle on `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// The person sends text.
    pub fn send_text(&self, req: SendText) -> ControlResult<Sent> {
        if req.text.trim().is_empty() {
            return Err(ControlError::bad("text is empty"));
        }
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        let entities = match &req.entities {
            Some(e) => {
                entities::validate(&req.text, e).map_err(|e| ControlError::bad(e.to_string()))?
            }
            None => entities::detect(&req.text),
        };
        let forward_origin = match &req.forward {
            None => None,
            Some(f) => {
                let date = f.date.unwrap_or_else(|| w.clock.now_unix());
                Some(match (f.from_user_id, &f.sender_name) {
                    (Some(id), _) => {
                        json!({ "type": "user", "date": date, "sender_user": w.person(id).user_json() })
                    }
                    (None, Some(name)) => {
                        json!({ "type": "hidden_user", "date": date, "sender_user_name": name })
                    }
                    (None, None) => {
                        return Err(ControlError::bad(
                            "forward needs from_user_id or sender_name",
                        ));
                    }
                })
            }
        };
        let chat = req.chat_id.unwrap_or(uid);
        if req.anonymous && chat == uid {
            return Err(ControlError::bad(
                "only a group's admin can write anonymously",
            ));
        }
        let msg = Message {
            thread_id: req.thread_id,
            text: Some(req.text),
            entities,
            reply_to: req.reply_to_message_id,
            forward_origin,
            date: req.date.unwrap_or_default(),
            sender: req.anonymous.then_some(Sender::Anonymous(uid)),
            ..Message::default()
        };
        message_in(&mut w, bot, uid, chat, msg)
    }

    /// The bot is removed from a group (kicked by an admin): it gets `my_chat_member`, and
    /// its calls to the group are refused from now on.
    pub fn remove_from_group(
        &self,
        chat_id: i64,
        token: Option<&str>,
    ) -> ControlResult<Option<i64>> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let chat_json = match w.bots[bot].chats.get(&chat_id) {
            Some(c) if c.group.is_some() && !c.blocked => w.chat_json(c),
            _ => return Err(ControlError::not_found("the bot is in no such group")),
        };
        let from = w.person(DEFAULT_USER_ID).user_json();
        let date = w.clock.now_unix();
        let b = &mut w.bots[bot];
        if let Some(c) = b.chats.get_mut(&chat_id) {
            c.blocked = true;
        }
        let me = b.user_json();
        Ok(b.push_update(
            "my_chat_member",
            json!({
                "chat": chat_json, "from": from, "date": date,
                "old_chat_member": { "status": "administrator", "user": me },
                "new_chat_member": { "status": "kicked", "user": me, "until_date": 0 },
            }),
        ))
    }

    /// The bot is added to a group: its chat exists from now on and the bot gets
    /// `my_chat_member` (from `left` to `administrator` or `member`).
    pub fn add_to_group(&self, req: NewGroup) -> ControlResult<Option<i64>> {
        if req.chat_id >= 0 {
            return Err(ControlError::bad("a group's chat id is negative"));
        }
        if req.title.trim().is_empty() {
            return Err(ControlError::bad("a group needs a title"));
        }
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        if w.bots[bot].chats.contains_key(&req.chat_id) {
            return Err(ControlError::conflict("the bot is in that group already"));
        }
        let by = req.added_by.unwrap_or(DEFAULT_USER_ID);
        let mut members: std::collections::BTreeSet<i64> = req.members.iter().copied().collect();
        members.insert(by);
        for m in &members {
            w.person(*m);
        }
        let group = crate::world::Group {
            title: req.title.clone(),
            forum: req.forum,
            members,
            bot_admin: req.bot_admin,
            bot_can_manage_topics: req.bot_admin && req.can_manage_topics,
        };
        let chat = crate::world::Chat::new_group(req.chat_id, group);
        let chat_json = w.chat_json(&chat);
        w.bots[bot].chats.insert(req.chat_id, chat);
        let from = w.person(by).user_json();
        let date = w.clock.now_unix();
        let b = &mut w.bots[bot];
        let me = b.user_json();
        let new_status = if req.bot_admin {
            json!({ "status": "administrator", "user": me, "can_manage_topics": req.can_manage_topics })
        } else {
            json!({ "status": "member", "user": me })
        };
        Ok(b.push_update(
            "my_chat_member",
            json!({
                "chat": chat_json, "from": from, "date": date,
                "old_chat_member": { "status": "left", "user": me },
                "new_chat_member": new_status,
            }),
        ))
    }

    fn media_message(
        w: &mut World,
        bot: usize,
        item: MediaItem,
        thread_id: Option<i64>,
        reply_to: Option<i64>,
        group: Option<String>,
    ) -> ControlResult<Message> {
        let bytes = decode(&item.data_base64)?;
        if bytes.is_empty() {
            return Err(ControlError::bad("a file must not be empty"));
        }
        let mime = item
            .mime_type
            .or_else(|| guess_mime(item.filename.as_deref(), item.kind));
        let file_id = w.bots[bot].store_file(item.kind, bytes, item.filename, mime, false);
        let caption = item.caption.filter(|c| !c.is_empty());
        let caption_entities = caption.as_deref().map(entities::detect).unwrap_or_default();
        Ok(Message {
            thread_id,
            media: Some((item.kind, file_id)),
            caption,
            caption_entities,
            reply_to,
            media_group_id: group,
            ..Message::default()
        })
    }

    /// The person sends a photo, document, voice note, ...
    pub fn send_media(&self, req: SendMedia) -> ControlResult<Sent> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        let chat = req.chat_id.unwrap_or(uid);
        check_person_thread(&w, bot, chat, req.thread_id)?;
        let msg = Self::media_message(
            &mut w,
            bot,
            req.item,
            req.thread_id,
            req.reply_to_message_id,
            None,
        )?;
        message_in(&mut w, bot, uid, chat, msg)
    }

    /// The person sends an album.
    pub fn send_media_group(&self, req: SendMediaGroup) -> ControlResult<Vec<Sent>> {
        if !(2..=10).contains(&req.items.len()) {
            return Err(ControlError::bad("a media group has 2-10 items"));
        }
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        check_person_thread(&w, bot, uid, req.thread_id)?;
        let group = w.bots[bot].new_media_group();
        let mut sent = Vec::new();
        for item in req.items {
            let msg =
                Self::media_message(&mut w, bot, item, req.thread_id, None, Some(group.clone()))?;
            sent.push(person_message(&mut w, bot, uid, msg)?);
        }
        Ok(sent)
    }

    /// The person edits their message; the bot gets `edited_message`.
    pub fn edit_text(&self, req: EditText) -> ControlResult<Sent> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        let now = w.clock.now_unix();
        let msg = w.bots[bot]
            .chats
            .get_mut(&uid)
            .and_then(|c| c.messages.get_mut(&req.message_id))
            .filter(|m| !m.deleted && m.sender == Some(Sender::Person(uid)) && m.text.is_some())
            .ok_or_else(|| {
                ControlError::not_found("no text message of this person with that id")
            })?;
        if msg.text.as_deref() == Some(req.text.as_str()) {
            return Err(ControlError::conflict("the text did not change"));
        }
        msg.history.push(json!({ "text": msg.text }));
        msg.entities = entities::detect(&req.text);
        msg.text = Some(req.text);
        msg.edit_date = Some(now);
        let payload = w.stored_message_json(bot, uid, req.message_id);
        let update_id = w.bots[bot].push_update("edited_message", payload);
        Ok(Sent {
            update_id,
            message_id: req.message_id,
            chat_id: uid,
        })
    }

    /// The person presses an inline button; the bot gets `callback_query`.
    pub fn press(&self, req: Press) -> ControlResult<Pressed> {
        self.press_as(req, false)
    }

    /// What a modified client can send: a `callback_query` with data no button carries, or a
    /// press on a message the presser cannot see (then the query carries Telegram's
    /// inaccessible-message form, `date` 0). For tests of forged and replayed button data.
    pub fn forge_press(&self, req: Press) -> ControlResult<Pressed> {
        self.press_as(req, true)
    }

    fn press_as(&self, req: Press, forged: bool) -> ControlResult<Pressed> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        let chat = req.chat_id.unwrap_or(uid);
        let has_button = w.bots[bot]
            .chats
            .get(&chat)
            .and_then(|c| c.live_message(req.message_id))
            .and_then(|m| m.reply_markup.as_ref())
            .and_then(|r| r.get("inline_keyboard"))
            .and_then(Value::as_array)
            .is_some_and(|rows| {
                rows.iter().filter_map(Value::as_array).flatten().any(|b| {
                    b.get("callback_data").and_then(Value::as_str) == Some(req.data.as_str())
                })
            });
        if !has_button && !forged {
            return Err(ControlError::not_found(
                "no live message with a button carrying that callback_data",
            ));
        }
        let from = w.person(uid).user_json();
        let message = match w.stored_message_json(bot, chat, req.message_id) {
            Value::Null => json!({
                "message_id": req.message_id,
                "chat": { "id": chat, "type": if chat == uid { "private" } else { "supergroup" } },
                "date": 0,
            }),
            m => m,
        };
        let b = &mut w.bots[bot];
        let id = b.new_callback(chat);
        let update_id = b.push_update(
            "callback_query",
            json!({
                "id": id,
                "from": from,
                "message": message,
                "chat_instance": format!("ci{}{}", b.id, uid),
                "data": req.data,
            }),
        );
        Ok(Pressed {
            update_id,
            callback_query_id: id,
        })
    }

    /// The person sets a reaction; the bot gets `message_reaction` if it asked for them.
    pub fn react(&self, req: React) -> ControlResult<Option<i64>> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        let user = w.person(uid).user_json();
        let chat = w.person(uid).chat_json();
        let date = w.clock.now_unix();
        let new: Vec<Value> = req
            .emoji
            .filter(|e| !e.is_empty())
            .map(|e| vec![json!({ "type": "emoji", "emoji": e })])
            .unwrap_or_default();
        let msg = w.bots[bot]
            .chats
            .get_mut(&uid)
            .and_then(|c| c.messages.get_mut(&req.message_id))
            .filter(|m| !m.deleted)
            .ok_or_else(|| ControlError::not_found("no such message"))?;
        let old = std::mem::replace(&mut msg.person_reactions, new.clone());
        Ok(w.bots[bot].push_update(
            "message_reaction",
            json!({
                "chat": chat, "message_id": req.message_id, "user": user, "date": date,
                "old_reaction": old, "new_reaction": new,
            }),
        ))
    }

    /// The person creates a topic in the Telegram UI.
    pub fn create_topic(&self, req: NewTopic) -> ControlResult<CreatedTopic> {
        let name = req.name.trim();
        if name.is_empty() || name.chars().count() > topics::MAX_TOPIC_NAME {
            return Err(ControlError::bad("a topic name has 1-128 characters"));
        }
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        let b = &w.bots[bot];
        if !b.has_topics_enabled {
            return Err(ControlError::conflict("Threaded Mode is off for this bot"));
        }
        if !b.allows_users_to_create_topics {
            return Err(ControlError::conflict(
                "this bot does not let people create topics",
            ));
        }
        w.person(uid);
        let (_, thread_id) = topics::create_topic(
            &mut w,
            bot,
            uid,
            Sender::Person(uid),
            name,
            topics::ICON_COLORS[1],
            None,
        );
        let payload = w.stored_message_json(bot, uid, thread_id);
        let update_id = w.bots[bot].push_update("message", payload);
        Ok(CreatedTopic {
            thread_id,
            update_id,
        })
    }

    /// The person deletes a topic (with all its messages). Telegram sends the bot no update.
    pub fn delete_topic(
        &self,
        thread_id: i64,
        user_id: Option<i64>,
        token: Option<&str>,
    ) -> ControlResult<()> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let uid = user_id.unwrap_or(DEFAULT_USER_ID);
        if !w.bots[bot].chats.contains_key(&uid) {
            return Err(ControlError::not_found("no such chat"));
        }
        topics::delete_topic(&mut w, bot, uid, thread_id)
            .map_err(|_| ControlError::not_found("no live topic with that id"))
    }

    /// The person closes or reopens a topic.
    pub fn set_topic_state(
        &self,
        thread_id: i64,
        closed: bool,
        user_id: Option<i64>,
        token: Option<&str>,
    ) -> ControlResult<()> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let uid = user_id.unwrap_or(DEFAULT_USER_ID);
        let state = if closed {
            TopicState::Closed
        } else {
            TopicState::Open
        };
        if !w.bots[bot].chats.contains_key(&uid) {
            return Err(ControlError::not_found("no such chat"));
        }
        topics::change_state(&mut w, bot, uid, thread_id, state, Sender::Person(uid))
            .map_err(|e| ControlError::conflict(e.description))
    }

    /// Changes runtime settings.
    pub fn settings(&self, req: SettingsChange) -> ControlResult<Value> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        if let Some(s) = req.strict {
            w.settings.strict = s;
        }
        if let Some(f) = req.flood {
            w.settings.flood = f;
        }
        let b = &mut w.bots[bot];
        if let Some(t) = req.has_topics_enabled {
            b.has_topics_enabled = t;
        }
        if let Some(a) = req.allows_users_to_create_topics {
            b.allows_users_to_create_topics = a;
        }
        let me = b.get_me();
        Ok(json!({ "me": me, "strict": w.settings.strict, "flood": w.settings.flood }))
    }

    /// The person blocks or unblocks the bot.
    pub fn block(&self, req: Block) -> ControlResult<()> {
        let mut w = self.shared.lock();
        let bot = bot_of(&w, req.token.as_deref())?;
        let uid = req.user_id.unwrap_or(DEFAULT_USER_ID);
        w.person(uid);
        w.bots[bot].chat_mut(uid).blocked = req.blocked;
        Ok(())
    }

    /// Messages of a chat (default: the default person's chat).
    pub fn transcript(
        &self,
        chat_id: Option<i64>,
        filter: ThreadFilter,
        token: Option<&str>,
    ) -> ControlResult<Vec<TranscriptEntry>> {
        let w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let b = &w.bots[bot];
        let chat = chat_id.unwrap_or(DEFAULT_USER_ID);
        let c = b
            .chats
            .get(&chat)
            .ok_or_else(|| ControlError::not_found("no such chat"))?;
        Ok(c.messages
            .values()
            .filter(|m| match filter {
                ThreadFilter::All => true,
                ThreadFilter::Main => m.thread_id.is_none(),
                ThreadFilter::Thread(t) => m.thread_id == Some(t),
            })
            .map(|m| transcript_entry(b, m))
            .collect())
    }

    /// Everything the person sees in a chat.
    pub fn chat(&self, chat_id: Option<i64>, token: Option<&str>) -> ControlResult<ChatView> {
        let w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let b = &w.bots[bot];
        let chat = chat_id.unwrap_or(DEFAULT_USER_ID);
        let c = b
            .chats
            .get(&chat)
            .ok_or_else(|| ControlError::not_found("no such chat"))?;
        Ok(chat_view(c, b, w.clock.now_ms()))
    }

    /// Topics of a chat.
    pub fn topics(&self, chat_id: Option<i64>, token: Option<&str>) -> ControlResult<Vec<Topic>> {
        Ok(self.chat(chat_id, token)?.topics)
    }

    /// The request log after sequence number `since`, optionally for one method.
    pub fn requests(&self, since: u64, method: Option<&str>) -> Vec<RequestEntry> {
        self.shared.lock().log.query(since, method)
    }

    /// Adds a fault rule; returns its id.
    pub fn add_fault(&self, spec: FaultSpec) -> ControlResult<u64> {
        if let Some(p) = spec.probability
            && !(0.0..=1.0).contains(&p)
        {
            return Err(ControlError::bad("probability must be within 0..1"));
        }
        Ok(self.shared.lock().faults.add(spec))
    }

    /// Active fault rules.
    pub fn faults(&self) -> Vec<FaultRule> {
        self.shared.lock().faults.list().to_vec()
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.shared.lock().faults.clear();
    }

    /// A receiver that changes after every Bot API call that changed something (to wait for
    /// the bot's replies without polling).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// Moves the fake clock forward; returns the new time (ms).
    pub fn advance_clock(&self, by: Duration) -> u64 {
        self.shared.clock.advance(by)
    }

    /// Back to the start state: chats, topics, updates, files, faults, log; settings from the
    /// configuration.
    pub fn reset(&self) {
        self.shared.lock().reset();
    }

    /// Files in a bot's store.
    pub fn uploads(&self, token: Option<&str>) -> ControlResult<Vec<UploadView>> {
        let w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let mut list: Vec<_> = w.bots[bot]
            .files
            .values()
            .map(|f| UploadView {
                file_id: f.file_id.clone(),
                kind: f.kind,
                file_name: f.file_name.clone(),
                mime_type: f.mime_type.clone(),
                size: f.bytes.len(),
                from_bot: f.from_bot,
            })
            .collect();
        list.sort_by(|a, b| a.file_id.cmp(&b.file_id));
        Ok(list)
    }

    /// The bytes of a stored file.
    pub fn file_bytes(&self, file_id: &str, token: Option<&str>) -> ControlResult<bytes::Bytes> {
        let w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        w.bots[bot]
            .file(file_id)
            .map(|f| f.bytes.clone())
            .ok_or_else(|| ControlError::not_found("no such file"))
    }

    /// A bot's state: `getMe`, pending updates, `allowed_updates`, webhook, flood waits,
    /// commands.
    pub fn bot(&self, token: Option<&str>) -> ControlResult<Value> {
        let w = self.shared.lock();
        let bot = bot_of(&w, token)?;
        let b = &w.bots[bot];
        let now = w.clock.now_ms();
        let penalties: Vec<Value> = b
            .flood
            .penalties(now)
            .into_iter()
            .map(|(scope, secs)| match scope {
                Scope::Chat(c) => json!({ "chat_id": c, "retry_after": secs }),
                Scope::Global => json!({ "chat_id": null, "retry_after": secs }),
            })
            .collect();
        Ok(json!({
            "me": b.get_me(),
            "pending_updates": b.updates.len(),
            "next_update_id": b.next_update_id,
            "allowed_updates": b.allowed_updates,
            "webhook": b.webhook,
            "flood_waits": penalties,
            "commands": b.commands,
            "strict": w.settings.strict,
            "now_ms": now,
        }))
    }
}

// ---- HTTP routes ----------------------------------------------------------------------------

/// A JSON body whose rejection is a JSON control error (status 400) like every other error.
struct Body<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S> for Body<T> {
    type Rejection = ControlError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        Json::<T>::from_request(req, state)
            .await
            .map(|Json(v)| Body(v))
            .map_err(|e| ControlError::bad(e.body_text()))
    }
}

/// A query string whose rejection is a JSON control error.
struct Q<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S> for Q<T> {
    type Rejection = ControlError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| ControlError::bad(e.body_text()))
    }
}

#[derive(Debug, Deserialize)]
struct ChatQuery {
    chat_id: Option<i64>,
    thread_id: Option<String>,
    token: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TokenQuery {
    token: Option<String>,
    user_id: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct RequestsQuery {
    #[serde(default)]
    since: u64,
    method: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ClockChange {
    advance_ms: u64,
}

fn reply<T: Serialize>(r: ControlResult<T>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

fn thread_filter(raw: Option<&str>) -> ControlResult<ThreadFilter> {
    match raw {
        None | Some("") | Some("all") => Ok(ThreadFilter::All),
        Some("main") | Some("0") => Ok(ThreadFilter::Main),
        Some(n) => n
            .parse()
            .map(ThreadFilter::Thread)
            .map_err(|_| ControlError::bad("thread_id must be a number, \"main\" or \"all\"")),
    }
}

/// The `/__control/` routes.
pub fn routes() -> Router<Arc<Shared>> {
    fn c(s: Arc<Shared>) -> Control {
        Control::new(s)
    }
    Router::new()
        .route("/send", post(|State(s): State<Arc<Shared>>, Body(r): Body<SendText>| async move { reply(c(s).send_text(r)) }))
        .route("/send_media", post(|State(s): State<Arc<Shared>>, Body(r): Body<SendMedia>| async move { reply(c(s).send_media(r)) }))
        .route("/send_media_group", post(|State(s): State<Arc<Shared>>, Body(r): Body<SendMediaGroup>| async move { reply(c(s).send_media_group(r)) }))
        .route("/edit", post(|State(s): State<Arc<Shared>>, Body(r): Body<EditText>| async move { reply(c(s).edit_text(r)) }))
        .route("/press", post(|State(s): State<Arc<Shared>>, Body(r): Body<Press>| async move { reply(c(s).press(r)) }))
        .route("/forge_press", post(|State(s): State<Arc<Shared>>, Body(r): Body<Press>| async move { reply(c(s).forge_press(r)) }))
        .route("/react", post(|State(s): State<Arc<Shared>>, Body(r): Body<React>| async move {
            reply(c(s).react(r).map(|update_id| json!({ "update_id": update_id })))
        }))
        .route(
            "/topics",
            post(|State(s): State<Arc<Shared>>, Body(r): Body<NewTopic>| async move { reply(c(s).create_topic(r)) })
                .get(|State(s): State<Arc<Shared>>, Q(q): Q<ChatQuery>| async move {
                    reply(c(s).topics(q.chat_id, q.token.as_deref()))
                }),
        )
        .route(
            "/topics/{thread_id}",
            axum::routing::delete(|State(s): State<Arc<Shared>>, Path(t): Path<i64>, Q(q): Q<TokenQuery>| async move {
                reply(c(s).delete_topic(t, q.user_id, q.token.as_deref()).map(|()| json!({ "ok": true })))
            }),
        )
        .route("/topics/{thread_id}/close", post(|State(s): State<Arc<Shared>>, Path(t): Path<i64>, Q(q): Q<TokenQuery>| async move {
            reply(c(s).set_topic_state(t, true, q.user_id, q.token.as_deref()).map(|()| json!({ "ok": true })))
        }))
        .route("/topics/{thread_id}/reopen", post(|State(s): State<Arc<Shared>>, Path(t): Path<i64>, Q(q): Q<TokenQuery>| async move {
            reply(c(s).set_topic_state(t, false, q.user_id, q.token.as_deref()).map(|()| json!({ "ok": true })))
        }))
        .route("/settings", post(|State(s): State<Arc<Shared>>, Body(r): Body<SettingsChange>| async move { reply(c(s).settings(r)) }))
        .route("/groups", post(|State(s): State<Arc<Shared>>, Body(r): Body<NewGroup>| async move {
            reply(c(s).add_to_group(r).map(|u| json!({ "update_id": u })))
        }))
        .route(
            "/groups/{chat_id}",
            axum::routing::delete(|State(s): State<Arc<Shared>>, Path(chat): Path<i64>, Q(q): Q<TokenQuery>| async move {
                reply(c(s).remove_from_group(chat, q.token.as_deref()).map(|u| json!({ "update_id": u })))
            }),
        )
        .route("/block", post(|State(s): State<Arc<Shared>>, Body(r): Body<Block>| async move {
            reply(c(s).block(r).map(|()| json!({ "ok": true })))
        }))
        .route("/transcript", get(|State(s): State<Arc<Shared>>, Q(q): Q<ChatQuery>| async move {
            reply(thread_filter(q.thread_id.as_deref()).and_then(|f| c(s).transcript(q.chat_id, f, q.token.as_deref())))
        }))
        .route("/chat", get(|State(s): State<Arc<Shared>>, Q(q): Q<ChatQuery>| async move {
            reply(c(s).chat(q.chat_id, q.token.as_deref()))
        }))
        .route("/requests", get(|State(s): State<Arc<Shared>>, Q(q): Q<RequestsQuery>| async move {
            Json(c(s).requests(q.since, q.method.as_deref()))
        }))
        .route(
            "/faults",
            post(|State(s): State<Arc<Shared>>, Body(r): Body<FaultSpec>| async move {
                reply(c(s).add_fault(r).map(|id| json!({ "id": id })))
            })
            .get(|State(s): State<Arc<Shared>>| async move { Json(c(s).faults()) })
            .delete(|State(s): State<Arc<Shared>>| async move {
                c(s).clear_faults();
                Json(json!({ "ok": true }))
            }),
        )
        .route("/clock", post(|State(s): State<Arc<Shared>>, Body(r): Body<ClockChange>| async move {
            Json(json!({ "now_ms": c(s).advance_clock(Duration::from_millis(r.advance_ms)) }))
        }))
        .route("/reset", post(|State(s): State<Arc<Shared>>| async move {
            c(s).reset();
            Json(json!({ "ok": true }))
        }))
        .route("/uploads", get(|State(s): State<Arc<Shared>>, Q(q): Q<TokenQuery>| async move {
            reply(c(s).uploads(q.token.as_deref()))
        }))
        .route("/files/{file_id}", get(|State(s): State<Arc<Shared>>, Path(id): Path<String>, Q(q): Q<TokenQuery>| async move {
            match c(s).file_bytes(&id, q.token.as_deref()) {
                Ok(b) => ([(axum::http::header::CONTENT_TYPE, "application/octet-stream")], b).into_response(),
                Err(e) => e.into_response(),
            }
        }))
        .route("/bot", get(|State(s): State<Arc<Shared>>, Q(q): Q<TokenQuery>| async move {
            reply(c(s).bot(q.token.as_deref()))
        }))
}
