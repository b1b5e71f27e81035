//! Narrow, typed views of the update fields the hub reads. They borrow a parsed
//! `serde_json::Value` and never fail: a missing or oddly typed field reads as `None`.

use serde_json::Value;

/// What an update is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateKind {
    /// `message`
    Message,
    /// `edited_message`
    EditedMessage,
    /// `callback_query`
    CallbackQuery,
    /// `message_reaction`
    MessageReaction,
    /// `my_chat_member` (the person blocked or unblocked the bot)
    MyChatMember,
    /// Anything else, by its field name.
    Other(String),
}

#[derive(Debug, Clone, Copy)]
pub struct UpdateView<'a>(pub &'a Value);

impl<'a> UpdateView<'a> {
    /// `update_id`.
    pub fn id(&self) -> Option<i64> {
        self.0.get("update_id").and_then(Value::as_i64)
    }

    /// The kind, from the one field besides `update_id`.
    pub fn kind(&self) -> UpdateKind {
        let Some(map) = self.0.as_object() else {
            return UpdateKind::Other(String::new());
        };
        let field = map
            .keys()
            .find(|k| *k != "update_id")
            .map(String::as_str)
            .unwrap_or("");
        match field {
            "message" => UpdateKind::Message,
            "edited_message" => UpdateKind::EditedMessage,
            "callback_query" => UpdateKind::CallbackQuery,
            "message_reaction" => UpdateKind::MessageReaction,
            "my_chat_member" => UpdateKind::MyChatMember,
            other => UpdateKind::Other(other.to_owned()),
        }
    }

    /// The message of a `message` or `edited_message` update.
    pub fn message(&self) -> Option<MessageView<'a>> {
        self.0
            .get("message")
            .or_else(|| self.0.get("edited_message"))
            .map(MessageView)
    }

    /// The callback query.
    pub fn callback(&self) -> Option<CallbackView<'a>> {
        self.0.get("callback_query").map(CallbackView)
    }

    /// The user who caused the update, whatever its kind.
    pub fn sender_id(&self) -> Option<i64> {
        let inner = self
            .0
            .as_object()?
            .iter()
            .find(|(k, _)| *k != "update_id")?
            .1;
        inner
            .get("from")
            .or_else(|| inner.get("user"))
            .and_then(|u| u.get("id"))
            .and_then(Value::as_i64)
    }

    /// The name of the user who caused the update (first name, and the last when given).
    pub fn sender_name(&self) -> Option<String> {
        let inner = self
            .0
            .as_object()?
            .iter()
            .find(|(k, _)| *k != "update_id")?
            .1;
        let user = inner.get("from").or_else(|| inner.get("user"))?;
        let first = user.get("first_name").and_then(Value::as_str)?;
        Some(match user.get("last_name").and_then(Value::as_str) {
            Some(last) if !last.is_empty() => format!("{first} {last}"),
            _ => first.to_owned(),
        })
    }

    /// The chat the update belongs to, whatever its kind.
    pub fn chat_id(&self) -> Option<i64> {
        let inner = self
            .0
            .as_object()?
            .iter()
            .find(|(k, _)| *k != "update_id")?
            .1;
        inner
            .get("chat")
            .or_else(|| inner.get("message").and_then(|m| m.get("chat")))
            .and_then(|c| c.get("id"))
            .and_then(Value::as_i64)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct MessageView<'a>(pub &'a Value);

impl<'a> MessageView<'a> {
    fn int(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(Value::as_i64)
    }

    /// `message_id`.
    pub fn id(&self) -> Option<i64> {
        self.int("message_id")
    }

    /// `chat.id`.
    pub fn chat_id(&self) -> Option<i64> {
        self.0
            .get("chat")
            .and_then(|c| c.get("id"))
            .and_then(Value::as_i64)
    }

