//! The fake's state: bots, the people who talk to them, private chats with their messages and
//! topics, pending updates, files, and the per-request machinery (faults, flood, log).
//!
//! Everything lives under one mutex (`Shared::world`); no lock is held across an await.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::config::{FakeConfig, PersonConfig};
use crate::faults::{Faults, Rng};
use crate::flood::{Flood, FloodConfig};
use crate::log::RequestLog;

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    Bot,
    /// A person, by user id.
    Person(i64),
    /// A group's admin who remains anonymous: Telegram shows the group as the sender
    /// (`sender_chat`) and `GroupAnonymousBot` as `from`; by user id, for the fake's records.
    Anonymous(i64),
}

/// The user Telegram puts in `from` for an anonymous admin's message.
pub const GROUP_ANONYMOUS_BOT: i64 = 1_087_968_824;

/// A supergroup the bot was added to (a forum when `forum`: topics instead of one thread).
#[derive(Debug, Clone)]
pub struct Group {
    pub title: String,
    pub forum: bool,
    /// Who is in it, by user id.
    pub members: BTreeSet<i64>,
    /// The bot is an administrator.
    pub bot_admin: bool,
    /// The bot's administrator right to create, edit and delete topics.
    pub bot_can_manage_topics: bool,
}

/// Kinds of media a message can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    /// `photo`
    Photo,
    /// `document`
    Document,
    /// `voice`
    Voice,
    /// `audio`
    Audio,
    /// `video`
    Video,
    /// `animation`
    Animation,
}

impl MediaKind {
    /// The Message field name.
    pub fn field(self) -> &'static str {
        match self {
            Self::Photo => "photo",
            Self::Document => "document",
            Self::Voice => "voice",
            Self::Audio => "audio",
            Self::Video => "video",
            Self::Animation => "animation",
        }
    }

    fn dir(self) -> &'static str {
        match self {
            Self::Photo => "photos",
            Self::Document => "documents",
            Self::Voice => "voice",
            Self::Audio => "music",
            Self::Video => "videos",
            Self::Animation => "animations",
        }
    }
}

/// A file the fake holds: uploaded by the bot or sent by a person.
#[derive(Debug, Clone)]
pub struct StoredFile {
    /// `file_id`
    pub file_id: String,
    /// `file_unique_id`
    pub file_unique_id: String,
    /// Content.
    pub bytes: Bytes,
    /// Original file name.
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    /// `file_path` for downloads.
    pub path: String,
    /// What kind of media it was sent as.
    pub kind: MediaKind,
    /// Pixel size for photos (read from PNG/JPEG headers when possible).
    pub dimensions: (u32, u32),
    /// Whether the bot uploaded it.
    pub from_bot: bool,
}

/// One message in a chat.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// Per-chat message id.
    pub id: i64,
    /// Topic, if any.
    pub thread_id: Option<i64>,
    /// `None` only transiently; always set for stored messages.
    pub sender: Option<Sender>,
    /// Unix time sent.
    pub date: i64,
    /// Fake clock time sent, in ms.
    pub at_ms: u64,
    /// Position among this chat's messages, drafts and actions (orders them exactly).
    pub seq: u64,
    /// Unix time of the last edit.
    pub edit_date: Option<i64>,
    /// Text (text messages).
    pub text: Option<String>,
    /// Entities of `text`.
    pub entities: Vec<Value>,
    /// `RichMessage` (rich messages).
    pub rich: Option<Value>,
    /// Caption (media messages).
    pub caption: Option<String>,
    /// Entities of `caption`.
    pub caption_entities: Vec<Value>,
    /// Attached media: kind and `file_id`.
    pub media: Option<(MediaKind, String)>,
    /// Message this one replies to.
    pub reply_to: Option<i64>,
    /// `forward_origin` for forwarded messages.
    pub forward_origin: Option<Value>,
    /// `media_group_id`.
    pub media_group_id: Option<String>,
    /// `reply_markup` as sent.
    pub reply_markup: Option<Value>,
    /// `link_preview_options` as sent.
    pub link_preview_options: Option<Value>,
    /// Service message: field name and value (`forum_topic_created`, ...).
    pub service: Option<(String, Value)>,
    /// Deleted by the bot, the person or with its topic.
    pub deleted: bool,
    /// Reactions the person set.
    pub person_reactions: Vec<Value>,
    /// Reactions the bot set.
    pub bot_reactions: Vec<Value>,
    /// Pinned in its chat (or topic).
    pub pinned: bool,
    /// Every earlier version of the text (or rich content) before an edit.
    pub history: Vec<Value>,
}

