//! What files a Telegram message carries, as the store records them.

use serde_json::Value;

/// One file of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRef {
    /// `photo`, `document`, `audio`, `voice`, `video`, `video_note`, `animation`, `sticker`.
    pub kind: &'static str,
    /// Telegram's file id.
    pub file_id: String,
    /// Telegram's stable id.
    pub file_unique_id: Option<String>,
    /// The name the sender gave it.
    pub name: Option<String>,
    /// MIME type.
    pub mime: Option<String>,
    /// Declared size.
    pub size: Option<i64>,
}

/// The kinds of file the hub downloads, by message field. An animation also carries
/// `document`: the more specific field wins.
const KINDS: [&str; 8] = [
    "photo",
    "animation",
    "video",
    "video_note",
    "voice",
    "audio",
    "sticker",
    "document",
];

/// The files of `message` (at most one per message; a photo is its largest size).
pub fn of_message(message: &Value) -> Vec<MediaRef> {
    for kind in KINDS {
        let Some(v) = message.get(kind) else {
            continue;
        };
        let item = if kind == "photo" {
            // Sizes come smallest first; the largest is what a person sees.
            v.as_array().and_then(|sizes| {
                sizes.iter().max_by_key(|s| {
                    let w = s.get("width").and_then(Value::as_i64).unwrap_or(0);
                    let h = s.get("height").and_then(Value::as_i64).unwrap_or(0);
                    // Values from outside: a product that does not fit is as large as any.
                    (
                        w.saturating_mul(h),
                        s.get("file_size").and_then(Value::as_i64).unwrap_or(0),
                    )
                })
            })
        } else {
            Some(v)
        };
        let Some(item) = item else { continue };
        let Some(file_id) = item.get("file_id").and_then(Value::as_str) else {
            continue;
        };
        let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_owned);
        let mime = text("mime_type").or_else(|| match kind {
            "photo" => Some("image/jpeg".into()),
            "voice" => Some("audio/ogg".into()),
            "video_note" => Some("video/mp4".into()),
            "sticker" => Some(
                if item.get("is_video").and_then(Value::as_bool) == Some(true) {
                    "video/webm"
                } else if item.get("is_animated").and_then(Value::as_bool) == Some(true) {
                    "application/x-tgsticker"
                } else {
                    "image/webp"
                }
                .into(),
            ),
            _ => None,
        });
        return vec![MediaRef {
            kind,
            file_id: file_id.to_owned(),
            file_unique_id: text("file_unique_id"),
            name: text("file_name"),
            mime,
            size: item.get("file_size").and_then(Value::as_i64),
        }];
    }
    Vec::new()
}

/// Content a message carries that the hub does not turn into files or text (a location, a
/// poll, ...), by field name.
pub fn unsupported(message: &Value) -> Option<&'static str> {
    [
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
    .find(|k| message.get(*k).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_photo_is_its_largest_size() {
        let m = json!({ "photo": [
            { "file_id": "s", "width": 90, "height": 60, "file_size": 900 },
            { "file_id": "l", "file_unique_id": "u", "width": 1280, "height": 853, "file_size": 90_000 },
            { "file_id": "m", "width": 320, "height": 213, "file_size": 9000 },
        ], "caption": "look" });
        let f = of_message(&m);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].file_id, "l");
        assert_eq!(f[0].kind, "photo");
        assert_eq!(f[0].mime.as_deref(), Some("image/jpeg"));
        assert_eq!(f[0].size, Some(90_000));
    }

    #[test]
    fn an_animation_is_not_its_document_and_names_are_kept() {
        let m = json!({
            "animation": { "file_id": "a", "file_name": "cat.mp4", "mime_type": "video/mp4" },
            "document": { "file_id": "a", "file_name": "cat.mp4" },
        });
        assert_eq!(of_message(&m)[0].kind, "animation");
        let d = json!({ "document": { "file_id": "d", "file_name": "../../x", "file_size": 3 } });
        assert_eq!(of_message(&d)[0].name.as_deref(), Some("../../x"));
        assert_eq!(of_message(&json!({ "text": "hi" })), vec![]);
        assert_eq!(unsupported(&json!({ "location": {} })), Some("location"));
    }
}
