//! Invariants checked where they must hold, in the manner of rust-analyzer's `never!`: a
//! broken one panics in debug builds (every test) and wherever [`panic_when_broken`] asked for
//! it (the simulation, in release builds too); in a release build the hub logs it, records it
//! as an incident (`status`, `doctor`) and carries on, since the person's conversation matters
//! more than the hub's pride. ARCHITECTURE.md's table of invariants names where each is
//! checked.
//!
//! What a message says is ids and states, never a person's text: it goes to the log at error
//! level.

use crate::db::Durability;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

use crate::db::Db;

static PANICS: AtomicBool = AtomicBool::new(cfg!(debug_assertions));
static INCIDENTS: OnceLock<mpsc::UnboundedSender<String>> = OnceLock::new();

/// `true` when `$cond` holds, which it never should: then reported as [`broken`] says. Use
/// it as a condition, so that the code goes on sensibly either way:
/// `if never!(plan.current().is_none(), "plan of row {id} points past its messages") { .. }`.
#[macro_export]
macro_rules! never {
    ($cond:expr, $($arg:tt)+) => {{
        let broken: bool = $cond;
        if broken {
            $crate::never::broken(::std::format_args!($($arg)+), file!(), line!());
        }
        broken
    }};
}

/// Whether a broken invariant panics from now on (in this process).
pub fn panic_when_broken(panics: bool) {
    PANICS.store(panics, Ordering::Relaxed);
}

/// Whether a broken invariant panics now: debug builds, and wherever [`panic_when_broken`]
/// asked for it. Checks that cost a read of the store run only then.
pub fn panics() -> bool {
    PANICS.load(Ordering::Relaxed)
}

/// A broken invariant: a panic, or a log line and an incident. Called by [`never!`].
#[doc(hidden)]
pub fn broken(what: std::fmt::Arguments<'_>, file: &'static str, line: u32) {
    let message = format!("invariant broken at {file}:{line}: {what}");
    if PANICS.load(Ordering::Relaxed) {
        panic!("{message}");
    }
    tracing::error!(%message, "an invariant does not hold; the hub carries on");
    if let Some(tx) = INCIDENTS.get() {
        let _ = tx.send(message);
    }
}

/// Records what [`broken`] reports as incidents, until every sender is gone: `serve` runs it
/// beside its tasks. The first call in a process wins (one hub per process).
pub async fn record_incidents(db: Db) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    if INCIDENTS.set(tx).is_err() {
        return;
    }
    while let Some(message) = rx.recv().await {
        let now = db.now_ms();
        let recorded = db
            .write(Durability::OnDisk, move |tx| {
                store::incidents::record(tx, now, "invariant", &message)
            })
            .await;
        if let Err(e) = recorded {
            tracing::warn!(error = %e, "could not record a broken invariant");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_broken_invariant_panics_in_tests_and_says_where() {
        assert!(!crate::never!(1 + 1 == 3, "arithmetic"));
        let caught = std::panic::catch_unwind(|| crate::never!(true, "turn {} twice", 7));
        let message = caught
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(
            message.contains("never.rs") && message.ends_with("turn 7 twice"),
            "{message}"
        );
    }
}
