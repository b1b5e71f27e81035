//! Telegram `MessageEntity` handling: validation of caller-supplied entities, the nesting rules
//! Telegram enforces, and detection of commands, mentions, hashtags, URLs... in plain text.
//!
//! The behaviour follows TDLib (`td/telegram/MessageEntity.cpp`, `LinkManager.cpp`,
//! `tdutils/td/utils/HttpUrl.cpp`) and the Bot API server (`telegram-bot-api/Client.cpp`), which
//! is what the real Bot API runs. Error texts are theirs where known; every deviation is noted
//! on the item it concerns.
//!
//! Entities travel as Bot API `MessageEntity` JSON objects (`serde_json::Value`): `type`,
//! `offset` and `length` in UTF-16 code units, plus `url` (`text_link`), `user`
//! (`text_mention`), `language` (`pre`), `custom_emoji_id` (`custom_emoji`), `unix_time` and
//! `date_time_format` (`date_time`). Inside the crate they are typed (`Entity`, `Kind`).
//!
//! Layout: `model` (the typed `Kind` and `Entity`, sorted as Telegram sorts them), `json`
//! (reading and writing `MessageEntity` objects), `validation` (caller-supplied lists), `nesting`
//! (TDLib's `fix_entities` rules), `detection` and `urls` (what Telegram finds in typed text),
//! `link` (TDLib's link checking).

mod detection;
mod json;
mod link;
mod model;
mod nesting;
mod urls;
mod validation;

use serde_json::Value;

pub(crate) use json::normalize_date_format;
pub(crate) use link::{check_link, is_td_space};
pub(crate) use model::{Entity, Kind, sort_entities};
pub(crate) use nesting::fix_entities;
pub use validation::validate;

use detection::find_entities;
use nesting::merge_new_entities;

/// A caller-supplied entity list Telegram would reject. The text is what follows
/// `"Bad Request: "` in Telegram's error description.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[error("{0}")]
pub struct EntityError(pub String);

/// Entities Telegram detects in text a person typed (what a bot receives in `Message.entities`).
///
/// Detects, as TDLib's `find_entities` does:
/// - `bot_command`: `/` + 1-64 of `[A-Za-z0-9_]`, optionally `@` + 3-32 of them, not preceded or
///   followed by a word character, `/`, `<` or `>`.
/// - `mention`: `@` + 5-32 of `[A-Za-z0-9_]`, not preceded or followed by a word character.
///   (Telegram also accepts a handful of reserved shorter names; not modelled.)
/// - `hashtag`: `#` + up to 256 letters, digits, `_`, U+200C or U+00B7 with at least one letter,
///   not preceded by such a character and not followed by another `#`.
/// - `cashtag`: `$` + 1-8 of `[A-Z]` (or `1INCH`), not touching letters, digits or `$`.
/// - `url`: `http://`, `https://` and `ftp://` URLs, bare `t.me`, `telegram.me` and
///   `telegram.dog` links, and `tg://`/`ton://` links; trailing `.:;,('?!` and an unmatched
///   closing bracket are not part of the URL. Telegram also links bare domains with known TLDs
///   (`example.com`); not modelled.
/// - `email`: `local@domain.tld` by Telegram's e-mail rules.
///
/// Phone numbers are not detected (Telegram does not either). Offsets are UTF-16; the result is
/// sorted and non-overlapping.
pub fn detect(text: &str) -> Vec<Value> {
    find_entities(text).iter().map(Entity::to_value).collect()
}

/// Merges the entities Telegram detects in `text` ([`detect`]) into `entities` (already valid
/// for `text`, e.g. from [`validate`] or [`crate::html::parse`]), as Telegram does before
/// storing a message: a detected entity that overlaps an existing link, code, pre, mention...
/// is dropped, and bold/italic/underline/strikethrough/spoiler entities are split at the
/// boundaries of the detected ones. Entities that are not valid `MessageEntity` objects are
/// dropped.
pub fn merge_detected(text: &str, entities: Vec<Value>) -> Vec<Value> {
    let mut existing: Vec<Entity> = entities.iter().filter_map(Entity::from_value).collect();
    sort_entities(&mut existing);
    merge_new_entities(existing, find_entities(text))
        .iter()
        .map(Entity::to_value)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn e(kind: &str, offset: usize, length: usize) -> Value {
        json!({"type": kind, "offset": offset, "length": length})
    }

    #[test]
    fn merge_detected_like_telegram() {
        let parsed = crate::html::parse("<b>see https://x.com now</b>").unwrap();
        let merged = merge_detected(&parsed.text, parsed.entities);
        assert_eq!(
            merged,
            vec![
                e("bold", 0, 4),
                e("url", 4, 13),
                e("bold", 4, 13),
                e("bold", 17, 4)
            ]
        );
        // Nothing is detected inside code, pre or a link.
        let parsed =
            crate::html::parse("<code>/start</code> <a href=\"https://t.me\">@durov</a>").unwrap();
        let merged = merge_detected(&parsed.text, parsed.entities.clone());
        assert_eq!(merged, parsed.entities);
        // Plain text gets the detected entities.
        assert_eq!(
            merge_detected("hi @durov", vec![]),
            vec![e("mention", 3, 6)]
        );
        // Inside a blockquote is fine.
        let parsed = crate::html::parse("<blockquote>#tag</blockquote>").unwrap();
        assert_eq!(
            merge_detected(&parsed.text, parsed.entities),
            vec![e("blockquote", 0, 4), e("hashtag", 0, 4)]
        );
    }
}
