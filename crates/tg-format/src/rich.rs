//! Rich messages (Bot API 10.1/10.2): an `InputRichMessage` turned into the `RichMessage` the
//! server stores and returns.
//!
//! The three input forms share one path: `markdown` (pulldown-cmark events) and `html` (a small
//! tolerant tokenizer) both drive the same `Builder`, so HTML embedded in markdown (`<u>`,
//! `<details>`...) behaves exactly like it does in the html form; `blocks` is validated and
//! rebuilt field by field. The JSON is built with `serde_json` directly so that this crate needs
//! no Bot API types crate; the tests check every produced shape against frankenstein's types.
//!
//! Media (photos, videos... and the `media` list they refer to) are rejected: the fake server
//! has no file store to resolve them against.
//!
//! Choices where Telegram's behaviour is unknown:
//! - markdown soft line breaks stay `"\n"`, as a person typing in a chat means them;
//! - list item labels are `"•"` for bullets and `"3."` (or `"c."`, `"iii."` for `<ol type>`)
//!   for ordered items, which also carry `value`;
//! - a footnote reference is a `reference_link` numbered in order of first use, its
//!   definition a paragraph starting with a `reference` of the same name;
//! - unknown HTML tags are dropped and their content kept, a `<` that starts no tag is text,
//!   but a tag left unfinished at the end of the input is a parse error (as for `parse_mode`);
//! - text outside any block becomes paragraphs, split at blank lines in the html form;
//! - `max_depth` bounds container nesting (block quotes, lists, details) and, separately,
//!   inline formatting nesting.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};
use serde_json::{Map, Value, json};

/// Why a rich message was refused. `Display` is the text that follows `Bad Request: ` in the
/// server's answer (Telegram's real texts are unknown, these are our own).
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum RichError {
    /// None, or more than one, of `blocks`, `html` and `markdown` was given.
    #[error("rich message must have exactly one of blocks, html, markdown")]
    SourceCount,
    /// The text content is longer than [`Limits::max_chars`].
    #[error("rich message is too long")]
    TooLong,
    /// More blocks (nested blocks, list items and table rows included) than [`Limits::max_blocks`].
    #[error("too many blocks in rich message")]
    TooManyBlocks,
    /// Blocks, or inline formatting, nested deeper than [`Limits::max_depth`].
    #[error("rich message nesting is too deep")]
    TooDeep,
    /// A table row has more cells than [`Limits::max_table_columns`].
    #[error("too many columns in rich message table")]
    TooManyColumns,
    /// The `media` list is longer than [`Limits::max_media`].
    #[error("too many media in rich message")]
    TooManyMedia,
    /// The message has a media block, an image, or a `media` list.
    #[error("tg-fake does not support media in rich messages")]
    MediaUnsupported,
    /// The input is malformed: wrong JSON shape, missing field, unfinished HTML tag...
    #[error("can't parse rich message: {0}")]
    Parse(String),
    /// A block of `blocks` has a `type` that does not exist.
    #[error("invalid block type \"{0}\"")]
    InvalidBlockType(String),
    /// A rich text object has a `type` that does not exist.
    #[error("invalid rich text type \"{0}\"")]
    InvalidTextType(String),
    /// Nothing would be shown.
    #[error("rich message text is empty")]
    Empty,
}

/// Limits a rich message must respect. The defaults are the documented Bot API ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum text content, counted by [`char_count`].
    pub max_chars: usize,
    /// Maximum blocks, counting nested blocks, list items and table rows.
    pub max_blocks: usize,
    /// Maximum nesting of container blocks (block quotes, lists, details), and separately of
    /// inline formatting.
    pub max_depth: usize,
    /// Maximum length of the `media` list.
    pub max_media: usize,
    /// Maximum cells in one table row.
    pub max_table_columns: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_chars: 32768,
            max_blocks: 500,
            max_depth: 16,
            max_media: 50,
            max_table_columns: 20,
        }
    }
}

type Result<T> = std::result::Result<T, RichError>;

fn parse_err(detail: impl Into<String>) -> RichError {
    RichError::Parse(detail.into())
}

/// Convert an InputRichMessage JSON value into the RichMessage JSON value the server returns.
///
/// `input` is the already decoded `rich_message` object. The answer is
/// `{"blocks": [...], "is_rtl": true}` (`is_rtl` only when asked for);
/// `skip_entity_detection` is accepted and ignored because the fake never detects entities in
/// rich messages.
pub fn convert(input: &Value, limits: &Limits) -> Result<Value> {
    let obj = input
        .as_object()
        .ok_or_else(|| parse_err("rich_message must be an Object"))?;
    let field = |name: &str| obj.get(name).filter(|v| !v.is_null());
    let sources = ["blocks", "html", "markdown"]
        .iter()
        .filter(|name| field(name).is_some())
        .count();
    if sources != 1 {
        return Err(RichError::SourceCount);
    }
    if let Some(media) = field("media") {
        let media = media
            .as_array()
            .ok_or_else(|| parse_err("field \"media\" must be an Array"))?;
        if media.len() > limits.max_media {
            return Err(RichError::TooManyMedia);
        }
        if !media.is_empty() {
            return Err(RichError::MediaUnsupported);
        }
    }
    let is_rtl = match field("is_rtl") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| parse_err("field \"is_rtl\" must be a Boolean"))?,
    };

    let blocks = if let Some(blocks) = field("blocks") {
        input_blocks(blocks, limits, 0)?
    } else if let Some(html) = field("html") {
        let html = html
            .as_str()
            .ok_or_else(|| parse_err("field \"html\" must be a String"))?;
        html_to_blocks(html, limits)?
    } else if let Some(markdown) = field("markdown") {
        let markdown = markdown
            .as_str()
            .ok_or_else(|| parse_err("field \"markdown\" must be a String"))?;
        markdown_to_blocks(markdown, limits)?
    } else {
        return Err(RichError::SourceCount);
    };

    check_limits(&blocks, limits)?;
    let mut out = Map::new();
    out.insert("blocks".into(), Value::Array(blocks));
    if is_rtl {
        out.insert("is_rtl".into(), Value::Bool(true));
    }
    Ok(Value::Object(out))
}

