//! Telegram's text model, as the Bot API server applies it to what a bot sends: the fake Bot
//! API server (tg-fake) parses and validates messages with it, and the renderer's tests and the
//! fuzz targets read the renderer's pieces back with it. The hub sends what the renderer
//! (tg-format) writes and does not link this crate.
//!
//! - [`html`]: Telegram's HTML `parse_mode` subset parsed into plain text plus `MessageEntity`s,
//!   with the error texts Telegram gives; also the HTML character-reference decoder the rich
//!   html form shares, with each reader's rules.
//! - [`entities`]: validation of caller-supplied entities, Telegram's nesting rules, link
//!   checking, and automatic detection of commands, mentions, hashtags, URLs... in text a person
//!   typed (typed `Entity`/`Kind` inside, `MessageEntity` JSON at the boundary).
//! - [`rich`]: `InputRichMessage` (markdown, html or blocks) converted to the `RichMessage` the
//!   server returns, with plain-text extraction and limits; built as typed blocks and rich
//!   texts, turned into JSON only in the answer.
//! - [`utf16`]: tg-format's UTF-16 measures (the unit of every Telegram limit and of entity
//!   offsets), the same module re-exported.

pub mod entities;
pub mod html;
pub mod rich;

pub use tg_format::utf16;