/// A topic's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TopicState {
    /// Usable.
    Open,
    /// Closed: sends are refused until reopened.
    Closed,
    /// Deleted with all its messages.
    Deleted,
}

/// A private-chat topic.
#[derive(Debug, Clone, Serialize)]
pub struct Topic {
    /// `message_thread_id` (the id of its `forum_topic_created` service message).
    pub thread_id: i64,
    pub name: String,
    pub icon_color: i64,
    pub icon_custom_emoji_id: Option<String>,
    pub state: TopicState,
    /// Whether the bot created it (else the person did, in the Telegram UI).
    pub created_by_bot: bool,
    /// When it was created (fake clock, ms).
    pub created_ms: u64,
}

/// A draft the bot streamed (`sendMessageDraft` / `sendRichMessageDraft`).
#[derive(Debug, Clone, Serialize)]
pub struct DraftEvent {
    /// When it was sent (ms).
    pub at_ms: u64,
    /// Position among this chat's events.
    pub seq: u64,
    /// Topic, if any.
    pub thread_id: Option<i64>,
    /// `draft_id`.
    pub draft_id: i64,
    /// Text after entity parsing (plain text of rich drafts).
    pub text: String,
    /// Entities of `text`.
    pub entities: Vec<Value>,
    /// Rich content for rich drafts.
    pub rich: Option<Value>,
}

/// A chat action the bot sent (`typing`, ...).
#[derive(Debug, Clone, Serialize)]
pub struct ActionEvent {
    pub at_ms: u64,
    /// Position among this chat's events.
    pub seq: u64,
    /// Topic, if any.
    pub thread_id: Option<i64>,
    /// `typing`, `upload_document`, ...
    pub action: String,
}

/// An answer to a callback query, as the person sees it (a toast or an alert).
#[derive(Debug, Clone, Serialize)]
pub struct CallbackAnswer {
    pub at_ms: u64,
    /// The query answered.
    pub callback_query_id: String,
    /// Notification text.
    pub text: Option<String>,
    /// Alert instead of a toast.
    pub show_alert: bool,
    /// URL to open.
    pub url: Option<String>,
}

/// A bot's private chat with one person.
#[derive(Debug, Clone)]
pub struct Chat {
    /// Chat id (equals the person's user id, as in Telegram).
    pub id: i64,
    /// Next message id to assign.
    pub next_message_id: i64,
    /// Messages by id.
    pub messages: BTreeMap<i64, Message>,
    /// Topics by thread id.
    pub topics: BTreeMap<i64, Topic>,
    /// Drafts streamed.
    pub drafts: Vec<DraftEvent>,
    /// Chat actions sent.
    pub actions: Vec<ActionEvent>,
    /// Callback answers shown.
    pub callback_answers: Vec<CallbackAnswer>,
    /// The person blocked the bot.
    pub blocked: bool,
    /// A group's chat (negative id) rather than a person's private chat.
    pub group: Option<Group>,
    next_seq: u64,
}

impl Chat {
    fn new(id: i64) -> Self {
        Self {
            id,
            next_message_id: 1,
            messages: BTreeMap::new(),
            topics: BTreeMap::new(),
            drafts: Vec::new(),
            actions: Vec::new(),
            callback_answers: Vec::new(),
            blocked: false,
            group: None,
            next_seq: 0,
        }
    }

    /// A group's chat.
    pub fn new_group(id: i64, group: Group) -> Self {
        Self {
            group: Some(group),
            ..Self::new(id)
        }
    }

    /// Whether messages here can go into topics: a forum group, or a private chat with the
    /// bot's Threaded Mode on.
    pub fn has_topics(&self, bot: &Bot) -> bool {
        self.group
            .as_ref()
            .map_or(bot.has_topics_enabled, |g| g.forum)
    }

