//! After `/abort` of a Telegram turn (the reference's folding, `hub::state::Fold`), with a
//! scripted fake of the extension: the prompts that waited behind the aborted turn wait on,
//! and go to pi with the person's next message, before its words; unless the turn was over
//! before the abort reached pi, or the person sends `/next`, or pi runs work of its own.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Shim, TestHub};
use serde_json::{Value, json};

/// A hub, an instance, and a turn it works on with `behind` waiting after it.
async fn aborting(behind: &[&str]) -> (TestHub, Shim, Value) {
    let hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    hub.say("long job");
    let running = pi.recv_type("prompt").await;
    pi.start(&running).await;
    for text in behind {
        hub.say(text);
    }
    hub.say("/abort");
    pi.recv_type("abort").await;
    (hub, pi, running)
}

/// pi ends `prompt`'s turn, cut short (`aborted`) or not.
async fn end(pi: &mut Shim, prompt: &Value, aborted: bool) {
    let turn = prompt["turn_id"].clone();
    pi.send(&json!({ "type": "event", "turn_id": turn,
        "event": { "type": "agent_settled", "aborted": aborted } }))
        .await;
    pi.send(
        &json!({ "type": "turn_done", "turn_id": turn, "text": "so far",
        "aborted": aborted, "error": null }),
    )
    .await;
}

/// No prompt reaches pi for a while.
async fn no_prompt(pi: &mut Shim) {
    let early = tokio::time::timeout(Duration::from_millis(700), pi.recv_type("prompt")).await;
    assert!(early.is_err(), "a prompt went to pi: {early:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_waited_behind_an_aborted_turn_goes_with_the_next_message() {
    let (mut hub, mut pi, running) = aborting(&["second", "third"]).await;
    hub.wait_for_bot("the abort reply", |m| {
        m.iter().any(|(_, t, _)| {
            t.ends_with("2 waiting message(s) go to pi with your next message, as said before it (/next runs them one by one instead).")
        })
    })
    .await;
    end(&mut pi, &running, true).await;
    no_prompt(&mut pi).await;
    hub.say("fourth");
    let folded = pi.recv_type("prompt").await;
    assert_eq!(
        folded["text"],
        json!(hub::outgoing::texts::folded_prompt(
            &["second".into(), "third".into()],
            "fourth"
        ))
    );
    pi.answer(&folded, "all three").await;
    // Once taken along, the queue is as ever: the next message is its own prompt.
    hub.say("fifth");
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("fifth"));
    pi.answer(&next, "five").await;
    hub.wait_for_bot("the last answer", |m| m.iter().any(|(_, t, _)| t == "five"))
        .await;
    hub.stop().await;
    let st = hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap();
    // long job, fourth, fifth done; second and third folded (cancelled, never prompted).
    assert_eq!(st.turns["done"], 3, "{:?}", st.turns);
    assert_eq!(st.turns["cancelled"], 2, "{:?}", st.turns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_over_before_the_abort_reached_pi_leaves_the_queue_running() {
    let (mut hub, mut pi, running) = aborting(&["second"]).await;
    // pi finished anyway: nothing was aborted.
    end(&mut pi, &running, false).await;
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("second"));
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_runs_what_waited_one_by_one() {
    let (mut hub, mut pi, running) = aborting(&["second", "third"]).await;
    end(&mut pi, &running, true).await;
    no_prompt(&mut pi).await;
    hub.say("/next");
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("second"));
    pi.answer(&next, "two").await;
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("third"));
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_of_pis_own_lets_the_queue_run_after_it() {
    let (mut hub, mut pi, running) = aborting(&["second"]).await;
    end(&mut pi, &running, true).await;
    no_prompt(&mut pi).await;
    // A run typed in pi's terminal: no Telegram turn.
    for event in [
        json!({ "type": "agent_start" }),
        json!({ "type": "agent_settled", "aborted": false }),
    ] {
        pi.send(&json!({ "type": "event", "turn_id": null, "event": event }))
            .await;
    }
    let next = pi.recv_type("prompt").await;
    assert_eq!(next["text"], json!("second"));
    hub.stop().await;
}
