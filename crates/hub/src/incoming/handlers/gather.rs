//! Messages that belong together become one turn: an album (`media_group_id`), forwards with
//! the person's comment (before or after them), and a long text Telegram split into several
//! messages. Only what Telegram marks as part of a group is held, and only while the rest can
//! still arrive: an ordinary message never waits.
//!
//! A group is a turn that is not ready (`gather_until_ms > 0`) under a `group_key`; the parts
//! that follow join it in their own update's transaction; the inbound task takes the turn
//! over when the group's time is up, or at once when a part closes it (a comment after
//! forwards, the short last piece of a long text).

use serde_json::Value;
use store::StoreError;
use store::files::{self, Origin};
use store::journal::{self, Outcome};
use store::turns::{self, Turn};
use telegram::view::MessageView;

use super::Say;
use crate::pi::inbound::media::MediaRef;
use crate::pi::inbound::prompt;

/// How long an album waits for its next part (Telegram sends the parts back to back).
pub const ALBUM_WAIT_MS: i64 = 1000;
/// How long forwards wait for the next forward or the person's comment.
pub const FORWARD_WAIT_MS: i64 = 1000;
/// How long a text at Telegram's length limit waits for its continuation.
pub const LONG_TEXT_WAIT_MS: i64 = 1500;
/// A text this long (UTF-16 units) may be the first piece of one Telegram split (at 4096).
pub const LONG_TEXT_AT: usize = 4000;

/// What a message is, for grouping.
pub(super) struct Part<'a> {
    pub msg: &'a MessageView<'a>,
    /// The person's words (text or caption).
    pub text: &'a str,
    pub media: &'a [MediaRef],
    /// Who wrote what was forwarded, when it is a forward.
    pub forward_from: Option<String>,
}

impl Part<'_> {
    fn plain_text(&self) -> bool {
        self.forward_from.is_none()
            && self.media.is_empty()
            && !self.text.trim().is_empty()
            && !self.text.starts_with('/')
    }

    fn long(&self) -> bool {
        self.plain_text() && tg_format::utf16::len(self.text) >= LONG_TEXT_AT
    }
}

fn place(msg: &MessageView<'_>) -> String {
    format!(
        "{}:{}",
        msg.chat_id().unwrap_or_default(),
        msg.thread_id().unwrap_or_default()
    )
}

fn album_key(msg: &MessageView<'_>) -> Option<String> {
    msg.media_group_id()
        .map(|g| format!("album:{}:{g}", place(msg)))
}

fn forward_key(msg: &MessageView<'_>) -> String {
    format!("forward:{}", place(msg))
}

fn long_key(msg: &MessageView<'_>) -> String {
    format!("long:{}", place(msg))
}

/// Who wrote a forwarded message, from its `forward_origin`.
pub(super) fn forward_origin(msg: &MessageView<'_>) -> Option<String> {
    let o = msg.0.get("forward_origin")?;
    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let name = match o.get("type").and_then(Value::as_str) {
        Some("user") => {
            let u = o.get("sender_user");
            s(u.and_then(|u| u.get("username")))
                .map(|n| format!("@{n}"))
                .or_else(|| s(u.and_then(|u| u.get("first_name"))))
        }
        Some("hidden_user") => s(o.get("sender_user_name")),
        Some("chat") => s(o.get("sender_chat").and_then(|c| c.get("title"))),
        Some("channel") => s(o.get("chat").and_then(|c| c.get("title"))),
        _ => None,
    };
    Some(name.unwrap_or_else(|| "unknown".into()))
}

/// The group a new turn starts, and until when it gathers. `None`: it does not start one.
pub(super) fn starts(say: &Say<'_>, part: &Part<'_>) -> Result<Option<(String, i64)>, StoreError> {
    let now = say.ctx.now_ms;
    if let Some(key) = album_key(part.msg) {
        return Ok(Some((key, now + ALBUM_WAIT_MS)));
    }
    if part.forward_from.is_some() {
        return Ok(Some((forward_key(part.msg), now + FORWARD_WAIT_MS)));
    }
    if part.long() {
        return Ok(Some((long_key(part.msg), now + LONG_TEXT_WAIT_MS)));
    }
    // A comment sent right before forwards (what Telegram clients do for "forward with a
    // comment"): only when the forward is journaled already, so the comment never waits.
    if part.plain_text()
        && let Some(next) = journal::next_after(say.tx, say.entry.update_id)?
        && let Ok(v) = serde_json::from_str::<Value>(&next.raw)
        && let Some(m) = v.get("message")
    {
        let m = MessageView(m);
        let adjacent = m.chat_id() == part.msg.chat_id()
            && m.thread_id() == part.msg.thread_id()
            && m.id() == part.msg.id().map(|i| i + 1)
            && m.from_id() == part.msg.from_id();
        if adjacent && m.0.get("forward_origin").is_some() {
            return Ok(Some((forward_key(part.msg), now + FORWARD_WAIT_MS)));
        }
    }
    Ok(None)
}

