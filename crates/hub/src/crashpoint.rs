//! Deterministic fault injection: `PI_TELEGRAM_CRASH_AT=<point>[:<n>]` aborts the process the
//! `n`-th time (default first) execution reaches `hit(<point>)`. Tests use it to kill the hub
//! exactly between two steps of a state change; without the variable a hit costs one atomic
//! load.
//!
//! The hub's points are [`CrashPoint`]; Threaded Mode's are `threads::Point`, reached through
//! [`hit_threads`]. ARCHITECTURE.md's table of them is written from [`CrashPoint::ALL`] by
//! `crates/hub/tests/crash_points_doc.rs`, which fails when the two differ.

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

/// A place where a test may kill the hub, between two steps of a state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// The poller's batch written, not committed.
    JournalBeforeCommit,
    /// The batch journaled, not yet synced.
    JournalAfterCommit,
    /// The batch on disk, the offset not yet confirmed.
    JournalAfterSync,
    /// A handler's effects written, not committed.
    HandleBeforeCommit,
    /// Handled, the sender not woken.
    HandleAfterCommit,
    /// An outbox row marked `sending`, its call not made.
    SendAfterMarkSending,
    /// The call made, its outcome not recorded.
    SendAfterCall,
    /// The outcome recorded.
    SendAfterRecord,
    /// At the hub's start, what became of the turns the last hub left judged, not committed.
    RecoverBeforeCommit,
    /// pi connected, its registration not committed.
    AttachBeforeCommit,
    /// A turn chosen, not marked dispatched.
    DispatchBeforeCommit,
    /// The turn dispatched, its prompt not sent.
    DispatchAfterCommit,
    /// The prompt handed to the link.
    DispatchAfterSend,
    /// pi has the prompt, its ack not stored.
    AckBeforeCommit,
    /// pi finished, its result not stored.
    TurnDoneBeforeCommit,
    /// The result and the answer's rows stored, pi not told.
    TurnDoneAfterCommit,
    /// A file's bytes fetched, nothing saved or recorded.
    InboundAfterDownload,
    /// A control journaled, pi not asked.
    ControlBeforeEffect,
}

impl CrashPoint {
    /// Every point, in the order of the data path.
    pub const ALL: [CrashPoint; 18] = [
        Self::JournalBeforeCommit,
        Self::JournalAfterCommit,
        Self::JournalAfterSync,
        Self::HandleBeforeCommit,
        Self::HandleAfterCommit,
        Self::SendAfterMarkSending,
        Self::SendAfterCall,
        Self::SendAfterRecord,
        Self::RecoverBeforeCommit,
        Self::AttachBeforeCommit,
        Self::DispatchBeforeCommit,
        Self::DispatchAfterCommit,
        Self::DispatchAfterSend,
        Self::AckBeforeCommit,
        Self::TurnDoneBeforeCommit,
        Self::TurnDoneAfterCommit,
        Self::InboundAfterDownload,
        Self::ControlBeforeEffect,
    ];

