//! The store from async code: every call runs off the scheduler, so an fsync never stalls
//! the runtime. The handle also carries the hub's [`Clock`]: every timestamp the hub reads ends
//! up in the store, and every task that reads one holds a `Db`.

use std::sync::Arc;

use store::{CommitNo, Connection, Store, StoreError};

use crate::clock::Clock;

/// Whether an instance outlives a crash of this machine, which decides how durable a commit
/// must be before the hub tells the instance something (ARCHITECTURE.md, "Durability").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A process of this machine: it dies with the machine, so it only needs what survives a
    /// crash of the hub's process (any commit).
    ThisMachine,
    /// pi on another machine (the TLS listener): it remembers what the hub told it across a
    /// crash of this machine, so what it is told must be on disk first.
    OtherMachine,
}

/// How far a transaction's commit has gone when [`Db::write`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On disk: it survives a crash of the machine ([`Store::write`]).
    OnDisk,
    /// Committed, so it survives a crash of the process; on disk with the next sync
    /// ([`Store::write_lazy_sync`]). For a transaction whose effects reach no other machine
    /// before such a sync: lost with the machine, it is redone from what was durable, and
    /// nobody outside saw the difference.
    Lazy,
    /// The commit before the hub tells an instance something that follows from it (a prompt,
    /// "your result is stored"): on disk when the instance is on another machine, which would
    /// remember it across a crash of this one; otherwise lazy, since such a process dies with
    /// this machine and a crash of the hub's process loses no commit.
    BeforeTelling(Reach),
}

impl Durability {
    fn on_disk(self) -> bool {
        match self {
            Self::OnDisk | Self::BeforeTelling(Reach::OtherMachine) => true,
            Self::Lazy | Self::BeforeTelling(Reach::ThisMachine) => false,
        }
    }
}

/// One transaction on `store`, then its sync when `durability` or `on_disk_if` asks for one.
fn commit<T, E, F, P>(
    store: &Store,
    durability: Durability,
    f: F,
    on_disk_if: P,
) -> Result<(T, CommitNo), E>
where
    E: From<StoreError>,
    F: FnOnce(&Connection) -> Result<T, E>,
    P: FnOnce(&T) -> bool,
{
    let (value, commit) = store.write_lazy_sync_numbered(f)?;
    if durability.on_disk() || on_disk_if(&value) {
        store.sync_through(commit)?;
    }
    Ok((value, commit))
}

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
    /// Transactions the store ran so far (`Store::transactions`).
    pub fn transactions(&self) -> u64 {
        self.store.transactions()
    }

    /// The store with the real clock; calls run off the scheduler ([`off_runtime`]).
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

    /// One transaction, committed as far as `durability` says before it returns.
    pub async fn write<T, F>(&self, durability: Durability, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.write_numbered(durability, f, |_| false)
            .await
            .map(|(value, _)| value)
    }

    /// [`Db::write`], also returning the commit's number, for a [`Db::sync_through`] by
    /// whoever acts on the commit next; and made durable in the same store call when
    /// `on_disk_if(&value)` says its effect leaves the machine next (one call off the runtime
    /// rather than two, and whoever acts on it next finds it on disk already).
    pub async fn write_numbered<T, F, P>(
        &self,
        durability: Durability,
        f: F,
        on_disk_if: P,
    ) -> Result<(T, CommitNo), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        P: FnOnce(&T) -> bool + Send + 'static,
    {
        self.run(move |s| commit(s, durability, f, on_disk_if))
            .await
    }

    /// [`Db::write`] for a transaction that fails with the caller's error type `E`, which a
    /// store error converts into: one that may also refuse, where a refusal must roll back and
    /// must never be mistaken for a store fault (or the other way round).
    pub async fn write_as<T, E, F>(&self, durability: Durability, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        self.run(move |s| commit(s, durability, f, |_| false).map(|(value, _)| value))
            .await
    }

    /// Makes every commit so far survive a crash of the machine ([`Store::sync`]); free when
    /// an earlier sync covered them.
    pub async fn sync(&self) -> Result<(), StoreError> {
        self.run(|s| s.sync()).await
    }

    /// Makes commit `commit` and those before it survive a crash of the machine
    /// ([`Store::sync_through`]); waits for a sync under way that covers it.
    pub async fn sync_through(&self, commit: CommitNo) -> Result<(), StoreError> {
        // Usually the producer synced it before handing the work on: no store call then.
        if self.store.is_durable(commit) {
            return Ok(());
        }
        self.run(move |s| s.sync_through(commit)).await
    }

    /// One consistent read.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.run(move |s| s.read(f)).await
    }

    /// Runs `f` on the store: in place for a simulation, otherwise off the runtime's scheduler.
    async fn run<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Store) -> Result<T, E> + Send + 'static,
    {
        if self.inline {
            return f(&self.store);
        }
        off_runtime(self.store.clone(), f).await
    }
}

