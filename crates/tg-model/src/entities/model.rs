//! The typed entity model shared with `html`: an entity's type with its data, and Telegram's
//! order of entities.

use std::cmp::Reverse;

use serde_json::Value;

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
    pub(super) fn type_name(&self) -> &'static str {
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
    pub(super) fn bit(&self) -> u32 {
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
    pub(super) fn splittable_index(&self) -> Option<usize> {
        match self {
            Kind::Bold => Some(0),
            Kind::Italic => Some(1),
            Kind::Underline => Some(2),
            Kind::Strikethrough => Some(3),
            Kind::Spoiler => Some(4),
            _ => None,
        }
    }

    pub(super) fn is_blockquote(&self) -> bool {
        matches!(self, Kind::Blockquote | Kind::ExpandableBlockquote)
    }

    /// Code and pre: nothing may be nested inside them.
    pub(super) fn is_pre(&self) -> bool {
        matches!(self, Kind::Code | Kind::Pre(_))
    }

    /// TDLib's "continuous" types: they can't contain or be part of each other.
    /// (Whether TDLib counts `date_time` here is an assumption.)
    pub(super) fn is_continuous(&self) -> bool {
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
    pub(super) fn is_detected(&self) -> bool {
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

    pub(super) fn splittable_from_index(index: usize) -> Kind {
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

impl Entity {
    pub(super) fn end(&self) -> usize {
        self.offset + self.length
    }
}

/// Sorts as Telegram does: by offset, then longer (outer) first, then by type priority.
pub(crate) fn sort_entities(entities: &mut [Entity]) {
    entities.sort_by_key(|e| (e.offset, Reverse(e.length), e.kind.priority()));
}
