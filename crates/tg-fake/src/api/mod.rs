//! Bot API methods with real semantics. Each handler runs under the world lock and either
//! commits its whole effect or none of it.

pub mod media;
mod messages;
mod misc;
pub mod topics;
pub mod updates;

use serde_json::Value;
use tg_model::{entities, html, utf16};

use crate::api_spec::MethodSpec;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::world::{Bot, Chat, TopicState, World};

/// Telegram's limit for message text, in UTF-16 code units after entity parsing.
pub const MAX_TEXT: usize = 4096;
/// The most buttons an inline keyboard may have.
pub const MAX_INLINE_BUTTONS: usize = 100;
/// Telegram's limit for captions.
pub const MAX_CAPTION: usize = 1024;
/// `callback_data` limit in bytes.
pub const MAX_CALLBACK_DATA: usize = 64;

/// Runs a synchronous method. `getUpdates` is handled by [`updates`] because it waits.
pub fn call(world: &mut World, bot: usize, spec: &MethodSpec, p: &Params) -> ApiResult {
    match spec.name {
        "getMe" => Ok(world.bots[bot].get_me()),
        "sendMessage" => messages::send_message(world, bot, p),
        "sendRichMessage" => messages::send_rich_message(world, bot, p),
        "editMessageText" => messages::edit_message_text(world, bot, p),
        "editMessageReplyMarkup" => messages::edit_reply_markup(world, bot, p),
        "editMessageCaption" => media::edit_caption(world, bot, p),
        "deleteMessage" => messages::delete_message(world, bot, p),
        "deleteMessages" => messages::delete_messages(world, bot, p),
        "sendChatAction" => messages::send_chat_action(world, bot, p),
        "sendMessageDraft" => messages::send_draft(world, bot, p, false),
        "sendRichMessageDraft" => messages::send_draft(world, bot, p, true),
        "setMessageReaction" => messages::set_reaction(world, bot, p),
        "pinChatMessage" => messages::set_pinned(world, bot, p, true),
        "unpinChatMessage" => messages::set_pinned(world, bot, p, false),
        "sendDocument" => media::send_media(world, bot, p, crate::world::MediaKind::Document),
        "sendMediaGroup" => media::send_media_group(world, bot, p),
        "sendPhoto" => media::send_media(world, bot, p, crate::world::MediaKind::Photo),
        "sendVoice" => media::send_media(world, bot, p, crate::world::MediaKind::Voice),
        "sendAudio" => media::send_media(world, bot, p, crate::world::MediaKind::Audio),
        "sendVideo" => media::send_media(world, bot, p, crate::world::MediaKind::Video),
        "sendAnimation" => media::send_media(world, bot, p, crate::world::MediaKind::Animation),
        "getFile" => media::get_file(world, bot, p),
        "createForumTopic" => topics::create(world, bot, p),
        "editForumTopic" => topics::edit(world, bot, p),
        "closeForumTopic" => topics::set_state(world, bot, p, TopicState::Closed),
        "reopenForumTopic" => topics::set_state(world, bot, p, TopicState::Open),
        "deleteForumTopic" => topics::delete(world, bot, p),
        "answerCallbackQuery" => misc::answer_callback_query(world, bot, p),
        "getChatMember" => misc::get_chat_member(world, bot, p),
        "setMyCommands" => misc::set_my_commands(world, bot, p),
        "getMyCommands" => misc::get_my_commands(world, bot, p),
        "deleteMyCommands" => misc::delete_my_commands(world, bot, p),
        "setWebhook" => misc::set_webhook(world, bot, p),
        "deleteWebhook" => misc::delete_webhook(world, bot, p),
        "getWebhookInfo" => misc::get_webhook_info(world, bot),
        "logOut" | "close" => Ok(Value::Bool(true)),
        other => Err(ApiError::bad_request(format!(
            "method {other} is documented but tg-fake does not implement it"
        ))),
    }
}

/// Whether a method counts against flood limits (sends and edits, as Telegram counts them).
pub fn counts_for_flood(method: &str) -> bool {
    (method.starts_with("send") && method != "sendChatAction" && !is_draft(method))
        || method.starts_with("edit")
        || method.starts_with("copy")
        || method.starts_with("forward")
        || method == "createForumTopic"
}

/// Draft updates, counted against their own budget.
pub fn is_draft(method: &str) -> bool {
    method == "sendMessageDraft" || method == "sendRichMessageDraft"
}