fn check_limits(blocks: &[Value], limits: &Limits) -> Result<()> {
    let chars = blocks_char_count(blocks);
    if blocks.is_empty() || (chars == 0 && !has_non_text_block(blocks)) {
        return Err(RichError::Empty);
    }
    if count_blocks(blocks) > limits.max_blocks {
        return Err(RichError::TooManyBlocks);
    }
    if chars > limits.max_chars {
        return Err(RichError::TooLong);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reading a RichMessage: plain text, character count, block count.
// ---------------------------------------------------------------------------------------------

fn message_blocks(rich: &Value) -> &[Value] {
    let blocks = match rich {
        Value::Array(_) => Some(rich),
        _ => rich.get("blocks"),
    };
    blocks.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn child_blocks<'v>(block: &'v Value, key: &str) -> &'v [Value] {
    block
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn str_field<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn block_type(block: &Value) -> &str {
    str_field(block, "type")
}

/// Plain text of a RichMessage (blocks separated by "\n", list items prefixed "- " or "1. ",
/// table cells tab-separated, rows by "\n"), used by the fake to show what the person sees and
/// to count length.
///
/// Accepts the `{"blocks": [...]}` object or a bare block array. Formatting is dropped; a
/// divider shows as `---`, media as `[photo]`-like placeholders, a credit as `— credit`.
pub fn plain_text(rich: &Value) -> String {
    let mut lines = Vec::new();
    plain_blocks(message_blocks(rich), &mut lines);
    lines.join("\n")
}

fn plain_blocks(blocks: &[Value], lines: &mut Vec<String>) {
    for block in blocks {
        plain_block(block, lines);
    }
}

fn plain_of(text: Option<&Value>) -> String {
    let mut out = String::new();
    if let Some(text) = text {
        text_plain(text, &mut out);
    }
    out
}

fn push_credit(block: &Value, lines: &mut Vec<String>) {
    if let Some(credit) = block.get("credit") {
        lines.push(format!("— {}", plain_of(Some(credit))));
    }
}

fn push_caption(block: &Value, lines: &mut Vec<String>) {
    if let Some(caption) = block.get("caption") {
        let text = plain_of(caption.get("text"));
        if !text.is_empty() {
            lines.push(text);
        }
        push_credit(caption, lines);
    }
}

fn plain_block(block: &Value, lines: &mut Vec<String>) {
    match block_type(block) {
        "divider" => lines.push("---".into()),
        "anchor" => {}
        "mathematical_expression" => lines.push(str_field(block, "expression").into()),
        "list" => {
            for item in child_blocks(block, "items") {
                let label = str_field(item, "label");
                let mut prefix = if label.is_empty() || label == "•" {
                    "- ".to_string()
                } else {
                    format!("{label} ")
                };
                if item.get("has_checkbox") == Some(&Value::Bool(true)) {
                    let checked = item.get("is_checked") == Some(&Value::Bool(true));
                    prefix.push_str(if checked { "[x] " } else { "[ ] " });
                }
                let mut inner = Vec::new();
                plain_blocks(child_blocks(item, "blocks"), &mut inner);
                let body = inner.join("\n").replace('\n', "\n  ");
                lines.push(format!("{prefix}{body}"));
            }
        }
        "blockquote" => {
            plain_blocks(child_blocks(block, "blocks"), lines);
            push_credit(block, lines);
        }
        "expandable_blockquote" | "pullquote" => {
            lines.push(plain_of(block.get("text")));
            push_credit(block, lines);
        }
        "table" => {
            if let Some(caption) = block.get("caption") {
                lines.push(plain_of(Some(caption)));
            }
            for row in child_blocks(block, "cells") {
                let cells: Vec<String> = row
                    .as_array()
                    .map(|cells| cells.iter().map(|c| plain_of(c.get("text"))).collect())
                    .unwrap_or_default();
                lines.push(cells.join("\t"));
            }
        }
        "details" => {
            lines.push(plain_of(block.get("summary")));
            plain_blocks(child_blocks(block, "blocks"), lines);
        }
        "collage" | "slideshow" => {
            plain_blocks(child_blocks(block, "blocks"), lines);
            push_caption(block, lines);
        }
        "map" => {
            lines.push("[map]".into());
            push_caption(block, lines);
        }
        "buttons" => {
            let buttons: Vec<String> = child_blocks(block, "buttons")
                .iter()
                .map(|b| format!("[{}]", plain_of(b.get("text"))))
                .collect();
            lines.push(buttons.join(" "));
        }
        kind @ ("photo" | "video" | "audio" | "animation" | "document" | "voice_note") => {
            lines.push(format!("[{kind}]"));
            push_caption(block, lines);
        }
        _ => lines.push(plain_of(block.get("text"))),
    }
}

/// Appends the visible characters of a RichText: formula sources and custom emoji alternative
/// texts included, URLs and other targets excluded.
fn text_plain(text: &Value, out: &mut String) {
    match text {
        Value::String(s) => out.push_str(s),
        Value::Array(parts) => parts.iter().for_each(|p| text_plain(p, out)),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("mathematical_expression") => out.push_str(str_field(text, "expression")),
            Some("custom_emoji") => out.push_str(str_field(text, "alternative_text")),
            Some("anchor") => {}
            Some("button") => {
                if let Some(t) = text.get("button").and_then(|b| b.get("text")) {
                    text_plain(t, out);
                }
            }
            _ => {
                if let Some(t) = o.get("text") {
                    text_plain(t, out);
                }
            }
        },
        _ => {}
    }
}

/// Count of characters (Unicode scalar values, as Telegram's "32768 UTF-8 characters") of text
/// content incl. formula sources.
///
/// Only content counts: no block separators, list labels, URLs or placeholders.
pub fn char_count(rich: &Value) -> usize {
    blocks_char_count(message_blocks(rich))
}

fn blocks_char_count(blocks: &[Value]) -> usize {
    let mut content = String::new();
    for block in blocks {
        block_content(block, &mut content);
    }
    content.chars().count()
}

fn block_content(block: &Value, out: &mut String) {
    for key in ["text", "summary", "credit"] {
        if let Some(t) = block.get(key) {
            text_plain(t, out);
        }
    }
    out.push_str(str_field(block, "expression"));
    if let Some(caption) = block.get("caption") {
        // A table's caption is a RichText, a media caption a RichBlockCaption.
        if caption.get("text").is_some() {
            block_content(caption, out);
        } else {
            text_plain(caption, out);
        }
    }
    for child in child_blocks(block, "blocks") {
        block_content(child, out);
    }
    for item in child_blocks(block, "items") {
        for child in child_blocks(item, "blocks") {
            block_content(child, out);
        }
    }
    for row in child_blocks(block, "cells") {
        for cell in row.as_array().map_or(&[][..], Vec::as_slice) {
            if let Some(t) = cell.get("text") {
                text_plain(t, out);
            }
        }
    }
    for button in child_blocks(block, "buttons") {
        if let Some(t) = button.get("text") {
            text_plain(t, out);
        }
    }
}

fn count_blocks(blocks: &[Value]) -> usize {
    blocks
        .iter()
        .map(|block| {
            let items = child_blocks(block, "items");
            1 + count_blocks(child_blocks(block, "blocks"))
                + items.len()
                + items
                    .iter()
                    .map(|i| count_blocks(child_blocks(i, "blocks")))
                    .sum::<usize>()
                + child_blocks(block, "cells").len()
        })
        .sum()
}

/// Blocks that show something even without text, so a message made only of them is not empty.
fn has_non_text_block(blocks: &[Value]) -> bool {
    blocks.iter().any(|block| {
        matches!(
            block_type(block),
            "divider" | "map" | "buttons" | "table" | "list"
        ) || has_non_text_block(child_blocks(block, "blocks"))
    })
}

// ---------------------------------------------------------------------------------------------
// RichText and block constructors.
// ---------------------------------------------------------------------------------------------

/// Appends `s` to a list of RichText parts, merging with a preceding string.
fn push_str_part(parts: &mut Vec<Value>, s: &str) {
    if s.is_empty() {
        return;
    }
    if let Some(Value::String(last)) = parts.last_mut() {
        last.push_str(s);
    } else {
        parts.push(Value::String(s.to_string()));
    }
}

/// Appends a RichText to a list of parts; an array is spliced in, so lists stay flat.
fn push_part(parts: &mut Vec<Value>, part: Value) {
    match part {
        Value::String(s) => push_str_part(parts, &s),
        Value::Array(inner) => {
            for part in inner {
                push_part(parts, part);
            }
        }
        other => parts.push(other),
    }
}

/// The RichText for a list of parts: the part itself when there is one, `""` when none.
fn collapse(parts: Vec<Value>) -> Value {
    let mut merged = Vec::with_capacity(parts.len());
    for part in parts {
        push_part(&mut merged, part);
    }
    match merged.len() {
        0 => Value::String(String::new()),
        1 => merged.pop().unwrap_or_default(),
        _ => Value::Array(merged),
    }
}

fn is_empty_text(text: &Value) -> bool {
    match text {
        Value::String(s) => s.is_empty(),
        Value::Array(parts) => parts.is_empty(),
        _ => false,
    }
}

/// Trims whitespace at both ends of a paragraph's top-level parts, dropping parts left empty.
fn trim_parts(parts: &mut Vec<Value>) {
    while let Some(Value::String(first)) = parts.first_mut() {
        let trimmed = first.trim_start();
        if trimmed.is_empty() {
            parts.remove(0);
        } else {
            *first = trimmed.to_string();
            break;
        }
    }
    while let Some(Value::String(last)) = parts.last_mut() {
        let trimmed = last.trim_end();
        if trimmed.is_empty() {
            parts.pop();
        } else {
            last.truncate(trimmed.len());
            break;
        }
    }
}

fn math_text(expression: &str) -> Value {
    json!({"type": "mathematical_expression", "expression": expression})
}

fn insert_opt(map: &mut Value, key: &str, value: Option<Value>) {
    if let (Some(value), Some(map)) = (value, map.as_object_mut()) {
        map.insert(key.to_string(), value);
    }
}

/// The text content of blocks as one RichText, blocks separated by "\n"; used where the
/// target (a table cell, a footer, a pull quote...) holds text rather than blocks.
fn flatten_blocks(blocks: &[Value]) -> Option<Value> {
    let mut parts = Vec::new();
    for block in blocks {
        if let Some(text) = flatten_block(block) {
            if !parts.is_empty() {
                push_str_part(&mut parts, "\n");
            }
            push_part(&mut parts, text);
        }
    }
    (!parts.is_empty()).then(|| collapse(parts))
}

fn flatten_block(block: &Value) -> Option<Value> {
    match block_type(block) {
        "mathematical_expression" => Some(math_text(str_field(block, "expression"))),
        "divider" | "anchor" | "table" => None,
        "list" => {
            let mut parts = Vec::new();
            for item in child_blocks(block, "items") {
                if !parts.is_empty() {
                    push_str_part(&mut parts, "\n");
                }
                let label = str_field(item, "label");
                push_str_part(&mut parts, &format!("{label} "));
                if let Some(text) = flatten_blocks(child_blocks(item, "blocks")) {
                    push_part(&mut parts, text);
                }
            }
            (!parts.is_empty()).then(|| collapse(parts))
        }
        "blockquote" | "details" => flatten_blocks(child_blocks(block, "blocks")),
        _ => block.get("text").cloned(),
    }
}

fn ordered_label(n: i64, style: Option<&str>) -> String {
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

const BULLET: &str = "•";

fn list_item(
    label: String,
    blocks: Vec<Value>,
    checkbox: Option<bool>,
    value: Option<i64>,
    style: Option<String>,
) -> Value {
    let mut item = json!({"label": label, "blocks": blocks});
    if let Some(checked) = checkbox {
        insert_opt(&mut item, "has_checkbox", Some(Value::Bool(true)));
        insert_opt(&mut item, "is_checked", Some(Value::Bool(checked)));
    }
    insert_opt(
        &mut item,
        "value",
        value.and_then(|v| i32::try_from(v).ok()).map(Value::from),
    );
    insert_opt(&mut item, "type", style.map(Value::String));
    item
}

// ---------------------------------------------------------------------------------------------
// The builder shared by the markdown and html forms.
// ---------------------------------------------------------------------------------------------

/// What may close an open container, text block or inline frame: a markdown end event, an
/// HTML end tag, nothing but an enclosing close (implicit), or a `==`/`||` marker.
#[derive(Debug, Clone, PartialEq)]
enum Closer {
    Implicit,
    Md(TagEnd),
    Html(String),
    Marker,
}

fn html_closer(name: &str) -> Closer {
    Closer::Html(name.to_string())
}

/// Containers whose content ends up as a text field of their parent or of a text-only block.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Flat {
    Footer,
    Summary,
    Credit,
    Caption,
}

#[derive(Debug)]
enum Kind {
    Quote {
        credit: Option<Value>,
        expandable: bool,
    },
    Pullquote {
        credit: Option<Value>,
    },
    List {
        ordered: bool,
        next: i64,
        style: Option<String>,
        items: Vec<Value>,
    },
    Item {
        label: String,
        value: Option<i64>,
        style: Option<String>,
        checkbox: Option<bool>,
    },
    Details {
        summary: Option<Value>,
        open: bool,
    },
    Table {
        rows: Vec<Vec<Value>>,
        row: Option<Vec<Value>>,
        head: bool,
        aligns: Vec<&'static str>,
        caption: Option<Value>,
        flags: [bool; 3],
    },
    Cell {
        header: bool,
        align: String,
        valign: String,
        colspan: Option<u64>,
        rowspan: Option<u64>,
    },
    Footnote {
        label: String,
    },
    Flat(Flat),
}

impl Kind {
    /// Whether this container nests blocks in the output, and so counts towards `max_depth`.
    fn nests(&self) -> bool {
        matches!(
            self,
            Kind::Quote {
                expandable: false,
                ..
            } | Kind::List { .. }
                | Kind::Details { .. }
        )
    }
}

#[derive(Debug)]
struct Container {
    kind: Kind,
    blocks: Vec<Value>,
    closer: Closer,
}

#[derive(Debug)]
enum TextKind {
    Paragraph {
        implicit: bool,
    },
    Heading(u8),
    Pre {
        language: Option<String>,
        html: bool,
    },
    Math,
}

#[derive(Debug)]
enum FrameKind {
    Root,
    Format(&'static str),
    Url(String),
    Email(String),
    Phone(String),
    AnchorLink(String),
    Math,
    Emoji(String),
    DateTime(u64, String),
    Marker(&'static str),
    /// An unknown tag: its content stays, the tag goes.
    Transparent,
}

#[derive(Debug)]
struct Frame {
    kind: FrameKind,
    closer: Closer,
    parts: Vec<Value>,
}

/// The one block currently taking inline content: a paragraph, heading, code block or formula.
#[derive(Debug)]
struct TextBlock {
    kind: TextKind,
    closer: Closer,
    /// Open inline formatting; `frames[0]` is the block's own root frame.
    frames: Vec<Frame>,
    /// Content of code blocks and formulas, which take no formatting.
    raw: String,
}

impl TextBlock {
    fn new(kind: TextKind, closer: Closer) -> Self {
        Self {
            kind,
            closer,
            frames: vec![Frame {
                kind: FrameKind::Root,
                closer: Closer::Implicit,
                parts: Vec::new(),
            }],
            raw: String::new(),
        }
    }

    fn is_raw(&self) -> bool {
        matches!(self.kind, TextKind::Pre { .. } | TextKind::Math)
    }

    fn top(&mut self) -> &mut Vec<Value> {
        // The root frame is never popped; recreating it keeps this total without a panic path.
        let frames = &mut self.frames;
        if frames.is_empty() {
            frames.push(Frame {
                kind: FrameKind::Root,
                closer: Closer::Implicit,
                parts: Vec::new(),
            });
        }
        let last = frames.len() - 1;
        &mut frames[last].parts
    }

    fn push_str(&mut self, s: &str) {
        push_str_part(self.top(), s);
    }

    fn push_value(&mut self, v: Value) {
        push_part(self.top(), v);
    }

    fn ends_with_space(&self) -> bool {
        match self.frames.last().and_then(|f| f.parts.last()) {
            Some(Value::String(s)) => s.ends_with(char::is_whitespace),
            Some(_) => false,
            None => true,
        }
    }

    fn top_is_marker(&self, marker: &str) -> bool {
        matches!(self.frames.last(), Some(Frame { kind: FrameKind::Marker(m), .. }) if *m == marker)
    }

    /// Closes the innermost frame into its parent. An unmatched marker closed without
    /// `proper` goes back to being the literal text it was.
    fn close_top(&mut self, proper: bool) {
        if self.frames.len() < 2 {
            return;
        }
        let Some(frame) = self.frames.pop() else {
            return;
        };
        let parts = frame.parts;
        let value = match frame.kind {
            FrameKind::Root => None,
            FrameKind::Transparent => {
                for part in parts {
                    self.push_value(part);
                }
                None
            }
            FrameKind::Marker(marker) if !proper => {
                self.push_str(marker);
                for part in parts {
                    self.push_value(part);
                }
                None
            }
            FrameKind::Marker(marker) => {
                let ty = if marker == "==" { "marked" } else { "spoiler" };
                (!parts.is_empty()).then(|| json!({"type": ty, "text": collapse(parts)}))
            }
            FrameKind::Format(ty) => {
                (!parts.is_empty()).then(|| json!({"type": ty, "text": collapse(parts)}))
            }
            FrameKind::Url(url) => {
                let text = if parts.is_empty() {
                    Value::String(url.clone())
                } else {
                    collapse(parts)
                };
                Some(json!({"type": "url", "text": text, "url": url}))
            }
            FrameKind::Email(email) => {
                let text = if parts.is_empty() {
                    Value::String(email.clone())
                } else {
                    collapse(parts)
                };
                Some(json!({"type": "email_address", "text": text, "email_address": email}))
            }
            FrameKind::Phone(phone) => {
                let text = if parts.is_empty() {
                    Value::String(phone.clone())
                } else {
                    collapse(parts)
                };
                Some(json!({"type": "phone_number", "text": text, "phone_number": phone}))
            }
            FrameKind::AnchorLink(name) => (!parts.is_empty()).then(
                || json!({"type": "anchor_link", "text": collapse(parts), "anchor_name": name}),
            ),
            FrameKind::Math => {
                let mut source = String::new();
                text_plain(&Value::Array(parts), &mut source);
                let source = source.trim();
                (!source.is_empty()).then(|| math_text(source))
            }
            FrameKind::Emoji(id) => {
                let mut alt = String::new();
                text_plain(&Value::Array(parts), &mut alt);
                Some(
                    json!({"type": "custom_emoji", "custom_emoji_id": id, "alternative_text": alt}),
                )
            }
            FrameKind::DateTime(unix_time, format) => (!parts.is_empty()).then(|| {
                json!({
                    "type": "date_time",
                    "text": collapse(parts),
                    "unix_time": unix_time,
                    "date_time_format": format,
                })
            }),
        };
        if let Some(value) = value {
            self.push_value(value);
        }
    }

    /// Closes the innermost frame with this closer and every frame opened after it; `false`
    /// when there is none.
    fn close_matching(&mut self, closer: &Closer) -> bool {
        let Some(index) = self.frames.iter().rposition(|f| f.closer == *closer) else {
            return false;
        };
        if index == 0 {
            return false;
        }
        while self.frames.len() > index + 1 {
            // Markers still open inside a closing element never found their partner.
            self.close_top(false);
        }
        self.close_top(true);
        true
    }

    fn into_block(mut self) -> Option<Value> {
        while self.frames.len() > 1 {
            self.close_top(false);
        }
        match self.kind {
            TextKind::Pre { language, html } => {
                let mut raw = self.raw;
                if html && raw.starts_with('\n') {
                    raw.remove(0);
                }
                if raw.ends_with('\n') {
                    raw.pop();
                }
                if raw.trim().is_empty() {
                    return None;
                }
                let mut block = json!({"type": "pre", "text": raw});
                insert_opt(&mut block, "language", language.map(Value::String));
                Some(block)
            }
            TextKind::Math => {
                let source = self.raw.trim();
                (!source.is_empty())
                    .then(|| json!({"type": "mathematical_expression", "expression": source}))
            }
            TextKind::Paragraph { .. } | TextKind::Heading(_) => {
                let mut parts = self.frames.pop().map(|f| f.parts).unwrap_or_default();
                trim_parts(&mut parts);
                let text = collapse(parts);
                if is_empty_text(&text) {
                    return None;
                }
                Some(match self.kind {
                    TextKind::Heading(size) => {
                        json!({"type": "heading", "text": text, "size": size})
                    }
                    _ => json!({"type": "paragraph", "text": text}),
                })
            }
        }
    }
}

/// Builds the block tree from block and inline events, whichever markup they come from.
///
/// Inline content arriving where no text block is open starts an implicit paragraph; content
/// arriving directly in a list or a table gets an implicit item or cell. That keeps the tree
/// well formed whatever the input, so every output has the shape of a `RichMessage`.
struct Builder<'l> {
    limits: &'l Limits,
    root: Vec<Value>,
    stack: Vec<Container>,
    text: Option<TextBlock>,
    /// Footnote labels in order of first use, for their numbers.
    footnotes: Vec<String>,
}

impl<'l> Builder<'l> {
    fn new(limits: &'l Limits) -> Self {
        Self {
            limits,
            root: Vec::new(),
            stack: Vec::new(),
            text: None,
            footnotes: Vec::new(),
        }
    }

    fn finish(mut self) -> Result<Vec<Value>> {
        self.finish_text();
        while !self.stack.is_empty() {
            self.pop_container()?;
        }
        Ok(self.root)
    }

    fn top_blocks(&mut self) -> &mut Vec<Value> {
        match self.stack.last_mut() {
            Some(container) => &mut container.blocks,
            None => &mut self.root,
        }
    }

    fn nearest(&self, pred: impl Fn(&Kind) -> bool) -> Option<usize> {
        self.stack.iter().rposition(|c| pred(&c.kind))
    }

    fn pop_to(&mut self, index: usize) -> Result<()> {
        while self.stack.len() > index + 1 {
            self.pop_container()?;
        }
        Ok(())
    }

    // -- blocks ---------------------------------------------------------------------------

    /// Makes the innermost container one that holds blocks.
    fn ensure_flow(&mut self) -> Result<()> {
        match self.stack.last().map(|c| &c.kind) {
            Some(Kind::List { .. }) => self.open_item(None, Closer::Implicit),
            Some(Kind::Table { .. }) => {
                self.open_cell(false, "left", "top", None, None, Closer::Implicit);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn add_block(&mut self, block: Value) -> Result<()> {
        self.finish_text();
        self.ensure_flow()?;
        self.top_blocks().push(block);
        Ok(())
    }

    fn push_container(&mut self, kind: Kind, closer: Closer) -> Result<()> {
        self.finish_text();
        self.ensure_flow()?;
        self.stack.push(Container {
            kind,
            blocks: Vec::new(),
            closer,
        });
        let depth = self.stack.iter().filter(|c| c.kind.nests()).count();
        if depth > self.limits.max_depth {
            return Err(RichError::TooDeep);
        }
        Ok(())
    }

    /// Closes the innermost container with this closer and everything opened inside it.
    fn end_container(&mut self, closer: &Closer) -> Result<()> {
        self.finish_text();
        if let Some(index) = self.stack.iter().rposition(|c| c.closer == *closer) {
            self.pop_to(index)?;
            self.pop_container()?;
        }
        Ok(())
    }

    fn open_item(&mut self, value: Option<i64>, closer: Closer) -> Result<()> {
        let (label, value, style) = match self.stack.last_mut() {
            Some(Container {
                kind:
                    Kind::List {
                        ordered: true,
                        next,
                        style,
                        ..
                    },
                ..
            }) => {
                if let Some(value) = value {
                    *next = value;
                }
                let n = *next;
                *next = n.saturating_add(1);
                (ordered_label(n, style.as_deref()), Some(n), style.clone())
            }
            Some(Container {
                kind: Kind::List { .. },
                ..
            }) => (BULLET.to_string(), None, None),
            _ => {
                // An item outside any list gets a list of its own.
                self.push_container(
                    Kind::List {
                        ordered: false,
                        next: 1,
                        style: None,
                        items: Vec::new(),
                    },
                    Closer::Implicit,
                )?;
                (BULLET.to_string(), None, None)
            }
        };
        self.stack.push(Container {
            kind: Kind::Item {
                label,
                value,
                style,
                checkbox: None,
            },
            blocks: Vec::new(),
            closer,
        });
        Ok(())
    }

    fn set_checkbox(&mut self, checked: bool) {
        if let Some(Kind::Item { checkbox, .. }) = self
            .stack
            .iter_mut()
            .rev()
            .map(|c| &mut c.kind)
            .find(|k| matches!(k, Kind::Item { .. }))
        {
            *checkbox = Some(checked);
        }
    }

    fn open_cell(
        &mut self,
        header: bool,
        align: &str,
        valign: &str,
        colspan: Option<u64>,
        rowspan: Option<u64>,
        closer: Closer,
    ) {
        let header = match self.stack.last_mut() {
            Some(Container {
                kind: Kind::Table { row, head, .. },
                ..
            }) => {
                row.get_or_insert_with(Vec::new);
                header || *head
            }
            _ => header,
        };
        self.stack.push(Container {
            kind: Kind::Cell {
                header,
                align: align.to_string(),
                valign: valign.to_string(),
                colspan,
                rowspan,
            },
            blocks: Vec::new(),
            closer,
        });
    }

    /// Closes everything inside the innermost table and returns its index.
    fn close_to_table(&mut self) -> Result<Option<usize>> {
        self.finish_text();
        let Some(index) = self.nearest(|k| matches!(k, Kind::Table { .. })) else {
            return Ok(None);
        };
        self.pop_to(index)?;
        Ok(Some(index))
    }

    fn finish_row(&mut self) -> Result<()> {
        let max = self.limits.max_table_columns;
        if let Some(Container {
            kind: Kind::Table { rows, row, .. },
            ..
        }) = self.stack.last_mut()
            && let Some(cells) = row.take()
            && !cells.is_empty()
        {
            if cells.len() > max {
                return Err(RichError::TooManyColumns);
            }
            rows.push(cells);
        }
        Ok(())
    }

    fn start_row(&mut self, is_head: bool) -> Result<()> {
        if self.close_to_table()?.is_none() {
            return Ok(());
        }
        self.finish_row()?;
        if let Some(Container {
            kind: Kind::Table { row, head, .. },
            ..
        }) = self.stack.last_mut()
        {
            *row = Some(Vec::new());
            *head = is_head;
        }
        Ok(())
    }

    fn end_row(&mut self) -> Result<()> {
        if self.close_to_table()?.is_some() {
            self.finish_row()?;
            if let Some(Container {
                kind: Kind::Table { head, .. },
                ..
            }) = self.stack.last_mut()
            {
                *head = false;
            }
        }
        Ok(())
    }

    fn footnote_number(&mut self, label: &str) -> usize {
        match self.footnotes.iter().position(|l| l == label) {
            Some(i) => i + 1,
            None => {
                self.footnotes.push(label.to_string());
                self.footnotes.len()
            }
        }
    }

    /// Closes the innermost container and attaches what it made to its parent.
    fn pop_container(&mut self) -> Result<()> {
        self.finish_text();
        let Some(Container { kind, blocks, .. }) = self.stack.pop() else {
            return Ok(());
        };
        match kind {
            Kind::Quote {
                credit,
                expandable: true,
            } => {
                if let Some(text) = flatten_blocks(&blocks) {
                    let mut block = json!({"type": "expandable_blockquote", "text": text});
                    insert_opt(&mut block, "credit", credit);
                    self.add_block(block)?;
                }
            }
            Kind::Quote { credit, .. } => {
                if !blocks.is_empty() {
                    let mut block = json!({"type": "blockquote", "blocks": blocks});
                    insert_opt(&mut block, "credit", credit);
                    self.add_block(block)?;
                }
            }
            Kind::Pullquote { credit } => {
                if let Some(text) = flatten_blocks(&blocks) {
                    let mut block = json!({"type": "pullquote", "text": text});
                    insert_opt(&mut block, "credit", credit);
                    self.add_block(block)?;
                }
            }
            Kind::List { items, .. } => {
                if !items.is_empty() {
                    self.add_block(json!({"type": "list", "items": items}))?;
                }
            }
            Kind::Item {
                label,
                value,
                style,
                checkbox,
            } => match self.stack.last_mut() {
                Some(Container {
                    kind: Kind::List { items, .. },
                    ..
                }) => items.push(list_item(label, blocks, checkbox, value, style)),
                _ => {
                    for block in blocks {
                        self.add_block(block)?;
                    }
                }
            },
            Kind::Details { summary, open } => {
                let summary = summary.unwrap_or_else(|| Value::String("Details".into()));
                let mut block = json!({"type": "details", "summary": summary, "blocks": blocks});
                insert_opt(&mut block, "is_open", open.then_some(Value::Bool(true)));
                self.add_block(block)?;
            }
            Kind::Table {
                mut rows,
                row,
                caption,
                flags,
                ..
            } => {
                if let Some(cells) = row.filter(|r| !r.is_empty()) {
                    if cells.len() > self.limits.max_table_columns {
                        return Err(RichError::TooManyColumns);
                    }
                    rows.push(cells);
                }
                if !rows.is_empty() {
                    let mut block = json!({"type": "table", "cells": rows});
                    for (flag, key) in
                        flags
                            .into_iter()
                            .zip(["is_bordered", "is_striped", "is_compact"])
                    {
                        insert_opt(&mut block, key, flag.then_some(Value::Bool(true)));
                    }
                    insert_opt(&mut block, "caption", caption);
                    self.add_block(block)?;
                }
            }
            Kind::Cell {
                header,
                align,
                valign,
                colspan,
                rowspan,
            } => {
                let mut cell = json!({"align": align, "valign": valign});
                insert_opt(&mut cell, "text", flatten_blocks(&blocks));
                insert_opt(&mut cell, "is_header", header.then_some(Value::Bool(true)));
                insert_opt(&mut cell, "colspan", colspan.map(Value::from));
                insert_opt(&mut cell, "rowspan", rowspan.map(Value::from));
                match self.stack.last_mut() {
                    Some(Container {
                        kind: Kind::Table { row, .. },
                        ..
                    }) => row.get_or_insert_with(Vec::new).push(cell),
                    _ => {
                        for block in blocks {
                            self.add_block(block)?;
                        }
                    }
                }
            }
            Kind::Footnote { label } => {
                let number = self.footnote_number(&label);
                let mut parts = vec![
                    json!({"type": "reference", "name": label, "text": format!("{number}.")}),
                    Value::String(" ".into()),
                ];
                if let Some(text) = flatten_blocks(&blocks) {
                    push_part(&mut parts, text);
                }
                self.add_block(json!({"type": "paragraph", "text": collapse(parts)}))?;
            }
            Kind::Flat(flat) => {
                let Some(text) = flatten_blocks(&blocks) else {
                    return Ok(());
                };
                let slot = match (flat, self.stack.last_mut().map(|c| &mut c.kind)) {
                    (Flat::Summary, Some(Kind::Details { summary, .. })) => Some(summary),
                    (
                        Flat::Credit,
                        Some(Kind::Quote { credit, .. } | Kind::Pullquote { credit }),
                    ) => Some(credit),
                    (Flat::Caption, Some(Kind::Table { caption, .. })) => Some(caption),
                    _ => None,
                };
                match slot {
                    Some(slot) => *slot = Some(text),
                    None if flat == Flat::Footer => {
                        self.add_block(json!({"type": "footer", "text": text}))?;
                    }
                    None => self.add_block(json!({"type": "paragraph", "text": text}))?,
                }
            }
        }
        Ok(())
    }

    // -- text blocks ------------------------------------------------------------------------

    fn start_text(&mut self, kind: TextKind, closer: Closer) -> Result<()> {
        self.finish_text();
        self.ensure_flow()?;
        self.text = Some(TextBlock::new(kind, closer));
        Ok(())
    }

    fn finish_text(&mut self) {
        if let Some(block) = self.text.take().and_then(TextBlock::into_block) {
            // The container cannot have changed since the block started: opening or closing
            // one finishes the text block first.
            self.top_blocks().push(block);
        }
    }

    fn text_block(&mut self) -> Result<&mut TextBlock> {
        if self.text.is_none() {
            self.ensure_flow()?;
        }
        Ok(self.text.get_or_insert_with(|| {
            TextBlock::new(TextKind::Paragraph { implicit: true }, Closer::Implicit)
        }))
    }

    fn in_raw_block(&self) -> bool {
        self.text.as_ref().is_some_and(TextBlock::is_raw)
    }

    fn in_implicit_paragraph(&self) -> bool {
        matches!(
            &self.text,
            Some(TextBlock { kind: TextKind::Paragraph { implicit: true }, frames, .. }) if frames.len() == 1
        )
    }

    // -- inline content ---------------------------------------------------------------------

    fn inline_str(&mut self, s: &str) -> Result<()> {
        let block = self.text_block()?;
        if block.is_raw() {
            block.raw.push_str(s);
        } else {
            block.push_str(s);
        }
        Ok(())
    }

    fn inline_value(&mut self, v: Value) -> Result<()> {
        let block = self.text_block()?;
        if block.is_raw() {
            text_plain(&v, &mut block.raw);
        } else {
            block.push_value(v);
        }
        Ok(())
    }

    /// Text with no markup in it. Whitespace between blocks is dropped; in the html form a
    /// blank line outside any block tag separates paragraphs.
    fn text_run(&mut self, s: &str, split_paragraphs: bool) -> Result<()> {
        if self.in_raw_block() {
            return self.inline_str(s);
        }
        if !split_paragraphs || !(self.text.is_none() || self.in_implicit_paragraph()) {
            if self.text.is_none() && s.trim().is_empty() {
                return Ok(());
            }
            return self.inline_str(s);
        }
        for (i, part) in split_blank_lines(s).into_iter().enumerate() {
            if i > 0 && self.in_implicit_paragraph() {
                self.finish_text();
            }
            if self.text.is_none() && part.trim().is_empty() {
                continue;
            }
            self.inline_str(part)?;
        }
        Ok(())
    }

    /// Markdown text, where `==marked==` and `||spoiler||` are ours to find. `protected` holds
    /// byte offsets of characters that came from escapes or entities and are never markers.
    fn markdown_text(&mut self, s: &str, protected: &[usize]) -> Result<()> {
        if self.in_raw_block() || (self.text.is_none() && s.trim().is_empty()) {
            return self.text_run(s, false);
        }
        let bytes = s.as_bytes();
        let mut last = 0;
        let mut i = 0;
        while i + 1 < bytes.len() {
            let marker = match &bytes[i..i + 2] {
                b"==" => "==",
                b"||" => "||",
                _ => {
                    i += 1;
                    continue;
                }
            };
            if protected.binary_search(&i).is_ok() || protected.binary_search(&(i + 1)).is_ok() {
                i += 1;
                continue;
            }
            self.inline_str(&s[last..i])?;
            let block = self.text_block()?;
            let space_before = s[..i]
                .chars()
                .next_back()
                .map_or_else(|| block.ends_with_space(), char::is_whitespace);
            let space_after = s[i + 2..].chars().next().is_some_and(char::is_whitespace);
            if block.top_is_marker(marker) && !space_before {
                block.close_top(true);
            } else if !space_after {
                self.open_frame(FrameKind::Marker(marker), Closer::Marker)?;
            } else {
                block.push_str(marker);
            }
            i += 2;
            last = i;
        }
        self.inline_str(&s[last..])
    }

    fn open_frame(&mut self, kind: FrameKind, closer: Closer) -> Result<()> {
        let max_depth = self.limits.max_depth;
        let block = self.text_block()?;
        if block.is_raw() {
            return Ok(());
        }
        if block.frames.len() > max_depth {
            return Err(RichError::TooDeep);
        }
        block.frames.push(Frame {
            kind,
            closer,
            parts: Vec::new(),
        });
        Ok(())
    }

    fn close_frame(&mut self, closer: &Closer) -> bool {
        self.text
            .as_mut()
            .is_some_and(|block| block.close_matching(closer))
    }

    fn footnote_reference(&mut self, label: &str) -> Result<()> {
        let number = self.footnote_number(label);
        self.inline_value(json!({
            "type": "reference_link",
            "text": number.to_string(),
            "reference_name": label,
        }))
    }

    // -- html -------------------------------------------------------------------------------

    fn html_token(&mut self, token: Token) -> Result<()> {
        match token {
            Token::Text(text) => self.text_run(&text, true),
            Token::Start {
                name,
                attrs,
                self_closing,
            } => self.html_start(&name, &attrs, self_closing),
            Token::End(name) => self.html_end(&name),
        }
    }

    fn html_start(
        &mut self,
        name: &str,
        attrs: &[(String, String)],
        self_closing: bool,
    ) -> Result<()> {
        let attr = |key: &str| attr_of(attrs, key);
        // Inside code and formulas tags are not markup, except those that shape the block.
        if let Some(block) = self.text.as_mut().filter(|b| b.is_raw()) {
            match (name, &mut block.kind) {
                ("br", _) => block.raw.push('\n'),
                ("code", TextKind::Pre { language, .. }) if language.is_none() => {
                    *language = attr("class").and_then(class_language);
                }
                _ => {}
            }
            return Ok(());
        }
        let closer = html_closer(name);
        match name {
            "p" => self.start_text(TextKind::Paragraph { implicit: false }, closer),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let size = name[1..].parse().unwrap_or(1);
                self.start_text(TextKind::Heading(size), closer)
            }
            "pre" => {
                let language = attr("language").map(str::to_string);
                self.start_text(
                    TextKind::Pre {
                        language,
                        html: true,
                    },
                    closer,
                )
            }
            "tg-math-block" => self.start_text(TextKind::Math, closer),
            "blockquote" => {
                let expandable = attr("expandable").is_some();
                self.push_container(
                    Kind::Quote {
                        credit: None,
                        expandable,
                    },
                    closer,
                )
            }
            "aside" => self.push_container(Kind::Pullquote { credit: None }, closer),
            "ul" | "ol" => {
                let ordered = name == "ol";
                let next = attr("start")
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(1);
                let style = attr("type")
                    .filter(|t| ordered && ["1", "a", "A", "i", "I"].contains(t))
                    .map(str::to_string);
                self.push_container(
                    Kind::List {
                        ordered,
                        next,
                        style,
                        items: Vec::new(),
                    },
                    closer,
                )
            }
            "li" => {
                self.finish_text();
                if let Some(index) = self.nearest(|k| matches!(k, Kind::List { .. })) {
                    self.pop_to(index)?;
                }
                let value = attr("value").and_then(|v| v.trim().parse().ok());
                self.open_item(value, closer)
            }
            "input" => {
                if attr("type").is_some_and(|t| t.eq_ignore_ascii_case("checkbox")) {
                    self.set_checkbox(attr("checked").is_some());
                }
                Ok(())
            }
            "table" => {
                let flags = ["bordered", "striped", "compact"].map(|f| attr(f).is_some());
                self.push_container(
                    Kind::Table {
                        rows: Vec::new(),
                        row: None,
                        head: false,
                        aligns: Vec::new(),
                        caption: None,
                        flags,
                    },
                    closer,
                )
            }
            "tr" => self.start_row(false),
            "td" | "th" => {
                if self.close_to_table()?.is_some() {
                    let align = attr("align")
                        .filter(|a| ["left", "center", "right"].contains(a))
                        .unwrap_or("left");
                    let valign = attr("valign")
                        .filter(|a| ["top", "middle", "bottom"].contains(a))
                        .unwrap_or("top");
                    let span = |key| {
                        attr(key)
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .filter(|n| *n > 1 && *n <= u64::from(u32::MAX))
                    };
                    self.open_cell(
                        name == "th",
                        align,
                        valign,
                        span("colspan"),
                        span("rowspan"),
                        closer,
                    );
                }
                Ok(())
            }
            "caption" => {
                if self.close_to_table()?.is_some() {
                    self.stack.push(Container {
                        kind: Kind::Flat(Flat::Caption),
                        blocks: Vec::new(),
                        closer,
                    });
                }
                Ok(())
            }
            "thead" | "tbody" | "tfoot" | "colgroup" | "col" => Ok(()),
            "details" => {
                let open = attr("open").is_some();
                self.push_container(
                    Kind::Details {
                        summary: None,
                        open,
                    },
                    closer,
                )
            }
            "summary" => self.push_container(Kind::Flat(Flat::Summary), closer),
            "footer" => self.push_container(Kind::Flat(Flat::Footer), closer),
            "cite" if self.quote_is_nearest() => {
                self.push_container(Kind::Flat(Flat::Credit), closer)
            }
            "hr" => self.add_block(json!({"type": "divider"})),
            "br" => self.inline_str("\n"),
            "img" | "video" | "audio" | "tg-collage" | "tg-slideshow" | "picture" => {
                Err(RichError::MediaUnsupported)
            }
            "div" | "section" | "article" | "header" | "main" | "nav" | "figure" | "figcaption"
            | "html" | "head" | "body" => {
                self.finish_text();
                Ok(())
            }
            _ if self_closing || VOID_TAGS.contains(&name) => Ok(()),
            _ => {
                let kind = inline_tag_kind(name, attrs);
                if let (FrameKind::Transparent, Some(anchor), "a") = (&kind, attr("name"), name) {
                    self.inline_value(json!({"type": "anchor", "name": anchor}))?;
                }
                self.open_frame(kind, closer)
            }
        }
    }

    fn quote_is_nearest(&self) -> bool {
        self.stack
            .iter()
            .rev()
            .find(|c| !matches!(c.kind, Kind::Flat(_)))
            .is_some_and(|c| matches!(c.kind, Kind::Quote { .. } | Kind::Pullquote { .. }))
    }

    fn html_end(&mut self, name: &str) -> Result<()> {
        let closer = html_closer(name);
        if let Some(block) = &self.text
            && (block.is_raw() || matches!(name, "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"))
        {
            if block.closer == closer {
                self.finish_text();
            }
            return Ok(());
        }
        match name {
            "tr" => self.end_row(),
            "cite" => {
                if !self.close_frame(&closer) {
                    self.end_container(&closer)?;
                }
                Ok(())
            }
            "li" | "ul" | "ol" | "blockquote" | "aside" | "table" | "td" | "th" | "caption"
            | "details" | "summary" | "footer" => self.end_container(&closer),
            "div" | "section" | "article" | "header" | "main" | "nav" | "figure" | "figcaption"
            | "html" | "head" | "body" => {
                self.finish_text();
                Ok(())
            }
            _ => {
                self.close_frame(&closer);
                Ok(())
            }
        }
    }

    /// HTML inside markdown: a fragment pulldown-cmark found. One that does not tokenize is
    /// shown as it was written.
    fn html_fragment(&mut self, html: &str) -> Result<()> {
        match tokenize(html) {
            Ok(tokens) => {
                for token in tokens {
                    self.html_token(token)?;
                }
                Ok(())
            }
            Err(_) => self.inline_str(html),
        }
    }
}

const VOID_TAGS: [&str; 9] = [
    "area", "base", "embed", "link", "meta", "param", "source", "track", "wbr",
];

fn attr_of<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn inline_tag_kind(name: &str, attrs: &[(String, String)]) -> FrameKind {
    let attr = |key: &str| attr_of(attrs, key);
    match name {
        "b" | "strong" => FrameKind::Format("bold"),
        "i" | "em" | "cite" | "var" => FrameKind::Format("italic"),
        "u" | "ins" => FrameKind::Format("underline"),
        "s" | "strike" | "del" => FrameKind::Format("strikethrough"),
        "tg-spoiler" => FrameKind::Format("spoiler"),
        "span"
            if attr("class").is_some_and(|c| c.split_whitespace().any(|c| c == "tg-spoiler")) =>
        {
            FrameKind::Format("spoiler")
        }
        "sub" => FrameKind::Format("subscript"),
        "sup" => FrameKind::Format("superscript"),
        "mark" => FrameKind::Format("marked"),
        "code" | "kbd" | "samp" | "tt" => FrameKind::Format("code"),
        "a" => attr("href").map_or(FrameKind::Transparent, href_kind),
        "tg-math" => FrameKind::Math,
        "tg-emoji" => attr("emoji-id").map_or(FrameKind::Transparent, |id| {
            FrameKind::Emoji(id.to_string())
        }),
        "tg-time" => match attr("unix").and_then(|u| u.trim().parse().ok()) {
            Some(unix) => FrameKind::DateTime(unix, attr("format").unwrap_or_default().to_string()),
            None => FrameKind::Transparent,
        },
        _ => FrameKind::Transparent,
    }
}

fn href_kind(href: &str) -> FrameKind {
    let href = href.trim();
    if href.is_empty() {
        FrameKind::Transparent
    } else if let Some(anchor) = href.strip_prefix('#') {
        FrameKind::AnchorLink(anchor.to_string())
    } else if let Some(email) = strip_prefix_ci(href, "mailto:") {
        FrameKind::Email(email.to_string())
    } else if let Some(phone) = strip_prefix_ci(href, "tel:") {
        FrameKind::Phone(phone.to_string())
    } else {
        FrameKind::Url(href.to_string())
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn class_language(class: &str) -> Option<String> {
    class
        .split_whitespace()
        .find_map(|c| c.strip_prefix("language-"))
        .filter(|l| !l.is_empty())
        .map(str::to_string)
}

/// Splits at blank lines (a newline, optional spaces or tabs, a newline).
fn split_blank_lines(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(off) = s[search..].find('\n') {
        let nl = search + off;
        let after = &s[nl + 1..];
        let gap = after.len() - after.trim_start_matches([' ', '\t']).len();
        if after[gap..].starts_with('\n') {
            parts.push(&s[start..nl]);
            start = nl + 1 + gap + 1;
            search = start;
        } else {
            search = nl + 1;
        }
    }
    parts.push(&s[start..]);
    parts
}

// ---------------------------------------------------------------------------------------------
// Markdown.
// ---------------------------------------------------------------------------------------------

/// Consecutive markdown text events, joined so that a `==` or `||` split across events is
/// still found.
#[derive(Default)]
struct PendingText {
    text: String,
    protected: Vec<usize>,
}

impl PendingText {
    fn push(&mut self, text: &str, source: &str, range: std::ops::Range<usize>) {
        let base = self.text.len();
        if source.get(range.clone()) == Some(text) {
            // An escape ends the previous event; the escaped character starts this one.
            if range.start > 0 && source.as_bytes().get(range.start - 1) == Some(&b'\\') {
                self.protected.push(base);
            }
        } else {
            self.protected.extend((0..text.len()).map(|i| base + i));
        }
        self.text.push_str(text);
    }

    fn flush(&mut self, builder: &mut Builder) -> Result<()> {
        if self.text.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(&mut self.text);
        let protected = std::mem::take(&mut self.protected);
        builder.markdown_text(&text, &protected)
    }
}

fn markdown_options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_MATH
        | Options::ENABLE_GFM
}

fn markdown_to_blocks(source: &str, limits: &Limits) -> Result<Vec<Value>> {
    let mut builder = Builder::new(limits);
    let mut pending = PendingText::default();
    // An HTML block arrives line by line; a tag may span lines, so it is tokenized whole.
    let mut html_block: Option<String> = None;
    for (event, range) in Parser::new_ext(source, markdown_options()).into_offset_iter() {
        if let Event::Text(text) = &event {
            pending.push(text, source, range);
            continue;
        }
        pending.flush(&mut builder)?;
        match event {
            Event::Start(tag) => markdown_start(&mut builder, tag, &mut html_block)?,
            Event::End(end) => markdown_end(&mut builder, end, &mut html_block)?,
            Event::Code(code) => builder.inline_value(json!({"type": "code", "text": &*code}))?,
            Event::InlineMath(math) => builder.inline_value(math_text(math.trim()))?,
            Event::DisplayMath(math) => {
                // A formula block; the paragraph around it, if any, goes on after it.
                let math = math.trim();
                if !math.is_empty() {
                    builder.add_block(
                        json!({"type": "mathematical_expression", "expression": math}),
                    )?;
                }
            }
            Event::Html(html) => match html_block.as_mut() {
                Some(block) => block.push_str(&html),
                None => builder.html_fragment(&html)?,
            },
            Event::InlineHtml(html) => builder.html_fragment(&html)?,
            Event::FootnoteReference(label) => builder.footnote_reference(&label)?,
            Event::SoftBreak | Event::HardBreak => builder.inline_str("\n")?,
            Event::Rule => builder.add_block(json!({"type": "divider"}))?,
            Event::TaskListMarker(checked) => builder.set_checkbox(checked),
            Event::Text(_) => {}
        }
    }
    pending.flush(&mut builder)?;
    builder.finish()
}

fn markdown_start(builder: &mut Builder, tag: Tag, html_block: &mut Option<String>) -> Result<()> {
    let closer = Closer::Md(tag.to_end());
    match tag {
        Tag::Paragraph => builder.start_text(TextKind::Paragraph { implicit: false }, closer),
        Tag::Heading { level, .. } => builder.start_text(TextKind::Heading(level as u8), closer),
        Tag::CodeBlock(kind) => {
            let language = match kind {
                CodeBlockKind::Fenced(info) => info.split_whitespace().next().map(str::to_string),
                CodeBlockKind::Indented => None,
            };
            if language.as_deref() == Some("math") {
                builder.start_text(TextKind::Math, closer)
            } else {
                builder.start_text(
                    TextKind::Pre {
                        language,
                        html: false,
                    },
                    closer,
                )
            }
        }
        Tag::HtmlBlock => {
            builder.finish_text();
            *html_block = Some(String::new());
            Ok(())
        }
        Tag::BlockQuote(_) => builder.push_container(
            Kind::Quote {
                credit: None,
                expandable: false,
            },
            closer,
        ),
        Tag::List(start) => builder.push_container(
            Kind::List {
                ordered: start.is_some(),
                next: start.map_or(1, |s| i64::try_from(s).unwrap_or(i64::MAX)),
                style: None,
                items: Vec::new(),
            },
            closer,
        ),
        Tag::Item => {
            builder.finish_text();
            builder.open_item(None, closer)
        }
        Tag::FootnoteDefinition(label) => builder.push_container(
            Kind::Footnote {
                label: label.to_string(),
            },
            closer,
        ),
        Tag::Table(aligns) => builder.push_container(
            Kind::Table {
                rows: Vec::new(),
                row: None,
                head: false,
                aligns: aligns
                    .iter()
                    .map(|a| match a {
                        Alignment::Center => "center",
                        Alignment::Right => "right",
                        Alignment::None | Alignment::Left => "left",
                    })
                    .collect(),
                caption: None,
                flags: [false; 3],
            },
            closer,
        ),
        Tag::TableHead => builder.start_row(true),
        Tag::TableRow => builder.start_row(false),
        Tag::TableCell => {
            let align = match builder.stack.last() {
                Some(Container {
                    kind: Kind::Table { aligns, row, .. },
                    ..
                }) => aligns
                    .get(row.as_ref().map_or(0, Vec::len))
                    .copied()
                    .unwrap_or("left"),
                _ => "left",
            };
            builder.open_cell(false, align, "top", None, None, closer);
            Ok(())
        }
        Tag::Emphasis => builder.open_frame(FrameKind::Format("italic"), closer),
        Tag::Strong => builder.open_frame(FrameKind::Format("bold"), closer),
        Tag::Strikethrough => builder.open_frame(FrameKind::Format("strikethrough"), closer),
        Tag::Superscript => builder.open_frame(FrameKind::Format("superscript"), closer),
        Tag::Subscript => builder.open_frame(FrameKind::Format("subscript"), closer),
        Tag::Link {
            link_type,
            dest_url,
            ..
        } => {
            let kind = if link_type == LinkType::Email {
                FrameKind::Email(dest_url.to_string())
            } else {
                href_kind(&dest_url)
            };
            builder.open_frame(kind, closer)
        }
        Tag::Image { .. } => Err(RichError::MediaUnsupported),
        Tag::MetadataBlock(_)
        | Tag::DefinitionList
        | Tag::DefinitionListTitle
        | Tag::DefinitionListDefinition => Ok(()),
    }
}

fn markdown_end(builder: &mut Builder, end: TagEnd, html_block: &mut Option<String>) -> Result<()> {
    let closer = Closer::Md(end);
    match end {
        TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock => {
            builder.finish_text();
            Ok(())
        }
        TagEnd::HtmlBlock => {
            if let Some(html) = html_block.take() {
                builder.html_fragment(&html)?;
            }
            // Loose text of an HTML block ends with it; an explicit <p> may go on.
            if builder.in_implicit_paragraph() {
                builder.finish_text();
            }
            Ok(())
        }
        TagEnd::BlockQuote(_)
        | TagEnd::List(_)
        | TagEnd::Item
        | TagEnd::FootnoteDefinition
        | TagEnd::Table
        | TagEnd::TableCell => builder.end_container(&closer),
        TagEnd::TableHead | TagEnd::TableRow => builder.end_row(),
        TagEnd::Emphasis
        | TagEnd::Strong
        | TagEnd::Strikethrough
        | TagEnd::Superscript
        | TagEnd::Subscript
        | TagEnd::Link => {
            builder.close_frame(&closer);
            Ok(())
        }
        TagEnd::Image
        | TagEnd::MetadataBlock(_)
        | TagEnd::DefinitionList
        | TagEnd::DefinitionListTitle
        | TagEnd::DefinitionListDefinition => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// HTML.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Token {
    /// Text with entities decoded.
    Text(String),
    /// A start tag; names are lowercased, attribute values decoded.
    Start {
        name: String,
        attrs: Vec<(String, String)>,
        self_closing: bool,
    },
    End(String),
}

fn html_to_blocks(source: &str, limits: &Limits) -> Result<Vec<Value>> {
    let mut builder = Builder::new(limits);
    for token in tokenize(source)? {
        builder.html_token(token)?;
    }
    builder.finish()
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':')
}

fn read_name(source: &str, start: usize) -> (String, usize) {
    let bytes = source.as_bytes();
    let mut end = start;
    while bytes.get(end).copied().is_some_and(is_name_byte) {
        end += 1;
    }
    (source[start..end].to_ascii_lowercase(), end)
}

fn skip_spaces(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Tokenizes HTML leniently: a `<` that does not start a tag is text, and unknown tags are the
/// builder's business. Only a tag or comment left unfinished at the end is an error, since
/// nothing sensible can be made of it.
fn tokenize(source: &str) -> Result<Vec<Token>> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(off) = source[i..].find('<') {
        let lt = i + off;
        let next = bytes.get(lt + 1).copied();
        let parsed: Option<(Option<Token>, usize)> = if source[lt..].starts_with("<!--") {
            let end = source[lt + 4..]
                .find("-->")
                .ok_or_else(|| parse_err(format!("unclosed comment at byte offset {lt}")))?;
            Some((None, lt + 4 + end + 3))
        } else if matches!(next, Some(b'!' | b'?')) {
            source[lt..].find('>').map(|e| (None, lt + e + 1))
        } else if next == Some(b'/') && bytes.get(lt + 2).is_some_and(u8::is_ascii_alphabetic) {
            let (name, after) = read_name(source, lt + 2);
            let end = source[after..]
                .find('>')
                .ok_or_else(|| parse_err(format!("unclosed end tag \"{name}\"")))?;
            Some((Some(Token::End(name)), after + end + 1))
        } else if next.is_some_and(|b| b.is_ascii_alphabetic()) {
            let (token, end) = start_tag(source, lt + 1)?;
            Some((Some(token), end))
        } else {
            None
        };
        match parsed {
            Some((token, end)) => {
                if text_start < lt {
                    tokens.push(Token::Text(decode_entities(&source[text_start..lt])));
                }
                tokens.extend(token);
                text_start = end;
                i = end;
            }
            None => i = lt + 1,
        }
    }
    if text_start < source.len() {
        tokens.push(Token::Text(decode_entities(&source[text_start..])));
    }
    Ok(tokens)
}

fn start_tag(source: &str, name_start: usize) -> Result<(Token, usize)> {
    let bytes = source.as_bytes();
    let (name, mut i) = read_name(source, name_start);
    let unfinished = || parse_err(format!("unclosed start tag \"{name}\""));
    let mut attrs = Vec::new();
    loop {
        i = skip_spaces(bytes, i);
        match bytes.get(i) {
            None => return Err(unfinished()),
            Some(b'>') => {
                let token = Token::Start {
                    name,
                    attrs,
                    self_closing: false,
                };
                return Ok((token, i + 1));
            }
            Some(b'/') => {
                i += 1;
                if bytes.get(i) == Some(&b'>') {
                    let token = Token::Start {
                        name,
                        attrs,
                        self_closing: true,
                    };
                    return Ok((token, i + 1));
                }
            }
            Some(b'=') => i += 1,
            Some(_) => {
                let key_start = i;
                while bytes
                    .get(i)
                    .is_some_and(|b| !b.is_ascii_whitespace() && !matches!(b, b'=' | b'>' | b'/'))
                {
                    i += 1;
                }
                let key = source[key_start..i].to_ascii_lowercase();
                let after_key = skip_spaces(bytes, i);
                let mut value = String::new();
                if bytes.get(after_key) == Some(&b'=') {
                    i = skip_spaces(bytes, after_key + 1);
                    match bytes.get(i) {
                        Some(&quote @ (b'"' | b'\'')) => {
                            let len = source[i + 1..].find(quote as char).ok_or_else(|| {
                                parse_err(format!("unclosed attribute value in tag \"{name}\""))
                            })?;
                            value = decode_entities(&source[i + 1..i + 1 + len]);
                            i += len + 2;
                        }
                        _ => {
                            let value_start = i;
                            while bytes
                                .get(i)
                                .is_some_and(|b| !b.is_ascii_whitespace() && *b != b'>')
                            {
                                i += 1;
                            }
                            value = decode_entities(&source[value_start..i]);
                        }
                    }
                }
                attrs.push((key, value));
            }
        }
    }
}

/// Decodes character references; one that is not recognised stays as written.
fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest.find(';').filter(|&semi| semi <= 32).and_then(|semi| {
            let name = &rest[1..semi];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ => {
                    let code = if let Some(hex) =
                        name.strip_prefix("#x").or_else(|| name.strip_prefix("#X"))
                    {
                        u32::from_str_radix(hex, 16).ok()
                    } else {
                        name.strip_prefix('#').and_then(|dec| dec.parse().ok())
                    };
                    code.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, semi))
        });
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------------------------
// The blocks form: InputRichBlock validated and rebuilt as RichBlock.
// ---------------------------------------------------------------------------------------------

fn input_blocks(value: &Value, limits: &Limits, depth: usize) -> Result<Vec<Value>> {
    value
        .as_array()
        .ok_or_else(|| parse_err("field \"blocks\" must be an Array"))?
        .iter()
        .map(|block| input_block(block, limits, depth))
        .collect()
}

/// Reads fields of one input object, naming it in errors.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    what: String,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn required(&self, key: &str) -> Result<&'a Value> {
        self.get(key).ok_or_else(|| {
            parse_err(format!(
                "field \"{key}\" of {} must be specified",
                self.what
            ))
        })
    }

    fn wrong(&self, key: &str, expected: &str) -> RichError {
        parse_err(format!(
            "field \"{key}\" of {} must be {expected}",
            self.what
        ))
    }

    fn string(&self, key: &str) -> Result<Option<Value>> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::String(_)) => Ok(Some(v.clone())),
            Some(_) => Err(self.wrong(key, "a String")),
        }
    }

    fn required_string(&self, key: &str) -> Result<Value> {
        self.required(key)?;
        self.string(key)?.ok_or_else(|| self.wrong(key, "a String"))
    }

    fn boolean(&self, key: &str) -> Result<Option<Value>> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::Bool(_)) => Ok(Some(v.clone())),
            Some(_) => Err(self.wrong(key, "a Boolean")),
        }
    }

    fn integer(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .filter(|n| (min..=max).contains(n))
                .map(Some)
                .ok_or_else(|| self.wrong(key, &format!("an Integer between {min} and {max}"))),
        }
    }

    fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(_) => Err(self.wrong(key, "an Object")),
        }
    }

    fn array(&self, key: &str) -> Result<&'a Vec<Value>> {
        self.required(key)?
            .as_array()
            .ok_or_else(|| self.wrong(key, "an Array"))
    }
}

