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
//! `date_time_format` (`date_time`).

use std::cmp::Reverse;

use serde_json::{Map, Value};

use crate::utf16;

/// A caller-supplied entity list Telegram would reject. The text is what follows
/// `"Bad Request: "` in Telegram's error description.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[error("{0}")]
pub struct EntityError(pub String);

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
///   [`merge_detected`]).
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
        if let Some(entity) = parsed.filter(|(_, _, kind)| !kind.is_detected()) {
            raw.push(entity);
        }
    }
    // ...then TDLib checks each entity's data...
    for (_, _, kind) in &mut raw {
        match kind {
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
    for (offset, length, kind) in raw {
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

// ---------------------------------------------------------------------------------------------
// The typed entity model shared with `html`.

/// The type of an entity, with the data that type carries.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    Mention,
    Hashtag,
    Cashtag,
    BotCommand,
    Url,
    Email,
    PhoneNumber,
    Bold,
    Italic,
    Underline,
    Strikethrough,
    Spoiler,
    Code,
    /// `pre`, with the optional programming language.
    Pre(Option<String>),
    TextLink(String),
    /// `text_mention`, with the `User` object as given.
    TextMention(Value),
    /// `custom_emoji`, with the decimal identifier.
    CustomEmoji(String),
    /// `date_time`, with the Unix time and the normalised format (`None` for no format).
    DateTime(i64, Option<String>),
    Blockquote,
    ExpandableBlockquote,
}

impl Kind {
    fn type_name(&self) -> &'static str {
        match self {
            Kind::Mention => "mention",
            Kind::Hashtag => "hashtag",
            Kind::Cashtag => "cashtag",
            Kind::BotCommand => "bot_command",
            Kind::Url => "url",
            Kind::Email => "email",
            Kind::PhoneNumber => "phone_number",
            Kind::Bold => "bold",
            Kind::Italic => "italic",
            Kind::Underline => "underline",
            Kind::Strikethrough => "strikethrough",
            Kind::Spoiler => "spoiler",
            Kind::Code => "code",
            Kind::Pre(_) => "pre",
            Kind::TextLink(_) => "text_link",
            Kind::TextMention(_) => "text_mention",
            Kind::CustomEmoji(_) => "custom_emoji",
            Kind::DateTime(..) => "date_time",
            Kind::Blockquote => "blockquote",
            Kind::ExpandableBlockquote => "expandable_blockquote",
        }
    }

    /// TDLib's `get_type_priority`: the tie-breaker when two entities share offset and length
    /// (lower first).
    fn priority(&self) -> u8 {
        match self {
            Kind::Blockquote | Kind::ExpandableBlockquote => 0,
            Kind::Pre(Some(_)) => 10,
            Kind::Pre(None) => 11,
            Kind::Code => 20,
            Kind::DateTime(..) => 30,
            Kind::TextLink(_) | Kind::TextMention(_) => 49,
            Kind::Mention
            | Kind::Hashtag
            | Kind::Cashtag
            | Kind::BotCommand
            | Kind::Url
            | Kind::Email
            | Kind::PhoneNumber => 50,
            Kind::Bold => 90,
            Kind::Italic => 91,
            Kind::Underline => 92,
            Kind::Strikethrough => 93,
            Kind::Spoiler => 94,
            Kind::CustomEmoji(_) => 99,
        }
    }

    /// One bit per TDLib entity type (pre with and without a language are distinct types).
    fn bit(&self) -> u32 {
        let index = match self {
            Kind::Mention => 0,
            Kind::Hashtag => 1,
            Kind::BotCommand => 2,
            Kind::Url => 3,
            Kind::Email => 4,
            Kind::Bold => 5,
            Kind::Italic => 6,
            Kind::Code => 7,
            Kind::Pre(None) => 8,
            Kind::Pre(Some(_)) => 9,
            Kind::TextLink(_) => 10,
            Kind::TextMention(_) => 11,
            Kind::Cashtag => 12,
            Kind::PhoneNumber => 13,
            Kind::Underline => 14,
            Kind::Strikethrough => 15,
            Kind::Blockquote => 16,
            Kind::Spoiler => 17,
            Kind::CustomEmoji(_) => 18,
            Kind::ExpandableBlockquote => 19,
            Kind::DateTime(..) => 20,
        };
        1 << index
    }

    /// Index among the "splittable" types: those that may cross other entities' boundaries and
    /// get split there.
    fn splittable_index(&self) -> Option<usize> {
        match self {
            Kind::Bold => Some(0),
            Kind::Italic => Some(1),
            Kind::Underline => Some(2),
            Kind::Strikethrough => Some(3),
            Kind::Spoiler => Some(4),
            _ => None,
        }
    }

    fn is_blockquote(&self) -> bool {
        matches!(self, Kind::Blockquote | Kind::ExpandableBlockquote)
    }

    /// Code and pre: nothing may be nested inside them.
    fn is_pre(&self) -> bool {
        matches!(self, Kind::Code | Kind::Pre(_))
    }

    /// TDLib's "continuous" types: they can't contain or be part of each other.
    /// (Whether TDLib counts `date_time` here is an assumption.)
    fn is_continuous(&self) -> bool {
        matches!(
            self,
            Kind::Mention
                | Kind::Hashtag
                | Kind::BotCommand
                | Kind::Url
                | Kind::Email
                | Kind::TextLink(_)
                | Kind::TextMention(_)
                | Kind::Cashtag
                | Kind::PhoneNumber
                | Kind::CustomEmoji(_)
                | Kind::DateTime(..)
        )
    }

    /// Types Telegram finds in the text itself and ignores when a caller supplies them.
    fn is_detected(&self) -> bool {
        matches!(
            self,
            Kind::Mention
                | Kind::Hashtag
                | Kind::Cashtag
                | Kind::BotCommand
                | Kind::Url
                | Kind::Email
                | Kind::PhoneNumber
        )
    }

    fn splittable_from_index(index: usize) -> Kind {
        match index {
            0 => Kind::Bold,
            1 => Kind::Italic,
            2 => Kind::Underline,
            3 => Kind::Strikethrough,
            _ => Kind::Spoiler,
        }
    }
}

/// An entity with offset and length in UTF-16 code units.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entity {
    pub(crate) kind: Kind,
    pub(crate) offset: usize,
    pub(crate) length: usize,
}

