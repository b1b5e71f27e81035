//! Caller-supplied entities (the `entities`/`caption_entities` parameters) checked the way the
//! Bot API server and TDLib check them.

use serde_json::Value;

use super::EntityError;
use super::json::{Supplied, parse_entity_fields};
use super::link::check_link;
use super::model::{Entity, Kind};
use super::nesting::fix_entities;
use crate::utf16;

/// Validates caller-supplied `entities` (the `entities`/`caption_entities` parameter) for `text`
/// and returns them the way Telegram stores them.
///
/// Mirrors the Bot API server and TDLib:
/// - `entities` that is not a JSON array is ignored (empty result), as the Bot API ignores an
///   `entities` parameter it can't decode as an array.
/// - Each element must be an object with integer `offset` and `length` (JSON numbers or decimal
///   strings) and a string `type`; errors read `Can't parse MessageEntity: Can't find field
///   "offset"`, `... Field "length" must be a Number`, `... Unsupported type specified`, ...
/// - `text_link` needs `url`, `text_mention` needs `user` with `id`, `custom_emoji` needs
///   `custom_emoji_id`, `date_time` needs `unix_time`; `pre` takes an optional `language`.
/// - Types Telegram detects by itself (`mention`, `hashtag`, `cashtag`, `bot_command`, `url`,
///   `email`, `phone_number`, `bank_card_number`) are dropped: Telegram re-detects them (see
///   [`merge_detected`](super::merge_detected)).
/// - A `text_link` URL is checked and normalised like Telegram does (`example.com` becomes
///   `http://example.com/`); a bad one gives `Entity URL 'x' is invalid: <reason>`.
/// - An offset or length outside 0..=1000000 gives `Receive an entity with incorrect offset N`
///   (or `length`); empty entities are dropped; overlapping and forbidden nestings are resolved
///   as Telegram does (see [`crate::html::parse`]); an entity past the end of the text gives
///   `Entity beginning at UTF-16 offset N ends after the end of the text at UTF-16 offset M` (or
///   `Entity begins after the end of the text at UTF-16 offset N`); one splitting a surrogate
///   pair gives `Entity begins in a middle of a UTF-16 symbol at byte offset N`.
///
/// Unknown extra fields are removed. Not modelled: the Bot API's access check on a
/// `text_mention` user, and the conversion of `tg://user?id=` links into `text_mention`.
/// `date_time` validation is inferred from the HTML `<tg-time>` rules (TDLib's Bot API JSON code
/// for it was not available): an invalid `date_time_format` gives `Can't parse MessageEntity:
/// Invalid date format used`.
pub fn validate(text: &str, entities: &Value) -> Result<Vec<Value>, EntityError> {
    let Value::Array(items) = entities else {
        return Ok(Vec::new());
    };
    // The Bot API server decodes the whole array first...
    let mut raw = Vec::with_capacity(items.len());
    for item in items {
        let parsed = parse_entity_fields(item)
            .map_err(|m| EntityError(format!("Can't parse MessageEntity: {m}")))?;
        if let Some(entity) = parsed.filter(|entity| !entity.kind.is_detected()) {
            raw.push(entity);
        }
    }
    // ...then TDLib checks each entity's data...
    for entity in &mut raw {
        match &mut entity.kind {
            Kind::TextLink(url) => {
                *url = check_link(url).map_err(|reason| {
                    EntityError(format!("Entity URL '{url}' is invalid: {reason}"))
                })?;
            }
            Kind::CustomEmoji(id) if id == "0" => {
                return Err(EntityError(
                    "Invalid custom emoji identifier specified".into(),
                ));
            }
            _ => {}
        }
    }
    // ...and finally offsets and lengths.
    let mut checked = Vec::with_capacity(raw.len());
    for Supplied {
        offset,
        length,
        kind,
    } in raw
    {
        if !(0..=1_000_000).contains(&offset) {
            return Err(EntityError(format!(
                "Receive an entity with incorrect offset {offset}"
            )));
        }
        if !(0..=1_000_000).contains(&length) {
            return Err(EntityError(format!(
                "Receive an entity with incorrect length {length}"
            )));
        }
        if length > 0 {
            checked.push(Entity {
                kind,
                offset: usize::try_from(offset).unwrap_or_default(),
                length: usize::try_from(length).unwrap_or_default(),
            });
        }
    }
    let fixed = fix_entities(checked);
    check_bounds(text, &fixed)?;
    Ok(fixed.iter().map(Entity::to_value).collect())
}