    /// Stores `msg` under a fresh id; returns the id.
    pub fn add_message(&mut self, mut msg: Message) -> i64 {
        let id = self.next_message_id;
        self.next_message_id += 1;
        msg.id = id;
        msg.seq = self.bump();
        self.messages.insert(id, msg);
        id
    }

    fn bump(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Records a draft.
    pub fn push_draft(&mut self, mut d: DraftEvent) {
        d.seq = self.bump();
        self.drafts.push(d);
    }

    /// Records a chat action.
    pub fn push_action(&mut self, mut a: ActionEvent) {
        a.seq = self.bump();
        self.actions.push(a);
    }

    /// Whether the bot sent a message to `thread` after event `seq`.
    pub fn bot_message_after(&self, thread: Option<i64>, seq: u64) -> bool {
        self.messages
            .values()
            .rev()
            .take_while(|m| m.seq > seq)
            .any(|m| m.sender == Some(Sender::Bot) && m.thread_id == thread && m.service.is_none())
    }

    /// A live (not deleted) message.
    pub fn live_message(&self, id: i64) -> Option<&Message> {
        self.messages.get(&id).filter(|m| !m.deleted)
    }
}

/// A callback query a person triggered and the bot may answer.
#[derive(Debug, Clone)]
pub struct PendingCallback {
    /// Chat of the message with the button.
    pub chat_id: i64,
    /// Whether `answerCallbackQuery` was called.
    pub answered: bool,
}

/// One update waiting for `getUpdates`.
#[derive(Debug, Clone)]
pub struct Update {
    /// `update_id`.
    pub id: i64,
    /// The update's field (`message`, `callback_query`, ...).
    pub kind: String,
    /// The field's value.
    pub payload: Value,
}

impl Update {
    /// The Update object as Telegram serializes it.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "update_id": self.id });
        v[self.kind.as_str()] = self.payload.clone();
        v
    }
}

/// Update kinds delivered when `allowed_updates` is unset or empty.
const DEFAULT_EXCLUDED_UPDATES: [&str; 3] =
    ["chat_member", "message_reaction", "message_reaction_count"];

/// One bot (one token).
#[derive(Debug)]
pub struct Bot {
    /// Full token.
    pub token: String,
    /// User id (the token's numeric prefix).
    pub id: i64,
    /// `@username` without the `@`.
    pub username: String,
    /// Display name.
    pub first_name: String,
    /// Threaded Mode: private-chat topics enabled in BotFather.
    pub has_topics_enabled: bool,
    /// People may create and delete topics themselves.
    pub allows_users_to_create_topics: bool,
    /// Updates not yet confirmed.
    pub updates: VecDeque<Update>,
    /// Next `update_id`.
    pub next_update_id: i64,
    /// Persisting `allowed_updates` (None: never set).
    pub allowed_updates: Option<Vec<String>>,
    /// Webhook set with `setWebhook` (the fake never calls it).
    pub webhook: Option<Value>,
    /// Bumped by [`Bot::supersede_polls`]; a waiting poll that sees it move answers 409.
    pub poll_generation: u64,
    /// Private chats by chat id.
    pub chats: BTreeMap<i64, Chat>,
    /// Files by `file_id`.
    pub files: HashMap<String, StoredFile>,
    next_file: u64,
    /// Callback queries by id.
    pub callbacks: HashMap<String, PendingCallback>,
    next_callback: u64,
    next_media_group: u64,
    /// Commands by scope+language key.
    pub commands: BTreeMap<String, Value>,
    /// Flood state.
    pub flood: Flood,
    /// Wakes long polls.
    pub notify: Arc<Notify>,
}

impl Bot {
    /// Ends every waiting long poll with a conflict (a newer poll, a webhook, a reset).
    pub fn supersede_polls(&mut self) {
        self.poll_generation += 1;
        self.notify.notify_waiters();
    }

