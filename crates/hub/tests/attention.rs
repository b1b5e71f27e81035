//! What buzzes (`notifications`), questions pinned while they wait, and the reactions that show
//! a person's message's fate (`assistant.reactions`): the real hub against tg-fake, read from
//! tg-fake's request log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{OWNER, Shim, TestHub, eventually};
use serde_json::{Value, json};
use tg_fake::FakeConfig;
use tg_fake::control::{Press, SendText, ThreadFilter, TranscriptEntry};
use tg_fake::log::RequestEntry;

fn sends(hub: &TestHub) -> Vec<RequestEntry> {
    hub.fake
        .control()
        .requests(0, None)
        .into_iter()
        .filter(|r| r.method == "sendMessage" || r.method == "sendRichMessage")
        .filter(|r| r.status == Some(200))
        .collect()
}

fn words(r: &RequestEntry) -> String {
    r.params
        .get("text")
        .or_else(|| r.params.pointer("/rich_message/markdown"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn silent(r: &RequestEntry) -> bool {
    r.params.get("disable_notification") == Some(&json!(true))
}

fn transcript(hub: &TestHub) -> Vec<TranscriptEntry> {
    hub.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
}

/// A turn with thinking, commentary and a tool before its answer `answer`.
async fn tool_turn(pi: &mut Shim, prompt: &Value, answer: &str) {
    pi.start(prompt).await;
    let turn = prompt["turn_id"].clone();
    pi.send(
        &json!({ "type": "event", "turn_id": turn, "event": { "type": "message_end",
        "message": { "role": "assistant", "content": [
            { "type": "thinking", "thinking": "which file holds it?" },
            { "type": "text", "text": "Let me look at the file." },
            { "type": "toolCall", "id": "c1", "name": "read", "arguments": { "path": "a.txt" } }],
            "stopReason": "toolUse", "timestamp": 1 } } }),
    )
    .await;
    pi.send(
        &json!({ "type": "event", "turn_id": turn, "event": { "type": "tool_execution_start",
        "toolCallId": "c1", "toolName": "read", "args": { "path": "a.txt" } } }),
    )
    .await;
    pi.send(
        &json!({ "type": "event", "turn_id": turn, "event": { "type": "tool_execution_end",
        "toolCallId": "c1", "toolName": "read", "result": { "content": [] }, "isError": false } }),
    )
    .await;
    pi.send(
        &json!({ "type": "event", "turn_id": turn, "event": { "type": "message_end",
        "message": { "role": "assistant", "content": [{ "type": "text", "text": answer }],
            "stopReason": "stop", "timestamp": 2 } } }),
    )
    .await;
    pi.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_settled", "aborted": false } })).await;
    pi.send(&json!({ "type": "turn_done", "turn_id": turn, "text": answer, "aborted": false, "error": null })).await;
}

/// A tool turn under `extra` settings: every message send, answered or not, once the answer
/// arrived.
async fn a_tool_turn_with(extra: Value) -> (TestHub, Vec<RequestEntry>) {
    let mut hub = TestHub::prepare(FakeConfig::default(), extra).await;
    hub.launch().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    hub.say("what is in a.txt?");
    let prompt = pi.recv_type("prompt").await;
    tool_turn(&mut pi, &prompt, "It says hello.").await;
    let all = eventually("the answer", || {
        let s = sends(&hub);
        s.iter()
            .any(|r| words(r).contains("It says hello"))
            .then_some(s)
    })
    .await;
    (hub, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_tool_turn_only_the_answer_buzzes() {
    let (mut hub, all) = a_tool_turn_with(json!({})).await;
    let (answer, rest): (Vec<_>, Vec<_>) =
        all.iter().partition(|r| words(r).contains("It says hello"));
    assert_eq!(answer.len(), 1, "{all:#?}");
    assert!(
        !silent(answer[0]),
        "the answer notifies: {:?}",
        answer[0].params
    );
    // The notice, the thinking, the commentary and the tool: each sent, each silent.
    for needle in [
        "pi connected",
        "which file holds it",
        "Let me look",
        "🔧 Read",
    ] {
        assert!(
            rest.iter().any(|r| words(r).contains(needle)),
            "{needle:?} was sent: {all:#?}"
        );
    }
    for r in &rest {
        assert!(silent(r), "{:?} is silent", words(r));
    }
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_all_and_answers() {
    let (mut hub, all) = a_tool_turn_with(json!({ "notifications": "all" })).await;
    assert!(all.iter().all(|r| !silent(r)), "all: nothing silent");
    hub.stop().await;
    let (mut hub, all) = a_tool_turn_with(json!({ "notifications": "answers" })).await;
    for r in &all {
        assert_eq!(
            silent(r),
            !words(r).contains("It says hello"),
            "answers: {:?}",
            words(r)
        );
    }
    hub.stop().await;
}

/// The emoji of every `setMessageReaction` on message `message`, in order.
fn reactions_on(hub: &TestHub, message: i64) -> Vec<String> {
    hub.fake
        .control()
        .requests(0, Some("setMessageReaction"))
        .into_iter()
        .filter(|r| r.params["message_id"].as_i64() == Some(message))
        .filter_map(|r| {
            r.params
                .pointer("/reaction/0/emoji")?
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_shows_its_fate() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    let first = hub.say("first");
    let p1 = pi.recv_type("prompt").await;
    pi.start(&p1).await;
    eventually("first running", || {
        (reactions_on(&hub, first.message_id) == ["✍"]).then_some(())
    })
    .await;
    // pi is busy: the second waits, the third is skipped by the person's 👎 (their own
    // reaction, which the bot's never reads as).
    let second = hub.say("second");
    let third = hub.say("third");
    eventually("second and third queued", || {
        (reactions_on(&hub, second.message_id) == ["👀"]
            && reactions_on(&hub, third.message_id) == ["👀"])
        .then_some(())
    })
    .await;
    hub.fake
        .control()
        .react(tg_fake::control::React {
            message_id: third.message_id,
            emoji: Some("👎".into()),
            user_id: None,
            token: None,
        })
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    pi.answer(&p1, "one").await;
    let p2 = pi.recv_type("prompt").await;
    assert_eq!(
        p2["text"],
        json!("second"),
        "the skipped third never reaches pi"
    );
    pi.answer(&p2, "two").await;
    eventually("the fates", || {
        (reactions_on(&hub, first.message_id) == ["✍", "👌"]
            && reactions_on(&hub, second.message_id)
                .last()
                .map(String::as_str)
                == Some("👌")
            && reactions_on(&hub, third.message_id)
                .last()
                .map(String::as_str)
                == Some("🙈"))
        .then_some(())
    })
    .await;
    // The bot's reactions are its own: the person's stay as they set them.
    let seen = transcript(&hub);
    let m3 = seen
        .iter()
        .find(|m| m.message_id == third.message_id)
        .unwrap();
    assert_eq!(m3.bot_reactions[0]["emoji"], json!("🙈"));
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_off_sets_none() {
    let mut hub = TestHub::prepare(
        FakeConfig::default(),
        json!({ "assistant": { "reactions": false } }),
    )
    .await;
    hub.launch().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("hi");
    let p = pi.recv_type("prompt").await;
    pi.answer(&p, "hello").await;
    hub.wait_for_bot("the answer", |m| m.iter().any(|(_, t, _)| t == "hello"))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        hub.fake
            .control()
            .requests(0, Some("setMessageReaction"))
            .is_empty()
    );
    hub.stop().await;
}

/// The newest bot message with a button labelled `label`: (message id, callback data).
async fn button(hub: &TestHub, label: &str) -> (i64, String) {
    eventually(&format!("a button {label:?}"), || {
        transcript(hub).into_iter().rev().find_map(|m| {
            let rows = m
                .reply_markup
                .as_ref()?
                .get("inline_keyboard")?
                .as_array()?
                .clone();
            rows.iter()
                .flat_map(|r| r.as_array().cloned().unwrap_or_default())
                .find(|b| b["text"] == json!(label))
                .and_then(|b| b["callback_data"].as_str().map(str::to_owned))
                .map(|d| (m.message_id, d))
        })
    })
    .await
}

fn pinned(hub: &TestHub, message: i64) -> bool {
    transcript(hub)
        .iter()
        .any(|m| m.message_id == message && m.pinned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chooser_is_pinned_until_it_is_settled() {
    let mut hub = TestHub::threaded().await;
    let mut web = hub.shim("/work/web", 4101).await;
    let _api = hub.shim("/work/api", 4102).await;
    eventually("two topics", || {
        (hub.fake.control().topics(Some(OWNER), None).ok()?.len() >= 2).then_some(())
    })
    .await;
    hub.fake
        .control()
        .send_text(SendText {
            text: "run the tests".into(),
            ..Default::default()
        })
        .unwrap();
    let (chooser, data) = button(&hub, "Send to web").await;
    eventually("the chooser pinned", || pinned(&hub, chooser).then_some(())).await;
    let pin = hub.fake.control().requests(0, Some("pinChatMessage"));
    assert_eq!(pin.len(), 1);
    assert_eq!(pin[0].params["disable_notification"], json!(true));
    let asked = sends(&hub)
        .into_iter()
        .find(|r| words(r).contains("run the tests") || r.params.get("reply_markup").is_some())
        .unwrap();
    assert!(!silent(&asked), "the question notifies");
    hub.fake
        .control()
        .press(Press {
            message_id: chooser,
            data,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    let prompt = web.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("run the tests"));
    eventually("the chooser unpinned", || {
        (!pinned(&hub, chooser)).then_some(())
    })
    .await;
    let unpin = hub.fake.control().requests(0, Some("unpinChatMessage"));
    assert_eq!(unpin.len(), 1);
    assert_eq!(unpin[0].params["message_id"], json!(chooser));
    hub.stop().await;
}
