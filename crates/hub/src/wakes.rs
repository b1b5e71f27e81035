//! The hub's tasks wake each other through these; nothing polls on a timer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::time::Duration;

use tokio::sync::Notify;

/// One `Notify` per task. Notifications are permits: one sent while the task is busy is not
/// lost.
#[derive(Debug, Clone, Default)]
pub struct Wakes {
    /// Journaled updates wait for the worker.
    pub worker: Arc<Notify>,
    /// Outbox rows wait for the sender.
    pub sender: Arc<Notify>,
    /// Turns or the selection changed.
    pub conductor: Arc<Notify>,
    /// Something may need a topic (or a cleanup).
    pub topics: Arc<Notify>,
    /// A turn waits for its files or its group.
    pub inbound: Arc<Notify>,
    /// A voice message waits to be made.
    pub voice: Arc<Notify>,
    /// A control was recorded since the conductor last looked (set before `conductor` is
    /// notified): the conductor reads the open controls only then, when pi told it something,
    /// or when a control's wait runs out, not on every message on its way to pi.
    pub controls: Arc<AtomicBool>,
    /// Since when (Unix ms) the poller cannot reach Telegram, 0 while it can: set by the poller
    /// (`incoming::reach`) before `conductor` is notified, read by the conductor for pi's
    /// footer.
    pub telegram_down_since: Arc<AtomicI64>,
}

/// Sleeps for `d` (at least a millisecond), or forever when there is nothing to wait for; for
/// the timer branch of a task's `select!`.
pub async fn sleep_for(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d.max(Duration::from_millis(1))).await,
        None => std::future::pending().await,
    }
}
