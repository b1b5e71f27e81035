//! Callback answers, bot commands, webhooks.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::world::{CallbackAnswer, World};

const QUERY_INVALID: &str = "query is too old and response timeout expired or query ID is invalid";

pub(super) fn answer_callback_query(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let id = p.string("callback_query_id")?.unwrap_or_default();
    let text = p.string("text")?.filter(|t| !t.is_empty());
    if text.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return Err(ApiError::bad_request("MESSAGE_TOO_LONG"));
    }
    let show_alert = p.bool("show_alert")?.unwrap_or(false);
    let url = p.string("url")?.filter(|u| !u.is_empty());
    let at_ms = world.clock.now_ms();
    let b = &mut world.bots[bot];
    let cb = b
        .callbacks
        .get_mut(&id)
        .filter(|c| !c.answered)
        .ok_or_else(|| ApiError::bad_request(QUERY_INVALID))?;
    cb.answered = true;
    let chat = cb.chat_id;
    b.chat_mut(chat).callback_answers.push(CallbackAnswer {
        at_ms,
        callback_query_id: id,
        text,
        show_alert,
        url,
    });
    Ok(Value::Bool(true))
}

fn commands_key(p: &Params) -> Result<String, ApiError> {
    let scope = p
        .json("scope")?
        .unwrap_or_else(|| json!({ "type": "default" }));
    let lang = p.string("language_code")?.unwrap_or_default();
    Ok(format!("{scope}|{lang}"))
}

pub(super) fn set_my_commands(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let commands = p.json("commands")?.unwrap_or(Value::Null);
    let list = commands
        .as_array()
        .ok_or_else(|| ApiError::bad_request("can't parse commands JSON object"))?;
    if list.len() > 100 {
        return Err(ApiError::bad_request("too many commands"));
    }
    for c in list {
        let name = c.get("command").and_then(Value::as_str).unwrap_or_default();
        let valid = (1..=32).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(ApiError::bad_request("BOT_COMMAND_INVALID"));
        }
        let desc = c
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !(1..=256).contains(&desc.chars().count()) {
            return Err(ApiError::bad_request("BOT_COMMAND_DESCRIPTION_INVALID"));
        }
    }
    let key = commands_key(p)?;
    world.bots[bot].commands.insert(key, commands);
    Ok(Value::Bool(true))
}

pub(super) fn get_my_commands(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let key = commands_key(p)?;
    Ok(world.bots[bot]
        .commands
        .get(&key)
        .cloned()
        .unwrap_or_else(|| json!([])))
}

pub(super) fn delete_my_commands(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let key = commands_key(p)?;
    world.bots[bot].commands.remove(&key);
    Ok(Value::Bool(true))
}

pub(super) fn set_webhook(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    // Everything is checked before anything changes: a refused call has no effect.
    let url = p.string("url")?.unwrap_or_default();
    let drop_pending = p.bool("drop_pending_updates")?.unwrap_or(false);
    let allowed = p.json("allowed_updates")?;
    if !url.is_empty() && !url.starts_with("https://") {
        return Err(ApiError::bad_request(
            "bad webhook: An HTTPS URL must be provided for webhook",
        ));
    }
    let b = &mut world.bots[bot];
    if drop_pending {
        b.updates.clear();
    }
    if let Some(allowed) = allowed {
        b.allowed_updates = serde_json::from_value(allowed).ok();
    }
    if url.is_empty() {
        b.webhook = None;
    } else {
        b.webhook = Some(json!({ "url": url }));
        // A waiting long poll ends with a conflict once a webhook exists.
        b.supersede_polls();
    }
    Ok(Value::Bool(true))
}

pub(super) fn delete_webhook(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let b = &mut world.bots[bot];
    if p.bool("drop_pending_updates")?.unwrap_or(false) {
        b.updates.clear();
    }
    b.webhook = None;
    Ok(Value::Bool(true))
}

pub(super) fn get_webhook_info(world: &mut World, bot: usize) -> ApiResult {
    let b = &world.bots[bot];
    let url = b
        .webhook
        .as_ref()
        .and_then(|w| w.get("url"))
        .cloned()
        .unwrap_or_else(|| json!(""));
    let mut info = json!({
        "url": url,
        "has_custom_certificate": false,
        "pending_update_count": b.updates.len(),
    });
    if let Some(a) = &b.allowed_updates {
        info["allowed_updates"] = json!(a);
    }
    Ok(info)
}

/// `getChatMember`: the bot's own standing in a group (an administrator with its topic
/// right, or a member), a person's (a member, or `left`); in a private chat both are members.
pub(super) fn get_chat_member(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let chat = super::chat_id(&world.bots[bot], p)?;
    let user = p
        .int("user_id")?
        .ok_or_else(|| ApiError::bad_request("user_id is empty"))?;
    let b = &world.bots[bot];
    let user_json = if user == b.id {
        b.user_json()
    } else {
        world
            .persons
            .get(&user)
            .map(crate::world::Person::user_json)
            .ok_or_else(|| ApiError::bad_request("user not found"))?
    };
    let Some(g) = b.chats[&chat].group.as_ref() else {
        return Ok(json!({ "status": "member", "user": user_json }));
    };
    Ok(if user == b.id && g.bot_admin {
        json!({
            "status": "administrator", "user": user_json, "can_be_edited": false,
            "is_anonymous": false, "can_manage_chat": true, "can_delete_messages": true,
            "can_manage_video_chats": false, "can_restrict_members": false,
            "can_promote_members": false, "can_change_info": false, "can_invite_users": true,
            "can_post_stories": false, "can_edit_stories": false, "can_delete_stories": false,
            "can_pin_messages": true, "can_manage_topics": g.bot_can_manage_topics,
        })
    } else if user == b.id || g.members.contains(&user) {
        json!({ "status": "member", "user": user_json })
    } else {
        json!({ "status": "left", "user": user_json })
    })
}