    fn new(token: &str, cfg: &FakeConfig, update_start: i64) -> Self {
        let id = token
            .split(':')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1000);
        Self {
            token: token.to_owned(),
            id,
            username: format!("fake_{id}_bot"),
            first_name: format!("Fake Bot {id}"),
            has_topics_enabled: cfg.has_topics_enabled,
            allows_users_to_create_topics: cfg.allows_users_to_create_topics,
            updates: VecDeque::new(),
            next_update_id: update_start,
            allowed_updates: None,
            webhook: None,
            poll_generation: 0,
            chats: BTreeMap::new(),
            files: HashMap::new(),
            next_file: 0,
            callbacks: HashMap::new(),
            next_callback: 0,
            next_media_group: 0,
            commands: BTreeMap::new(),
            flood: Flood::default(),
            notify: Arc::new(Notify::new()),
        }
    }

    /// The bot as a `User` in messages.
    pub fn user_json(&self) -> Value {
        json!({ "id": self.id, "is_bot": true, "first_name": self.first_name, "username": self.username })
    }

    /// The `getMe` answer.
    pub fn get_me(&self) -> Value {
        json!({
            "id": self.id,
            "is_bot": true,
            "first_name": self.first_name,
            "username": self.username,
            "can_join_groups": true,
            "can_read_all_group_messages": false,
            "supports_inline_queries": false,
            "can_connect_to_business": false,
            "has_main_web_app": false,
            "has_topics_enabled": self.has_topics_enabled,
            "allows_users_to_create_topics": self.allows_users_to_create_topics,
        })
    }

    /// Whether an update of `kind` is created under the current `allowed_updates`.
    /// Telegram filters when updates are created: changing the setting does not affect updates
    /// already waiting.
    pub fn wants(&self, kind: &str) -> bool {
        match &self.allowed_updates {
            Some(list) if !list.is_empty() => list.iter().any(|k| k == kind),
            _ => !DEFAULT_EXCLUDED_UPDATES.contains(&kind),
        }
    }

    /// Queues an update if `allowed_updates` wants it and wakes long polls; returns its id.
    pub fn push_update(&mut self, kind: &str, payload: Value) -> Option<i64> {
        if !self.wants(kind) {
            return None;
        }
        let id = self.next_update_id;
        self.next_update_id += 1;
        self.updates.push_back(Update {
            id,
            kind: kind.to_owned(),
            payload,
        });
        self.notify.notify_waiters();
        Some(id)
    }

    /// Confirms updates below `offset`; a negative offset keeps only the last `-offset`.
    pub fn confirm(&mut self, offset: i64) {
        if offset < 0 {
            let keep = offset.unsigned_abs() as usize;
            while self.updates.len() > keep {
                self.updates.pop_front();
            }
        } else {
            while self.updates.front().is_some_and(|u| u.id < offset) {
                self.updates.pop_front();
            }
        }
    }

    /// The chat with `id`, created on first contact.
    pub fn chat_mut(&mut self, id: i64) -> &mut Chat {
        self.chats.entry(id).or_insert_with(|| Chat::new(id))
    }

    /// Stores a file; returns its `file_id`.
    pub fn store_file(
        &mut self,
        kind: MediaKind,
        bytes: Bytes,
        file_name: Option<String>,
        mime_type: Option<String>,
        from_bot: bool,
    ) -> String {
        self.next_file += 1;
        let n = self.next_file;
        let file_id = format!("F{}-{}-{n:06}", self.id, kind.field());
        let ext = file_name
            .as_deref()
            .and_then(|f| f.rsplit_once('.').map(|(_, e)| e.to_owned()))
            .filter(|e| e.len() <= 8 && e.chars().all(|c| c.is_ascii_alphanumeric()))
            .unwrap_or_else(|| "bin".into());
        let dimensions = image_dimensions(&bytes).unwrap_or((100, 100));
        self.files.insert(
            file_id.clone(),
            StoredFile {
                file_unique_id: format!("U{}{n:06}", self.id),
                file_id: file_id.clone(),
                bytes,
                file_name,
                mime_type,
                path: format!("{}/file_{n}.{ext}", kind.dir()),
                kind,
                dimensions,
                from_bot,
            },
        );
        file_id
    }

    /// A fresh callback query id.
    pub fn new_callback(&mut self, chat_id: i64) -> String {
        self.next_callback += 1;
        let id = format!("{}{:08}", self.id, self.next_callback);
        self.callbacks.insert(
            id.clone(),
            PendingCallback {
                chat_id,
                answered: false,
            },
        );
        id
    }

    /// A fresh `media_group_id`.
    pub fn new_media_group(&mut self) -> String {
        self.next_media_group += 1;
        format!("{}{:010}", self.id, self.next_media_group)
    }

    /// The media object (`document`, `photo` array, ...) for a stored file.
    pub fn media_json(&self, kind: MediaKind, file_id: &str) -> Value {
        let Some(f) = self.files.get(file_id) else {
            return Value::Null;
        };
        let size = f.bytes.len();
        match kind {
            MediaKind::Photo => {
                let (w, h) = f.dimensions;
                let small = (w.min(90), h.min(90));
                json!([
                    { "file_id": format!("{}-s", f.file_id), "file_unique_id": format!("{}s", f.file_unique_id), "width": small.0, "height": small.1, "file_size": size.min(4096) },
                    { "file_id": f.file_id, "file_unique_id": f.file_unique_id, "width": w, "height": h, "file_size": size },
                ])
            }
            MediaKind::Voice => json!({
                "file_id": f.file_id, "file_unique_id": f.file_unique_id, "duration": 1,
                "mime_type": f.mime_type.clone().unwrap_or_else(|| "audio/ogg".into()), "file_size": size,
            }),
            MediaKind::Audio => json!({
                "file_id": f.file_id, "file_unique_id": f.file_unique_id, "duration": 1,
                "file_name": f.file_name, "mime_type": f.mime_type, "file_size": size,
            }),
            MediaKind::Video | MediaKind::Animation => json!({
                "file_id": f.file_id, "file_unique_id": f.file_unique_id, "width": f.dimensions.0,
                "height": f.dimensions.1, "duration": 1, "file_name": f.file_name,
                "mime_type": f.mime_type, "file_size": size,
            }),
            MediaKind::Document => json!({
                "file_id": f.file_id, "file_unique_id": f.file_unique_id,
                "file_name": f.file_name, "mime_type": f.mime_type, "file_size": size,
            }),
        }
    }

    /// Resolves a file id (including the small photo size ids `…-s`).
    pub fn file(&self, file_id: &str) -> Option<&StoredFile> {
        self.files
            .get(file_id)
            .or_else(|| file_id.strip_suffix("-s").and_then(|id| self.files.get(id)))
    }
}