const SPLITTABLE_MASK: u32 = (1 << 5) | (1 << 6) | (1 << 14) | (1 << 15) | (1 << 17);
const BLOCKQUOTE_MASK: u32 = (1 << 16) | (1 << 19);
const CONTINUOUS_MASK: u32 = (1 << 0)
    | (1 << 1)
    | (1 << 2)
    | (1 << 3)
    | (1 << 4)
    | (1 << 10)
    | (1 << 11)
    | (1 << 12)
    | (1 << 13)
    | (1 << 18)
    | (1 << 20);

impl Entity {
    fn end(&self) -> usize {
        self.offset + self.length
    }

    /// The Bot API `MessageEntity` object.
    pub(crate) fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), self.kind.type_name().into());
        map.insert("offset".into(), self.offset.into());
        map.insert("length".into(), self.length.into());
        match &self.kind {
            Kind::Pre(Some(language)) => {
                map.insert("language".into(), language.clone().into());
            }
            Kind::TextLink(url) => {
                map.insert("url".into(), url.clone().into());
            }
            Kind::TextMention(user) => {
                map.insert("user".into(), user.clone());
            }
            Kind::CustomEmoji(id) => {
                map.insert("custom_emoji_id".into(), id.clone().into());
            }
            Kind::DateTime(unix_time, format) => {
                map.insert("unix_time".into(), (*unix_time).into());
                if let Some(format) = format {
                    map.insert("date_time_format".into(), format.clone().into());
                }
            }
            _ => {}
        }
        Value::Object(map)
    }

    /// Reads back an entity this crate produced (or any well-formed one); `None` for anything
    /// that isn't a valid `MessageEntity`.
    pub(crate) fn from_value(value: &Value) -> Option<Entity> {
        let (offset, length, kind) = parse_entity_fields(value).ok()??;
        Some(Entity {
            kind,
            offset: usize::try_from(offset).ok()?,
            length: usize::try_from(length).ok()?,
        })
    }
}

/// Sorts as Telegram does: by offset, then longer (outer) first, then by type priority.
pub(crate) fn sort_entities(entities: &mut [Entity]) {
    entities.sort_by_key(|e| (e.offset, Reverse(e.length), e.kind.priority()));
}

/// TDLib's `are_entities_valid`: true when `entities` (sorted) already obey every nesting rule,
/// in which case [`fix_entities`] leaves them alone.
fn are_entities_valid(entities: &[Entity]) -> bool {
    let mut end_pos: [Option<usize>; 5] = [None; 5];
    let mut stack: Vec<&Entity> = Vec::new();
    let mut mask = 0u32;
    for entity in entities {
        while let Some(top) = stack.last() {
            if entity.offset < top.end() {
                break;
            }
            mask &= !top.kind.bit();
            stack.pop();
        }
        if let Some(parent) = stack.last() {
            let kind = &entity.kind;
            if entity.end() > parent.end()
                || mask & kind.bit() != 0
                || parent.kind.is_pre()
                || (kind.is_pre() && mask & !BLOCKQUOTE_MASK != 0)
                || ((kind.is_continuous() || kind.is_blockquote()) && mask & CONTINUOUS_MASK != 0)
                || (kind.is_blockquote() && mask & BLOCKQUOTE_MASK != 0)
                // Anything inside a splittable entity may need that entity split.
                || mask & SPLITTABLE_MASK != 0
            {
                return false;
            }
        }
        if let Some(index) = entity.kind.splittable_index() {
            if end_pos[index].is_some_and(|end| end >= entity.offset) {
                // Touching or overlapping entities of one splittable type get merged.
                return false;
            }
            end_pos[index] = Some(entity.end());
        }
        stack.push(entity);
        mask |= entity.kind.bit();
    }
    true
}

/// Keeps, in sorted order, only entities that start at or after the end of the last kept one:
/// the outer one of two nested entities wins, and so does the earlier of two overlapping ones.
fn remove_intersecting_entities(entities: Vec<Entity>) -> Vec<Entity> {
    let mut last_end = 0;
    entities
        .into_iter()
        .filter(|e| {
            let keep = e.offset >= last_end;
            if keep {
                last_end = e.end();
            }
            keep
        })
        .collect()
}

/// Drops entities that cross a blockquote boundary (being inside one is fine).
fn remove_entities_intersecting_blockquote(entities: &mut Vec<Entity>, blockquotes: &[Entity]) {
    let mut quote = 0;
    entities.retain(|e| {
        while quote < blockquotes.len() && blockquotes[quote].end() <= e.offset {
            quote += 1;
        }
        match blockquotes.get(quote) {
            Some(q) => !(q.end() < e.end() || (e.offset < q.offset && q.offset < e.end())),
            None => true,
        }
    });
}

/// TDLib's `split_entities`: cuts the splittable entities at every start and end of the other
/// entities, merges touching ones of one type, and drops the parts inside code and pre.
fn split_entities(splittable: Vec<Entity>, others: &[Entity]) -> Vec<Entity> {
    struct Splitter {
        entities: Vec<Entity>,
        next: usize,
        begin: [usize; 5],
        // 0 means "no pending entity of this type"; entities are never empty so a pending one
        // always ends after 0.
        end: [usize; 5],
        result: Vec<Entity>,
    }
    impl Splitter {
        fn flush(&mut self, offset: usize) {
            for index in 0..5 {
                if self.end[index] != 0 && self.begin[index] < offset {
                    if self.end[index] <= offset {
                        self.emit(index, self.begin[index], self.end[index]);
                        self.begin[index] = 0;
                        self.end[index] = 0;
                    } else {
                        self.emit(index, self.begin[index], offset);
                        self.begin[index] = offset;
                    }
                }
            }
        }
        fn emit(&mut self, index: usize, begin: usize, end: usize) {
            self.result.push(Entity {
                kind: Kind::splittable_from_index(index),
                offset: begin,
                length: end - begin,
            });
        }
        fn add_entities(&mut self, end_offset: usize) {
            while let Some(entity) = self.entities.get(self.next) {
                if entity.offset >= end_offset {
                    break;
                }
                let (offset, end) = (entity.offset, entity.end());
                let Some(index) = entity.kind.splittable_index() else {
                    self.next += 1;
                    continue;
                };
                if offset <= self.end[index] && self.end[index] != 0 {
                    self.end[index] = self.end[index].max(end);
                } else {
                    self.flush(offset);
                    self.begin[index] = offset;
                    self.end[index] = end;
                }
                self.next += 1;
            }
            self.flush(end_offset);
        }
    }

    let mut splitter = Splitter {
        entities: splittable,
        next: 0,
        begin: [0; 5],
        end: [0; 5],
        result: Vec::new(),
    };
    let mut stack: Vec<&Entity> = Vec::new();
    let add_offset = |splitter: &mut Splitter, stack: &mut Vec<&Entity>, offset: usize| {
        while let Some(top) = stack.last() {
            if offset < top.end() {
                break;
            }
            let old_len = splitter.result.len();
            splitter.add_entities(top.end());
            if top.kind.is_pre() {
                splitter.result.truncate(old_len);
            }
            stack.pop();
        }
        splitter.add_entities(offset);
    };
    for other in others {
        add_offset(&mut splitter, &mut stack, other.offset);
        stack.push(other);
    }
    add_offset(&mut splitter, &mut stack, usize::MAX);
    let mut result = splitter.result;
    sort_entities(&mut result);
    result
}

