//! Strangers cannot slow the owner down: a flood of button taps from people who are not the
//! owner (tg-fake lets anyone press anything, as a modified client can) gets a few answers,
//! reaches no pi, and never holds the owner's messages back. Read from tg-fake's request log:
//! counts and order, no timings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};

use common::{OWNER, TestHub, eventually};
use serde_json::{Value, json};
use tg_fake::FakeConfig;
use tg_fake::control::Press;
use tg_fake::log::RequestEntry;

const STRANGERS: i64 = 40;
const TAPS: i64 = 1000;

fn requests(hub: &TestHub) -> Vec<RequestEntry> {
    hub.fake.control().requests(0, None)
}

fn is_answer(r: &RequestEntry) -> bool {
    r.method == "answerCallbackQuery"
}

/// A message send's words (an answer goes out rich).
fn words(r: &RequestEntry) -> Option<&str> {
    matches!(r.method.as_str(), "sendMessage" | "sendRichMessage")
        .then(|| {
            r.params
                .get("text")
                .or_else(|| r.params.pointer("/rich_message/markdown"))
                .and_then(Value::as_str)
        })
        .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_strangers_taps_neither_reach_pi_nor_hold_the_owner_back() {
    let hub = TestHub::start().await;
    let mut pi = hub.shim("/work/proj", 4100).await;
    // 1,000 taps from 40 strangers, on a message of the owner's and on one that never was.
    let mut presser = HashMap::new();
    for n in 0..TAPS {
        let user = 7000 + n % STRANGERS;
        let pressed = hub
            .fake
            .control()
            .forge_press(Press {
                message_id: 1 + n % 3,
                data: format!("junk{n}"),
                user_id: Some(user),
                token: None,
                chat_id: None,
            })
            .unwrap();
        presser.insert(pressed.callback_query_id, user);
    }
    // Then the owner writes: the prompt is the only one pi gets (the worker handles updates in
    // order, so every tap was handled when it comes).
    hub.say("are you there?");
    let prompt = pi.recv_type("prompt").await;
    assert_eq!(prompt["text"], "are you there?");
    pi.answer(&prompt, "right here").await;
    hub.wait_for_bot("the owner's answer", |m| {
        m.iter().any(|(_, t, _)| t == "right here")
    })
    .await;

    // The answer went out ahead of (nearly) every stranger's answer: at most one per
    // stranger, and at most `STRANGERS_ANSWERED_MAX` strangers a minute.
    let most = hub::state::STRANGERS_ANSWERED_MAX;
    let log = requests(&hub);
    let answer_at = log
        .iter()
        .position(|r| words(r) == Some("right here"))
        .expect("the answer's send");
    let before = log[..answer_at].iter().filter(|r| is_answer(r)).count();
    assert!(
        before <= most,
        "{before} strangers' tap answers went out before the owner's answer"
    );
    // Every stranger answer that may still come is queued already: wait until they are out.
    eventually("the strangers' answers", || {
        let n = requests(&hub).iter().filter(|r| is_answer(r)).count();
        (n == most).then_some(())
    })
    .await;
    let answered: Vec<i64> = requests(&hub)
        .iter()
        .filter(|r| is_answer(r))
        .map(|r| {
            let id = r.params["callback_query_id"].as_str().unwrap();
            presser[id]
        })
        .collect();
    let distinct: HashSet<_> = answered.iter().collect();
    assert_eq!(
        (answered.len(), distinct.len()),
        (most, most),
        "one answer per stranger, {most} strangers: {answered:?}"
    );
    // No other prompt reached pi, and the strangers' chats heard nothing but those answers.
    hub.say("still there?");
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], "still there?");
    for user in 7000..7000 + STRANGERS {
        let said = hub
            .fake
            .control()
            .transcript(Some(user), tg_fake::control::ThreadFilter::All, None)
            .unwrap_or_default();
        assert!(
            said.iter().all(|m| !m.from_bot),
            "the bot wrote to stranger {user}"
        );
    }
}

/// Strangers' answers already queued go after the owner's messages, whatever their age: the
/// sender picks the owner's row first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_strangers_answers_go_after_the_owners_message() {
    let mut hub = TestHub::prepare(FakeConfig::default(), json!({})).await;
    hub.launch().await;
    hub.stop().await;
    let store = store::Store::open(&hub.paths.state_db()).unwrap();
    store
        .write(|tx| {
            for n in 0..50 {
                hub::outgoing::outbound::answer_stranger_tap(
                    tx,
                    &format!("q{n}"),
                    7000 + n,
                    "This button is no longer active.",
                    None,
                    1,
                )?;
            }
            hub::outgoing::outbound::text(
                tx,
                &hub::outgoing::outbound::Text {
                    chat: OWNER,
                    thread: None,
                    text: "for the owner",
                    reply_to: None,
                    markup: None,
                    purpose: &store::outbox::Purpose::ReplyControl,
                    source_update_id: None,
                    resend: false,
                },
                2,
            )?;
            Ok::<(), store::StoreError>(())
        })
        .unwrap();
    drop(store);
    hub.launch().await;
    eventually("every queued row sent", || {
        let log = requests(&hub);
        (log.iter().filter(|r| is_answer(r)).count() == 50).then_some(log)
    })
    .await;
    let log = requests(&hub);
    let owner_at = log
        .iter()
        .position(|r| words(r) == Some("for the owner"))
        .expect("the owner's message");
    let before = log[..owner_at].iter().filter(|r| is_answer(r)).count();
    assert_eq!(
        before, 0,
        "strangers' answers went out before the owner's message"
    );
    hub.stop().await;
}