    /// The name `PI_TELEGRAM_CRASH_AT` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::JournalBeforeCommit => "journal.before_commit",
            Self::JournalAfterCommit => "journal.after_commit",
            Self::JournalAfterSync => "journal.after_sync",
            Self::HandleBeforeCommit => "handle.before_commit",
            Self::HandleAfterCommit => "handle.after_commit",
            Self::SendAfterMarkSending => "send.after_mark_sending",
            Self::SendAfterCall => "send.after_call",
            Self::SendAfterRecord => "send.after_record",
            Self::RecoverBeforeCommit => "recover.before_commit",
            Self::AttachBeforeCommit => "attach.before_commit",
            Self::DispatchBeforeCommit => "dispatch.before_commit",
            Self::DispatchAfterCommit => "dispatch.after_commit",
            Self::DispatchAfterSend => "dispatch.after_send",
            Self::AckBeforeCommit => "ack.before_commit",
            Self::TurnDoneBeforeCommit => "turn_done.before_commit",
            Self::TurnDoneAfterCommit => "turn_done.after_commit",
            Self::InboundAfterDownload => "inbound.after_download",
            Self::ControlBeforeEffect => "control.before_effect",
        }
    }

    /// What is true when the hub dies here, and what a restart makes of it: the guarantee
    /// each point's test checks.
    pub fn guarantee(self) -> (&'static str, &'static str) {
        match self {
            Self::JournalBeforeCommit => (
                "batch written, not committed",
                "re-polled with the old offset, journaled once",
            ),
            Self::JournalAfterCommit => (
                "journaled (handled too when nothing older waited; not yet synced), offset not confirmed, nothing woken",
                "the worker handles what is unhandled; the sender and conductor pick up what the handling queued at start",
            ),
            Self::JournalAfterSync => (
                "journaled and on disk, offset not confirmed",
                "as above; the next poll confirms the offset",
            ),
            Self::HandleBeforeCommit => (
                "effects written, not committed (in the poller's transaction: the batch is not journaled either)",
                "handled again from scratch, once (re-polled first when it was the poller's)",
            ),
            Self::HandleAfterCommit => (
                "handled, sender not woken",
                "sender picks the rows up at start",
            ),
            Self::SendAfterMarkSending => (
                "row `sending`, call not made",
                "row `ambiguous` (not repeated); answers and the texts that are all a person learns of a message are sent again, marked",
            ),
            Self::SendAfterCall => (
                "call made, outcome not recorded",
                "row `ambiguous` (not repeated); answers and the texts that are all a person learns of a message are sent again, marked",
            ),
            Self::SendAfterRecord => ("outcome recorded", "nothing left to do"),
            Self::RecoverBeforeCommit => (
                "headless turns the last hub left judged from pi's session files (run again, answered from the file, interrupted), not committed",
                "judged again from the same files at the next start: one run again, one answer",
            ),
            Self::AttachBeforeCommit => (
                "pi connected, its registration not committed",
                "the extension starts a hub and reconnects: one instance",
            ),
            Self::DispatchBeforeCommit => (
                "turn chosen, not marked dispatched",
                "dispatched after the restart, delivered once",
            ),
            Self::DispatchAfterCommit => (
                "turn dispatched, prompt not sent",
                "the extension does not list it: requeued, delivered once",
            ),
            Self::DispatchAfterSend => ("prompt handed to the link", "same: delivered once"),
            Self::AckBeforeCommit => (
                "pi has the prompt, ack not stored",
                "the extension lists it in `received_turns`: not re-sent",
            ),
            Self::TurnDoneBeforeCommit => (
                "pi finished, result not stored",
                "the extension re-reports it in `completed_turns`: answered once",
            ),
            Self::TurnDoneAfterCommit => (
                "result and answer rows stored, pi not told; the answer's first row may be claimed (`sending`) in that commit",
                "the answer is sent once (a claimed row as an interrupted send: sent again with the repeat mark); the re-reported result is ignored",
            ),
            Self::InboundAfterDownload => (
                "a file's bytes fetched, nothing saved or recorded",
                "downloaded again, saved once, pi prompted once (`media.rs`)",
            ),
            Self::ControlBeforeEffect => (
                "a control (menu, switch, abort, compaction) journaled, pi not asked",
                "carried out once after the restart (`operator.rs`: a model switch)",
            ),
        }
    }
}

/// Marks a crash point of the hub.
pub fn hit(point: CrashPoint) {
    hit_named(point.name());
}

/// Marks one of Threaded Mode's crash points.
pub fn hit_threads(point: threads::Point) {
    hit_named(point.name());
}

fn hit_named(point: &str) {
    if let Some(p) = plan()
        && p.point == point
        && p.seen.fetch_add(1, Ordering::SeqCst) + 1 == p.nth
    {
        eprintln!("pi-telegram: crash point {point} reached: aborting (PI_TELEGRAM_CRASH_AT)");
        std::process::abort();
    }
}
