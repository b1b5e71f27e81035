//! The store from async code: every call runs on a blocking thread, so an fsync never stalls
//! the runtime.

use std::sync::Arc;

use store::{Connection, Store, StoreError};

/// A shared handle on the hub's one store.
#[derive(Debug, Clone)]
pub struct Db(pub Arc<Store>);

impl Db {
    /// One durable transaction.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.0.clone();
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
        let store = self.0.clone();
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
        let store = self.0.clone();
        tokio::task::spawn_blocking(move || store.read(f))
            .await
            .map_err(|e| StoreError::Corrupt(format!("store task failed: {e}")))?
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