fn resplit_entities(splittable: Vec<Entity>, mut entities: Vec<Entity>) -> Vec<Entity> {
    if !splittable.is_empty() {
        let split = split_entities(splittable, &entities);
        if entities.is_empty() {
            return split;
        }
        entities.extend(split);
        sort_entities(&mut entities);
    }
    entities
}

type Partition = (Vec<Entity>, Vec<Entity>, Vec<Entity>);

/// Splits into (splittable, blockquote, all others) keeping the order.
fn partition(entities: Vec<Entity>) -> Partition {
    let (mut splittable, mut blockquotes, mut others) = (Vec::new(), Vec::new(), Vec::new());
    for entity in entities {
        if entity.kind.splittable_index().is_some() {
            splittable.push(entity);
        } else if entity.kind.is_blockquote() {
            blockquotes.push(entity);
        } else {
            others.push(entity);
        }
    }
    (splittable, blockquotes, others)
}

/// Enforces Telegram's nesting rules (TDLib's `fix_entities`) on non-empty entities:
/// - links, code, pre, custom emoji, mentions... can't overlap or contain each other: of two
///   such, the one sorting first (the earlier one, the outer one, or for the same range the
///   one of lower [`Kind::priority`]) is kept;
/// - blockquotes can't overlap or nest; other entities crossing a blockquote boundary are
///   dropped;
/// - nothing survives inside code or pre;
/// - bold, italic, underline, strikethrough and spoiler are merged when touching and split at
///   the boundaries of every other entity they contain or cross (whenever the list isn't already
///   valid, Telegram splits a bold run around a nested link into three bold entities).
pub(crate) fn fix_entities(mut entities: Vec<Entity>) -> Vec<Entity> {
    sort_entities(&mut entities);
    if are_entities_valid(&entities) {
        return entities;
    }
    let (splittable, blockquotes, others) = partition(entities);
    let mut others = remove_intersecting_entities(others);
    if !blockquotes.is_empty() {
        let blockquotes = remove_intersecting_entities(blockquotes);
        remove_entities_intersecting_blockquote(&mut others, &blockquotes);
        others.extend(blockquotes);
        sort_entities(&mut others);
    }
    resplit_entities(splittable, others)
}

/// TDLib's `merge_entities`: adds the new (detected) entities that don't overlap an old one.
fn merge_entities(old: Vec<Entity>, new: Vec<Entity>) -> Vec<Entity> {
    if new.is_empty() {
        return old;
    }
    if old.is_empty() {
        return new;
    }
    let mut result = Vec::with_capacity(old.len() + new.len());
    let mut new = new.into_iter().peekable();
    for old_entity in old {
        while let Some(n) = new.next_if(|n| n.end() <= old_entity.offset) {
            result.push(n);
        }
        let old_end = old_entity.end();
        result.push(old_entity);
        while new.next_if(|n| n.offset < old_end).is_some() {}
    }
    result.extend(new);
    result
}

/// TDLib's `merge_new_entities`: merges detected entities into valid, sorted ones.
pub(crate) fn merge_new_entities(entities: Vec<Entity>, mut new: Vec<Entity>) -> Vec<Entity> {
    if new.is_empty() {
        return entities;
    }
    let (splittable, blockquotes, others) = partition(entities);
    remove_entities_intersecting_blockquote(&mut new, &blockquotes);
    let mut others = merge_entities(others, new);
    if !blockquotes.is_empty() {
        others.extend(blockquotes);
        sort_entities(&mut others);
    }
    resplit_entities(splittable, others)
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

// ---------------------------------------------------------------------------------------------
// Parsing Bot API JSON entities (telegram-bot-api `get_text_entity` and TDLib's JsonObject).

/// Parses a Bot API `MessageEntity` object as the Bot API server does (`Ok(None)` for
/// `bank_card_number`, which has no model here). Errors are the Bot API's texts.
fn parse_entity_fields(value: &Value) -> Result<Option<(i64, i64, Kind)>, String> {
    let Value::Object(object) = value else {
        return Err("expected an Object".into());
    };
    let offset = int_field(object, "offset")?;
    let length = int_field(object, "length")?;
    let type_name = string_field(object, "type")?;
    let kind = match type_name.as_str() {
        "" => return Err("Type is not specified".into()),
        "bold" => Kind::Bold,
        "italic" => Kind::Italic,
        "underline" => Kind::Underline,
        "strikethrough" => Kind::Strikethrough,
        "spoiler" => Kind::Spoiler,
        "code" => Kind::Code,
        "pre" => {
            let language = optional_string_field(object, "language")?;
            Kind::Pre((!language.is_empty()).then_some(language))
        }
        "text_link" => Kind::TextLink(string_field(object, "url")?),
        "text_mention" => {
            let user = match object.get("user") {
                None => return Err("Can't find field \"user\"".into()),
                Some(user @ Value::Object(fields)) => {
                    long_field(fields, "id")?;
                    user.clone()
                }
                Some(_) => return Err("Field \"user\" must be of type Object".into()),
            };
            Kind::TextMention(user)
        }
        "custom_emoji" => Kind::CustomEmoji(long_field(object, "custom_emoji_id")?.to_string()),
        "blockquote" => Kind::Blockquote,
        "expandable_blockquote" => Kind::ExpandableBlockquote,
        "date_time" => {
            let unix_time = long_field(object, "unix_time")?;
            let format = optional_string_field(object, "date_time_format")?;
            let format = normalize_date_format(&format).ok_or("Invalid date format used")?;
            Kind::DateTime(unix_time, format)
        }
        "mention" => Kind::Mention,
        "hashtag" => Kind::Hashtag,
        "cashtag" => Kind::Cashtag,
        "bot_command" => Kind::BotCommand,
        "url" => Kind::Url,
        "email" => Kind::Email,
        "phone_number" => Kind::PhoneNumber,
        "bank_card_number" => return Ok(None),
        _ => return Err("Unsupported type specified".into()),
    };
    Ok(Some((offset, length, kind)))
}

/// TDLib's `to_integer_safe`: the text must be exactly the decimal form of the number.
fn parse_exact<T: std::str::FromStr + ToString>(text: &str) -> Option<T> {
    let n = text.parse::<T>().ok()?;
    (n.to_string() == text).then_some(n)
}

fn number_field<T: std::str::FromStr + ToString>(
    object: &Map<String, Value>,
    name: &str,
) -> Result<T, String> {
    let text = match object.get(name) {
        None => return Err(format!("Can't find field \"{name}\"")),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(format!("Field \"{name}\" must be a Number")),
    };
    parse_exact(&text).ok_or_else(|| format!("Field \"{name}\" must be a valid Number"))
}

/// A 32-bit integer field, widened so callers can range-check negative values.
fn int_field(object: &Map<String, Value>, name: &str) -> Result<i64, String> {
    number_field::<i32>(object, name).map(i64::from)
}

fn long_field(object: &Map<String, Value>, name: &str) -> Result<i64, String> {
    number_field::<i64>(object, name)
}

fn string_field(object: &Map<String, Value>, name: &str) -> Result<String, String> {
    match object.get(name) {
        None => Err(format!("Can't find field \"{name}\"")),
        Some(_) => optional_string_field(object, name),
    }
}

fn optional_string_field(object: &Map<String, Value>, name: &str) -> Result<String, String> {
    match object.get(name) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        // TDLib's JSON layer accepts a number where a string is expected.
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(format!("Field \"{name}\" must be of type String")),
    }
}