/// A person who talks to the bots.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Person {
    /// User id (also their private chat id).
    pub id: i64,
    pub first_name: String,
    pub last_name: Option<String>,
    pub username: Option<String>,
    /// IETF language tag.
    pub language_code: Option<String>,
}

impl Person {
    fn from_config(p: &PersonConfig) -> Self {
        Self {
            id: p.id,
            first_name: p.first_name.clone(),
            last_name: p.last_name.clone(),
            username: p.username.clone(),
            language_code: Some("en".into()),
        }
    }

    fn unknown(id: i64) -> Self {
        Self {
            id,
            first_name: format!("User {id}"),
            last_name: None,
            username: None,
            language_code: Some("en".into()),
        }
    }

    /// As a `User`.
    pub fn user_json(&self) -> Value {
        let mut v = json!({ "id": self.id, "is_bot": false, "first_name": self.first_name });
        if let Some(l) = &self.last_name {
            v["last_name"] = json!(l);
        }
        if let Some(u) = &self.username {
            v["username"] = json!(u);
        }
        if let Some(l) = &self.language_code {
            v["language_code"] = json!(l);
        }
        v
    }

    /// Their private chat with a bot, as a `Chat`.
    pub fn chat_json(&self) -> Value {
        let mut v = json!({ "id": self.id, "type": "private", "first_name": self.first_name });
        if let Some(l) = &self.last_name {
            v["last_name"] = json!(l);
        }
        if let Some(u) = &self.username {
            v["username"] = json!(u);
        }
        v
    }
}

