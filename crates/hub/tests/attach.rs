//! `telegram_attach` against the end of its turn, with the scripted extension: files recorded
//! for a turn go with its answer while it is open; once its answer is queued (or it was
//! interrupted) they go at once, in its place, after that answer. Whatever the order in which
//! the call and the turn's end reach the hub, every file arrives and the model was told the
//! truth.
#![allow(clippy::unwrap_used)]

mod common;

use common::{OWNER, Shim, TestHub};
use serde_json::{Value, json};
use tg_fake::control::{ThreadFilter, TranscriptEntry};

/// The bot's messages in the owner's chat, in order.
fn bot_messages(hub: &TestHub) -> Vec<TranscriptEntry> {
    hub.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

fn file_name(m: &TranscriptEntry) -> Option<&str> {
    m.media.as_ref().and_then(|f| f.file_name.as_deref())
}

/// Where `name` stands among the bot's messages, once it has arrived.
async fn arrived(hub: &TestHub, name: &str) -> (usize, Vec<TranscriptEntry>) {
    common::eventually(&format!("{name} at Telegram"), || {
        let msgs = bot_messages(hub);
        let at = msgs.iter().position(|m| file_name(m) == Some(name))?;
        Some((at, msgs))
    })
    .await
}

fn position_of_text(msgs: &[TranscriptEntry], text: &str) -> usize {
    msgs.iter()
        .position(|m| m.text.as_deref() == Some(text))
        .unwrap_or_else(|| panic!("no message {text:?} in {msgs:#?}"))
}

/// A file of its own in the test's folder, by its absolute path.
fn file(hub: &TestHub, name: &str) -> String {
    let path = hub.dir.path().join(name);
    std::fs::write(&path, format!("contents of {name}")).unwrap();
    path.display().to_string()
}

fn attach(call: &str, turn: &Value, paths: &[String]) -> Value {
    json!({ "type": "tool_call", "id": call, "tool": "telegram_attach", "turn_id": turn,
            "args": { "paths": paths } })
}

/// The text the model gets for tool call `call`.
async fn tool_result(pi: &mut Shim, call: &str) -> String {
    let r = pi.recv_type("response").await;
    assert_eq!(r["id"], json!(call), "{r}");
    assert_eq!(r["ok"], json!(true), "the call failed: {r}");
    r["data"]["text"].as_str().unwrap().to_owned()
}

/// A turn answered, the next one under way, and then a call for the first: the decision is
/// the one the race of a call with its turn's end needs (the turn's answer was queued before
/// the files could wait for it), made here in a fixed order. The files go now, after the first
/// answer, not with the second turn's answer (which may never come).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_for_a_turn_already_answered_follows_that_answer_at_once() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    let first = hub.say("first");
    let p1 = pi.recv_type("prompt").await;
    pi.answer(&p1, "the first answer").await;
    pi.recv_type("done_ack").await;
    hub.say("second");
    let p2 = pi.recv_type("prompt").await;
    pi.start(&p2).await;
    let path = file(&hub, "late.txt");
    pi.send(&attach("c1", &p1["turn_id"], &[path])).await;
    let told = tool_result(&mut pi, "c1").await;
    assert!(
        told.starts_with("Sent to Telegram after your answer"),
        "the model is told where its file went: {told}"
    );
    let (at, msgs) = arrived(&hub, "late.txt").await;
    let answer = &msgs[position_of_text(&msgs, "the first answer")];
    assert!(
        position_of_text(&msgs, "the first answer") < at,
        "after the answer of its turn: {msgs:#?}"
    );
    assert_eq!(answer.reply_to_message_id, Some(first.message_id));
    assert_eq!(
        (msgs[at].thread_id, msgs[at].reply_to_message_id),
        (answer.thread_id, None),
        "in the answer's place, after it (as files with an answer go)"
    );
    assert!(
        !msgs
            .iter()
            .any(|m| m.text.as_deref() == Some("the second answer")),
        "the second turn is still open"
    );
    pi.answer(&p2, "the second answer").await;
    hub.wait_for_bot("the second answer", |m| {
        m.iter().any(|(_, t, _)| t == "the second answer")
    })
    .await;
    let copies = bot_messages(&hub)
        .iter()
        .filter(|m| file_name(m) == Some("late.txt"))
        .count();
    assert_eq!(copies, 1, "sent once");
    hub.stop().await;
}

