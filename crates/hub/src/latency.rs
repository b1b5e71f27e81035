//! Marks on a message's way through the hub, for the round-trip benchmark's breakdown
//! (`cargo bench -p pi-telegram --bench roundtrip`).
//!
//! Each mark is a debug event of the target `hub::latency`, so it costs one disabled-callsite
//! check unless `PI_TELEGRAM_LOG` turns that target on (`info,hub::latency=debug`). It carries
//! the wall clock in microseconds, not the hub's clock: the bench lines the marks up with
//! tg-fake's and the fake model's own stamps, taken on the same machine.

/// A step of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `getUpdates` returned a non-empty batch (key: the last update id).
    Polled,
    /// The batch and the offset are committed to the journal (key: the last update id).
    Journaled,
    /// The worker's transaction over a batch committed (key: the last update id).
    Handled,
    /// The conductor handed a prompt to the instance's link (key: the turn).
    Dispatched,
    /// A `turn_done` line was read from the instance's connection (key: the turn).
    Settled,
    /// The turn's answer is committed to the outbox (key: the turn).
    Queued,
    /// The sender picked an outbox row to send (key: the row).
    Picked,
    /// The row is durably marked as being sent; the call to Telegram starts (key: the row).
    Calling,
    /// Telegram answered that call (key: the row).
    Called,
}

impl Step {
    /// The name written to the log.
    pub fn name(self) -> &'static str {
        match self {
            Self::Polled => "polled",
            Self::Journaled => "journaled",
            Self::Handled => "handled",
            Self::Dispatched => "dispatched",
            Self::Settled => "settled",
            Self::Queued => "queued",
            Self::Picked => "picked",
            Self::Calling => "calling",
            Self::Called => "called",
        }
    }
}

/// Records that `key` (an update id, a turn, an outbox row) reached `step` now.
pub fn mark(step: Step, key: impl std::fmt::Display) {
    // The field values are evaluated only when the event is enabled.
    tracing::debug!(target: "hub::latency", step = step.name(), key = %key, us = wall_us());
}

fn wall_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}