/// Strict mode: every parameter must be documented for the method.
/// File parts referenced as `attach://<name>` are exempt: their names are the caller's choice.
pub fn check_documented(spec: &MethodSpec, p: &Params) -> Result<(), ApiError> {
    let attached = p.attached_names();
    for name in p.names() {
        if spec.param(name).is_none() && !attached.iter().any(|a| a == name) {
            return Err(ApiError::bad_request(format!(
                "parameter \"{name}\" is not documented for {} (tg-fake strict mode)",
                spec.name
            )));
        }
    }
    Ok(())
}

/// Required parameters must be present, with the texts Telegram uses for the common ones.
pub fn check_required(spec: &MethodSpec, p: &Params) -> Result<(), ApiError> {
    for param in spec.params.iter().filter(|p| p.required) {
        if p.has(param.name) {
            continue;
        }
        let text = match (spec.name, param.name) {
            (_, "text") => "message text is empty".to_owned(),
            (_, "message_id") => "message identifier is not specified".to_owned(),
            (_, "callback_query_id") => {
                "query is too old and response timeout expired or query ID is invalid".to_owned()
            }
            (_, media @ ("document" | "photo" | "voice" | "audio" | "video" | "animation")) => {
                format!("there is no {media} in the request")
            }
            (_, name) => format!("{name} is empty"),
        };
        return Err(ApiError::bad_request(text));
    }
    Ok(())
}

/// The target chat of a method: a private chat or a group the bot knows (`chat_id` numeric).
pub fn chat_id(bot: &Bot, p: &Params) -> Result<i64, ApiError> {
    let id = match p.int("chat_id") {
        Ok(Some(id)) => id,
        Ok(None) => return Err(ApiError::bad_request("chat_id is empty")),
        // "@username" targets public channels and groups; the fake's have none.
        Err(_) => return Err(ApiError::bad_request("chat not found")),
    };
    let Some(chat) = bot.chats.get(&id) else {
        return Err(ApiError::bad_request("chat not found"));
    };
    if chat.blocked {
        return Err(ApiError::forbidden(if chat.group.is_some() {
            "bot was kicked from the supergroup chat"
        } else {
            "bot was blocked by the user"
        }));
    }
    Ok(id)
}

/// The topic a message goes to. Unknown or deleted topics (and any topic while Threaded Mode
/// is off) are `message thread not found`; closed ones `TOPIC_CLOSED`.
pub fn thread(bot: &Bot, chat: &Chat, p: &Params) -> Result<Option<i64>, ApiError> {
    let Some(t) = p.int("message_thread_id")?.filter(|t| *t != 0) else {
        return Ok(None);
    };
    if !chat.has_topics(bot) {
        return Err(ApiError::thread_not_found());
    }
    match chat.topics.get(&t).map(|t| t.state) {
        Some(TopicState::Open) => Ok(Some(t)),
        Some(TopicState::Closed) => Err(ApiError::bad_request("TOPIC_CLOSED")),
        Some(TopicState::Deleted) | None => Err(ApiError::thread_not_found()),
    }
}

/// Text and entities after `parse_mode`/`entities` processing and trimming, checked against
/// `limit` (UTF-16 units). `what` names the field in errors ("message text", "message caption").
pub fn formatted_text(
    p: &Params,
    text_param: &str,
    entities_param: &str,
    limit: usize,
    allow_empty: bool,
) -> Result<(String, Vec<Value>), ApiError> {
    let raw = p.string(text_param)?.unwrap_or_default();
    let parse_mode = p.string("parse_mode")?.filter(|m| !m.is_empty());
    let parsed = match parse_mode
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("html") => html::parse(&raw)
            .map_err(|e| ApiError::bad_request(format!("can't parse entities: {e}")))?,
        Some(m @ ("markdownv2" | "markdown")) => {
            return Err(ApiError::bad_request(format!(
                "parse_mode {m} is not implemented by tg-fake; use HTML or entities"
            )));
        }
        Some(_) => return Err(ApiError::bad_request("unsupported parse_mode")),
        None => {
            let entities = match p.json(entities_param)? {
                Some(e) => entities::validate(&raw, &e)
                    .map_err(|e| ApiError::bad_request(format!("can't parse entities: {e}")))?,
                None => Vec::new(),
            };
            html::Parsed {
                text: raw,
                entities,
            }
        }
    };
    // Telegram's pipeline: clean control characters, trim, then add the entities it detects
    // itself (URLs, mentions, commands...).
    let mut parsed = html::trim(html::clean(parsed));
    parsed.entities = entities::merge_detected(&parsed.text, parsed.entities);
    if parsed.text.is_empty() && !allow_empty {
        return Err(ApiError::bad_request(if text_param == "caption" {
            "message caption is empty"
        } else {
            "message text is empty"
        }));
    }
    if utf16::len(&parsed.text) > limit {
        return Err(ApiError::bad_request(if text_param == "caption" {
            "message caption is too long"
        } else {
            "message is too long"
        }));
    }
    Ok((parsed.text, parsed.entities))
}