/// TDLib's `get_date_flags` (`r`/`R` alone, or any of `tTdDwW`), returned as the canonical
/// Bot API `date_time_format` (`r`, or `w?[dD]?[tT]?`; `None` for an empty format).
/// `None` from the outer option means the format is invalid. When both the short and the long
/// form of a part are given, TDLib keeps the short one.
pub(crate) fn normalize_date_format(format: &str) -> Option<Option<String>> {
    if format == "r" || format == "R" {
        return Some(Some("r".into()));
    }
    let (mut short_time, mut long_time, mut short_date, mut long_date, mut weekday) =
        (false, false, false, false, false);
    for c in format.chars() {
        match c {
            't' => short_time = true,
            'T' => long_time = true,
            'd' => short_date = true,
            'D' => long_date = true,
            'w' | 'W' => weekday = true,
            _ => return None,
        }
    }
    let mut normalized = String::new();
    if weekday {
        normalized.push('w');
    }
    if short_date {
        normalized.push('d');
    } else if long_date {
        normalized.push('D');
    }
    if short_time {
        normalized.push('t');
    } else if long_time {
        normalized.push('T');
    }
    Some((!normalized.is_empty()).then_some(normalized))
}

// ---------------------------------------------------------------------------------------------
// Link checking (TDLib's `LinkManager::check_link` and `parse_url`).

struct HttpUrl {
    https: bool,
    userinfo: String,
    host: String,
    is_ipv6: bool,
    specified_port: u32,
    query: String,
}

/// TDLib's `is_space`.
pub(crate) fn is_td_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0 | 0x0b)
}

