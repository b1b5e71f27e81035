//! The store from async code: every call runs on a blocking thread, so an fsync never stalls
//! the runtime. The handle also carries the hub's [`Clock`]: every timestamp the hub reads ends
//! up in the store, and every task that reads one holds a `Db`.

use std::sync::Arc;

use store::{Connection, Store, StoreError};

use crate::clock::Clock;

/// A shared handle on the hub's one store, and the hub's clock.
#[derive(Debug, Clone)]
pub struct Db {
    store: Arc<Store>,
    clock: Clock,
    /// Store calls run on the caller's thread: only for simulations on a single-threaded
    /// runtime, where a blocking thread would make the order of commits depend on the OS.
    inline: bool,
}

impl Db {
    /// The store with the real clock; calls run on blocking threads.
    pub fn new(store: Arc<Store>) -> Self {
        Self {
            store,
            clock: Clock::real(),
            inline: false,
        }
    }

    /// For a deterministic simulation: `clock`, and store calls made on the calling thread (a
    /// current-thread runtime then runs everything in one reproducible order).
    pub fn simulated(store: Arc<Store>, clock: Clock) -> Self {
        Self {
            store,
            clock,
            inline: true,
        }
    }

    /// The store, for code that is not async (or runs inside a store call already).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The hub's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Milliseconds since the Unix epoch, by the hub's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// One durable transaction.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        if self.inline {
            return self.store.write(f);
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.write(f))
            .await
            .map_err(|e| StoreError::Corrupt(format!("store task failed: {e}")))?
    }

    /// One transaction whose effects reach the outside world only through a later durable
    /// commit ([`store::Store::write_lazy_sync`]): it does not wait for the disk.
    pub async fn write_lazy_sync<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        if self.inline {
            return self.store.write_lazy_sync(f);
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.write_lazy_sync(f))
            .await
            .map_err(|e| StoreError::Corrupt(format!("store task failed: {e}")))?
    }

    /// One consistent read.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        if self.inline {
            return self.store.read(f);
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.read(f))
            .await
            .map_err(|e| StoreError::Corrupt(format!("store task failed: {e}")))?
    }
}

/// Threaded Mode's provisioning and reconciler commit through the hub's store calls, so they
/// too run off the runtime threads.
impl threads::Storage for Db {
    fn write<T, F>(&self, f: F) -> threads::StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let db = self.clone();
        Box::pin(async move { db.write(f).await })
    }

    fn read<T, F>(&self, f: F) -> threads::StoreCall<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let db = self.clone();
        Box::pin(async move { db.read(f).await })
    }
}
