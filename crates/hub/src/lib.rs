//! The pi-telegram hub: everything between Telegram and pi instances that is not a transport.
//!
//! - [`paths`] and [`config`]: where things live and `telegram.json` (reference format, unknown
//!   keys preserved, atomic 0600 writes).
//! - [`serve`]: the daemon: [`lock`] (one hub per profile), [`poller`] (getUpdates -> durable
//!   journal), [`worker`] (journal -> [`handlers`], effects and "handled" in one commit),
//!   [`sender`] (outbox -> Telegram with pacing, flood waits and commit-unknown handling).
//! - [`instance`], [`links`] and [`conductor`]: pi instances over the extension socket, `pi
//!   --mode rpc` children or the echo agent; turns dispatched to idle instances exactly once;
//!   answers stored and queued.
//! - [`status`] (what a profile's hub knows, read without disturbing it), [`control`] (a client
//!   of a running hub), [`lifecycle`] (who started the hub, its installed service, the stop
//!   marker); [`logging`]: the rotated JSON log and `logs`. The operator commands themselves
//!   (setup, status, doctor, service, stop, threads resolve, remote-config) live in the
//!   `pi-telegram` binary crate, `src/cmd/`.
//! - [`remote`]: pi on other machines (the TLS listener's certificate).
//! - [`crashpoint`]: deterministic crash injection for tests.

pub mod activity;
pub mod assistant;
pub mod bot_api;
pub mod bot_commands;
pub mod buttons;
pub mod clock;
pub mod conductor;
pub mod config;
pub mod control;
pub mod crashpoint;
pub mod db;
pub mod delivery;
pub mod error;
pub mod handlers;
pub mod inbound;
pub mod instance;
pub mod latency;
pub mod lifecycle;
pub mod links;
pub mod lock;
pub mod logging;
pub mod markup;
pub mod menu;
pub mod names;
pub mod never;
pub mod outbound;
pub mod outgoing;
pub mod pairing;
pub mod paths;
pub mod poller;
pub mod preview;
pub mod regular;
pub mod remote;
pub mod retention;
pub mod secret;
pub mod sender;
pub mod serve;
pub mod sessions;
pub mod spawned;
pub mod state;
pub mod status;
pub mod texts;
pub mod topics;
pub mod voice;
pub mod wakes;
pub mod webhook;
pub mod worker;
pub mod workspaces;

pub use error::HubError;
