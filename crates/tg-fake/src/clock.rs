//! A clock tests can move forward, so that flood waits, draft lifetimes and other timeouts can be
//! checked without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Real time plus an offset that only grows.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicU64,
}

impl Clock {
    /// Milliseconds since the Unix epoch, as the fake sees it.
    pub fn now_ms(&self) -> u64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as u64;
        real + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Microseconds since the Unix epoch, as the fake sees it: for latency measurements, which
    /// need finer stamps than the milliseconds of the fake's own logic.
    pub fn now_us(&self) -> u64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_micros() as u64;
        real + self.offset_ms.load(Ordering::Relaxed) * 1000
    }

    /// Seconds since the Unix epoch (Telegram's `date`).
    pub fn now_unix(&self) -> i64 {
        (self.now_ms() / 1000) as i64
    }

    /// Moves the clock forward by `by`; returns the new time in ms.
    pub fn advance(&self, by: Duration) -> u64 {
        self.offset_ms
            .fetch_add(by.as_millis() as u64, Ordering::Relaxed);
        self.now_ms()
    }
}