/// Joins `part` to the group it belongs to, if one is gathering. Returns the outcome for the
/// journal, or `None` when the message starts its own turn.
pub(super) fn join(say: &mut Say<'_>, part: &Part<'_>) -> Result<Option<Outcome>, StoreError> {
    let now = say.ctx.now_ms;
    if let Some(key) = album_key(part.msg)
        && let Some(t) = turns::gathering(say.tx, &key)?
    {
        let text = joined_text(&t.text, part.text, "\n\n");
        add_files(say, &t, part)?;
        turns::gather(say.tx, t.id, &text, now + ALBUM_WAIT_MS)?;
        say.after.inbound = true;
        return Ok(Some(Outcome::JoinedAlbum));
    }
    if let Some(t) = turns::gathering(say.tx, &forward_key(part.msg))? {
        if let Some(from) = &part.forward_from {
            add_files(say, &t, part)?;
            turns::append_context(say.tx, t.id, &prompt::forward_block(from, part.text))?;
            turns::gather(say.tx, t.id, &t.text, now + FORWARD_WAIT_MS)?;
            say.after.inbound = true;
            return Ok(Some(Outcome::JoinedForward));
        }
        // The person's comment after the forwards closes the group.
        if part.plain_text() && t.text.trim().is_empty() {
            turns::gather(say.tx, t.id, part.text, 0)?;
            say.after.inbound = true;
            return Ok(Some(Outcome::JoinedComment));
        }
    }
    // A forward right after a comment that still waits (in another update batch than the
    // comment, so the look-ahead in `starts` missed it): they become one prompt again.
    if let Some(from) = &part.forward_from
        && let (Some(chat), Some(id)) = (part.msg.chat_id(), part.msg.id())
        && let Some(t) = turns::by_message(say.tx, chat, id - 1)?
        && t.state == turns::TurnState::Queued
        && t.thread_id == part.msg.thread_id()
        && !t.text.trim().is_empty()
        && t.group_key.is_none()
    {
        let key = forward_key(part.msg);
        turns::regather(say.tx, t.id, &key, now + FORWARD_WAIT_MS)?;
        add_files(say, &t, part)?;
        turns::append_context(say.tx, t.id, &prompt::forward_block(from, part.text))?;
        say.after.inbound = true;
        return Ok(Some(Outcome::JoinedForward));
    }
    if part.plain_text()
        && let Some(t) = turns::gathering(say.tx, &long_key(part.msg))?
    {
        let text = joined_text(&t.text, part.text, "\n");
        // Another piece at the limit may have more after it.
        let until = if part.long() {
            now + LONG_TEXT_WAIT_MS
        } else {
            0
        };
        turns::gather(say.tx, t.id, &text, until)?;
        say.after.inbound = true;
        return Ok(Some(Outcome::JoinedLongText));
    }
    Ok(None)
}

fn joined_text(before: &str, more: &str, sep: &str) -> String {
    match (before.trim().is_empty(), more.trim().is_empty()) {
        (_, true) => before.to_owned(),
        (true, false) => more.to_owned(),
        (false, false) => format!("{before}{sep}{more}"),
    }
}

/// Records the part's files under turn `t`.
pub(super) fn add_files(say: &mut Say<'_>, t: &Turn, part: &Part<'_>) -> Result<(), StoreError> {
    add_files_to(say, t.id, part)
}

/// Records the part's files under turn `turn`.
pub(super) fn add_files_to(
    say: &mut Say<'_>,
    turn: i64,
    part: &Part<'_>,
) -> Result<(), StoreError> {
    let origin = if part.forward_from.is_some() {
        Origin::Forward
    } else {
        Origin::Message
    };
    for (seq, m) in part.media.iter().enumerate() {
        files::create(
            say.tx,
            &files::NewFile {
                turn_id: turn,
                source_update_id: Some(say.entry.update_id),
                seq: seq as i64,
                origin,
                kind: m.kind,
                file_id: &m.file_id,
                file_unique_id: m.file_unique_id.as_deref(),
                name: m.name.as_deref(),
                mime: m.mime.as_deref(),
                size: m.size,
            },
            say.ctx.now_ms,
        )?;
    }
    if !part.media.is_empty() {
        say.after.inbound = true;
    }
    Ok(())
}
