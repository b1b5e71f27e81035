//! The typed `RichMessage`: blocks and rich texts as the converter builds them.
//!
//! Each type serializes to exactly the JSON the Bot API defines (field order included, since
//! `serde_json` keeps insertion order in this workspace and the fake's answers are compared byte
//! for byte). Optional fields are left out rather than written as `null`, as Telegram does.

use serde::Serialize;
use serde_json::{Map, Value};

/// A `RichMessage`: the blocks, and `is_rtl` only when it is set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct RichMessage {
    pub(super) blocks: Vec<Block>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) is_rtl: Option<bool>,
}

/// A `RichBlock`. Media blocks have no variant: the fake refuses them before building any.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Block {
    Paragraph {
        text: RichText,
    },
    Heading {
        text: RichText,
        size: u8,
    },
    Pre {
        text: RichText,
        #[serde(skip_serializing_if = "Option::is_none")]
        language: Option<String>,
    },
    Footer {
        text: RichText,
    },
    Thinking {
        text: RichText,
    },
    Divider,
    MathematicalExpression {
        expression: String,
    },
    Anchor {
        name: String,
    },
    List {
        items: Vec<ListItem>,
    },
    Blockquote {
        blocks: Vec<Block>,
        #[serde(skip_serializing_if = "Option::is_none")]
        credit: Option<RichText>,
    },
    ExpandableBlockquote {
        text: RichText,
        #[serde(skip_serializing_if = "Option::is_none")]
        credit: Option<RichText>,
    },
    Pullquote {
        text: RichText,
        #[serde(skip_serializing_if = "Option::is_none")]
        credit: Option<RichText>,
    },
    Details {
        summary: RichText,
        blocks: Vec<Block>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_open: Option<bool>,
    },
    Table {
        cells: Vec<Vec<Cell>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_bordered: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_striped: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_compact: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        caption: Option<RichText>,
    },
    Map {
        /// The `Location` as given: the fake only checks that it has coordinates.
        location: Map<String, Value>,
        zoom: u8,
        width: u32,
        height: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        caption: Option<Caption>,
    },
    Buttons {
        buttons: Vec<Button>,
        #[serde(skip_serializing_if = "Option::is_none")]
        align: Option<String>,
    },
}

/// One item of a list block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ListItem {
    pub(super) label: String,
    pub(super) blocks: Vec<Block>,
    #[serde(skip_serializing_if = "Option::is_none")]
    has_checkbox: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_checked: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<i32>,
    /// The numbering style (`"a"`, `"I"`...) of `<ol type>`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    style: Option<String>,
}

impl ListItem {
    /// `checkbox` is whether a checkbox is checked, `None` for none. A `value` outside the
    /// Bot API's 32-bit range is left out rather than refused: the label still shows it.
    pub(super) fn new(
        label: String,
        blocks: Vec<Block>,
        checkbox: Option<bool>,
        value: Option<i64>,
        style: Option<String>,
    ) -> Self {
        Self {
            label,
            blocks,
            has_checkbox: checkbox.map(|_| true),
            is_checked: checkbox,
            value: value.and_then(|v| i32::try_from(v).ok()),
            style,
        }
    }
}

/// One cell of a table block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Cell {
    pub(super) align: String,
    pub(super) valign: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) text: Option<RichText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) is_header: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) colspan: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rowspan: Option<u64>,
}

/// A `RichBlockCaption` (of a map): text with an optional credit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Caption {
    pub(super) text: RichText,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) credit: Option<RichText>,
}

/// An inline keyboard button shown in a message's text; the objects it may carry are kept as
/// given since the fake never acts on them.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub(super) struct Button {
    pub(super) text: RichText,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) style: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) callback_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) switch_inline_query: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) switch_inline_query_current_chat: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) web_app: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) login_url: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) switch_inline_query_chosen_chat: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) copy_text: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) disabled: Option<Map<String, Value>>,
}

/// A `RichText`: a string, a list of rich texts, or one typed object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(super) enum RichText {
    Plain(String),
    Concat(Vec<RichText>),
    Object(Box<TextObject>),
}

impl Default for RichText {
    fn default() -> Self {
        RichText::Plain(String::new())
    }
}

