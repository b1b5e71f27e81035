//! getUpdates: long-poll wake-up, offsets, limit, allowed_updates, 409 conflicts, webhooks.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::Harness;
use serde_json::json;

fn ids(v: &serde_json::Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|u| u["update_id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn long_poll_returns_as_soon_as_an_update_arrives() {
    let h = Harness::start().await;
    let started = Instant::now();
    let poll = h.call("getUpdates", json!({ "timeout": 30 }));
    let send = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        h.person_says("wake up");
    };
    let (answer, ()) = tokio::join!(poll, send);
    let waited = started.elapsed();
    assert_eq!(answer.result()[0]["message"]["text"], json!("wake up"));
    // It waited for the update (not a short poll) and woke long before the 30 s timeout.
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[tokio::test]
async fn long_poll_without_updates_waits_for_the_timeout_and_returns_empty() {
    let h = Harness::start().await;
    let started = Instant::now();
    let answer = h.call("getUpdates", json!({ "timeout": 1 })).await;
    assert_eq!(answer.result(), &json!([]));
    assert!(started.elapsed() >= Duration::from_millis(900));
    // timeout 0 is a short poll
    let started = Instant::now();
    assert_eq!(
        h.call("getUpdates", json!({ "timeout": 0 })).await.result(),
        &json!([])
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn offset_confirms_earlier_updates_and_unconfirmed_ones_come_again() {
    let h = Harness::start().await;
    let a = h.person_says("one").update_id.unwrap();
    let b = h.person_says("two").update_id.unwrap();
    let c = h.person_says("three").update_id.unwrap();
    assert_eq!((b, c), (a + 1, a + 2));
    // Without an offset the same unconfirmed updates come back every time.
    assert_eq!(
        ids(h.call("getUpdates", json!({})).await.result()),
        vec![a, b, c]
    );
    assert_eq!(
        ids(h.call("getUpdates", json!({})).await.result()),
        vec![a, b, c]
    );
    // limit
    assert_eq!(
        ids(h.call("getUpdates", json!({ "limit": 2 })).await.result()),
        vec![a, b]
    );
    // offset confirms everything below it, for good
    assert_eq!(
        ids(h.call("getUpdates", json!({ "offset": b })).await.result()),
        vec![b, c]
    );
    assert_eq!(
        ids(h.call("getUpdates", json!({})).await.result()),
        vec![b, c]
    );
    // negative offset keeps only the last -offset updates
    assert_eq!(
        ids(h.call("getUpdates", json!({ "offset": -1 })).await.result()),
        vec![c]
    );
    assert_eq!(
        ids(h
            .call("getUpdates", json!({ "offset": c + 1 }))
            .await
            .result()),
        Vec::<i64>::new()
    );
    // Parameters work the same as query string, urlencoded body and GET.
    let d = h.person_says("four").update_id.unwrap();
    let form = h
        .call_form("getUpdates", &[("offset", &d.to_string()), ("limit", "5")])
        .await;
    assert_eq!(ids(form.result()), vec![d]);
    let get = h
        .call_get("getUpdates", &[("offset", &d.to_string())])
        .await;
    assert_eq!(ids(get.result()), vec![d]);
}

#[tokio::test]
async fn allowed_updates_persists_between_calls_and_filters_new_updates() {
    let h = Harness::start().await;
    // By default reactions are not delivered.
    let sent = h.person_says("react to me");
    let none = h.fake.control().react(tg_fake::control::React {
        message_id: sent.message_id,
        emoji: Some("👍".into()),
        user_id: None,
        token: None,
    });
    assert_eq!(none.unwrap(), None);
    let first = h
        .call(
            "getUpdates",
            json!({ "allowed_updates": ["message", "message_reaction"] }),
        )
        .await;
    assert_eq!(first.result().as_array().unwrap().len(), 1);
    let offset = first.result()[0]["update_id"].as_i64().unwrap() + 1;
    // The setting persists: a later call without allowed_updates still gets reactions.
    let reaction = h
        .fake
        .control()
        .react(tg_fake::control::React {
            message_id: sent.message_id,
            emoji: Some("🔥".into()),
            user_id: None,
            token: None,
        })
        .unwrap();
    assert!(reaction.is_some());
    let next = h.call("getUpdates", json!({ "offset": offset })).await;
    let r = &next.result()[0]["message_reaction"];
    assert_eq!(
        r["new_reaction"],
        json!([{ "type": "emoji", "emoji": "🔥" }])
    );
    assert_eq!(
        r["old_reaction"],
        json!([{ "type": "emoji", "emoji": "👍" }])
    );
    // Narrowing it stops messages from being created as updates at all.
    let offset = next.result()[0]["update_id"].as_i64().unwrap() + 1;
    h.call(
        "getUpdates",
        json!({ "offset": offset, "allowed_updates": ["callback_query"] }),
    )
    .await;
    assert_eq!(h.person_says("ignored").update_id, None);
    assert_eq!(h.call("getUpdates", json!({})).await.result(), &json!([]));
}

#[tokio::test]
async fn a_second_poller_terminates_the_first_with_409() {
    let h = Harness::start().await;
    let older = h.call("getUpdates", json!({ "timeout": 20 }));
    let newer = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        h.call("getUpdates", json!({ "timeout": 1 })).await
    };
    let (older, newer) = tokio::join!(older, newer);
    older.expect_error(
        409,
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    );
    assert_eq!(newer.result(), &json!([]));
}

#[tokio::test]
async fn webhook_excludes_polling_until_deleted_and_can_drop_pending_updates() {
    let h = Harness::start().await;
    h.person_says("pending");
    assert!(
        h.call(
            "setWebhook",
            json!({ "url": "https://example.invalid/hook" })
        )
        .await
        .ok()
    );
    let info = h.call("getWebhookInfo", json!({})).await;
    assert_eq!(info.result()["url"], json!("https://example.invalid/hook"));
    assert_eq!(info.result()["pending_update_count"], json!(1));
    h.call("getUpdates", json!({})).await.expect_error(
        409,
        "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
    );
    assert!(
        h.call("deleteWebhook", json!({ "drop_pending_updates": true }))
            .await
            .ok()
    );
    assert_eq!(h.call("getUpdates", json!({})).await.result(), &json!([]));
    assert_eq!(
        h.call("getWebhookInfo", json!({})).await.result()["url"],
        json!("")
    );
}

#[tokio::test]
async fn a_refused_set_webhook_changes_nothing() {
    let h = Harness::start().await;
    h.person_says("pending");
    h.call(
        "setWebhook",
        json!({ "url": "http://example.invalid/hook", "drop_pending_updates": true }),
    )
    .await
    .expect_error(
        400,
        "Bad Request: bad webhook: An HTTPS URL must be provided for webhook",
    );
    let updates = h.call("getUpdates", json!({})).await;
    assert_eq!(
        updates.result().as_array().map(Vec::len),
        Some(1),
        "the pending update is still there"
    );
}

#[tokio::test]
async fn a_reset_ends_a_waiting_long_poll_with_a_conflict() {
    let h = Harness::start().await;
    let poll = h.call("getUpdates", json!({ "timeout": 5 }));
    let reset = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        h.fake.control().reset();
    };
    let started = std::time::Instant::now();
    let (poll, ()) = tokio::join!(poll, reset);
    poll.expect_error(
        409,
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "it ended at the reset"
    );
}

#[tokio::test]
async fn several_people_and_bots_are_separate() {
    let h = Harness::with(tg_fake::FakeConfig {
        tokens: vec!["1000:fake-token".into(), "2000:other-token".into()],
        ..Default::default()
    })
    .await;
    let stranger = h
        .fake
        .control()
        .send_text(tg_fake::control::SendText {
            text: "hello from a stranger".into(),
            user_id: Some(5555),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(stranger.chat_id, 5555);
    assert_eq!(stranger.message_id, 1, "message ids are per chat");
    let other = h
        .fake
        .control()
        .send_text(tg_fake::control::SendText {
            text: "to the second bot".into(),
            token: Some("2000:other-token".into()),
            ..Default::default()
        })
        .unwrap();
    let first_bot = h.call("getUpdates", json!({})).await;
    assert_eq!(first_bot.result().as_array().unwrap().len(), 1);
    assert_eq!(
        first_bot.result()[0]["message"]["from"]["first_name"],
        json!("User 5555")
    );
    let url = h.fake.method_url("2000:other-token", "getUpdates");
    let second: serde_json::Value = h
        .http
        .post(url)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        second["result"][0]["update_id"],
        json!(other.update_id.unwrap())
    );
    assert_eq!(
        second["result"][0]["message"]["text"],
        json!("to the second bot")
    );
    // The bot can answer the stranger in their own chat.
    let ans = h
        .call(
            "sendMessage",
            json!({ "chat_id": 5555, "text": "hi stranger" }),
        )
        .await;
    assert_eq!(ans.result()["chat"]["id"], json!(5555));
}