fn parse_url(url: &str) -> Result<HttpUrl, &'static str> {
    let stop = url.find(|c| ":/?#@[]".contains(c)).unwrap_or(url.len());
    let protocol = url[..stop].to_ascii_lowercase();
    let (https, rest) = match url[stop..].strip_prefix("://") {
        Some(rest) => match protocol.as_str() {
            "http" => (false, rest),
            "https" => (true, rest),
            _ => return Err("Unsupported URL protocol"),
        },
        None => (false, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, raw_query) = rest.split_at(authority_end);

    let bytes = authority.as_bytes();
    let separator = (1..bytes.len())
        .rev()
        .find(|&k| matches!(bytes[k], b':' | b']' | b'@'));
    let (userinfo_host, port) = match separator {
        Some(k) if bytes[k] == b':' => {
            let mut digits = &authority[k + 1..];
            while digits.len() > 1 && digits.starts_with('0') {
                digits = &digits[1..];
            }
            let port = match parse_exact::<i32>(digits) {
                Some(p) if p != 0 => i64::from(p),
                _ => -1,
            };
            (&authority[..k], port)
        }
        _ => (authority, 0),
    };
    if !(0..=65535).contains(&port) {
        return Err("Wrong port number specified in the URL");
    }
    let (userinfo, host) = match userinfo_host.rfind('@') {
        Some(at) => (&userinfo_host[..at], &userinfo_host[at + 1..]),
        None => ("", userinfo_host),
    };
    let is_ipv6 = host.len() >= 2 && host.starts_with('[') && host.ends_with(']');
    if is_ipv6
        && host[1..host.len() - 1]
            .parse::<std::net::Ipv6Addr>()
            .is_err()
    {
        return Err("Wrong IPv6 address specified in the URL");
    }
    if host.is_empty() {
        return Err("URL host is empty");
    }
    if host == "." {
        return Err("Host is invalid");
    }

    let trimmed = raw_query.trim_end_matches(|c: char| c.is_ascii() && is_td_space(c as u8));
    let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
    let mut query = String::with_capacity(trimmed.len() + 1);
    if !trimmed.starts_with('/') {
        query.push('/');
    }
    for c in trimmed.chars() {
        if u32::from(c) <= 0x20 {
            query.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            query.push(c);
        }
    }

    let host = host.to_ascii_lowercase();
    let hb = host.as_bytes();
    let mut i = 0;
    while i < hb.len() {
        let c = hb[i];
        if is_ipv6 {
            if i == 0 || i + 1 == hb.len() || c == b':' || c.is_ascii_hexdigit() || c == b'.' {
                i += 1;
                continue;
            }
            return Err("Wrong IPv6 URL host");
        }
        if c.is_ascii_lowercase() || c.is_ascii_digit() || b".-_!$,~*'();&+=".contains(&c) {
            // Characters RFC 7230 and RFC 3986 allow.
        } else if c == b'%' {
            let hex = |k: usize| hb.get(k).is_some_and(|h| h.is_ascii_hexdigit());
            if !(hex(i + 1) && hex(i + 2)) {
                return Err("Wrong percent-encoded symbol in URL host");
            }
            i += 2;
        } else if c < 128 {
            return Err("Wrong URL host");
        }
        // Non-ASCII (internationalised) hosts are allowed as plain UTF-8.
        i += 1;
    }
    Ok(HttpUrl {
        https,
        userinfo: userinfo.to_string(),
        host,
        is_ipv6,
        specified_port: u32::try_from(port).unwrap_or(0),
        query,
    })
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Checks and normalises a link the way Telegram does for `text_link` URLs and `<a href>`:
/// `http`/`https` URLs (scheme optional, defaulting to `http`) whose host contains a dot, with
/// the host lowercased and the path defaulting to `/`; `tg:`, `ton:` and `tonsite:` links with a
/// simple host. The error is TDLib's reason (`Wrong HTTP URL`, `Unsupported URL protocol`...).
pub(crate) fn check_link(link: &str) -> Result<String, String> {
    let (scheme, rest) = if starts_with_ignore_case(link, "tg:") {
        (Some("tg"), &link[3..])
    } else if starts_with_ignore_case(link, "ton:") {
        (Some("ton"), &link[4..])
    } else if starts_with_ignore_case(link, "tonsite:") {
        (Some("tonsite"), &link[8..])
    } else {
        (None, link)
    };
    let rest = match scheme {
        Some(_) => rest.strip_prefix("//").unwrap_or(rest),
        None => rest,
    };
    let url = parse_url(rest).map_err(str::to_string)?;
    if let Some(scheme) = scheme {
        if starts_with_ignore_case(rest, "http://")
            || url.https
            || !url.userinfo.is_empty()
            || url.specified_port != 0
            || url.is_ipv6
        {
            return Err(if scheme == "tg" {
                "Wrong tg URL".into()
            } else {
                "Wrong ton URL".into()
            });
        }
        let query = match url.query.strip_prefix('/') {
            Some(q) if q.starts_with('?') => q,
            _ => url.query.as_str(),
        };
        let host_ok = url.host.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || c == b'-'
                || c == b'_'
                || (scheme == "tonsite" && c == b'.')
        });
        if !host_ok {
            return Err("Unallowed characters in URL host".into());
        }
        return Ok(format!("{scheme}://{}{query}", url.host));
    }
    if !url.host.contains('.') && !url.is_ipv6 {
        return Err("Wrong HTTP URL".into());
    }
    let mut result = String::from(if url.https { "https://" } else { "http://" });
    if !url.userinfo.is_empty() {
        result.push_str(&url.userinfo);
        result.push('@');
    }
    result.push_str(&url.host);
    if url.specified_port > 0 {
        result.push_str(&format!(":{}", url.specified_port));
    }
    result.push_str(&url.query);
    Ok(result)
}

// ---------------------------------------------------------------------------------------------
// Detection (TDLib's `find_entities`), on byte offsets first.

/// TDLib's `is_word_character`: letters, numbers and `_`.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// TDLib's `is_hashtag_letter`; the flag says whether `c` is a letter.
fn hashtag_letter(c: char) -> Option<bool> {
    if c.is_alphabetic() {
        return Some(true);
    }
    let extra =
        c == '_' || c == '\u{200c}' || c == '\u{b7}' || ('\u{d80}'..='\u{dff}').contains(&c);
    (extra || c.is_numeric()).then_some(false)
}

fn prev_char(text: &str, byte: usize) -> Option<char> {
    text.get(..byte)?.chars().next_back()
}

fn next_char(text: &str, byte: usize) -> Option<char> {
    text.get(byte..)?.chars().next()
}

fn ascii_run(bytes: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    let mut i = from;
    while i < bytes.len() && pred(bytes[i]) {
        i += 1;
    }
    i
}

fn is_alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

type Span = (usize, usize, Kind);

fn match_mentions(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut result = Vec::new();
    for (at, _) in text.match_indices('@') {
        if prev_char(text, at).is_some_and(is_word_char) {
            continue;
        }
        let end = ascii_run(bytes, at + 1, is_alnum_underscore);
        let size = end - at - 1;
        if !(5..=32).contains(&size) || next_char(text, end).is_some_and(is_word_char) {
            continue;
        }
        result.push((at, end, Kind::Mention));
    }
    result
}

fn match_bot_commands(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let blocks = |c: char| is_word_char(c) || c == '/' || c == '<' || c == '>';
    let mut result = Vec::new();
    for (slash, _) in text.match_indices('/') {
        if prev_char(text, slash).is_some_and(blocks) {
            continue;
        }
        let mut end = ascii_run(bytes, slash + 1, is_alnum_underscore);
        if !(1..=64).contains(&(end - slash - 1)) {
            continue;
        }
        if bytes.get(end) == Some(&b'@') {
            let bot_end = ascii_run(bytes, end + 1, is_alnum_underscore);
            if !(3..=32).contains(&(bot_end - end - 1)) {
                continue;
            }
            end = bot_end;
        }
        if next_char(text, end).is_some_and(blocks) {
            continue;
        }
        result.push((slash, end, Kind::BotCommand));
    }
    result
}

fn match_hashtags(text: &str) -> Vec<Span> {
    let mut result = Vec::new();
    for (hash, _) in text.match_indices('#') {
        if prev_char(text, hash).and_then(hashtag_letter).is_some() {
            continue;
        }
        let mut size = 0;
        let mut was_letter = false;
        let mut run_end = hash + 1;
        let mut tag_end = None;
        for c in text[hash + 1..].chars() {
            let Some(is_letter) = hashtag_letter(c) else {
                break;
            };
            run_end += c.len_utf8();
            // A hashtag is cut after 256 characters, but the whole run is examined.
            if size == 255 {
                tag_end = Some(run_end);
            }
            if size != 256 {
                was_letter |= is_letter;
                size += 1;
            }
        }
        if size == 0 || text[run_end..].starts_with('#') || !was_letter {
            continue;
        }
        result.push((hash, tag_end.unwrap_or(run_end), Kind::Hashtag));
    }
    result
}

