//! The renderer: pi's Markdown as the messages the hub sends Telegram, and the text measures it
//! needs. What Telegram makes of those messages (HTML `parse_mode` parsing, entity validation
//! and detection, rich messages) is tg-model's, which the fake Bot API server answers with; the
//! renderer's output is checked against it there (tg-model's `tests/render.rs`), since tg-model
//! depends on this crate.
//!
//! - [`markdown`]: the renderer: pi's Markdown as Telegram rich Markdown, Telegram HTML or
//!   plain text, split into pieces Telegram accepts, and preview frames of a partial answer.
//! - [`html`]: Telegram HTML written: [`html::escape`].
//! - [`split`]: plain text cut into pieces within Telegram's limit.
//! - [`utf16`]: lengths and offsets in UTF-16 code units, the unit of every Telegram limit.

pub mod html;
pub mod markdown;
pub mod split;
pub mod utf16;
