//! What the bot sends: one [`Outgoing`] per Bot API call the hub makes with a message, each knowing
//! its place, stored in the outbox as it is (inside a delivery plan,
//! `crate::outgoing::delivery::Plan`) and turned into its call by [`Outgoing::call`], which only
//! the senders use (the outbox's sender and the preview task).
//!
//! The stored form is the call's parameters under their Bot API names, with the method in
//! `method` and what is not sent as a parameter (files to upload, words to speak) under `__`
//! keys: so the store can read a row's files (`path`) for retention, an old row's parameters
//! became a message by adding its method (schema version 12), and what a row sends is
//! readable in the database.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outgoing::attention::Attention;

/// A message the bot sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method")]
pub enum Outgoing {
    /// A text, plain or Telegram HTML.
    #[serde(rename = "sendMessage")]
    Text(Text),
    /// A rich message (Markdown Telegram renders).
    #[serde(rename = "sendRichMessage")]
    Rich(Rich),
    /// New text and buttons for one of the bot's messages.
    #[serde(rename = "editMessageText")]
    Edit(Edit),
    /// New buttons for one of the bot's messages.
    #[serde(rename = "editMessageReplyMarkup")]
    EditMarkup(EditMarkup),
    /// The answer to a button tap.
    #[serde(rename = "answerCallbackQuery")]
    TapAnswer(TapAnswer),
    /// One image, shown inline.
    #[serde(rename = "sendPhoto")]
    Photo(File),
    /// One file.
    #[serde(rename = "sendDocument")]
    Document(File),
    /// Up to ten photos or documents as one album.
    #[serde(rename = "sendMediaGroup")]
    Album(Album),
    /// A voice message: the words to speak until it is made, then its file.
    #[serde(rename = "sendVoice")]
    Voice(Voice),
    /// The bot's command list.
    #[serde(rename = "setMyCommands")]
    Commands(Commands),
    /// A question pinned while it waits for the person (best effort).
    #[serde(rename = "pinChatMessage")]
    Pin(Pin),
    /// A settled question unpinned (best effort).
    #[serde(rename = "unpinChatMessage")]
    Unpin(Unpin),
}

/// Where a message goes: chat, topic, the message it replies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spot {
    pub chat_id: i64,
    /// Topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    /// The message it replies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_parameters: Option<ReplyTo>,
}

impl Spot {
    /// In `chat` (topic `thread`), replying to `reply_to` if it still exists.
    pub fn new(chat: i64, thread: Option<i64>, reply_to: Option<i64>) -> Self {
        Self {
            chat_id: chat,
            message_thread_id: thread,
            reply_parameters: reply_to.map(|message_id| ReplyTo {
                message_id,
                // A reply to a message deleted since is still sent.
                allow_sending_without_reply: true,
            }),
        }
    }
}

/// A reply's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyTo {
    pub message_id: i64,
    /// Sent even when it is gone.
    pub allow_sending_without_reply: bool,
}

/// `sendMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Text {
    /// Where.
    #[serde(flatten)]
    pub spot: Spot,
    /// The words (Telegram HTML with `parse_mode`).
    pub text: String,
    /// `HTML`, or plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<ParseMode>,
    /// Formatting of plain text (Telegram `MessageEntity` objects): a menu's struck-through
    /// skipped prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<Value>,
    /// Link previews (answers have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_preview_options: Option<LinkPreview>,
    /// Buttons (an inline keyboard, as the hub's buttons make it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<Value>,
}

/// How a text is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParseMode {
    /// Telegram HTML.
    #[serde(rename = "HTML")]
    Html,
}

/// Link preview settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkPreview {
    /// No preview.
    pub is_disabled: bool,
}

impl LinkPreview {
    /// No preview.
    pub const NONE: Self = Self { is_disabled: true };
}

/// `sendRichMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rich {
    /// Where.
    #[serde(flatten)]
    pub spot: Spot,
    pub rich_message: RichMessage,
    /// Buttons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<Value>,
}

/// A rich message's Markdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RichMessage {
    /// Telegram's rich Markdown.
    pub markdown: String,
    /// Links and the like are what the Markdown says, not what Telegram guesses.
    #[serde(default)]
    pub skip_entity_detection: bool,
}

/// `editMessageText`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    pub chat_id: i64,
    /// The bot's message.
    pub message_id: i64,
    /// New words.
    pub text: String,
    /// Their formatting (Telegram `MessageEntity` objects), as [`Text::entities`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<Value>,
    /// New buttons (an empty keyboard removes them).
    pub reply_markup: Value,
}

/// `editMessageReplyMarkup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditMarkup {
    pub chat_id: i64,
    /// The bot's message.
    pub message_id: i64,
    /// New buttons.
    pub reply_markup: Value,
}

/// `answerCallbackQuery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapAnswer {
    /// The tap.
    pub callback_query_id: String,
    /// What the person sees.
    pub text: String,
}

/// `sendPhoto` or `sendDocument`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    /// Where.
    #[serde(flatten)]
    pub spot: Spot,
    /// Words under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// The file, uploaded.
    #[serde(rename = "__files")]
    pub files: Vec<Upload>,
}

