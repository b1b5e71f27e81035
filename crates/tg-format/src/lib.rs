//! Telegram's text model, shared by the fake Bot API server and the hub's renderer.
//!
//! - [`utf16`]: lengths and offsets in UTF-16 code units, the unit of every Telegram limit.
//! - [`html`]: Telegram's HTML `parse_mode` subset parsed into plain text plus `MessageEntity`s,
//!   with the error texts Telegram gives; also the HTML character-reference decoder the rich
//!   html form shares, with each reader's rules.
//! - [`entities`]: validation of caller-supplied entities, Telegram's nesting rules, link
//!   checking, and automatic detection of commands, mentions, hashtags, URLs... in text a person
//!   typed (typed `Entity`/`Kind` inside, `MessageEntity` JSON at the boundary).
//! - [`split`]: plain text cut into pieces within Telegram's limit.
//! - [`markdown`]: the renderer: pi's Markdown as Telegram rich Markdown, Telegram HTML or
//!   plain text, split into pieces Telegram accepts, and preview frames of a partial answer.
//! - [`rich`]: `InputRichMessage` (markdown, html or blocks) converted to the `RichMessage` the
//!   server returns, with plain-text extraction and limits; built as typed blocks and rich
//!   texts, turned into JSON only in the answer.

pub mod entities;
pub mod html;
pub mod markdown;
pub mod rich;
pub mod split;
pub mod utf16;
