//! Rich messages (Bot API 10.1/10.2): an `InputRichMessage` turned into the `RichMessage` the
//! server stores and returns.
//!
//! The three input forms share one path: `markdown` (pulldown-cmark events) and `html` (a small
//! tolerant tokenizer) both drive the same builder, so HTML embedded in markdown (`<u>`,
//! `<details>`...) behaves exactly like it does in the html form; `blocks` is validated and
//! rebuilt field by field. Internally the message is a typed model whose serde serialization is
//! the Bot API's JSON, so that this crate needs no Bot API types crate; the tests check every
//! produced shape against frankenstein's types.
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
//!
//! Layout: `limits` (what is refused), `model` (the typed blocks and rich texts), `builder`,
//! `containers` and `inline` (the tree builder), `markdown` and `html` (the two markup forms
//! driving it), `blocks_input` (the blocks form), `plain` (reading a message back).

mod blocks_input;
mod builder;
mod containers;
mod html;
mod inline;
mod limits;
mod markdown;
mod model;
mod plain;

use serde_json::Value;

pub use limits::{Limits, RichError};
pub use plain::{char_count, plain_text};

use limits::{Result, parse_err};
use model::RichMessage;

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
        blocks_input::input_blocks(blocks, limits, 0)?
    } else if let Some(html) = field("html") {
        let html = html
            .as_str()
            .ok_or_else(|| parse_err("field \"html\" must be a String"))?;
        html::to_blocks(html, limits)?
    } else if let Some(markdown) = field("markdown") {
        let markdown = markdown
            .as_str()
            .ok_or_else(|| parse_err("field \"markdown\" must be a String"))?;
        markdown::to_blocks(markdown, limits)?
    } else {
        return Err(RichError::SourceCount);
    };

    let message = RichMessage {
        blocks,
        is_rtl: is_rtl.then_some(true),
    };
    // The model is plain data (string keys, no custom serializers), so this cannot fail; the
    // error is kept rather than unwrapped all the same.
    let value = serde_json::to_value(&message).map_err(|e| parse_err(e.to_string()))?;
    plain::check_limits(plain::message_blocks(&value), limits)?;
    Ok(value)
}

#[cfg(test)]
mod tests;