/// The race as it happens: pi calls the tool with many files, and the turn ends (an abort: the
/// extension stops waiting for the call, pi ends the run) while the hub is still copying them.
/// The answer is queued first and has taken the files waiting then; these are sent as soon as
/// their copies are made, after the answer, and the model is told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_still_being_copied_when_their_turn_ends_are_sent_after_the_answer() {
    const FILES: usize = 100;
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("the numbers, please");
    let p = pi.recv_type("prompt").await;
    pi.start(&p).await;
    // Copied one after the other: the last copy is made well after the first.
    let paths: Vec<String> = (0..FILES)
        .map(|n| {
            let path = hub.dir.path().join(format!("part-{n}.bin"));
            std::fs::write(&path, vec![7u8; 256 << 10]).unwrap();
            path.display().to_string()
        })
        .collect();
    let turn = p["turn_id"].clone();
    pi.send(&attach("c1", &turn, &paths)).await;
    // The turn ends once the copies have begun.
    let copies = hub.dir.path().join("tmp/telegram/default/out");
    common::eventually("the copies under way", || {
        std::fs::read_dir(&copies).ok()?.next().map(drop)
    })
    .await;
    pi.send(
        &json!({ "type": "turn_done", "turn_id": turn, "text": "the answer",
                     "aborted": false, "error": null }),
    )
    .await;
    let told = tool_result(&mut pi, "c1").await;
    assert!(
        told.starts_with("Sent to Telegram after your answer")
            || told.starts_with("Will be sent to Telegram right after your answer"),
        "{told}"
    );
    for n in 0..FILES {
        let (at, msgs) = arrived(&hub, &format!("part-{n}.bin")).await;
        assert!(
            position_of_text(&msgs, "the answer") < at,
            "part {n} after the answer: {msgs:#?}"
        );
    }
    hub.stop().await;
}

/// A run typed in pi (the call's `turn_id` is `null`) while a Telegram turn waits in pi's
/// queue: its files are that run's, sent now, not held for the waiting turn's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_a_run_typed_in_pi_is_sent_now() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("later, please");
    let p = pi.recv_type("prompt").await;
    pi.send(&json!({ "type": "ack", "turn_id": p["turn_id"], "disposition": "queued" }))
        .await;
    let path = file(&hub, "local.txt");
    pi.send(&attach("c1", &Value::Null, &[path])).await;
    let told = tool_result(&mut pi, "c1").await;
    assert!(told.starts_with("Sent to Telegram: local.txt"), "{told}");
    arrived(&hub, "local.txt").await;
    pi.answer(&p, "the answer").await;
    hub.wait_for_bot("the answer", |m| {
        m.iter().any(|(_, t, _)| t == "the answer")
    })
    .await;
    let copies = bot_messages(&hub)
        .iter()
        .filter(|m| file_name(m) == Some("local.txt"))
        .count();
    assert_eq!(copies, 1, "sent once, not again with the answer");
    hub.stop().await;
}

/// Files waiting for an answer that will not come (pi closed its session mid-turn) go when the
/// turn is interrupted, after the notice that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_an_interrupted_turn_are_sent() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("make a report");
    let p = pi.recv_type("prompt").await;
    pi.start(&p).await;
    let path = file(&hub, "report.txt");
    pi.send(&attach("c1", &p["turn_id"], &[path])).await;
    let told = tool_result(&mut pi, "c1").await;
    assert!(
        told.starts_with("Will be sent to Telegram right after your answer"),
        "{told}"
    );
    pi.send(&json!({ "type": "bye", "reason": "shutdown" }))
        .await;
    let (at, msgs) = arrived(&hub, "report.txt").await;
    let notice = msgs
        .iter()
        .position(|m| {
            m.text
                .as_deref()
                .is_some_and(|t| t.contains("make a report"))
        })
        .unwrap_or_else(|| panic!("no notice of the interrupted turn: {msgs:#?}"));
    assert!(notice < at, "{msgs:#?}");
    hub.stop().await;
}