fn match_cashtags(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let blocks = |c: char| hashtag_letter(c).is_some() || c == '$';
    let mut result = Vec::new();
    for (dollar, _) in text.match_indices('$') {
        if prev_char(text, dollar).is_some_and(blocks) {
            continue;
        }
        let end = if text[dollar + 1..].starts_with("1INCH") {
            dollar + 6
        } else {
            ascii_run(bytes, dollar + 1, |b| b.is_ascii_uppercase())
        };
        if !(1..=8).contains(&(end - dollar - 1)) || next_char(text, end).is_some_and(blocks) {
            continue;
        }
        result.push((dollar, end, Kind::Cashtag));
    }
    result
}

/// TDLib's `is_url_unicode_symbol`: not a separator, and of General Punctuation only the zero
/// width (non-)joiners and dashes.
fn is_url_unicode_symbol(c: char) -> bool {
    if ('\u{2000}'..='\u{206f}').contains(&c) {
        return c == '\u{200c}' || c == '\u{200d}' || ('\u{2010}'..='\u{2015}').contains(&c);
    }
    !c.is_whitespace()
}

fn is_url_path_symbol(c: char) -> bool {
    !matches!(c, '\n' | '<' | '>' | '"' | '\u{ab}' | '\u{bb}') && is_url_unicode_symbol(c)
}

fn is_domain_symbol(c: char) -> bool {
    if u32::from(c) < 0xc0 {
        return c == '.' || c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '~';
    }
    is_url_unicode_symbol(c)
}

const BAD_PATH_END_CHARS: &str = ".:;,('?!`";

/// Extends a URL ending at `end` over an optional path (`/`, `?` or `#` and what follows),
/// dropping trailing punctuation and anything after an unmatched closing bracket.
fn url_path_end(text: &str, end: usize) -> usize {
    let Some(first) = next_char(text, end).filter(|c| matches!(c, '/' | '?' | '#')) else {
        return end;
    };
    let mut path_end = end + 1;
    for c in text[end + 1..].chars() {
        if !is_url_path_symbol(c) {
            break;
        }
        path_end += c.len_utf8();
    }
    // Cut at the first closing bracket without its opening one, so "(see http://x.com/a)"
    // does not swallow the ")".
    let mut open = Vec::new();
    for (i, c) in text[end..path_end].char_indices() {
        let opening = match c {
            ')' => '(',
            ']' => '[',
            '}' => '{',
            '(' | '[' | '{' => {
                open.push(c);
                continue;
            }
            _ => continue,
        };
        if open.pop() != Some(opening) {
            path_end = end + i;
            break;
        }
    }
    while path_end > end + 1 && text[..path_end].ends_with(|c| BAD_PATH_END_CHARS.contains(c)) {
        path_end -= 1;
    }
    if first == '/' || path_end > end + 1 {
        path_end
    } else {
        end
    }
}

/// `:port` after a host, when it is a valid port number.
fn url_port_end(text: &str, end: usize) -> usize {
    let bytes = text.as_bytes();
    if bytes.get(end) != Some(&b':') {
        return end;
    }
    let digits_end = ascii_run(bytes, end + 1, |b| b.is_ascii_digit());
    let significant = text[end + 1..digits_end].trim_start_matches('0');
    if significant.is_empty() || significant.len() > 5 {
        return end;
    }
    match significant.parse::<u32>() {
        Ok(port) if port <= 65535 => digits_end,
        _ => end,
    }
}

/// `http://`, `https://` and `ftp://` URLs (a subset of TDLib's `match_urls`/`fix_url`).
fn match_scheme_urls(text: &str) -> Vec<Span> {
    let mut result = Vec::new();
    for (sep, _) in text.match_indices("://") {
        // The protocol is the run of protocol characters before "://"; like TDLib, a longer
        // run ending in a supported protocol name (e.g. "xhttp") still yields that protocol.
        let before = &text[..sep];
        let protocol_start = before
            .char_indices()
            .rev()
            .take_while(|&(_, c)| {
                if c.is_ascii() {
                    c.is_ascii_alphanumeric() || c == '+' || c == '-'
                } else {
                    !c.is_whitespace()
                }
            })
            .last()
            .map_or(sep, |(i, _)| i);
        let protocol = before[protocol_start..].to_ascii_lowercase();
        let name_len = if protocol.ends_with("https") {
            5
        } else if protocol.ends_with("http") && protocol != "shttp" {
            4
        } else if protocol.ends_with("ftp") && protocol != "tftp" && protocol != "sftp" {
            3
        } else {
            continue;
        };
        let start = sep - name_len;
        let host_start = sep + 3;
        let mut host_end = host_start;
        for c in text[host_start..].chars() {
            if !is_domain_symbol(c) {
                break;
            }
            host_end += c.len_utf8();
        }
        let host = text[host_start..host_end].trim_end_matches('.');
        host_end = host_start + host.len();
        if host.starts_with('.') || !host.contains('.') || host.split('.').any(str::is_empty) {
            continue;
        }
        let end = url_path_end(text, url_port_end(text, host_end));
        result.push((start, end, Kind::Url));
    }
    result
}

/// Bare `t.me/...` style links (TDLib links every bare domain with a known TLD; only
/// Telegram's own domains are modelled).
fn match_telegram_domains(text: &str) -> Vec<Span> {
    let lower = text.to_ascii_lowercase();
    let mut result = Vec::new();
    for domain in ["t.me", "telegram.me", "telegram.dog"] {
        for (start, _) in lower.match_indices(domain) {
            let blocked = |c: char| is_domain_symbol(c) || matches!(c, '/' | '#' | '@');
            if prev_char(text, start).is_some_and(blocked) {
                continue;
            }
            let host_end = start + domain.len();
            if next_char(text, host_end).is_some_and(|c| is_domain_symbol(c) && c != '.') {
                continue;
            }
            let end = url_path_end(text, url_port_end(text, host_end));
            result.push((start, end, Kind::Url));
        }
    }
    result
}

/// TDLib's `match_tg_urls`: `tg://` and `ton://` links.
fn match_tg_urls(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut result = Vec::new();
    for (colon, _) in text.match_indices("://") {
        let start = if colon >= 2 && bytes[colon - 2..colon].eq_ignore_ascii_case(b"tg") {
            colon - 2
        } else if colon >= 3 && bytes[colon - 3..colon].eq_ignore_ascii_case(b"ton") {
            colon - 3
        } else {
            continue;
        };
        let host_start = colon + 3;
        let mut host_end = host_start;
        while host_end < bytes.len()
            && host_end - host_start != 253
            && (is_alnum_underscore(bytes[host_end]) || bytes[host_end] == b'-')
        {
            host_end += 1;
        }
        if host_end == host_start {
            continue;
        }
        let end = url_path_end(text, host_end);
        result.push((start, end, Kind::Url));
    }
    result
}