fn fields<'a>(value: &'a Value, what: impl Into<String>) -> Result<Fields<'a>> {
    let what = what.into();
    let obj = value
        .as_object()
        .ok_or_else(|| parse_err(format!("{what} must be an Object")))?;
    Ok(Fields { obj, what })
}

fn nested(depth: usize, limits: &Limits) -> Result<usize> {
    if depth + 1 > limits.max_depth {
        return Err(RichError::TooDeep);
    }
    Ok(depth + 1)
}

const MEDIA_BLOCKS: [&str; 8] = [
    "animation",
    "audio",
    "document",
    "photo",
    "video",
    "voice_note",
    "collage",
    "slideshow",
];

fn input_block(value: &Value, limits: &Limits, depth: usize) -> Result<Value> {
    let f = fields(value, "rich block")?;
    let ty = f
        .get("type")
        .ok_or_else(|| parse_err("field \"type\" of rich block must be specified"))?
        .as_str()
        .ok_or_else(|| parse_err("field \"type\" of rich block must be a String"))?;
    if MEDIA_BLOCKS.contains(&ty) {
        return Err(RichError::MediaUnsupported);
    }
    let f = Fields {
        obj: f.obj,
        what: format!("{ty} block"),
    };
    let text = |key: &str| input_text(f.required(key)?, limits, 0);
    let opt_text = |key: &str| f.get(key).map(|t| input_text(t, limits, 0)).transpose();
    let mut out = json!({"type": ty});
    match ty {
        "paragraph" | "footer" | "thinking" => insert_opt(&mut out, "text", Some(text("text")?)),
        "heading" => {
            insert_opt(&mut out, "text", Some(text("text")?));
            f.required("size")?;
            insert_opt(&mut out, "size", f.integer("size", 1, 6)?.map(Value::from));
        }
        "pre" => {
            insert_opt(&mut out, "text", Some(text("text")?));
            insert_opt(&mut out, "language", f.string("language")?);
        }
        "divider" => {}
        "mathematical_expression" => {
            insert_opt(
                &mut out,
                "expression",
                Some(f.required_string("expression")?),
            );
        }
        "anchor" => insert_opt(&mut out, "name", Some(f.required_string("name")?)),
        "list" => {
            let depth = nested(depth, limits)?;
            let mut next = 1;
            let mut items = Vec::new();
            for item in f.array("items")? {
                let i = fields(item, "list item")?;
                let blocks = input_blocks(i.required("blocks")?, limits, depth)?;
                let value = i.integer("value", i32::MIN.into(), i32::MAX.into())?;
                let style = i
                    .string("type")?
                    .and_then(|t| t.as_str().map(str::to_string));
                let n = value.unwrap_or(next);
                next = n.saturating_add(1);
                let label = match i.string("label")? {
                    Some(Value::String(label)) => label,
                    _ if value.is_some() || style.is_some() => ordered_label(n, style.as_deref()),
                    _ => BULLET.to_string(),
                };
                let checkbox = match (i.boolean("has_checkbox")?, i.boolean("is_checked")?) {
                    (Some(Value::Bool(true)), checked) => Some(checked == Some(Value::Bool(true))),
                    _ => None,
                };
                items.push(list_item(label, blocks, checkbox, value, style));
            }
            insert_opt(&mut out, "items", Some(Value::Array(items)));
        }
        "blockquote" => {
            let depth = nested(depth, limits)?;
            let blocks = input_blocks(f.required("blocks")?, limits, depth)?;
            insert_opt(&mut out, "blocks", Some(Value::Array(blocks)));
            insert_opt(&mut out, "credit", opt_text("credit")?);
        }
        "expandable_blockquote" | "pullquote" => {
            insert_opt(&mut out, "text", Some(text("text")?));
            insert_opt(&mut out, "credit", opt_text("credit")?);
        }
        "details" => {
            let depth = nested(depth, limits)?;
            insert_opt(&mut out, "summary", Some(text("summary")?));
            let blocks = input_blocks(f.required("blocks")?, limits, depth)?;
            insert_opt(&mut out, "blocks", Some(Value::Array(blocks)));
            insert_opt(&mut out, "is_open", f.boolean("is_open")?);
        }
        "table" => {
            let mut rows = Vec::new();
            for row in f.array("cells")? {
                let cells = row
                    .as_array()
                    .ok_or_else(|| f.wrong("cells", "an Array of Arrays"))?;
                if cells.len() > limits.max_table_columns {
                    return Err(RichError::TooManyColumns);
                }
                let cells = cells
                    .iter()
                    .map(|cell| input_cell(cell, limits))
                    .collect::<Result<Vec<_>>>()?;
                rows.push(Value::Array(cells));
            }
            insert_opt(&mut out, "cells", Some(Value::Array(rows)));
            for key in ["is_bordered", "is_striped", "is_compact"] {
                insert_opt(&mut out, key, f.boolean(key)?);
            }
            insert_opt(&mut out, "caption", opt_text("caption")?);
        }
        "map" => {
            let location = f
                .object("location")?
                .ok_or_else(|| parse_err("field \"location\" of map block must be specified"))?;
            if !["latitude", "longitude"]
                .iter()
                .all(|k| location.get(*k).is_some_and(Value::is_number))
            {
                return Err(f.wrong("location", "a Location"));
            }
            insert_opt(&mut out, "location", Some(Value::Object(location.clone())));
            for (key, max) in [
                ("zoom", 255),
                ("width", i64::from(u32::MAX)),
                ("height", i64::from(u32::MAX)),
            ] {
                f.required(key)?;
                insert_opt(&mut out, key, f.integer(key, 0, max)?.map(Value::from));
            }
            insert_opt(
                &mut out,
                "caption",
                input_caption(f.get("caption"), limits)?,
            );
        }
        "buttons" => {
            let buttons = f
                .array("buttons")?
                .iter()
                .map(|b| input_button(b, limits))
                .collect::<Result<Vec<_>>>()?;
            insert_opt(&mut out, "buttons", Some(Value::Array(buttons)));
            insert_opt(&mut out, "align", f.string("align")?);
        }
        other => return Err(RichError::InvalidBlockType(other.to_string())),
    }
    Ok(out)
}