    /// `chat.type` (`private`, `group`, ...).
    pub fn chat_type(&self) -> Option<&'a str> {
        self.0
            .get("chat")
            .and_then(|c| c.get("type"))
            .and_then(Value::as_str)
    }

    /// `from.id`.
    pub fn from_id(&self) -> Option<i64> {
        self.0
            .get("from")
            .and_then(|u| u.get("id"))
            .and_then(Value::as_i64)
    }

    /// `from.is_bot`.
    pub fn from_is_bot(&self) -> bool {
        self.0
            .get("from")
            .and_then(|u| u.get("is_bot"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `text`.
    pub fn text(&self) -> Option<&'a str> {
        self.0.get("text").and_then(Value::as_str)
    }

    /// `caption`.
    pub fn caption(&self) -> Option<&'a str> {
        self.0.get("caption").and_then(Value::as_str)
    }

    /// `date`: when the person sent it (Unix seconds).
    pub fn date(&self) -> Option<i64> {
        self.int("date")
    }

    /// `message_thread_id` when the message is in a topic.
    pub fn thread_id(&self) -> Option<i64> {
        self.int("message_thread_id")
    }

    /// `reply_to_message.message_id`.
    pub fn reply_to_message_id(&self) -> Option<i64> {
        self.0
            .get("reply_to_message")
            .and_then(|m| m.get("message_id"))
            .and_then(Value::as_i64)
    }

    /// `media_group_id`.
    pub fn media_group_id(&self) -> Option<&'a str> {
        self.0.get("media_group_id").and_then(Value::as_str)
    }

    /// What the message carries besides text, by its field name (`photo`, `document`, ...):
    /// content that only reaches pi once files do.
    pub fn attachment(&self) -> Option<&'static str> {
        [
            // An animation also carries `document`: the more specific field first.
            "photo",
            "animation",
            "video",
            "video_note",
            "voice",
            "audio",
            "sticker",
            "document",
            "location",
            "venue",
            "contact",
            "poll",
            "dice",
            "story",
            "paid_media",
            "checklist",
        ]
        .into_iter()
        .find(|k| self.0.get(*k).is_some())
    }

    /// The service-message field, if this is one of the topic service messages.
    pub fn topic_service(&self) -> Option<&'static str> {
        [
            "forum_topic_created",
            "forum_topic_edited",
            "forum_topic_closed",
            "forum_topic_reopened",
        ]
        .into_iter()
        .find(|k| self.0.get(*k).is_some())
    }

    /// A bot command at the start of the text: `("start", "args")`, the `@bot` suffix removed.
    pub fn command(&self) -> Option<(&'a str, &'a str)> {
        let text = self.text()?;
        let rest = text.strip_prefix('/')?;
        let (head, args) = match rest.find(char::is_whitespace) {
            Some(i) => (&rest[..i], rest[i..].trim()),
            None => (rest, ""),
        };
        let name = head.split('@').next().unwrap_or(head);
        let valid =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        valid.then_some((name, args))
    }
}

/// A callback query.
#[derive(Debug, Clone, Copy)]
pub struct CallbackView<'a>(pub &'a Value);

impl<'a> CallbackView<'a> {
    /// Query id.
    pub fn id(&self) -> Option<&'a str> {
        self.0.get("id").and_then(Value::as_str)
    }

    /// `data`.
    pub fn data(&self) -> Option<&'a str> {
        self.0.get("data").and_then(Value::as_str)
    }

    /// `from.id`.
    pub fn from_id(&self) -> Option<i64> {
        self.0
            .get("from")
            .and_then(|u| u.get("id"))
            .and_then(Value::as_i64)
    }

    /// The message with the button.
    pub fn message(&self) -> Option<MessageView<'a>> {
        self.0.get("message").map(MessageView)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn views_read_what_is_there_and_tolerate_the_rest() {
        let u = json!({"update_id": 3, "message": {"message_id": 9, "from": {"id": 5, "is_bot": false},
            "chat": {"id": 5, "type": "private"}, "text": "/start@my_bot abc 123", "message_thread_id": 77,
            "future": {"x": 1}}});
        let v = UpdateView(&u);
        assert_eq!(v.kind(), UpdateKind::Message);
        assert_eq!(
            (v.id(), v.sender_id(), v.chat_id()),
            (Some(3), Some(5), Some(5))
        );
        let m = v.message();
        assert_eq!(m.and_then(|m| m.command()), Some(("start", "abc 123")));
        assert_eq!(m.and_then(|m| m.thread_id()), Some(77));
        let odd = json!({"update_id": 4, "poll_answer": {"user": {"id": 8}}});
        assert_eq!(
            UpdateView(&odd).kind(),
            UpdateKind::Other("poll_answer".into())
        );
        assert_eq!(UpdateView(&odd).sender_id(), Some(8));
        assert!(UpdateView(&odd).message().is_none());
        let weird = json!({"update_id": 5, "message": {"text": 42, "chat": "nope"}});
        let m = UpdateView(&weird).message();
        assert_eq!(m.and_then(|m| m.text()), None);
        assert_eq!(m.and_then(|m| m.chat_id()), None);
        let photo = json!({"photo": [{"file_id": "x"}], "caption": "look"});
        assert_eq!(MessageView(&photo).attachment(), Some("photo"));
        assert_eq!(MessageView(&json!({"text": "hi"})).attachment(), None);
        let cmd = json!({"text": "/ hello"});
        assert_eq!(MessageView(&cmd).command(), None);
        let cb = json!({"update_id": 6, "callback_query": {"id": "q1", "from": {"id": 5}, "data": "x",
            "message": {"message_id": 2, "chat": {"id": 5}}}});
        let c = UpdateView(&cb).callback();
        assert_eq!(c.and_then(|c| c.data()), Some("x"));
        assert_eq!(UpdateView(&cb).chat_id(), Some(5));
    }
}