/// The rich text objects, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum TextObject {
    Bold {
        text: RichText,
    },
    Italic {
        text: RichText,
    },
    Underline {
        text: RichText,
    },
    Strikethrough {
        text: RichText,
    },
    Spoiler {
        text: RichText,
    },
    Subscript {
        text: RichText,
    },
    Superscript {
        text: RichText,
    },
    Marked {
        text: RichText,
    },
    Code {
        text: RichText,
    },
    DateTime {
        text: RichText,
        unix_time: u64,
        date_time_format: String,
    },
    TextMention {
        text: RichText,
        /// The `User` as given, once checked.
        user: Value,
    },
    CustomEmoji {
        custom_emoji_id: String,
        alternative_text: String,
    },
    MathematicalExpression {
        expression: String,
    },
    Url {
        text: RichText,
        url: String,
    },
    EmailAddress {
        text: RichText,
        email_address: String,
    },
    PhoneNumber {
        text: RichText,
        phone_number: String,
    },
    BankCardNumber {
        text: RichText,
        bank_card_number: String,
    },
    Mention {
        text: RichText,
        username: String,
    },
    Hashtag {
        text: RichText,
        hashtag: String,
    },
    Cashtag {
        text: RichText,
        cashtag: String,
    },
    BotCommand {
        text: RichText,
        bot_command: String,
    },
    Button {
        /// Boxed: a button is far larger than any other rich text object.
        button: Box<Button>,
    },
    Anchor {
        name: String,
    },
    AnchorLink {
        text: RichText,
        anchor_name: String,
    },
    Reference {
        text: RichText,
        name: String,
    },
    /// The `reference` a markdown footnote definition starts with. It is [`Self::Reference`]
    /// with `name` written first, the order the fake has always answered with for footnotes.
    #[serde(rename = "reference")]
    FootnoteLabel {
        name: String,
        text: RichText,
    },
    ReferenceLink {
        text: RichText,
        reference_name: String,
    },
}

/// The formatting objects that hold nothing but text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    Bold,
    Italic,
    Underline,
    Strikethrough,
    Spoiler,
    Subscript,
    Superscript,
    Marked,
    Code,
}

impl Style {
    /// `text` formatted with this style.
    pub(super) fn apply(self, text: RichText) -> RichText {
        RichText::object(match self {
            Style::Bold => TextObject::Bold { text },
            Style::Italic => TextObject::Italic { text },
            Style::Underline => TextObject::Underline { text },
            Style::Strikethrough => TextObject::Strikethrough { text },
            Style::Spoiler => TextObject::Spoiler { text },
            Style::Subscript => TextObject::Subscript { text },
            Style::Superscript => TextObject::Superscript { text },
            Style::Marked => TextObject::Marked { text },
            Style::Code => TextObject::Code { text },
        })
    }
}

impl RichText {
    pub(super) fn object(object: TextObject) -> Self {
        RichText::Object(Box::new(object))
    }

    pub(super) fn math(expression: impl Into<String>) -> Self {
        RichText::object(TextObject::MathematicalExpression {
            expression: expression.into(),
        })
    }

    /// Whether nothing at all is in it (an empty object, say `bold` of `""`, is something).
    pub(super) fn is_empty(&self) -> bool {
        match self {
            RichText::Plain(s) => s.is_empty(),
            RichText::Concat(parts) => parts.is_empty(),
            RichText::Object(_) => false,
        }
    }

    /// Appends the visible characters: formula sources and custom emoji alternative texts
    /// included, URLs and other targets excluded. The same rule as `plain`'s reading of the
    /// JSON, which the tests check.
    pub(super) fn push_plain(&self, out: &mut String) {
        match self {
            RichText::Plain(s) => out.push_str(s),
            RichText::Concat(parts) => parts.iter().for_each(|p| p.push_plain(out)),
            RichText::Object(object) => match &**object {
                TextObject::MathematicalExpression { expression } => out.push_str(expression),
                TextObject::CustomEmoji {
                    alternative_text, ..
                } => out.push_str(alternative_text),
                TextObject::Anchor { .. } => {}
                TextObject::Button { button } => button.text.push_plain(out),
                TextObject::Bold { text }
                | TextObject::Italic { text }
                | TextObject::Underline { text }
                | TextObject::Strikethrough { text }
                | TextObject::Spoiler { text }
                | TextObject::Subscript { text }
                | TextObject::Superscript { text }
                | TextObject::Marked { text }
                | TextObject::Code { text }
                | TextObject::DateTime { text, .. }
                | TextObject::TextMention { text, .. }
                | TextObject::Url { text, .. }
                | TextObject::EmailAddress { text, .. }
                | TextObject::PhoneNumber { text, .. }
                | TextObject::BankCardNumber { text, .. }
                | TextObject::Mention { text, .. }
                | TextObject::Hashtag { text, .. }
                | TextObject::Cashtag { text, .. }
                | TextObject::BotCommand { text, .. }
                | TextObject::AnchorLink { text, .. }
                | TextObject::Reference { text, .. }
                | TextObject::FootnoteLabel { text, .. }
                | TextObject::ReferenceLink { text, .. } => text.push_plain(out),
            },
        }
    }

    /// The visible characters of parts, as [`Self::push_plain`] gives them.
    pub(super) fn plain_of(parts: &[RichText]) -> String {
        let mut out = String::new();
        parts.iter().for_each(|p| p.push_plain(&mut out));
        out
    }
}

/// The parts of a rich text being built: strings merged, lists spliced, so that the text is
/// as flat as the input allows.
#[derive(Debug, Default)]
pub(super) struct Parts(Vec<RichText>);

impl Parts {
    /// Appends a string, merging it with a preceding one.
    pub(super) fn push_str(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if let Some(RichText::Plain(last)) = self.0.last_mut() {
            last.push_str(s);
        } else {
            self.0.push(RichText::Plain(s.to_string()));
        }
    }

