//! Files: `sendDocument`/`sendPhoto`/`sendVoice`/`sendAudio`/..., captions, `getFile`.

use serde_json::json;

use super::messages::deliver;
use super::{MAX_CAPTION, chat_id, formatted_text, reply_markup, reply_to, thread};
use crate::error::{ApiError, ApiResult};
use crate::params::{FileRef, Params};
use crate::world::{MediaKind, Message, Sender, World};

/// Bots upload at most 50 MB through the cloud Bot API.
pub const MAX_UPLOAD: usize = 50 * 1024 * 1024;
/// `getFile` serves at most 20 MB.
pub const MAX_DOWNLOAD: usize = 20 * 1024 * 1024;

/// A MIME type from a file name, for uploads that did not say.
pub fn guess_mime(name: Option<&str>, kind: MediaKind) -> Option<String> {
    let ext = name
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase());
    let mime = match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("pdf") => "application/pdf",
        Some("txt" | "log" | "md") => "text/plain",
        Some("json") => "application/json",
        Some("zip") => "application/zip",
        Some("ogg" | "oga" | "opus") => "audio/ogg",
        Some("mp3") => "audio/mpeg",
        Some("m4a") => "audio/mp4",
        Some("mp4") => "video/mp4",
        _ => match kind {
            MediaKind::Voice => "audio/ogg",
            MediaKind::Photo => "image/jpeg",
            _ => return None,
        },
    };
    Some(mime.to_owned())
}

pub(super) fn send_media(world: &mut World, bot: usize, p: &Params, kind: MediaKind) -> ApiResult {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let c = &b.chats[&chat];
    let thread_id = thread(b, c, p)?;
    let field = kind.field();
    let file = p
        .file(field)?
        .ok_or_else(|| ApiError::bad_request(format!("there is no {field} in the request")))?;
    let (caption, caption_entities) =
        formatted_text(p, "caption", "caption_entities", MAX_CAPTION, true)?;
    let markup = reply_markup(p, false)?;
    let reply = reply_to(c, p)?;
    let file_id = match file {
        FileRef::Upload(u) => {
            if u.bytes.is_empty() {
                return Err(ApiError::bad_request("file must be non-empty"));
            }
            if u.bytes.len() > MAX_UPLOAD {
                return Err(ApiError {
                    code: 413,
                    description: "Request Entity Too Large".into(),
                    parameters: None,
                });
            }
            let mime = u
                .content_type
                .filter(|m| m != "application/octet-stream")
                .or_else(|| guess_mime(u.filename.as_deref(), kind));
            world.bots[bot].store_file(kind, u.bytes, u.filename, mime, true)
        }
        FileRef::FileId(id) => {
            let stored = world.bots[bot]
                .file(&id)
                .ok_or_else(|| ApiError::bad_request("wrong file identifier/HTTP URL specified"))?;
            if stored.kind != kind && kind != MediaKind::Document {
                return Err(ApiError::bad_request("type of file mismatch"));
            }
            stored.file_id.clone()
        }
        // The fake has no network to fetch from.
        FileRef::Url(_) => return Err(ApiError::bad_request("failed to get HTTP URL content")),
    };
    let msg = Message {
        thread_id,
        media: Some((kind, file_id)),
        caption: (!caption.is_empty()).then_some(caption),
        caption_entities,
        reply_to: reply,
        reply_markup: markup,
        ..Message::default()
    };
    Ok(deliver(world, bot, chat, msg))
}

pub(super) fn edit_caption(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    if p.has("inline_message_id") {
        return Err(ApiError::bad_request("MESSAGE_ID_INVALID"));
    }
    let chat = chat_id(&world.bots[bot], p)?;
    let id = p
        .int("message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))?;
    let (caption, entities) = formatted_text(p, "caption", "caption_entities", MAX_CAPTION, true)?;
    let markup = reply_markup(p, true)?;
    let now = world.clock.now_unix();
    let msg = world.bots[bot]
        .chat_mut(chat)
        .messages
        .get_mut(&id)
        .filter(|m| !m.deleted)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if msg.sender != Some(Sender::Bot) {
        return Err(ApiError::bad_request("message can't be edited"));
    }
    if msg.media.is_none() {
        return Err(ApiError::bad_request(
            "there is no caption in the message to edit",
        ));
    }
    let caption = (!caption.is_empty()).then_some(caption);
    if msg.caption == caption && msg.caption_entities == entities && msg.reply_markup == markup {
        return Err(ApiError::bad_request(
            "message is not modified: specified new message content and reply markup are exactly \
             the same as a current content and reply markup of the message",
        ));
    }
    msg.history.push(json!({ "caption": msg.caption }));
    msg.caption = caption;
    msg.caption_entities = entities;
    msg.reply_markup = markup;
    msg.edit_date = Some(now);
    Ok(world.stored_message_json(bot, chat, id))
}

pub(super) fn get_file(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let id = p.string("file_id")?.unwrap_or_default();
    let f = world.bots[bot]
        .file(&id)
        .ok_or_else(|| ApiError::bad_request("invalid file_id"))?;
    if f.bytes.len() > MAX_DOWNLOAD {
        return Err(ApiError::bad_request("file is too big"));
    }
    Ok(json!({
        "file_id": id,
        "file_unique_id": f.file_unique_id,
        "file_size": f.bytes.len(),
        "file_path": f.path,
    }))
}

/// Bytes for `/file/bot<token>/<path>`.
pub fn download(world: &World, bot: usize, path: &str) -> Option<bytes::Bytes> {
    world.bots[bot]
        .files
        .values()
        .find(|f| f.path == path && f.bytes.len() <= MAX_DOWNLOAD)
        .map(|f| f.bytes.clone())
}