/// The end-of-text and surrogate-pair checks of TDLib's `clean_input_string_with_entities`.
fn check_bounds(text: &str, entities: &[Entity]) -> Result<(), EntityError> {
    let total = utf16::len(text);
    for entity in entities {
        if entity.offset > total {
            return Err(EntityError(format!(
                "Entity begins after the end of the text at UTF-16 offset {}",
                entity.offset
            )));
        }
        if utf16::utf16_to_byte(text, entity.offset).is_none() {
            return Err(EntityError(format!(
                "Entity begins in a middle of a UTF-16 symbol at byte offset {}",
                byte_after_split_pair(text, entity.offset)
            )));
        }
        if entity.end() > total {
            return Err(EntityError(format!(
                "Entity beginning at UTF-16 offset {} ends after the end of the text at UTF-16 \
                 offset {}",
                entity.offset,
                entity.end()
            )));
        }
        if utf16::utf16_to_byte(text, entity.end()).is_none() {
            return Err(EntityError(format!(
                "Entity beginning at UTF-16 offset {} ends in a middle of a UTF-16 symbol at \
                 byte offset {}",
                entity.offset,
                byte_after_split_pair(text, entity.end())
            )));
        }
    }
    Ok(())
}

/// Byte offset just past the character whose surrogate pair UTF-16 offset `u16_idx` splits
/// (where TDLib notices the split).
fn byte_after_split_pair(text: &str, u16_idx: usize) -> usize {
    let mut pos = 0;
    for (i, c) in text.char_indices() {
        pos += c.len_utf16();
        if pos > u16_idx {
            return i + c.len_utf8();
        }
    }
    text.len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn e(kind: &str, offset: usize, length: usize) -> Value {
        json!({"type": kind, "offset": offset, "length": length})
    }

    fn invalid(text: &str, entities: Value) -> String {
        match validate(text, &entities) {
            Ok(ok) => panic!("accepted: {ok:?}"),
            Err(e) => e.0,
        }
    }

    fn valid(text: &str, entities: Value) -> Vec<Value> {
        match validate(text, &entities) {
            Ok(ok) => ok,
            Err(e) => panic!("rejected: {e}"),
        }
    }

    #[test]
    fn validate_accepts_and_normalises() {
        let out = valid(
            "hello world",
            json!([
                {"type": "italic", "offset": 6, "length": 5, "extra": true},
                {"type": "bold", "offset": "0", "length": 5},
                {"type": "pre", "offset": 0, "length": 0, "language": "rust"},
            ]),
        );
        assert_eq!(out, vec![e("bold", 0, 5), e("italic", 6, 5)]);
        let out = valid(
            "x",
            json!([{"type": "pre", "offset": 0, "length": 1, "language": "rust"},
                   {"type": "pre", "offset": 0, "length": 1, "language": ""}]),
        );
        // Two pre over the same text: the one with a language sorts first and wins.
        assert_eq!(
            out,
            vec![json!(
                {"type": "pre", "offset": 0, "length": 1, "language": "rust"}
            )]
        );
    }

    #[test]
    fn validate_every_type() {
        let user = json!({"id": 42, "is_bot": false, "first_name": "A"});
        let out = valid(
            "abcdefghijklm",
            json!([
                {"type": "bold", "offset": 0, "length": 1},
                {"type": "italic", "offset": 1, "length": 1},
                {"type": "underline", "offset": 2, "length": 1},
                {"type": "strikethrough", "offset": 3, "length": 1},
                {"type": "spoiler", "offset": 4, "length": 1},
                {"type": "code", "offset": 5, "length": 1},
                {"type": "pre", "offset": 6, "length": 1, "language": "c"},
                {"type": "text_link", "offset": 7, "length": 1, "url": "t.me/x"},
                {"type": "text_mention", "offset": 8, "length": 1, "user": user},
                {"type": "custom_emoji", "offset": 9, "length": 1, "custom_emoji_id": "77"},
                {"type": "blockquote", "offset": 10, "length": 1},
                {"type": "expandable_blockquote", "offset": 11, "length": 1},
                {"type": "date_time", "offset": 12, "length": 1, "unix_time": 5,
                 "date_time_format": "tD"},
            ]),
        );
        assert_eq!(
            out,
            vec![
                e("bold", 0, 1),
                e("italic", 1, 1),
                e("underline", 2, 1),
                e("strikethrough", 3, 1),
                e("spoiler", 4, 1),
                e("code", 5, 1),
                json!({"type": "pre", "offset": 6, "length": 1, "language": "c"}),
                json!({"type": "text_link", "offset": 7, "length": 1, "url": "http://t.me/x"}),
                json!({"type": "text_mention", "offset": 8, "length": 1, "user": user}),
                json!({"type": "custom_emoji", "offset": 9, "length": 1, "custom_emoji_id": "77"}),
                e("blockquote", 10, 1),
                e("expandable_blockquote", 11, 1),
                json!({"type": "date_time", "offset": 12, "length": 1, "unix_time": 5,
                   "date_time_format": "Dt"}),
            ]
        );
    }

    #[test]
    fn validate_drops_detected_types_and_ignores_non_arrays() {
        let out = valid(
            "@durov /start",
            json!([
                {"type": "mention", "offset": 0, "length": 6},
                {"type": "bot_command", "offset": 7, "length": 6},
                {"type": "url", "offset": 0, "length": 1},
                {"type": "bank_card_number", "offset": 0, "length": 1},
            ]),
        );
        assert!(out.is_empty());
        assert!(valid("x", json!(null)).is_empty());
        assert!(valid("x", json!({"type": "bold"})).is_empty());
        assert!(valid("x", json!("[]")).is_empty());
        assert!(valid("x", json!([])).is_empty());
    }

    #[test]
    fn validate_json_errors() {
        let p = |s: &str| format!("Can't parse MessageEntity: {s}");
        assert_eq!(invalid("x", json!([1])), p("expected an Object"));
        assert_eq!(
            invalid("x", json!([{"type": "bold", "length": 1}])),
            p("Can't find field \"offset\"")
        );
        assert_eq!(
            invalid("x", json!([{"type": "bold", "offset": 0}])),
            p("Can't find field \"length\"")
        );
        assert_eq!(
            invalid("x", json!([{"offset": 0, "length": 1}])),
            p("Can't find field \"type\"")
        );
        assert_eq!(
            invalid("x", json!([{"type": "bold", "offset": true, "length": 1}])),
            p("Field \"offset\" must be a Number")
        );
        for bad in [
            json!(1.5),
            json!("01"),
            json!("x"),
            json!(4_294_967_296_u64),
        ] {
            assert_eq!(
                invalid("x", json!([{"type": "bold", "offset": 0, "length": bad}])),
                p("Field \"length\" must be a valid Number")
            );
        }
        assert_eq!(
            invalid("x", json!([{"type": "", "offset": 0, "length": 1}])),
            p("Type is not specified")
        );
        assert_eq!(
            invalid("x", json!([{"type": ["bold"], "offset": 0, "length": 1}])),
            p("Field \"type\" must be of type String")
        );
        assert_eq!(
            invalid("x", json!([{"type": "bolder", "offset": 0, "length": 1}])),
            p("Unsupported type specified")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "text_link", "offset": 0, "length": 1}])
            ),
            p("Can't find field \"url\"")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "text_mention", "offset": 0, "length": 1}])
            ),
            p("Can't find field \"user\"")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "text_mention", "offset": 0, "length": 1, "user": 5}])
            ),
            p("Field \"user\" must be of type Object")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "text_mention", "offset": 0, "length": 1, "user": {}}])
            ),
            p("Can't find field \"id\"")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "custom_emoji", "offset": 0, "length": 1}])
            ),
            p("Can't find field \"custom_emoji_id\"")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "date_time", "offset": 0, "length": 1}])
            ),
            p("Can't find field \"unix_time\"")
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "date_time", "offset": 0, "length": 1, "unix_time": 1,
                        "date_time_format": "q"}])
            ),
            p("Invalid date format used")
        );
        // JSON errors are reported before any other check.
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "bold", "offset": -1, "length": 1}, {"type": "x"}])
            ),
            p("Can't find field \"offset\"")
        );
    }

    #[test]
    fn validate_data_errors() {
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "text_link", "offset": 0, "length": 1, "url": "foo"}])
            ),
            "Entity URL 'foo' is invalid: Wrong HTTP URL"
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "text_link", "offset": 0, "length": 1, "url": "ftp://a.com"}])
            ),
            "Entity URL 'ftp://a.com' is invalid: Unsupported URL protocol"
        );
        assert_eq!(
            invalid(
                "x",
                json!([{"type": "custom_emoji", "offset": 0, "length": 1, "custom_emoji_id": 0}])
            ),
            "Invalid custom emoji identifier specified"
        );
    }

    #[test]
    fn validate_range_errors() {
        let bold = |offset: i64, length: i64| json!([{"type": "bold", "offset": offset, "length": length}]);
        assert_eq!(
            invalid("x", bold(-1, 1)),
            "Receive an entity with incorrect offset -1"
        );
        assert_eq!(
            invalid("x", bold(0, -1)),
            "Receive an entity with incorrect length -1"
        );
        assert_eq!(
            invalid("x", bold(1_000_001, 1)),
            "Receive an entity with incorrect offset 1000001"
        );
        assert_eq!(
            invalid("abc", bold(1, 5)),
            "Entity beginning at UTF-16 offset 1 ends after the end of the text at UTF-16 offset 6"
        );
        assert_eq!(
            invalid("abc", bold(5, 1)),
            "Entity begins after the end of the text at UTF-16 offset 5"
        );
        assert_eq!(
            invalid("😀x", bold(1, 1)),
            "Entity begins in a middle of a UTF-16 symbol at byte offset 4"
        );
        assert_eq!(
            invalid("😀x", bold(0, 1)),
            "Entity beginning at UTF-16 offset 0 ends in a middle of a UTF-16 symbol at byte offset 4"
        );
        // Cyrillic counts one unit per letter.
        assert_eq!(valid("привет", bold(0, 6)), vec![e("bold", 0, 6)]);
        assert_eq!(valid("😀x", bold(0, 3)), vec![e("bold", 0, 3)]);
        // Zero-length entities are dropped, even past the end.
        assert!(valid("x", bold(5, 0)).is_empty());
    }

    #[test]
    fn validate_applies_nesting_rules() {
        let out = valid(
            "abcdef",
            json!([
                {"type": "code", "offset": 0, "length": 3},
                {"type": "bold", "offset": 1, "length": 1},
                {"type": "text_link", "offset": 2, "length": 3, "url": "https://t.me"},
                {"type": "italic", "offset": 4, "length": 2},
                {"type": "italic", "offset": 5, "length": 1},
            ]),
        );
        // Bold inside code goes; the link overlapping the code goes; the italics merge.
        assert_eq!(out, vec![e("code", 0, 3), e("italic", 4, 2)]);
        // Overlapping blockquotes: the first one wins.
        let out = valid(
            "abcdef",
            json!([
                {"type": "blockquote", "offset": 0, "length": 3},
                {"type": "expandable_blockquote", "offset": 2, "length": 3},
            ]),
        );
        assert_eq!(out, vec![e("blockquote", 0, 3)]);
        // A link crossing a blockquote boundary goes; one inside stays.
        let out = valid(
            "abcdef",
            json!([
                {"type": "blockquote", "offset": 0, "length": 3},
                {"type": "text_link", "offset": 2, "length": 2, "url": "https://t.me"},
                {"type": "code", "offset": 0, "length": 1},
            ]),
        );
        assert_eq!(out, vec![e("blockquote", 0, 3), e("code", 0, 1)]);
    }
}
