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

pub mod assistant;
pub mod atomic;
pub mod bot_api;
pub mod buttons;
pub mod clock;
pub mod config;
pub mod control;
pub mod crashpoint;
pub mod db;
pub(crate) mod error;
pub mod incoming;
pub mod latency;
pub mod lifecycle;
pub mod lock;
pub mod logging;
pub mod machine;
pub mod names;
pub mod network;
pub mod never;
pub mod outgoing;
pub mod pairing;
pub mod paths;
pub mod pi;
pub mod regular;
pub mod remote;
pub(crate) mod retention;
pub mod secret;
pub mod serve;
pub mod state;
pub mod status;
pub mod wakes;
pub(crate) mod when;

pub use error::HubError;
