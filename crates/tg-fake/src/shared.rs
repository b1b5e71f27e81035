//! The state every connection shares.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::Clock;
use crate::config::FakeConfig;
use crate::world::World;

/// The world behind its lock, plus the clock (readable without the lock).
#[derive(Debug)]
pub struct Shared {
    world: Mutex<World>,
    /// The fake's clock.
    pub clock: Arc<Clock>,
    /// Bumped after every Bot API call that changed something, for watchers (the demo).
    pub changes: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    /// A fresh fake from `config`.
    pub fn new(config: FakeConfig) -> Arc<Self> {
        let clock = Arc::new(Clock::default());
        let (changes, _) = tokio::sync::watch::channel(0);
        Arc::new(Self {
            world: Mutex::new(World::new(config, clock.clone())),
            clock,
            changes,
        })
    }

    /// Locks the world. A panic in another handler does not make the fake unusable: the world
    /// is only changed by complete method calls.
    pub fn lock(&self) -> MutexGuard<'_, World> {
        self.world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