fn input_cell(value: &Value, limits: &Limits) -> Result<Value> {
    let f = fields(value, "table cell")?;
    let align = f.string("align")?.unwrap_or_else(|| "left".into());
    let valign = f.string("valign")?.unwrap_or_else(|| "top".into());
    let mut cell = json!({"align": align, "valign": valign});
    insert_opt(
        &mut cell,
        "text",
        f.get("text")
            .map(|t| input_text(t, limits, 0))
            .transpose()?,
    );
    insert_opt(&mut cell, "is_header", f.boolean("is_header")?);
    for key in ["colspan", "rowspan"] {
        insert_opt(
            &mut cell,
            key,
            f.integer(key, 0, i64::from(u32::MAX))?.map(Value::from),
        );
    }
    Ok(cell)
}

fn input_caption(value: Option<&Value>, limits: &Limits) -> Result<Option<Value>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let f = fields(value, "caption")?;
    let mut caption = json!({"text": input_text(f.required("text")?, limits, 0)?});
    insert_opt(
        &mut caption,
        "credit",
        f.get("credit")
            .map(|t| input_text(t, limits, 0))
            .transpose()?,
    );
    Ok(Some(caption))
}

fn input_button(value: &Value, limits: &Limits) -> Result<Value> {
    let f = fields(value, "button")?;
    let mut button = json!({"text": input_text(f.required("text")?, limits, 0)?});
    for key in [
        "style",
        "url",
        "callback_data",
        "switch_inline_query",
        "switch_inline_query_current_chat",
    ] {
        insert_opt(&mut button, key, f.string(key)?);
    }
    for key in [
        "web_app",
        "login_url",
        "switch_inline_query_chosen_chat",
        "copy_text",
        "disabled",
    ] {
        insert_opt(
            &mut button,
            key,
            f.object(key)?.map(|o| Value::Object(o.clone())),
        );
    }
    Ok(button)
}