/// Validates `reply_markup`; returns it normalised (parsed from text when sent as a string).
pub fn reply_markup(p: &Params, inline_only: bool) -> Result<Option<Value>, ApiError> {
    let Some(markup) = p.json("reply_markup")? else {
        return Ok(None);
    };
    let Some(obj) = markup.as_object() else {
        return Err(ApiError::bad_request(
            "can't parse reply keyboard markup JSON object",
        ));
    };
    if let Some(rows) = obj.get("inline_keyboard") {
        let rows = rows
            .as_array()
            .ok_or_else(|| ApiError::bad_request("field \"inline_keyboard\" must be an Array"))?;
        let mut buttons = 0;
        for row in rows {
            let row = row.as_array().ok_or_else(|| {
                ApiError::bad_request("field \"inline_keyboard\" must be an Array of Array")
            })?;
            for button in row {
                check_inline_button(button)?;
            }
            buttons += row.len();
        }
        // Telegram refuses a keyboard of more than 100 buttons in all.
        if buttons > MAX_INLINE_BUTTONS {
            return Err(ApiError::bad_request("reply markup is too long"));
        }
        return Ok(Some(markup));
    }
    if inline_only {
        return Err(ApiError::bad_request("inline keyboard expected"));
    }
    if obj.contains_key("keyboard")
        || obj.contains_key("remove_keyboard")
        || obj.contains_key("force_reply")
    {
        return Ok(Some(markup));
    }
    Err(ApiError::bad_request(
        "can't parse reply keyboard markup JSON object",
    ))
}

fn check_inline_button(button: &Value) -> Result<(), ApiError> {
    let text = button
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if text.is_empty() {
        return Err(ApiError::bad_request("BUTTON_TEXT_INVALID"));
    }
    const ACTIONS: [&str; 10] = [
        "url",
        "callback_data",
        "web_app",
        "login_url",
        "switch_inline_query",
        "switch_inline_query_current_chat",
        "switch_inline_query_chosen_chat",
        "copy_text",
        "callback_game",
        "pay",
    ];
    let actions = ACTIONS.iter().filter(|a| button.get(**a).is_some()).count();
    if actions != 1 {
        return Err(ApiError::bad_request(
            "can't parse inline keyboard button: exactly one of the optional fields must be used",
        ));
    }
    if let Some(data) = button.get("callback_data") {
        let len = data.as_str().map(str::len).unwrap_or(0);
        if len == 0 || len > MAX_CALLBACK_DATA {
            return Err(ApiError::bad_request("BUTTON_DATA_INVALID"));
        }
    }
    if let Some(url) = button.get("url") {
        let ok = url.as_str().is_some_and(|u| {
            ["http://", "https://", "tg://"]
                .iter()
                .any(|s| u.starts_with(s))
        });
        if !ok {
            return Err(ApiError::bad_request("BUTTON_URL_INVALID"));
        }
    }
    Ok(())
}

/// The message a send replies to (`reply_parameters`), checked to exist in the chat.
pub fn reply_to(chat: &Chat, p: &Params) -> Result<Option<i64>, ApiError> {
    let Some(rp) = p.json("reply_parameters")? else {
        return Ok(None);
    };
    let id = rp
        .get("message_id")
        .and_then(Value::as_i64)
        .ok_or_else(|| ApiError::bad_request("message to be replied not found"))?;
    if chat.live_message(id).is_some() {
        return Ok(Some(id));
    }
    if rp
        .get("allow_sending_without_reply")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Ok(None);
    }
    Err(ApiError::bad_request("message to be replied not found"))
}