/// `sendMediaGroup`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Album {
    /// Where.
    #[serde(flatten)]
    pub spot: Spot,
    /// The items, each naming its upload (`attach://<field>`).
    pub media: Vec<Media>,
    /// The files, uploaded.
    #[serde(rename = "__files")]
    pub files: Vec<Upload>,
}

/// One item of an album.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    /// `photo` or `document`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `attach://<field>`.
    pub media: String,
    /// Words under the album (on its first item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
}

/// `sendVoice`: the words to speak until the voice task made the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Voice {
    /// Where.
    #[serde(flatten)]
    pub spot: Spot,
    /// Buttons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<Value>,
    /// The transcript, when it goes along.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// What to say (until the voice is made).
    #[serde(rename = "__speak", default, skip_serializing_if = "Option::is_none")]
    pub speak: Option<Speak>,
    /// The voice, once made.
    #[serde(rename = "__files", default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Upload>,
}

/// The words of a voice message to make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Speak {
    /// The words.
    pub text: String,
    /// Language hint.
    #[serde(default)]
    pub lang: Option<String>,
    /// Rate hint (`+30%`).
    #[serde(default)]
    pub rate: Option<String>,
    /// Whether the words go along as the caption.
    #[serde(default)]
    pub transcript: bool,
}

/// `setMyCommands`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commands {
    /// The list, in order.
    pub commands: Vec<BotCommand>,
}

/// One command of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotCommand {
    /// Without the slash.
    pub command: String,
    /// What it does.
    pub description: String,
}

/// `pinChatMessage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub chat_id: i64,
    /// The bot's message.
    pub message_id: i64,
    /// Always true: the question notified when it was sent; its pin must not buzz again.
    pub disable_notification: bool,
}

/// `unpinChatMessage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unpin {
    pub chat_id: i64,
    /// The bot's message.
    pub message_id: i64,
}

/// A file a message uploads (multipart, under `field`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    /// The multipart field (`photo`, `document`, `voice`, `file<n>` of an album).
    pub field: String,
    /// The file.
    pub path: String,
    /// The name the person sees.
    #[serde(default)]
    pub name: Option<String>,
    /// MIME type.
    #[serde(default)]
    pub mime: Option<String>,
    /// The hub made it for this row alone: removed once the row no longer needs it.
    #[serde(default)]
    pub copy: bool,
}

/// A Bot API call: what [`Outgoing::call`] makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: &'static str,
    /// Parameters, as sent.
    pub params: Value,
    /// Files to upload with them (multipart when there are any).
    pub uploads: Vec<Upload>,
}

