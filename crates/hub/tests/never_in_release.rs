//! A broken invariant in a release build: the hub goes on, and the incident is recorded for
//! `status` and `doctor`. Its own test binary, since whether `never!` panics is the process's.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use hub::db::Db;

#[tokio::test]
async fn a_broken_invariant_is_logged_and_recorded_and_the_hub_goes_on() {
    hub::never::panic_when_broken(false);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(Arc::new(
        store::Store::open(&dir.path().join("state.db")).unwrap(),
    ));
    let recorder = tokio::spawn(hub::never::record_incidents(db.clone()));
    // Let the recorder install itself before anything breaks.
    tokio::task::yield_now().await;
    let mut seen = Vec::new();
    for _ in 0..200 {
        assert!(hub::never!(seen.is_empty(), "turn {} dispatched twice", 41));
        seen = db.read(|c| store::incidents::recent(c, 10)).await.unwrap();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let incident = seen.first().expect("no incident recorded");
    assert_eq!(incident.context, "invariant");
    assert!(
        incident.message.contains("never_in_release.rs")
            && incident.message.ends_with("turn 41 dispatched twice"),
        "{}",
        incident.message
    );
    recorder.abort();
}
