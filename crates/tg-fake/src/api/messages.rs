//! Text and rich messages: send, edit, delete, drafts, chat actions, reactions.

use serde_json::{Value, json};
use tg_model::rich;

use super::{MAX_TEXT, chat_id, formatted_text, reply_markup, reply_to, thread};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::world::{ActionEvent, DraftEvent, Message, Sender, World};

const NOT_MODIFIED: &str = "message is not modified: specified new message content and reply \
                            markup are exactly the same as a current content and reply markup of \
                            the message";

const CHAT_ACTIONS: [&str; 11] = [
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
];

/// Stores a message from the bot and returns it as Telegram's `Message`.
pub(super) fn deliver(world: &mut World, bot: usize, chat: i64, mut msg: Message) -> Value {
    msg.sender = Some(Sender::Bot);
    msg.date = world.clock.now_unix();
    msg.at_ms = world.clock.now_ms();
    let id = world.bots[bot].chat_mut(chat).add_message(msg);
    world.stored_message_json(bot, chat, id)
}

pub(super) fn send_message(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let c = &b.chats[&chat];
    let thread_id = thread(b, c, p)?;
    let (text, entities) = formatted_text(p, "text", "entities", MAX_TEXT, false)?;
    let markup = reply_markup(p, false)?;
    let reply = reply_to(c, p)?;
    let msg = Message {
        thread_id,
        text: Some(text),
        entities,
        reply_to: reply,
        reply_markup: markup,
        link_preview_options: p.json("link_preview_options")?,
        ..Message::default()
    };
    Ok(deliver(world, bot, chat, msg))
}

fn rich_content(p: &Params) -> Result<Value, ApiError> {
    let input = p
        .json("rich_message")?
        .ok_or_else(|| ApiError::bad_request("rich_message is empty"))?;
    rich::convert(&input, &rich::Limits::default()).map_err(ApiError::bad_request)
}

pub(super) fn send_rich_message(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let c = &b.chats[&chat];
    let thread_id = thread(b, c, p)?;
    let content = rich_content(p)?;
    let markup = reply_markup(p, false)?;
    let reply = reply_to(c, p)?;
    let msg = Message {
        thread_id,
        rich: Some(content),
        reply_to: reply,
        reply_markup: markup,
        ..Message::default()
    };
    Ok(deliver(world, bot, chat, msg))
}