/// TDLib's `is_email_address`:
/// `^([a-z0-9_-]{0,26}[.+]){0,10}[a-z0-9_-]{1,35}@(([a-z0-9][a-z0-9_-]{0,28})?[a-z0-9][.]){1,6}[a-z]{2,8}$`
/// (case-insensitive).
fn is_email_address(s: &str) -> bool {
    let Some((user, domain)) = s.split_once('@') else {
        return false;
    };
    if domain.is_empty() {
        return false;
    }
    let user_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut parts = 0;
    let mut prev = 0;
    for (i, b) in user.bytes().enumerate() {
        if b == b'.' || b == b'+' {
            if i - prev >= 27 {
                return false;
            }
            parts += 1;
            prev = i + 1;
        } else if !user_char(b) {
            return false;
        }
    }
    parts += 1;
    let last = user.len() - prev;
    if parts >= 12 || last == 0 || last >= 36 {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    let Some((tld, rest)) = labels.split_last() else {
        return false;
    };
    if labels.len() <= 1 || labels.len() > 7 {
        return false;
    }
    if tld.len() <= 1 || tld.len() >= 9 || !tld.bytes().all(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    rest.iter().all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() < 31
            && b.iter().all(|&c| user_char(c))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
    })
}

fn match_emails(text: &str) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut result = Vec::new();
    for (at, _) in text.match_indices('@') {
        let mut start = at;
        while start > 0 && {
            let b = bytes[start - 1];
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+')
        } {
            start -= 1;
        }
        let raw_end = ascii_run(bytes, at + 1, |b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
        });
        let end = at + 1 + text[at + 1..raw_end].trim_end_matches('.').len();
        // Like TDLib, an address glued to a word, a path or another '@' is not an address.
        let glued_before =
            prev_char(text, start).is_some_and(|c| is_word_char(c) || matches!(c, '/' | '#' | '@'));
        let glued_after =
            next_char(text, raw_end).is_some_and(|c| !c.is_ascii() && is_domain_symbol(c));
        if start == at || glued_before || glued_after || !is_email_address(&text[start..end]) {
            continue;
        }
        result.push((start, end, Kind::Email));
    }
    result
}