impl Outgoing {
    /// The Bot API method.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Text(_) => "sendMessage",
            Self::Rich(_) => "sendRichMessage",
            Self::Edit(_) => "editMessageText",
            Self::EditMarkup(_) => "editMessageReplyMarkup",
            Self::TapAnswer(_) => "answerCallbackQuery",
            Self::Photo(_) => "sendPhoto",
            Self::Document(_) => "sendDocument",
            Self::Album(_) => "sendMediaGroup",
            Self::Voice(_) => "sendVoice",
            Self::Commands(_) => "setMyCommands",
            Self::Pin(_) => "pinChatMessage",
            Self::Unpin(_) => "unpinChatMessage",
        }
    }

    /// Best effort: a pin or an unpin is tried once and never holds anything up; its failure
    /// costs only a pin (`sender::judge`).
    pub fn is_best_effort(&self) -> bool {
        matches!(self, Self::Pin(_) | Self::Unpin(_))
    }

    /// The call that sends it: its parameters under their Bot API names, its files apart;
    /// a message into a chat sent `attention` silent carries `disable_notification`. The
    /// senders' alone (a message's wire form is made in one place).
    pub(crate) fn call(&self, attention: Attention) -> Result<Call, serde_json::Error> {
        let mut params = serde_json::to_value(self)?;
        if let Some(o) = params.as_object_mut() {
            // Not parameters: the method is the call's, the rest the hub's.
            for key in ["method", "__files", "__speak"] {
                o.remove(key);
            }
            // Only messages into a chat notify (edits, taps and lists never do).
            if attention == Attention::Silent && self.spot().is_some() {
                o.insert("disable_notification".into(), Value::Bool(true));
            }
        }
        Ok(Call {
            method: self.method(),
            params,
            uploads: self.uploads().to_vec(),
        })
    }

    /// The files it uploads.
    pub fn uploads(&self) -> &[Upload] {
        match self {
            Self::Photo(f) | Self::Document(f) => &f.files,
            Self::Album(a) => &a.files,
            Self::Voice(v) => &v.files,
            _ => &[],
        }
    }

    /// Where it goes, for messages sent into a chat (not edits, taps or commands).
    pub fn spot(&self) -> Option<&Spot> {
        match self {
            Self::Text(t) => Some(&t.spot),
            Self::Rich(r) => Some(&r.spot),
            Self::Photo(f) | Self::Document(f) => Some(&f.spot),
            Self::Album(a) => Some(&a.spot),
            Self::Voice(v) => Some(&v.spot),
            Self::Edit(_)
            | Self::EditMarkup(_)
            | Self::TapAnswer(_)
            | Self::Commands(_)
            | Self::Pin(_)
            | Self::Unpin(_) => None,
        }
    }

    fn spot_mut(&mut self) -> Option<&mut Spot> {
        match self {
            Self::Text(t) => Some(&mut t.spot),
            Self::Rich(r) => Some(&mut r.spot),
            Self::Photo(f) | Self::Document(f) => Some(&mut f.spot),
            Self::Album(a) => Some(&mut a.spot),
            Self::Voice(v) => Some(&mut v.spot),
            Self::Edit(_)
            | Self::EditMarkup(_)
            | Self::TapAnswer(_)
            | Self::Commands(_)
            | Self::Pin(_)
            | Self::Unpin(_) => None,
        }
    }

    /// Its buttons, if it has any.
    pub fn markup(&self) -> Option<&Value> {
        match self {
            Self::Text(t) => t.reply_markup.as_ref(),
            Self::Rich(r) => r.reply_markup.as_ref(),
            Self::Voice(v) => v.reply_markup.as_ref(),
            Self::Edit(e) => Some(&e.reply_markup),
            Self::EditMarkup(e) => Some(&e.reply_markup),
            _ => None,
        }
    }

    /// Buttons under it, for the messages that carry them (texts, rich messages, voices).
    pub fn set_markup(&mut self, markup: Value) {
        match self {
            Self::Text(t) => t.reply_markup = Some(markup),
            Self::Rich(r) => r.reply_markup = Some(markup),
            Self::Voice(v) => v.reply_markup = Some(markup),
            _ => {}
        }
    }

    /// It addressed where its row is now: a row moved to a new topic (the old one was deleted)
    /// or to the main chat (its topic was closed) takes its next messages along. A reply into
    /// a topic the row left is dropped.
    pub fn placed(&self, chat: i64, thread: Option<i64>) -> Outgoing {
        let mut m = self.clone();
        if let Some(s) = m.spot_mut() {
            let planned = s.message_thread_id;
            s.chat_id = chat;
            s.message_thread_id = thread;
            if planned != thread {
                s.reply_parameters = None;
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_is_stored_as_its_call_with_its_method() {
        let m = Outgoing::Text(Text {
            spot: Spot::new(5, Some(9), Some(3)),
            text: "hi".into(),
            parse_mode: Some(ParseMode::Html),
            entities: Vec::new(),
            link_preview_options: Some(LinkPreview::NONE),
            reply_markup: None,
        });
        let stored = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(
            stored,
            json!({ "method": "sendMessage", "chat_id": 5, "message_thread_id": 9,
                    "reply_parameters": { "message_id": 3, "allow_sending_without_reply": true },
                    "text": "hi", "parse_mode": "HTML", "link_preview_options": { "is_disabled": true } })
        );
        assert_eq!(
            serde_json::from_value::<Outgoing>(stored).ok(),
            Some(m.clone())
        );
        let call = m.call(Attention::Notify).ok();
        assert_eq!(call.as_ref().map(|c| c.method), Some("sendMessage"));
        assert!(call.is_some_and(|c| c.params.get("method").is_none()
            && c.params.get("disable_notification").is_none()
            && c.uploads.is_empty()));
        let silent = m.call(Attention::Silent).ok();
        assert_eq!(
            silent.map(|c| c.params["disable_notification"].clone()),
            Some(json!(true))
        );
        // An edit never notifies: it takes no such parameter.
        let edit = Outgoing::EditMarkup(EditMarkup {
            chat_id: 5,
            message_id: 3,
            reply_markup: json!({}),
        });
        assert!(
            edit.call(Attention::Silent)
                .is_ok_and(|c| c.params.get("disable_notification").is_none())
        );
    }

    #[test]
    fn files_and_words_to_speak_are_no_parameters() {
        let up = Upload {
            field: "voice".into(),
            path: "/v.ogg".into(),
            name: Some("voice.ogg".into()),
            mime: None,
            copy: true,
        };
        let m = Outgoing::Voice(Voice {
            spot: Spot::new(1, None, None),
            reply_markup: None,
            caption: Some("words".into()),
            speak: None,
            files: vec![up.clone()],
        });
        let call = m.call(Attention::Notify).ok();
        assert_eq!(
            call.as_ref().map(|c| c.params.clone()),
            Some(json!({ "chat_id": 1, "caption": "words" }))
        );
        assert_eq!(call.map(|c| c.uploads), Some(vec![up]));
    }

    #[test]
    fn a_message_moved_out_of_its_topic_no_longer_replies_there() {
        let m = Outgoing::Text(Text {
            spot: Spot::new(5, Some(9), Some(3)),
            text: "hi".into(),
            parse_mode: None,
            entities: Vec::new(),
            link_preview_options: None,
            reply_markup: None,
        });
        assert_eq!(m.placed(5, Some(9)), m);
        let moved = m.placed(5, None);
        assert_eq!(moved.spot(), Some(&Spot::new(5, None, None)));
    }
}
