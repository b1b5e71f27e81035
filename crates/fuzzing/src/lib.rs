//! Fuzz targets. Each `pub fn <target>(data: &[u8])` takes any bytes and panics only when a
//! property is violated (a panic in the code under test is one too): the cargo-fuzz targets in
//! `fuzz/` call them, and so does `tests/short_run.rs`, a short seeded mutation run on stable
//! Rust over the seed corpus in `fuzz/corpus/<target>/`.
//!
//! - [`update`]: one or more Telegram updates through the worker's handlers, on a real store;
//! - [`wire_line`]: hub protocol lines (framing, both directions' messages, round trips);
//! - [`config`]: telegram.json (checks, migration, the writer keeping every key);
//! - [`markdown`]: the renderer and splitters (rich, HTML, plain, previews) within limits;
//! - [`callback`]: stored button actions and pi's `telegram_button` payloads.

mod callback;
mod config;
mod markdown;
pub mod mutate;
mod update;
mod wire_line;

pub use callback::callback;
pub use config::config;
pub use markdown::markdown;
pub use update::update;
pub use wire_line::wire_line;

/// A fuzz target.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/corpus/<name>/` and `fuzz/fuzz_targets/<name>.rs` call it.
pub const TARGETS: [(&str, Target); 5] = [
    ("update", update),
    ("wire_line", wire_line),
    ("config", config),
    ("markdown", markdown),
    ("callback", callback),
];

/// Bytes as text the way a lenient reader would take them: the fuzzer's bytes are rarely
/// UTF-8, and the text paths are what these targets are about.
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}
