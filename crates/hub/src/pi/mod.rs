//! pi and its links: the conductor (the one task that knows live instances: attach and
//! recovery, dispatch, answers, pi's stream, controls, pi's Telegram tools), the links
//! (hub.sock and TLS for the extension, `pi --mode rpc` children, the echo agent), the
//! instance abstraction, headless pi the hub starts, pi's sessions and workspaces, and
//! `inbound` (a message's files and inbound handlers, STT, on their way into pi), and what pi
//! is told with a Telegram prompt (`preamble`) and how long the prompt waited (`waited`), and
//! the models a headless pi has enabled (`scope`).

pub mod conductor;
pub mod dialog;
pub(crate) mod inbound;
pub mod instance;
pub mod links;
pub(crate) mod preamble;
pub(crate) mod resume;
pub(crate) mod scope;
pub(crate) mod sessions;
pub mod spawned;
pub(crate) mod waited;
pub(crate) mod workspaces;
