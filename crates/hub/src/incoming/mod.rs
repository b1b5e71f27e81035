//! What comes in from Telegram: the poller (getUpdates into the journal), the worker (the
//! journal through the handlers, in order, each update's effects and its "handled" in one
//! commit), the handlers themselves (what a message, a command, a reaction or a tap does) and
//! the webhook cleared at start.

pub mod handlers;
pub mod poller;
pub mod reach;
pub mod webhook;
pub mod worker;
