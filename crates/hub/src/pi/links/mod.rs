//! Transports to pi instances. Each link owns its connection or child process, turns what it reads
//! into [`crate::pi::instance::LinkEvent`]s and carries out [`crate::pi::instance::Command`]s.

pub(crate) mod echo;
pub mod rpc;
pub(crate) mod socket;
pub mod strangers;
pub(crate) mod tcp;
pub(crate) mod uploads;

/// Commands an instance may have waiting before the hub considers it stuck.
pub const COMMAND_QUEUE: usize = 256;