    /// Appends a rich text; a list is spliced in, so lists stay flat.
    pub(super) fn push(&mut self, part: RichText) {
        match part {
            RichText::Plain(s) => self.push_str(&s),
            RichText::Concat(inner) => inner.into_iter().for_each(|part| self.push(part)),
            other => self.0.push(other),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn last(&self) -> Option<&RichText> {
        self.0.last()
    }

    pub(super) fn as_slice(&self) -> &[RichText] {
        &self.0
    }

    pub(super) fn into_vec(self) -> Vec<RichText> {
        self.0
    }

    /// Trims whitespace at both ends of the top-level strings, dropping those left empty.
    pub(super) fn trim(&mut self) {
        while let Some(RichText::Plain(first)) = self.0.first_mut() {
            let trimmed = first.trim_start();
            if trimmed.is_empty() {
                self.0.remove(0);
            } else {
                *first = trimmed.to_string();
                break;
            }
        }
        while let Some(RichText::Plain(last)) = self.0.last_mut() {
            let trimmed = last.trim_end();
            if trimmed.is_empty() {
                self.0.pop();
            } else {
                last.truncate(trimmed.len());
                break;
            }
        }
    }

    /// The rich text: the part itself when there is one, `""` when none.
    pub(super) fn into_text(self) -> RichText {
        let mut parts = self.0;
        match parts.len() {
            0 => RichText::default(),
            1 => parts.pop().unwrap_or_default(),
            _ => RichText::Concat(parts),
        }
    }
}

impl Block {
    /// The text content of blocks as one rich text, blocks separated by "\n"; used where the
    /// target (a table cell, a footer, a pull quote...) holds text rather than blocks.
    pub(super) fn flatten(blocks: &[Block]) -> Option<RichText> {
        let mut parts = Parts::default();
        for block in blocks {
            if let Some(text) = block.flat_text() {
                if !parts.is_empty() {
                    parts.push_str("\n");
                }
                parts.push(text);
            }
        }
        (!parts.is_empty()).then(|| parts.into_text())
    }

    fn flat_text(&self) -> Option<RichText> {
        match self {
            Block::MathematicalExpression { expression } => Some(RichText::math(expression)),
            Block::List { items } => {
                let mut parts = Parts::default();
                for item in items {
                    if !parts.is_empty() {
                        parts.push_str("\n");
                    }
                    parts.push_str(&format!("{} ", item.label));
                    if let Some(text) = Block::flatten(&item.blocks) {
                        parts.push(text);
                    }
                }
                (!parts.is_empty()).then(|| parts.into_text())
            }
            Block::Blockquote { blocks, .. } | Block::Details { blocks, .. } => {
                Block::flatten(blocks)
            }
            Block::Paragraph { text }
            | Block::Heading { text, .. }
            | Block::Pre { text, .. }
            | Block::Footer { text }
            | Block::Thinking { text }
            | Block::ExpandableBlockquote { text, .. }
            | Block::Pullquote { text, .. } => Some(text.clone()),
            Block::Divider
            | Block::Anchor { .. }
            | Block::Table { .. }
            | Block::Map { .. }
            | Block::Buttons { .. } => None,
        }
    }
}

/// The label of a bullet list item.
pub(super) const BULLET: &str = "•";

/// The label of the `n`th item of an ordered list: `3.`, or with an `<ol type>` style `c.`,
/// `C.`, `iii.`, `III.`; numbers a style can't write fall back to digits.
pub(super) fn ordered_label(n: i64, style: Option<&str>) -> String {
    let alpha = |upper: bool| -> Option<String> {
        if n < 1 {
            return None;
        }
        let mut n = n;
        let mut s = Vec::new();
        while n > 0 {
            n -= 1;
            let c = (b'a' + (n % 26) as u8) as char;
            s.push(if upper { c.to_ascii_uppercase() } else { c });
            n /= 26;
        }
        Some(s.iter().rev().collect())
    };
    let roman = |upper: bool| -> Option<String> {
        if !(1..4000).contains(&n) {
            return None;
        }
        const NUMERALS: [(i64, &str); 13] = [
            (1000, "m"),
            (900, "cm"),
            (500, "d"),
            (400, "cd"),
            (100, "c"),
            (90, "xc"),
            (50, "l"),
            (40, "xl"),
            (10, "x"),
            (9, "ix"),
            (5, "v"),
            (4, "iv"),
            (1, "i"),
        ];
        let mut n = n;
        let mut s = String::new();
        for (value, digits) in NUMERALS {
            while n >= value {
                s.push_str(digits);
                n -= value;
            }
        }
        Some(if upper { s.to_uppercase() } else { s })
    };
    let label = match style {
        Some("a") => alpha(false),
        Some("A") => alpha(true),
        Some("i") => roman(false),
        Some("I") => roman(true),
        _ => None,
    };
    format!("{}.", label.unwrap_or_else(|| n.to_string()))
}