/// The fields each rich text type requires, besides `type`.
#[derive(Clone, Copy)]
enum TextField {
    Text,
    Str,
    UnixTime,
    User,
    Button,
}

fn text_fields(ty: &str) -> Option<&'static [(&'static str, TextField)]> {
    use TextField::{Button, Str, Text, UnixTime, User};
    Some(match ty {
        "bold" | "italic" | "underline" | "strikethrough" | "spoiler" | "subscript"
        | "superscript" | "marked" | "code" => &[("text", Text)],
        "date_time" => &[
            ("text", Text),
            ("unix_time", UnixTime),
            ("date_time_format", Str),
        ],
        "text_mention" => &[("text", Text), ("user", User)],
        "custom_emoji" => &[("custom_emoji_id", Str), ("alternative_text", Str)],
        "mathematical_expression" => &[("expression", Str)],
        "url" => &[("text", Text), ("url", Str)],
        "email_address" => &[("text", Text), ("email_address", Str)],
        "phone_number" => &[("text", Text), ("phone_number", Str)],
        "bank_card_number" => &[("text", Text), ("bank_card_number", Str)],
        "mention" => &[("text", Text), ("username", Str)],
        "hashtag" => &[("text", Text), ("hashtag", Str)],
        "cashtag" => &[("text", Text), ("cashtag", Str)],
        "bot_command" => &[("text", Text), ("bot_command", Str)],
        "button" => &[("button", Button)],
        "anchor" => &[("name", Str)],
        "anchor_link" => &[("text", Text), ("anchor_name", Str)],
        "reference" => &[("text", Text), ("name", Str)],
        "reference_link" => &[("text", Text), ("reference_name", Str)],
        _ => return None,
    })
}