/// Settings that can change while running.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Reject parameters the documentation does not list for the method.
    pub strict: bool,
    /// The flood model.
    pub flood: FloodConfig,
}

/// The whole fake.
#[derive(Debug)]
pub struct World {
    /// Configuration it started from (used by reset).
    pub config: FakeConfig,
    /// Runtime settings.
    pub settings: Settings,
    /// Bots, in `--token` order; the first is the default for control calls.
    pub bots: Vec<Bot>,
    /// People by user id.
    pub persons: BTreeMap<i64, Person>,
    /// Fault rules.
    pub faults: Faults,
    /// Seeded randomness for probabilistic faults.
    pub rng: Rng,
    /// Request log.
    pub log: RequestLog,
    pub clock: Arc<Clock>,
}

impl World {
    /// A fresh world from `config`.
    pub fn new(config: FakeConfig, clock: Arc<Clock>) -> Self {
        let bots = config
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| Bot::new(t, &config, config.first_update_id + 1_000_000 * i as i64))
            .collect();
        let mut persons = BTreeMap::new();
        let person = Person::from_config(&config.person);
        persons.insert(person.id, person);
        let mut world = Self {
            settings: Settings {
                strict: config.strict,
                flood: config.flood.clone(),
            },
            rng: Rng::new(config.seed),
            bots,
            persons,
            faults: Faults::default(),
            log: RequestLog::default(),
            clock,
            config,
        };
        // The default person has started every bot: their chats exist from the beginning.
        let pid = world.config.person.id;
        for bot in &mut world.bots {
            bot.chat_mut(pid);
        }
        world
    }

    /// Back to the configured start state. Waiting long polls are woken and see a conflict.
    pub fn reset(&mut self) {
        let notifies: Vec<_> = self
            .bots
            .iter()
            .map(|b| (b.notify.clone(), b.poll_generation))
            .collect();
        let log = std::mem::take(&mut self.log);
        *self = World::new(self.config.clone(), self.clock.clone());
        self.log = log;
        self.log.clear();
        for (bot, (n, generation)) in self.bots.iter_mut().zip(notifies) {
            bot.notify = n;
            bot.poll_generation = generation;
            bot.supersede_polls();
        }
    }

    /// The person with `id`, created on first use.
    pub fn person(&mut self, id: i64) -> &Person {
        self.persons
            .entry(id)
            .or_insert_with(|| Person::unknown(id))
    }

    /// Index of the bot with `token`.
    pub fn bot_index(&self, token: &str) -> Option<usize> {
        self.bots.iter().position(|b| b.token == token)
    }

    /// The stored message `id` of `chat` as a `Message`, or null.
    pub fn stored_message_json(&self, bot: usize, chat: i64, id: i64) -> Value {
        let b = &self.bots[bot];
        match b
            .chats
            .get(&chat)
            .and_then(|c| c.messages.get(&id).map(|m| (c, m)))
        {
            Some((c, m)) => self.message_json(b, c, m, 0),
            None => Value::Null,
        }
    }

    /// A message as the `Message` object Telegram returns. `depth` 0 includes
    /// `reply_to_message` one level deep.
    /// `chat` as a `Chat` object: a person's private chat, or a supergroup.
    pub fn chat_json(&self, chat: &Chat) -> Value {
        match &chat.group {
            Some(g) => json!({
                "id": chat.id, "type": "supergroup", "title": g.title, "is_forum": g.forum,
            }),
            None => self
                .persons
                .get(&chat.id)
                .cloned()
                .unwrap_or_else(|| Person::unknown(chat.id))
                .chat_json(),
        }
    }

    pub fn message_json(&self, bot: &Bot, chat: &Chat, msg: &Message, depth: u8) -> Value {
        let from = match msg.sender {
            Some(Sender::Person(uid)) => self
                .persons
                .get(&uid)
                .map(Person::user_json)
                .unwrap_or_else(|| Person::unknown(uid).user_json()),
            Some(Sender::Anonymous(_)) => json!({
                "id": GROUP_ANONYMOUS_BOT, "is_bot": true, "first_name": "Group",
                "username": "GroupAnonymousBot",
            }),
            _ => bot.user_json(),
        };
        let mut v = json!({
            "message_id": msg.id,
            "from": from,
            "chat": self.chat_json(chat),
            "date": msg.date,
        });
        if matches!(msg.sender, Some(Sender::Anonymous(_))) {
            v["sender_chat"] = self.chat_json(chat);
        }
        if let Some(t) = msg.thread_id {
            v["message_thread_id"] = json!(t);
            v["is_topic_message"] = json!(true);
        }
        if let Some(d) = msg.edit_date {
            v["edit_date"] = json!(d);
        }
        if let Some(o) = &msg.forward_origin {
            v["forward_origin"] = o.clone();
        }
        if let Some(orig) = msg
            .reply_to
            .filter(|_| depth == 0)
            .and_then(|r| chat.messages.get(&r))
        {
            v["reply_to_message"] = self.message_json(bot, chat, orig, 1);
        }
        if let Some(g) = &msg.media_group_id {
            v["media_group_id"] = json!(g);
        }
        if let Some(t) = &msg.text {
            v["text"] = json!(t);
            if !msg.entities.is_empty() {
                v["entities"] = json!(msg.entities);
            }
        }
        if let Some(l) = &msg.link_preview_options {
            v["link_preview_options"] = l.clone();
        }
        if let Some(r) = &msg.rich {
            v["rich_message"] = r.clone();
        }
        if let Some((kind, file_id)) = &msg.media {
            v[kind.field()] = bot.media_json(*kind, file_id);
        }
        if let Some(c) = &msg.caption {
            v["caption"] = json!(c);
            if !msg.caption_entities.is_empty() {
                v["caption_entities"] = json!(msg.caption_entities);
            }
        }
        if let Some((field, value)) = &msg.service {
            v[field.as_str()] = value.clone();
        }
        if let Some(m) = msg
            .reply_markup
            .as_ref()
            .filter(|m| m.get("inline_keyboard").is_some())
        {
            v["reply_markup"] = m.clone();
        }
        v
    }
}

