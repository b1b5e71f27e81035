//! What goes out to Telegram: everything the bot says is queued in the outbox by `outbound`
//! as `message::Outgoing` values in a `delivery::Plan`, and sent by the `sender` (pacing,
//! flood waits, commit-unknown). Beside it: the texts, the menu's views, pi's activity,
//! live previews, spoken answers, the bot's command list, the Threaded Mode task (topics),
//! `markup` (pi's comments: the hidden actions it writes into answers (buttons, voice) and the
//! membrane that keeps every comment from the person) and `rejections` (the action comments
//! refused, kept for `status`).

pub(crate) mod activity;
pub mod attention;
pub mod bot_commands;
pub mod delivery;
pub mod markup;
pub(crate) mod menu;
pub(crate) mod message;
pub mod outbound;
pub(crate) mod preview;
pub mod reactions;
pub mod rejections;
pub mod sender;
pub mod texts;
pub mod topics;
pub(crate) mod voice;
