//! The hub's time and randomness, as one handle the tasks carry (in their [`crate::db::Db`] and
//! [`crate::incoming::handlers::HandlerCtx`]), never a global: the real one reads the system clock
//! and the OS's random source; a simulated one (tests) is a seeded generator and a wall clock tied
//! to tokio's clock, so a test on a paused runtime moves wall time, timers and timestamps together
//! and replays the same run from the same seed.
//!
//! Timers (`tokio::time::sleep`, `timeout`, `Instant`) stay tokio's: under a paused runtime they
//! are virtual already, and [`Clock::now_ms`] of a simulated clock follows them.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

/// Randomness could not be drawn (the OS source failed).
#[derive(Debug, thiserror::Error)]
#[error("no randomness: {0}")]
pub struct NoRandomness(String);

/// Where the hub's time and random bytes come from.
#[derive(Debug, Clone)]
pub struct Clock(Arc<Source>);

#[derive(Debug)]
enum Source {
    Real,
    Simulated(Simulated),
}

/// A simulated clock: `start_ms` plus the time tokio's clock moved since it was made, plus
/// whatever a test jumped it by (a wall clock step that timers do not see). Randomness from a
/// seeded splitmix64.
#[derive(Debug)]
struct Simulated {
    start_ms: i64,
    origin: tokio::time::Instant,
    jumped_ms: AtomicI64,
    rng: Mutex<u64>,
}

impl Default for Clock {
    fn default() -> Self {
        Self::real()
    }
}

impl Clock {
    /// The system clock and the OS's random source.
    pub fn real() -> Self {
        Self(Arc::new(Source::Real))
    }

    /// A simulated clock that reads `start_ms` now and then follows tokio's clock (pause the
    /// runtime to make it virtual), with randomness from `seed`.
    pub fn simulated(start_ms: i64, seed: u64) -> Self {
        Self(Arc::new(Source::Simulated(Simulated {
            start_ms,
            origin: tokio::time::Instant::now(),
            jumped_ms: AtomicI64::new(0),
            rng: Mutex::new(seed),
        })))
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match &*self.0 {
            Source::Real => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            Source::Simulated(s) => {
                let moved = tokio::time::Instant::now().saturating_duration_since(s.origin);
                s.start_ms + moved.as_millis() as i64 + s.jumped_ms.load(Ordering::Relaxed)
            }
        }
    }

    /// Moves a simulated wall clock by `ms` (either way) without moving timers, as a system
    /// clock step would. Nothing for the real clock.
    pub fn jump(&self, ms: i64) {
        if let Source::Simulated(s) = &*self.0 {
            s.jumped_ms.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Fills `bytes` with random bytes.
    pub fn fill(&self, bytes: &mut [u8]) -> Result<(), NoRandomness> {
        match &*self.0 {
            Source::Real => getrandom::fill(bytes).map_err(|e| NoRandomness(e.to_string())),
            Source::Simulated(s) => {
                // A poisoned lock only means another thread panicked mid-draw; the state is a
                // plain integer, still usable.
                let mut state = s.rng.lock().unwrap_or_else(|p| p.into_inner());
                for chunk in bytes.chunks_mut(8) {
                    let word = splitmix64(&mut state).to_le_bytes();
                    chunk.copy_from_slice(&word[..chunk.len()]);
                }
                Ok(())
            }
        }
    }

    /// Whether this is a simulated clock.
    pub fn is_simulated(&self) -> bool {
        matches!(&*self.0, Source::Simulated(_))
    }
}

/// Milliseconds since the Unix epoch by the system clock, for what runs outside the hub's tasks
/// (the CLI commands, the log's timestamps) and has no [`Clock`] to ask.
pub fn system_now_ms() -> i64 {
    Clock::real().now_ms()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_simulated_clock_follows_tokio_time_and_jumps() {
        let c = Clock::simulated(1_000_000, 7);
        assert_eq!(c.now_ms(), 1_000_000);
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        assert_eq!(c.now_ms(), 1_001_500);
        c.jump(-500);
        assert_eq!(c.now_ms(), 1_001_000);
    }

    #[test]
    fn simulated_randomness_repeats_from_its_seed() {
        let draw = |seed| {
            let c = Clock::simulated(0, seed);
            let mut b = [0u8; 13];
            c.fill(&mut b).map(|()| b).ok()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
