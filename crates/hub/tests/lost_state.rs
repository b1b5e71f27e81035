//! A hub whose state lost its latest commits (a crash of its machine takes what the disk did
//! not have yet) while a pi of another machine lived on: that pi had a prompt the state now
//! reads as never sent. The hub must neither wait for good for an answer that will not come
//! (its queue stuck behind it) nor drop an answer pi still holds.
//!
//! The lost commits are made for real: the state database as it was before the dispatch is
//! copied aside with the hub stopped, the conversation goes on, and the copy is put back.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{Shim, TestHub, hello};
use serde_json::{Value, json};

const PID: i64 = 4242;

fn db_files(db: &Path) -> [PathBuf; 3] {
    let name = db.file_name().unwrap().to_str().unwrap().to_owned();
    let dir = db.parent().unwrap();
    [
        db.to_path_buf(),
        dir.join(format!("{name}-wal")),
        dir.join(format!("{name}-shm")),
    ]
}

/// Copies the (stopped) hub's database files into `to`.
fn save(db: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in db_files(db) {
        if f.exists() {
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
}

/// Puts the saved files back, as the disk is after the crash: what came after them is gone.
fn restore(db: &Path, from: &Path) {
    for f in db_files(db) {
        let _ = std::fs::remove_file(&f);
        let saved = from.join(f.file_name().unwrap());
        if saved.exists() {
            std::fs::copy(&saved, &f).unwrap();
        }
    }
}

/// A hello of the pi that lived on, naming what it had, and its welcome.
async fn reconnect(hub: &TestHub, received: Value, completed: Value, store: &str) -> Shim {
    let mut s = Shim::connect(&hub.paths).await;
    let mut h = hello(&hub.secret(), "/work/web", PID, received, completed);
    h["store_id"] = json!(store);
    s.send(&h).await;
    let w = s.recv_type("welcome").await;
    assert_eq!(w["store_id"], json!(store), "the same state: {w}");
    s
}

/// The hub had "one" queued (no pi yet) and saved; then dispatched and answered it; then lost
/// all of that. Returns the hub started on the lost state, and the store's id.
async fn a_hub_that_lost_a_dispatch() -> (TestHub, String) {
    let mut hub = TestHub::start().await;
    hub.say("one");
    common::eventually("the prompt journaled", || {
        hub.bot_messages()
            .iter()
            .any(|(_, t, _)| t.contains("No pi"))
            .then_some(())
    })
    .await;
    hub.stop().await;
    let before = hub.dir.path().join("before-the-crash");
    save(&hub.paths.state_db(), &before);

    hub.launch().await;
    let mut pi = Shim::connect(&hub.paths).await;
    pi.send(&hello(
        &hub.secret(),
        "/work/web",
        PID,
        json!([]),
        json!([]),
    ))
    .await;
    let w = pi.recv_type("welcome").await;
    let store = w["store_id"].as_str().unwrap().to_owned();
    let p = pi.recv_type("prompt").await;
    assert_eq!(p["turn_id"], json!("t1"));
    pi.answer(&p, "the answer to one").await;
    pi.recv_type("done_ack").await;
    hub.stop().await;
    drop(pi);

    restore(&hub.paths.state_db(), &before);
    hub.launch().await;
    (hub, store)
}

/// pi answered and forgot it (the hub had acknowledged): it says so, the person is told, and
/// the next message goes to pi as usual. Before: the hub waited for an answer for good, and
/// "two" never reached pi.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_pi_answered_before_the_state_was_lost_ends_told_and_the_queue_moves() {
    let (mut hub, store) = a_hub_that_lost_a_dispatch().await;
    let mut pi = reconnect(&hub, json!(["t1"]), json!([]), &store).await;
    let again = pi.recv_type("prompt").await;
    assert_eq!(
        again["turn_id"],
        json!("t1"),
        "the state reads it as never sent"
    );
    pi.send(&json!({ "type": "ack", "turn_id": "t1", "disposition": "finished" }))
        .await;
    hub.wait_for_bot("the notice that the answer was lost", |m| {
        m.iter()
            .any(|(_, t, _)| t.contains("had already answered \"one\""))
    })
    .await;
    hub.say("two");
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("two"), "{next}");
    pi.answer(&next, "the answer to two").await;
    hub.wait_for_bot("the next answer", |m| {
        m.iter().any(|(_, t, _)| t == "the answer to two")
    })
    .await;
    hub.stop().await;
}

/// pi still held the answer (the acknowledgement was lost on the way): it comes with the
/// hello, is delivered, and pi is not asked the same thing again. Before: the hub ignored the
/// answer as not its own, told pi to forget it, and sent the prompt again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_pi_still_holds_for_a_lost_dispatch_is_delivered_not_asked_again() {
    let (mut hub, store) = a_hub_that_lost_a_dispatch().await;
    let done = json!([{ "turn_id": "t1", "text": "kept by pi", "aborted": false, "error": null }]);
    let mut pi = reconnect(&hub, json!(["t1"]), done, &store).await;
    let ack = pi.recv_type("done_ack").await;
    assert_eq!(ack["turn_id"], json!("t1"));
    hub.wait_for_bot("the answer pi kept", |m| {
        m.iter().any(|(_, t, _)| t == "kept by pi")
    })
    .await;
    hub.say("two");
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("two"), "t1 was not sent again: {next}");
    hub.stop().await;
}

/// Turns of another state (the person started over: its ids begin again at t1) are not taken
/// for this state's: the answer is not delivered, the new t1 goes to pi.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turns_of_another_state_are_not_taken_for_this_ones() {
    let (mut hub, _store) = a_hub_that_lost_a_dispatch().await;
    let done =
        json!([{ "turn_id": "t1", "text": "from another state", "aborted": false, "error": null }]);
    let mut pi = reconnect_any(&hub, json!(["t1"]), done, "0000").await;
    let p = pi.recv_type("prompt").await;
    assert_eq!(p["turn_id"], json!("t1"), "{p}");
    assert!(
        !hub.bot_messages()
            .iter()
            .any(|(_, t, _)| t == "from another state")
    );
    hub.stop().await;
}

/// As [`reconnect`], for a hello naming a state that is not the hub's.
async fn reconnect_any(hub: &TestHub, received: Value, completed: Value, store: &str) -> Shim {
    let mut s = Shim::connect(&hub.paths).await;
    let mut h = hello(&hub.secret(), "/work/web", PID, received, completed);
    h["store_id"] = json!(store);
    s.send(&h).await;
    s.recv_type("welcome").await;
    s
}
