//! Deterministic fault injection: `PI_TELEGRAM_CRASH_AT=<point>[:<n>]` aborts the process the
//! `n`-th time (default first) execution reaches `hit("<point>")`. Tests use it to kill the hub
//! exactly between two steps of a state change; without the variable a hit costs one atomic
//! load.
//!
//! Points (see ARCHITECTURE.md): `journal.before_commit`, `journal.after_commit`,
//! `journal.after_sync`,
//! `handle.before_commit`, `handle.after_commit`, `send.after_mark_sending`,
//! `send.after_call`, `send.after_record`, `attach.before_commit`, `dispatch.before_commit`,
//! `dispatch.after_commit`, `dispatch.after_send`, `ack.before_commit`,
//! `turn_done.before_commit`, `turn_done.after_commit`, `control.before_effect`,
//! `inbound.after_download`, and Threaded
//! Mode's `provision.intent_committed`, `provision.topic_created`, `provision.bound`,
//! `provision.ambiguous_committed`, `reconcile.before_delete`, `reconcile.deleted`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

struct Plan {
    point: String,
    nth: u64,
    seen: AtomicU64,
}

fn plan() -> Option<&'static Plan> {
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let spec = std::env::var("PI_TELEGRAM_CRASH_AT").ok()?;
        let (point, nth) = match spec.rsplit_once(':') {
            Some((p, n)) => (p.to_owned(), n.parse().unwrap_or(1)),
            None => (spec, 1),
        };
        Some(Plan {
            point,
            nth: nth.max(1),
            seen: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// Marks a crash point.
pub fn hit(point: &str) {
    if let Some(p) = plan()
        && p.point == point
        && p.seen.fetch_add(1, Ordering::SeqCst) + 1 == p.nth
    {
        eprintln!("pi-telegram: crash point {point} reached: aborting (PI_TELEGRAM_CRASH_AT)");
        std::process::abort();
    }
}
