//! The retention task: on the slow clock (at start, then every `every`), what recovery no
//! longer needs leaves the state database (`store::retention` has the rules per table), so the
//! database follows the traffic of the last period. It is off the path from an update to pi:
//! each batch is its own short transaction, and other tasks take the store between batches.

use std::collections::BTreeMap;
use std::time::Duration;

use store::retention::{self, BATCH, Horizon, Table};
use tokio::sync::watch;

use crate::db::Db;
use crate::error::HubError;

/// When and what the task prunes.
#[derive(Debug, Clone)]
pub struct RetentionSettings {
    /// Finished rows older than this go (`historyRetentionDays`; at least
    /// `store::retention::MIN_AGE_MS`).
    pub age: Duration,
    /// Time between passes.
    pub every: Duration,
}

/// Runs a pass at start and then every `settings.every` until the stop.
pub async fn run(
    db: Db,
    settings: RetentionSettings,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    loop {
        let pruned = pass(&db, &settings, &stop).await?;
        let total: usize = pruned.values().sum();
        if total > 0 {
            tracing::info!(rows = total, per_table = ?pruned, "pruned old state");
        }
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            () = tokio::time::sleep(settings.every) => {}
        }
        if *stop.borrow() {
            return Ok(());
        }
    }
}

/// One pass: each table, batch after batch until a batch finds less than a full one. Returns
/// the rows changed per table.
pub async fn pass(
    db: &Db,
    settings: &RetentionSettings,
    stop: &watch::Receiver<bool>,
) -> Result<BTreeMap<&'static str, usize>, HubError> {
    let age_ms = i64::try_from(settings.age.as_millis()).unwrap_or(i64::MAX);
    let mut pruned = BTreeMap::new();
    for table in Table::ALL {
        loop {
            if *stop.borrow() {
                return Ok(pruned);
            }
            let at = Horizon::new(db.now_ms(), age_ms);
            let n = db
                .write(move |tx| retention::prune(tx, table, at, BATCH))
                .await?;
            if n > 0 {
                *pruned.entry(table.name()).or_insert(0) += n;
            }
            if n < BATCH {
                break;
            }
            // The store is free between batches: the worker and the sender go first.
            tokio::task::yield_now().await;
        }
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use store::{Store, StoreError};

    use super::*;

    fn old_journal(n: i64, handled: bool) -> Result<(tempfile::TempDir, Db), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let store = Store::open(&dir.path().join("state.db"))?;
        store.write(|tx| {
            let mut stmt = tx.prepare(
                "INSERT INTO journal(update_id, kind, raw, received_ms, handled_ms)
                 VALUES (?1, 'message', '{}', 1, ?2)",
            )?;
            for id in 1..=n {
                stmt.execute((id, handled.then_some(2_i64)))?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok((dir, Db::new(Arc::new(store))))
    }

    fn settings() -> RetentionSettings {
        RetentionSettings {
            age: Duration::from_secs(60),
            every: Duration::from_secs(600),
        }
    }

    #[tokio::test]
    async fn a_pass_prunes_batch_after_batch_until_nothing_is_old() -> Result<(), HubError> {
        let rows = 2 * BATCH as i64 + 17;
        let (_dir, db) = old_journal(rows, true)?;
        let (_tx, stop) = watch::channel(false);
        let pruned = pass(&db, &settings(), &stop).await?;
        assert_eq!(pruned.get("journal"), Some(&(rows as usize)));
        let (pending, handled) = db.read(store::journal::counts).await?;
        assert_eq!((pending, handled), (0, rows), "pruned entries still count");
        let left: i64 = db
            .read(|c| {
                c.query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
                    .map_err(StoreError::from)
            })
            .await?;
        assert_eq!(left, 0);
        // Nothing is old any more.
        assert!(pass(&db, &settings(), &stop).await?.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn unhandled_updates_stay_and_a_stop_ends_the_pass() -> Result<(), HubError> {
        let (_dir, db) = old_journal(10, false)?;
        let (tx, stop) = watch::channel(false);
        assert!(pass(&db, &settings(), &stop).await?.is_empty());
        assert_eq!(db.read(store::journal::counts).await?, (10, 0));
        let _ = tx.send(true);
        let run = run(db, settings(), stop);
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .map_err(|_| HubError::Usage("the task did not stop".into()))??;
        Ok(())
    }
}
