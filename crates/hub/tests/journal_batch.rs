//! The poller's journal-and-handle transaction (`worker::journal_batch`) over a real SQLite
//! file: a fresh batch is journaled and handled in one commit; an older unhandled update, a full
//! poll or a failing handler leave it to the worker, and a failing handler loses nothing.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use hub::config::PairingMode;
use hub::db::Db;
use hub::incoming::worker::{self, WorkerSettings};
use hub::wakes::Wakes;
use serde_json::json;
use store::{Cached, Store, journal, kv, lease};

const OWNER: i64 = 4242;

struct Scene {
    _dir: tempfile::TempDir,
    db: Db,
    settings: WorkerSettings,
    wakes: Wakes,
}

fn scene() -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let epoch = store
        .write(|tx| {
            kv::set_i64(tx, kv::OWNER, OWNER)?;
            lease::acquire(tx, 1, 1_000)
        })
        .unwrap();
    let settings = WorkerSettings {
        bot_username: "bot".into(),
        pairing: PairingMode::Code,
        config_path: dir.path().join("telegram.json"),
        profile: hub::paths::ProfileName::default_profile(),
        epoch,
        title_template: threads::DEFAULT_TITLE.into(),
    };
    Scene {
        db: Db::new(Arc::new(store)),
        _dir: dir,
        settings,
        wakes: Wakes::default(),
    }
}

/// An owner's text message as `getUpdates` returns it: (update id, kind, JSON).
fn message(update_id: i64, text: &str) -> (i64, String, String) {
    let raw = json!({ "update_id": update_id, "message": {
        "message_id": update_id, "date": 1, "text": text,
        "from": { "id": OWNER, "is_bot": false, "first_name": "Ann" },
        "chat": { "id": OWNER, "type": "private", "first_name": "Ann" } } });
    (update_id, "message".into(), raw.to_string())
}

fn unhandled(s: &Scene) -> Vec<i64> {
    s.db.store()
        .read(|c| journal::pending(c, 100))
        .unwrap()
        .into_iter()
        .map(|e| e.update_id)
        .collect()
}

fn offset(s: &Scene) -> Option<i64> {
    s.db.store().read(journal::offset).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_batch_is_journaled_and_handled_in_one_commit() {
    let s = scene();
    let handled = worker::journal_batch(
        &s.db,
        &s.settings,
        &s.wakes,
        vec![message(10, "one"), message(11, "two")],
        12,
        true,
    )
    .await
    .unwrap();
    assert!(handled);
    assert!(unhandled(&s).is_empty());
    assert_eq!(offset(&s), Some(12));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_unhandled_update_or_a_full_poll_goes_to_the_worker() {
    let s = scene();
    // Journaled, not handled (a full poll).
    let handled = worker::journal_batch(
        &s.db,
        &s.settings,
        &s.wakes,
        vec![message(10, "a")],
        11,
        false,
    )
    .await
    .unwrap();
    assert!(!handled);
    assert_eq!(unhandled(&s), vec![10]);
    // A newer batch must not be handled before it.
    let handled = worker::journal_batch(
        &s.db,
        &s.settings,
        &s.wakes,
        vec![message(11, "b")],
        12,
        true,
    )
    .await
    .unwrap();
    assert!(!handled, "handled before an older update");
    assert_eq!(unhandled(&s), vec![10, 11]);
    assert_eq!(offset(&s), Some(12));
    // The worker was woken for them.
    tokio::time::timeout(Duration::from_secs(1), s.wakes.worker.notified())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_leaves_the_batch_journaled_for_the_worker_which_isolates_it() {
    let s = scene();
    // Every owner message becomes a turn: without the table its handler fails, and only it.
    s.db.store()
        .write(|tx| {
            tx.exec("ALTER TABLE turns RENAME TO turns_gone", [])
                .map_err(store::StoreError::from)
        })
        .unwrap();
    let handled = worker::journal_batch(
        &s.db,
        &s.settings,
        &s.wakes,
        vec![message(10, "x")],
        11,
        true,
    )
    .await
    .unwrap();
    assert!(!handled);
    assert_eq!(unhandled(&s), vec![10], "journaled, not handled");
    assert_eq!(offset(&s), Some(11), "the offset moves: the update is kept");
    // The worker handles it alone and records the failure instead of retrying forever.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(worker::run(
        s.db.clone(),
        s.settings.clone(),
        s.wakes.clone(),
        stop_rx,
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !unhandled(&s).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker did not take it"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let outcome: String =
        s.db.store()
            .read(|c| {
                c.row(
                    "SELECT outcome FROM journal WHERE update_id = 10",
                    [],
                    |r| r.get(0),
                )
                .map_err(store::StoreError::from)
            })
            .unwrap();
    assert!(outcome.starts_with("failed:"), "{outcome}");
    let _ = stop_tx.send(true);
    task.await.unwrap().unwrap();
}
