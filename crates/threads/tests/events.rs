//! Binding events against a real SQLite store: retention, fencing, and the three ways "move
//! here" binds a topic.
#![allow(clippy::unwrap_used)]

use ::threads::events::{self, Newcomer};
use store::Store;
use store::lease::{self, Epoch};
use store::threads::{self as tables, Binding, BindingState, NewIntent};

const CHAT: i64 = 1001;
const DAY: i64 = 24 * 3_600_000;

fn store() -> (tempfile::TempDir, Store, Epoch) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let epoch = store.write(|tx| lease::acquire(tx, 1, 0)).unwrap();
    (dir, store, epoch)
}

fn bind(store: &Store, identity: &str, thread: i64, slot: &str, epoch: Epoch) {
    store
        .write(|tx| {
            tables::insert_binding(
                tx,
                &Binding {
                    identity: identity.into(),
                    chat_id: CHAT,
                    thread_id: thread,
                    slot: slot.into(),
                    title: format!("{slot} · x"),
                    state: BindingState::Active,
                    instance_id: Some("i1".into()),
                    cwd: identity.into(),
                    epoch: epoch.0,
                    created_ms: 0,
                    updated_ms: 0,
                    offline_since_ms: None,
                },
            )
        })
        .unwrap();
}

#[test]
fn an_offline_binding_releases_its_slot_only_after_the_retention() {
    let (_d, store, epoch) = store();
    bind(&store, "/w/a", 10, "A", epoch);
    bind(&store, "/w/b", 11, "B", epoch);
    store
        .write(|tx| events::went_offline(tx, "/w/a", 1_000))
        .unwrap();
    let retention = 7 * DAY;
    let early = store
        .write(|tx| events::release_stale(tx, retention, epoch, 1_000 + retention - 1))
        .unwrap();
    assert!(early.is_empty(), "not before the retention is over");
    // A hub that lost the lease releases nothing.
    let newer = store.write(|tx| lease::acquire(tx, 2, 5)).unwrap();
    let fenced = store
        .write(|tx| events::release_stale(tx, retention, epoch, 1_000 + retention + 1))
        .unwrap();
    assert!(fenced.is_empty());
    let released = store
        .write(|tx| events::release_stale(tx, retention, newer, 1_000 + retention + 1))
        .unwrap();
    let released: Vec<String> = released.into_iter().map(|b| b.identity).collect();
    assert_eq!(released, vec!["/w/a".to_owned()]);
    let left = store.read(tables::bindings).unwrap();
    assert_eq!(left.len(), 1, "the live one stays");
    assert_eq!(left[0].identity, "/w/b");
    assert_eq!(
        store.read(tables::held_slots).unwrap(),
        vec!["B".to_owned()]
    );
    // The topic itself is left alone: no cleanup was queued.
    assert!(store.read(tables::pending_cleanups).unwrap().is_empty());
}

#[test]
fn a_lost_connection_deletes_nothing_and_a_disconnect_queues_the_delete() {
    let (_d, store, epoch) = store();
    bind(&store, "/w/a", 10, "A", epoch);
    assert!(
        store
            .write(|tx| events::went_offline(tx, "/w/a", 5))
            .unwrap()
    );
    assert!(store.read(tables::pending_cleanups).unwrap().is_empty());
    let b = store.read(|c| tables::binding(c, "/w/a")).unwrap().unwrap();
    assert_eq!(b.state, BindingState::Offline);
    assert_eq!(b.offline_since_ms, Some(5));
    let gone = store
        .write(|tx| events::disconnected(tx, "/w/a", epoch, 6))
        .unwrap();
    assert_eq!(gone.map(|b| b.thread_id), Some(10));
    let cleanups = store.read(tables::pending_cleanups).unwrap();
    assert_eq!(cleanups.len(), 1);
    assert_eq!(cleanups[0].thread_id, 10);
    assert!(store.read(tables::held_slots).unwrap().is_empty());
}

#[test]
fn move_here_moves_a_binding_and_queues_the_old_topic_for_deletion() {
    let (_d, store, epoch) = store();
    bind(&store, "/w/a", 10, "A", epoch);
    bind(&store, "/w/b", 11, "B", epoch);
    // A topic that is bound to someone else cannot be taken.
    let taken = store
        .write(|tx| events::move_here(tx, "/w/a", CHAT, 11, epoch, 7))
        .unwrap();
    assert!(taken.is_none());
    let moved = store
        .write(|tx| events::move_here(tx, "/w/a", CHAT, 20, epoch, 7))
        .unwrap()
        .unwrap();
    assert_eq!((moved.thread_id, moved.slot.as_str()), (20, "A"));
    let cleanups = store.read(tables::pending_cleanups).unwrap();
    assert_eq!(
        cleanups.iter().map(|c| c.thread_id).collect::<Vec<_>>(),
        vec![10]
    );
}

#[test]
fn move_here_adopts_an_intent_and_replaces_the_topic_it_knew() {
    let (_d, store, epoch) = store();
    let id = store
        .write(|tx| {
            tables::insert_intent(
                tx,
                &NewIntent {
                    identity: "/w/a",
                    instance_id: Some("i1"),
                    chat_id: CHAT,
                    cwd: "/w/a",
                    slot: "C",
                    title: "C · a",
                    epoch: epoch.0,
                },
                1,
            )
        })
        .unwrap();
    store
        .write(|tx| {
            tx.execute("UPDATE intents SET thread_id = 30 WHERE id = ?1", [id])
                .map_err(store::StoreError::from)
        })
        .unwrap();
    let b = store
        .write(|tx| events::adopt_intent_at(tx, "/w/a", CHAT, 40, epoch, 2))
        .unwrap()
        .unwrap();
    assert_eq!(
        (b.thread_id, b.slot.as_str(), b.state),
        (40, "C", BindingState::Active)
    );
    assert!(store.read(tables::intents).unwrap().is_empty());
    let cleanups = store.read(tables::pending_cleanups).unwrap();
    assert_eq!(
        cleanups.iter().map(|c| c.thread_id).collect::<Vec<_>>(),
        vec![30],
        "the topic the intent knew is replaced by the person's choice"
    );
}

#[test]
fn move_here_binds_a_newcomer_with_a_fresh_letter_and_is_fenced() {
    let (_d, store, epoch) = store();
    bind(&store, "/w/b", 11, "A", epoch);
    let who = Newcomer {
        identity: "/w/a",
        instance_id: Some("i2"),
        cwd: "/w/a",
        project: "a",
        title_template: ::threads::DEFAULT_TITLE,
    };
    let newer = store.write(|tx| lease::acquire(tx, 2, 5)).unwrap();
    let fenced = store
        .write(|tx| events::bind_here(tx, &who, CHAT, 50, epoch, 6))
        .unwrap();
    assert!(fenced.is_none(), "an old epoch binds nothing");
    let b = store
        .write(|tx| events::bind_here(tx, &who, CHAT, 50, newer, 6))
        .unwrap()
        .unwrap();
    assert_eq!((b.slot.as_str(), b.title.as_str()), ("B", "B · a"));
    let again = store
        .write(|tx| events::bind_here(tx, &who, CHAT, 51, newer, 7))
        .unwrap();
    assert!(again.is_none(), "it has a binding now");
}
