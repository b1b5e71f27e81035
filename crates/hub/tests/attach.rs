//! `telegram_attach` against the end of its turn, with the scripted extension: files recorded
//! for a turn go with its answer while it is open; once its answer is queued they go at once,
//! in its place, after that answer. Whatever the order in which
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
