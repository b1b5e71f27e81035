//! Reading a `RichMessage`: plain text, character count, block count.
//!
//! These read the JSON rather than the typed model because the fake calls them on messages it
//! stored, and because the limits are defined by what they count: [`super::convert`] checks
//! its own answer with them.

use serde_json::Value;

use super::limits::{Limits, Result, RichError};

/// Refuses a converted message that is empty or over the limits.
pub(super) fn check_limits(blocks: &[Value], limits: &Limits) -> Result<()> {
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

pub(super) fn message_blocks(rich: &Value) -> &[Value] {
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
pub(super) fn text_plain(text: &Value, out: &mut String) {
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
