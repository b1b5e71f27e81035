//! A careful Telegram Bot API client, written for a daemon that must never lose or duplicate a
//! message:
//!
//! - [`Client`]: calls over reqwest (rustls) with a configurable API base, proxies from the
//!   usual environment variables and an address family ([`network`]: what `doctor` reports is
//!   what the client does), JSON and multipart bodies.
//! - [`RawUpdate`]: every update kept byte for byte as Telegram sent it; [`view`] reads the few
//!   fields the hub needs without ever failing a batch on unknown fields or kinds.
//! - [`CallError`]: the classes a caller acts on: flood wait, retryable, **commit unknown**
//!   (a non-repeatable call whose effect may have happened), and terminal API errors with the
//!   kinds that matter recognised ([`ApiErrorKind`]).
//! - [`Pacer`]: per-chat and global budgets plus flood waits, in a form the caller can persist.
//!
//! The crate decides nothing about product policy: what to retry, resend or report is the hub's.

mod client;
mod error;
mod method;
pub mod network;
mod pacing;
mod token;
mod update;
pub mod view;

pub use client::{Client, ClientOptions, DEFAULT_API_BASE, Upload};
pub use error::{ApiError, ApiErrorKind, CallError};
pub use method::{Safety, paced_per_chat, safety};
pub use network::{FAMILY_ENV, Family, HOSTS_FILE_ENV, Route};
pub use pacing::{FloodScope, Pacer, PacingConfig, RATE_SLACK};
pub use token::{Token, TokenError};
pub use update::{RawUpdate, parse_updates};