/// The message an edit targets: must exist, be live and be the bot's.
fn editable(world: &World, bot: usize, p: &Params) -> Result<(i64, i64), ApiError> {
    if p.has("inline_message_id") {
        return Err(ApiError::bad_request("MESSAGE_ID_INVALID"));
    }
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let id = p
        .int("message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))?;
    let msg = b.chats[&chat]
        .live_message(id)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if msg.sender != Some(Sender::Bot) {
        return Err(ApiError::bad_request("message can't be edited"));
    }
    Ok((chat, id))
}

fn content_snapshot(m: &Message) -> Value {
    json!({ "text": m.text, "entities": m.entities, "rich_message": m.rich, "caption": m.caption })
}

pub(super) fn edit_message_text(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let (chat, id) = editable(world, bot, p)?;
    let has_text = p.has("text");
    let has_rich = p.has("rich_message");
    let (text, entities, rich) = match (has_text, has_rich) {
        (true, true) => {
            return Err(ApiError::bad_request(
                "only one of text and rich_message can be specified",
            ));
        }
        (false, false) => return Err(ApiError::bad_request("message text is empty")),
        (true, false) => {
            let (t, e) = formatted_text(p, "text", "entities", MAX_TEXT, false)?;
            (Some(t), e, None)
        }
        (false, true) => (None, Vec::new(), Some(rich_content(p)?)),
    };
    let markup = reply_markup(p, true)?;
    let link_preview = p.json("link_preview_options")?;
    let now = world.clock.now_unix();
    let msg = world.bots[bot]
        .chat_mut(chat)
        .messages
        .get_mut(&id)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if msg.media.is_some() || msg.service.is_some() {
        return Err(ApiError::bad_request(
            "there is no text in the message to edit",
        ));
    }
    if msg.text == text
        && msg.entities == entities
        && msg.rich == rich
        && msg.reply_markup == markup
    {
        return Err(ApiError::bad_request(NOT_MODIFIED));
    }
    msg.history.push(content_snapshot(msg));
    msg.text = text;
    msg.entities = entities;
    msg.rich = rich;
    // Telegram drops an inline keyboard that an edit does not repeat.
    msg.reply_markup = markup;
    if link_preview.is_some() {
        msg.link_preview_options = link_preview;
    }
    msg.edit_date = Some(now);
    Ok(world.stored_message_json(bot, chat, id))
}

pub(super) fn edit_reply_markup(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let (chat, id) = editable(world, bot, p)?;
    let markup = reply_markup(p, true)?;
    let now = world.clock.now_unix();
    let msg = world.bots[bot]
        .chat_mut(chat)
        .messages
        .get_mut(&id)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if msg.reply_markup == markup {
        return Err(ApiError::bad_request(NOT_MODIFIED));
    }
    msg.reply_markup = markup;
    msg.edit_date = Some(now);
    Ok(world.stored_message_json(bot, chat, id))
}

pub(super) fn delete_message(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let chat = chat_id(&world.bots[bot], p)?;
    let id = p
        .int("message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))?;
    match world.bots[bot].chat_mut(chat).messages.get_mut(&id) {
        Some(m) if !m.deleted => {
            m.deleted = true;
            Ok(Value::Bool(true))
        }
        _ => Err(ApiError::bad_request("message to delete not found")),
    }
}

pub(super) fn delete_messages(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let chat = chat_id(&world.bots[bot], p)?;
    let ids = p.json("message_ids")?.unwrap_or(Value::Null);
    let ids: Vec<i64> = ids
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    if ids.is_empty() || ids.len() > 100 {
        return Err(ApiError::bad_request(
            "message_ids must contain 1-100 identifiers",
        ));
    }
    let c = world.bots[bot].chat_mut(chat);
    for id in ids {
        if let Some(m) = c.messages.get_mut(&id) {
            m.deleted = true;
        }
    }
    Ok(Value::Bool(true))
}

pub(super) fn send_chat_action(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let thread_id = thread(b, &b.chats[&chat], p)?;
    let action = p.string("action")?.unwrap_or_default();
    if !CHAT_ACTIONS.contains(&action.as_str()) {
        return Err(ApiError::bad_request("wrong parameter action in request"));
    }
    let at_ms = world.clock.now_ms();
    world.bots[bot].chat_mut(chat).push_action(ActionEvent {
        at_ms,
        seq: 0,
        thread_id,
        action,
    });
    Ok(Value::Bool(true))
}

pub(super) fn send_draft(world: &mut World, bot: usize, p: &Params, rich_draft: bool) -> ApiResult {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    // "Unique identifier for the target private chat" (Bot API 10.2).
    if b.chats[&chat].group.is_some() {
        return Err(ApiError::bad_request("TEXTDRAFT_PEER_INVALID"));
    }
    let thread_id = thread(b, &b.chats[&chat], p)?;
    let draft_id = p.int("draft_id")?.unwrap_or(0);
    if draft_id == 0 {
        return Err(ApiError::bad_request("draft_id must be non-zero"));
    }
    let (text, entities, rich) = if rich_draft {
        let content = rich_content(p)?;
        (rich::plain_text(&content), Vec::new(), Some(content))
    } else {
        // Empty text is allowed: the client shows a "Thinking…" placeholder.
        let (t, e) = formatted_text(p, "text", "entities", MAX_TEXT, true)?;
        (t, e, None)
    };
    let at_ms = world.clock.now_ms();
    world.bots[bot].chat_mut(chat).push_draft(DraftEvent {
        at_ms,
        seq: 0,
        thread_id,
        draft_id,
        text,
        entities,
        rich,
    });
    Ok(Value::Bool(true))
}

pub(super) fn set_reaction(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let chat = chat_id(&world.bots[bot], p)?;
    let id = p
        .int("message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))?;
    let reaction = p.json("reaction")?.unwrap_or_else(|| json!([]));
    let list = reaction
        .as_array()
        .ok_or_else(|| ApiError::bad_request("can't parse reaction types JSON object"))?
        .clone();
    for r in &list {
        match r.get("type").and_then(Value::as_str) {
            Some("emoji") if r.get("emoji").and_then(Value::as_str).is_some() => {}
            Some("custom_emoji" | "paid") => {}
            _ => return Err(ApiError::bad_request("REACTION_INVALID")),
        }
    }
    let msg = world.bots[bot]
        .chat_mut(chat)
        .messages
        .get_mut(&id)
        .filter(|m| !m.deleted)
        .ok_or_else(|| ApiError::bad_request("message to react not found"))?;
    msg.bot_reactions = list;
    Ok(Value::Bool(true))
}

/// `pinChatMessage` / `unpinChatMessage`: a live message of the chat pinned or not. Unpinning
/// without `message_id` unpins the most recent pinned message; unpinning one that is not
/// pinned changes nothing and succeeds.
pub(super) fn set_pinned(world: &mut World, bot: usize, p: &Params, pinned: bool) -> ApiResult {
    let chat = chat_id(&world.bots[bot], p)?;
    let c = world.bots[bot].chat_mut(chat);
    let id = match p.int("message_id")? {
        Some(id) => id,
        None if !pinned => match c.messages.values().rev().find(|m| m.pinned) {
            Some(m) => m.id,
            None => return Ok(Value::Bool(true)),
        },
        None => return Err(ApiError::bad_request("message identifier is not specified")),
    };
    let msg = c
        .messages
        .get_mut(&id)
        .filter(|m| !m.deleted)
        .ok_or_else(|| ApiError::bad_request("message to pin not found"))?;
    msg.pinned = pinned;
    Ok(Value::Bool(true))
}