/// Width and height from a PNG or JPEG header, if the bytes are one.
fn image_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() >= 24 && b.starts_with(b"\x89PNG\r\n\x1a\n") {
        let w = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
        let h = u32::from_be_bytes([b[20], b[21], b[22], b[23]]);
        return Some((w, h));
    }
    if b.starts_with(&[0xFF, 0xD8]) {
        let mut i = 2;
        while i + 9 < b.len() {
            if b[i] != 0xFF {
                return None;
            }
            let marker = b[i + 1];
            let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
            if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
                let h = u32::from(u16::from_be_bytes([b[i + 5], b[i + 6]]));
                let w = u32::from(u16::from_be_bytes([b[i + 7], b[i + 8]]));
                return Some((w, h));
            }
            i += 2 + len;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_and_jpeg_dimensions() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(image_dimensions(&png), Some((640, 480)));
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01,
            0x2C, 0x01, 0x90, 0x03, 0x00, 0x00,
        ];
        assert_eq!(image_dimensions(&jpeg), Some((400, 300)));
        assert_eq!(image_dimensions(b"plain"), None);
    }

    #[test]
    fn allowed_updates_filter_at_creation_and_default_excludes_reactions() {
        let cfg = FakeConfig::default();
        let mut bot = Bot::new("1:x", &cfg, 10);
        assert_eq!(bot.push_update("message", json!({})), Some(10));
        assert_eq!(bot.push_update("message_reaction", json!({})), None);
        bot.allowed_updates = Some(vec!["message_reaction".into()]);
        assert_eq!(bot.push_update("message", json!({})), None);
        assert_eq!(bot.push_update("message_reaction", json!({})), Some(11));
        bot.confirm(11);
        assert_eq!(
            bot.updates.iter().map(|u| u.id).collect::<Vec<_>>(),
            vec![11]
        );
        bot.allowed_updates = Some(vec![]);
        bot.push_update("message", json!({}));
        bot.push_update("message", json!({}));
        bot.confirm(-1);
        assert_eq!(
            bot.updates.iter().map(|u| u.id).collect::<Vec<_>>(),
            vec![13]
        );
    }
}
