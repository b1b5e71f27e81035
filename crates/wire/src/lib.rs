//! The hub wire protocol (see `docs/wire-protocol.md`): JSON lines over a Unix socket between
//! the hub and pi instances (through the extension) or the CLI, versioned and authenticated.
//! The same [`PiEvent`] model reads events from the extension and from `pi --mode rpc`.
//!
//! - [`codec`]: line framing with a size limit, lenient about lone UTF-16 surrogates.
//! - [`msg`]: the messages, tolerant of unknown types and fields.
//! - [`event`]: pi's events as raw JSON with typed accessors.

pub mod codec;
pub mod event;
pub mod msg;

pub use codec::{LineError, LineReader, MAX_LINE, encode, repair_surrogates};
pub use event::{EventKind, PiEvent, ToolPhase};
pub use msg::{
    ClientMsg, Disposition, FILE_PART_BYTES, FilePart, Files, Hello, HelloError, HubMsg, ImagePart,
    InstanceState, ModelRef, PROTOCOL, Role, TurnId, TurnResult, read_hello, secrets_match,
};
