//! The hub's tasks wake each other through these; nothing polls on a timer.

use std::sync::Arc;

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
}