/// TDLib's `find_entities` + `fix_entity_offsets`: all matches, sorted, overlaps removed,
/// converted to UTF-16.
fn find_entities(text: &str) -> Vec<Entity> {
    let mut spans = Vec::new();
    spans.extend(match_mentions(text));
    spans.extend(match_bot_commands(text));
    spans.extend(match_hashtags(text));
    spans.extend(match_cashtags(text));
    spans.extend(match_tg_urls(text));
    spans.extend(match_scheme_urls(text));
    spans.extend(match_telegram_domains(text));
    spans.extend(match_emails(text));
    let mut entities: Vec<Entity> = spans
        .into_iter()
        .filter(|(start, end, _)| end > start)
        .map(|(start, end, kind)| Entity {
            kind,
            offset: start,
            length: end - start,
        })
        .collect();
    sort_entities(&mut entities);
    entities.dedup();
    let entities = remove_intersecting_entities(entities);
    entities
        .into_iter()
        .map(|e| {
            let offset = utf16::byte_to_utf16(text, e.offset);
            let end = utf16::byte_to_utf16(text, e.offset + e.length);
            Entity {
                kind: e.kind,
                offset,
                length: end - offset,
            }
        })
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

    fn spans(text: &str) -> Vec<(String, &'static str)> {
        find_entities(text)
            .into_iter()
            .map(|e| {
                let s = utf16::slice(text, e.offset, e.length).unwrap().to_string();
                (s, e.kind.type_name())
            })
            .collect()
    }

    fn span(s: &str, kind: &'static str) -> (String, &'static str) {
        (s.to_string(), kind)
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

    #[test]
    fn links_are_checked_like_telegram() {
        let ok = |url: &str| check_link(url).unwrap();
        assert_eq!(ok("https://example.com"), "https://example.com/");
        assert_eq!(
            ok("HTTPS://Example.COM/Path?Q=1#F"),
            "https://example.com/Path?Q=1#F"
        );
        assert_eq!(ok("example.com"), "http://example.com/");
        assert_eq!(ok("example.com?x"), "http://example.com/?x");
        assert_eq!(ok("http://a.com:8080/x"), "http://a.com:8080/x");
        assert_eq!(ok("http://a.com:0080"), "http://a.com:80/");
        assert_eq!(ok("http://user:pw@a.com"), "http://user:pw@a.com/");
        assert_eq!(ok("https://a.com/a b"), "https://a.com/a%20b");
        assert_eq!(ok("https://пример.рф"), "https://пример.рф/");
        assert_eq!(ok("http://[::1]/"), "http://[::1]/");
        assert_eq!(ok("tg://user?id=123"), "tg://user?id=123");
        assert_eq!(ok("TG:resolve?domain=x"), "tg://resolve?domain=x");
        assert_eq!(ok("tg://resolve"), "tg://resolve/");
        assert_eq!(ok("ton://wallet"), "ton://wallet/");
        let bad = |url: &str| check_link(url).unwrap_err();
        assert_eq!(bad("foo"), "Wrong HTTP URL");
        assert_eq!(bad(""), "URL host is empty");
        assert_eq!(bad("ftp://a.com"), "Unsupported URL protocol");
        assert_eq!(
            bad("javascript:alert(1)"),
            "Wrong port number specified in the URL"
        );
        assert_eq!(
            bad("http://a.com:70000"),
            "Wrong port number specified in the URL"
        );
        assert_eq!(bad("http://a b.com"), "Wrong URL host");
        assert_eq!(
            bad("http://a%zz.com"),
            "Wrong percent-encoded symbol in URL host"
        );
        assert_eq!(
            bad("http://[zz]/"),
            "Wrong IPv6 address specified in the URL"
        );
        assert_eq!(bad("tg://a.b"), "Unallowed characters in URL host");
        assert_eq!(bad("tg:https://a.com"), "Wrong tg URL");
        assert_eq!(bad("tg://a:1"), "Wrong tg URL");
    }

    #[test]
    fn detect_bot_commands() {
        assert_eq!(spans("/start"), vec![span("/start", "bot_command")]);
        assert_eq!(
            spans("/start@my_bot hi"),
            vec![span("/start@my_bot", "bot_command")]
        );
        assert_eq!(spans("hi /help me"), vec![span("/help", "bot_command")]);
        assert_eq!(spans("(/help)"), vec![span("/help", "bot_command")]);
        assert!(spans("a/start").is_empty());
        assert!(spans("/start/x").is_empty());
        assert!(spans("</b>").is_empty());
        assert!(spans("/").is_empty());
        assert!(spans("/start@ab").is_empty(), "bot name too short");
        assert!(spans(&format!("/{}", "a".repeat(65))).is_empty());
        assert!(spans("/команда").is_empty());
    }

    #[test]
    fn detect_mentions() {
        assert_eq!(spans("@durov"), vec![span("@durov", "mention")]);
        assert_eq!(spans("hi @Some_User!"), vec![span("@Some_User", "mention")]);
        assert!(spans("@abcd").is_empty(), "shorter than 5");
        assert!(spans("a@durov").is_empty());
        assert!(spans("@durovж").is_empty());
        assert!(spans(&format!("@{}", "a".repeat(33))).is_empty());
    }

    #[test]
    fn detect_hashtags_and_cashtags() {
        assert_eq!(
            spans("#hashtag #тег"),
            vec![span("#hashtag", "hashtag"), span("#тег", "hashtag")]
        );
        assert_eq!(spans("#tag_1 x"), vec![span("#tag_1", "hashtag")]);
        assert!(spans("#123").is_empty(), "needs a letter");
        assert!(spans("a#b").is_empty());
        assert!(spans("#a#b").is_empty());
        let long = format!("#{}", "a".repeat(300));
        assert_eq!(spans(&long), vec![span(&long[..257], "hashtag")]);
        assert_eq!(
            spans("$USD and $EUR."),
            vec![span("$USD", "cashtag"), span("$EUR", "cashtag")]
        );
        assert_eq!(spans("$1INCH"), vec![span("$1INCH", "cashtag")]);
        assert!(spans("$usd $ABCDEFGHI a$USD $USDx $$USD").is_empty());
    }

    #[test]
    fn detect_urls() {
        assert_eq!(
            spans("see https://example.com/path."),
            vec![span("https://example.com/path", "url")]
        );
        assert_eq!(
            spans("(https://example.com/a)"),
            vec![span("https://example.com/a", "url")]
        );
        assert_eq!(
            spans("https://en.wikipedia.org/wiki/Rust_(language)"),
            vec![span("https://en.wikipedia.org/wiki/Rust_(language)", "url")]
        );
        assert_eq!(
            spans("HTTP://A.COM:8080/x?y=1#z!"),
            vec![span("HTTP://A.COM:8080/x?y=1#z", "url")]
        );
        assert_eq!(
            spans("ftp://files.example.org"),
            vec![span("ftp://files.example.org", "url")]
        );
        assert_eq!(spans("go t.me/durov, now"), vec![span("t.me/durov", "url")]);
        assert_eq!(spans("telegram.me"), vec![span("telegram.me", "url")]);
        assert_eq!(
            spans("tg://resolve?domain=x"),
            vec![span("tg://resolve?domain=x", "url")]
        );
        assert_eq!(
            spans("https://t.me/abc"),
            vec![span("https://t.me/abc", "url")]
        );
        assert_eq!(
            spans("https://пример.рф/путь"),
            vec![span("https://пример.рф/путь", "url")]
        );
        assert_eq!(
            spans("«https://a.com/x»"),
            vec![span("https://a.com/x", "url")]
        );
        assert!(spans("http://localhost/x").is_empty());
        assert!(spans("shttp://a.com").is_empty());
        assert!(spans("at.me/x").is_empty());
        assert!(
            spans("example.com").is_empty(),
            "bare domains other than Telegram's: not modelled"
        );
    }

    #[test]
    fn detect_emails() {
        assert_eq!(
            spans("mail a@example.com."),
            vec![span("a@example.com", "email")]
        );
        assert_eq!(
            spans("first.last+tag@sub.example.org"),
            vec![span("first.last+tag@sub.example.org", "email")]
        );
        assert!(spans("a@b").is_empty());
        assert!(spans("a@b.c").is_empty(), "TLD of one letter");
        // Glued to a path: not an address (here it is a command addressed to a bot instead).
        assert_eq!(
            spans("/x@example.com"),
            vec![span("/x@example", "bot_command")]
        );
        assert!(spans("a/x@example.com").is_empty());
        assert!(spans("a@-b.com").is_empty());
    }

    #[test]
    fn detect_offsets_are_utf16_and_sorted() {
        let found = detect("😀 @durov и #тег /start");
        assert_eq!(
            found,
            vec![
                e("mention", 3, 6),
                e("hashtag", 12, 4),
                e("bot_command", 17, 6)
            ]
        );
        // Overlapping matches: the earlier and longer one wins.
        assert_eq!(
            spans("https://t.me/durov@durov"),
            vec![span("https://t.me/durov@durov", "url")]
        );
        assert!(detect("").is_empty());
        assert!(detect("plain words only").is_empty());
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

    #[test]
    fn date_format_normalisation() {
        assert_eq!(normalize_date_format(""), Some(None));
        assert_eq!(normalize_date_format("r"), Some(Some("r".into())));
        assert_eq!(normalize_date_format("TDW"), Some(Some("wDT".into())));
        assert_eq!(normalize_date_format("dD"), Some(Some("d".into())));
        assert_eq!(normalize_date_format("rt"), None);
        assert_eq!(normalize_date_format("x"), None);
    }

    #[test]
    fn from_value_reads_back_to_value() {
        for value in [
            e("bold", 1, 2),
            e("mention", 0, 6),
            json!({"type": "pre", "offset": 0, "length": 1, "language": "go"}),
            json!({"type": "date_time", "offset": 0, "length": 1, "unix_time": 9}),
        ] {
            assert_eq!(
                Entity::from_value(&value).map(|e| e.to_value()),
                Some(value)
            );
        }
        assert_eq!(Entity::from_value(&json!({"type": "bold"})), None);
        assert_eq!(
            Entity::from_value(&e("bold", 0, 1)).map(|e| e.kind),
            Some(Kind::Bold)
        );
    }
}