/// Validates a RichText and rebuilds it with only the fields its type has. `depth` counts the
/// formatting objects around it.
fn input_text(value: &Value, limits: &Limits, depth: usize) -> Result<Value> {
    match value {
        Value::String(_) => Ok(value.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| input_text(p, limits, depth))
            .collect::<Result<Vec<_>>>()
            .map(Value::Array),
        Value::Object(_) => {
            let depth = nested(depth, limits)?;
            let f = fields(value, "rich text")?;
            let ty = f
                .required_string("type")?
                .as_str()
                .unwrap_or_default()
                .to_string();
            let spec = text_fields(&ty).ok_or_else(|| RichError::InvalidTextType(ty.clone()))?;
            let f = Fields {
                obj: f.obj,
                what: format!("rich text \"{ty}\""),
            };
            let mut out = json!({"type": ty});
            for &(key, kind) in spec {
                let field = f.required(key)?;
                let checked = match kind {
                    TextField::Text => input_text(field, limits, depth)?,
                    TextField::Str => f.required_string(key)?,
                    TextField::UnixTime => field
                        .as_u64()
                        .map(Value::from)
                        .ok_or_else(|| f.wrong(key, "a non-negative Integer"))?,
                    TextField::User => {
                        let user = fields(field, "user")?;
                        if !field.get("id").is_some_and(Value::is_u64) {
                            return Err(user.wrong("id", "a positive Integer"));
                        }
                        user.required_string("first_name")?;
                        if user.boolean("is_bot")?.is_none() {
                            return Err(user.wrong("is_bot", "a Boolean"));
                        }
                        field.clone()
                    }
                    TextField::Button => input_button(field, limits)?,
                };
                insert_opt(&mut out, key, Some(checked));
            }
            Ok(out)
        }
        _ => Err(parse_err(
            "rich text must be a String, an Array or an Object",
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tokenizer_is_lenient_with_stray_brackets() {
        let tokens = tokenize("a < b <b class=\"x\" open>c</b> &lt;&#65;&bogus;").unwrap();
        assert_eq!(
            tokens,
            vec![
                Token::Text("a < b ".into()),
                Token::Start {
                    name: "b".into(),
                    attrs: vec![("class".into(), "x".into()), ("open".into(), String::new())],
                    self_closing: false,
                },
                Token::Text("c".into()),
                Token::End("b".into()),
                Token::Text(" <A&bogus;".into()),
            ]
        );
    }

    #[test]
    fn tokenizer_rejects_unfinished_tags() {
        assert!(matches!(tokenize("x <b"), Err(RichError::Parse(_))));
        assert!(matches!(tokenize("<!-- x"), Err(RichError::Parse(_))));
        assert!(matches!(
            tokenize("<a href=\"x>y"),
            Err(RichError::Parse(_))
        ));
    }

    #[test]
    fn blank_lines_split() {
        assert_eq!(split_blank_lines("a\n \nb\nc\n\n"), vec!["a", "b\nc", ""]);
    }

    #[test]
    fn labels() {
        assert_eq!(ordered_label(3, None), "3.");
        assert_eq!(ordered_label(28, Some("a")), "ab.");
        assert_eq!(ordered_label(14, Some("I")), "XIV.");
        assert_eq!(ordered_label(0, Some("i")), "0.");
    }
}
