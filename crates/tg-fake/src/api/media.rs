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
    let file_id = store(world, bot, file, kind)?;
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

/// `sendMediaGroup`: 2-10 photos, videos, documents or audios (documents and audios only with
/// their own kind, as Telegram requires), each uploaded as `attach://<field>` or named by
/// `file_id`; one message each, sharing a `media_group_id`. Every item is checked before any
/// is sent: a refused album sends nothing.
pub(super) fn send_media_group(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let c = &b.chats[&chat];
    let thread_id = thread(b, c, p)?;
    let reply = reply_to(c, p)?;
    let items = p
        .json("media")?
        .and_then(|v| v.as_array().cloned())
        .ok_or_else(|| ApiError::bad_request("media must be an array of InputMedia"))?;
    if !(2..=10).contains(&items.len()) {
        return Err(ApiError::bad_request("media must include 2-10 items"));
    }
    let mut album = Vec::with_capacity(items.len());
    for item in &items {
        let kind = match item.get("type").and_then(serde_json::Value::as_str) {
            Some("photo") => MediaKind::Photo,
            Some("video") => MediaKind::Video,
            Some("document") => MediaKind::Document,
            Some("audio") => MediaKind::Audio,
            _ => return Err(ApiError::bad_request("unsupported media type in the album")),
        };
        let media = item
            .get("media")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| ApiError::bad_request("an album item has no media"))?;
        let file = match media.strip_prefix("attach://") {
            Some(field) => match p.file(field)? {
                Some(f @ FileRef::Upload(_)) => f,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "file {field} not found in the request"
                    )));
                }
            },
            None if media.starts_with("http://") || media.starts_with("https://") => {
                FileRef::Url(media.to_owned())
            }
            None => FileRef::FileId(media.to_owned()),
        };
        let caption = item
            .get("caption")
            .and_then(serde_json::Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_owned);
        if caption
            .as_deref()
            .is_some_and(|c| c.encode_utf16().count() > MAX_CAPTION)
        {
            return Err(ApiError::bad_request("message caption is too long"));
        }
        album.push((kind, file, caption));
    }
    for only in [MediaKind::Document, MediaKind::Audio] {
        let n = album.iter().filter(|(k, _, _)| *k == only).count();
        if n != 0 && n != album.len() {
            return Err(ApiError::bad_request(format!(
                "{} can't be mixed with other media types",
                only.field()
            )));
        }
    }
    let mut ids = Vec::with_capacity(album.len());
    for (kind, file, _) in &album {
        ids.push(store(world, bot, file.clone(), *kind)?);
    }
    let group = world.bots[bot].new_media_group();
    let mut sent = Vec::with_capacity(album.len());
    for (i, ((kind, _, caption), file_id)) in album.into_iter().zip(ids).enumerate() {
        let msg = Message {
            thread_id,
            media: Some((kind, file_id)),
            caption,
            reply_to: reply.filter(|_| i == 0),
            media_group_id: Some(group.clone()),
            ..Message::default()
        };
        sent.push(deliver(world, bot, chat, msg));
    }
    Ok(serde_json::Value::Array(sent))
}

/// The `file_id` of a file a send names: an upload is stored first.
fn store(
    world: &mut World,
    bot: usize,
    file: FileRef,
    kind: MediaKind,
) -> Result<String, ApiError> {
    Ok(match file {
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
    })
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