/// Runs `f` off the runtime's scheduler. On the hub's multi-threaded runtime the calling
/// thread runs it (`block_in_place`: the scheduler moves to another thread meanwhile, so other
/// tasks go on, and the call itself needs no hand-over to a pool thread and back, which cost
/// two thread wake-ups per store call); elsewhere (a current-thread runtime in tests) a pool
/// thread does. While it runs, whatever else the calling task polls (other branches of its
/// `select!` or `join!`) waits: store calls are short, keep long work out of such tasks.
async fn off_runtime<T, E, F>(store: Arc<Store>, f: F) -> Result<T, E>
where
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
    F: FnOnce(&Store) -> Result<T, E> + Send + 'static,
{
    if tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::MultiThread
    {
        return tokio::task::block_in_place(|| f(&store));
    }
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|e| E::from(StoreError::Corrupt(format!("store task failed: {e}"))))?
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
        Box::pin(async move { db.write(Durability::OnDisk, f).await })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let store = Store::open(&dir.path().join("state.db"))
            .unwrap_or_else(|e| panic!("opening the store: {e}"));
        (dir, Db::new(Arc::new(store)))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_pi_on_another_machine_hears_of_is_on_disk_first() -> Result<(), StoreError> {
        let (_dir, db) = db();
        db.write(Durability::BeforeTelling(Reach::ThisMachine), |tx| {
            store::kv::set(tx, "k", "1")
        })
        .await?;
        assert_eq!(
            db.store().unsynced_commits(),
            1,
            "pi of this machine dies with it: no flush before it hears"
        );
        db.write(Durability::BeforeTelling(Reach::OtherMachine), |tx| {
            store::kv::set(tx, "k", "2")
        })
        .await?;
        assert_eq!(
            db.store().unsynced_commits(),
            0,
            "pi on another machine outlives a crash of ours: on disk first"
        );
        db.write(Durability::Lazy, |tx| store::kv::set(tx, "k", "3"))
            .await?;
        db.sync().await?;
        assert_eq!(db.store().unsynced_commits(), 0);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_whose_effect_leaves_next_is_on_disk_when_the_call_returns()
    -> Result<(), StoreError> {
        let (_dir, db) = db();
        let leaves = |v: &bool| *v;
        let (_, kept) = db
            .write_numbered(
                Durability::BeforeTelling(Reach::ThisMachine),
                |tx| store::kv::set(tx, "k", "1").map(|()| false),
                leaves,
            )
            .await?;
        assert!(
            !db.store().is_durable(kept),
            "nothing leaves: synced lazily"
        );
        let (_, claimed) = db
            .write_numbered(
                Durability::BeforeTelling(Reach::ThisMachine),
                |tx| store::kv::set(tx, "k", "2").map(|()| true),
                leaves,
            )
            .await?;
        assert!(
            db.store().is_durable(claimed),
            "a claimed row is called next"
        );
        assert!(
            db.store().is_durable(kept),
            "one sync covers the commits before it"
        );
        // The sender's wait is then no store call at all.
        db.sync_through(claimed).await?;
        let (_, remote) = db
            .write_numbered(
                Durability::BeforeTelling(Reach::OtherMachine),
                |tx| store::kv::set(tx, "k", "3").map(|()| false),
                leaves,
            )
            .await?;
        assert!(
            db.store().is_durable(remote),
            "pi on another machine: on disk first"
        );
        Ok(())
    }
}
