//! Telegram's text model, shared by the fake Bot API server and the hub's renderer.
//!
//! - [`utf16`]: lengths and offsets in UTF-16 code units, the unit of every Telegram limit.
//! - [`html`]: Telegram's HTML `parse_mode` subset parsed into plain text plus `MessageEntity`s,
//!   with the error texts Telegram gives.
//! - [`entities`]: validation of caller-supplied entities and automatic detection of commands,
//!   mentions, hashtags, URLs... in text a person typed.
//! - [`split`]: plain text cut into pieces within Telegram's limit.
//! - [`markdown`]: the renderer: pi's Markdown as Telegram rich Markdown, Telegram HTML or
//!   plain text, split into pieces Telegram accepts, and preview frames of a partial answer.
//! - [`rich`]: `InputRichMessage` (markdown, html or blocks) converted to the `RichMessage` the
//!   server returns, with plain-text extraction and limits.

pub mod entities;
pub mod html;
pub mod markdown;
pub mod rich;
pub mod split;
pub mod utf16;
