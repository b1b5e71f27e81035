//! The flood model through the API: per-chat and global budgets, refusal until the wait passes.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::json;
use tg_fake::{FakeConfig, FloodConfig};

fn flood_on() -> FakeConfig {
    FakeConfig {
        flood: FloodConfig {
            enabled: true,
            per_chat_per_sec: 1.0,
            per_chat_burst: 3,
            ..FloodConfig::default()
        },
        ..FakeConfig::default()
    }
}

#[tokio::test]
async fn per_chat_burst_then_429_until_the_wait_passes() {
    let h = Harness::with(flood_on()).await;
    let msg = json!({ "chat_id": h.chat(), "text": "x" });
    for _ in 0..3 {
        assert!(h.call("sendMessage", msg.clone()).await.ok());
    }
    let refused = h.call("sendMessage", msg.clone()).await;
    refused.expect_error(429, "Too Many Requests: retry after 1");
    assert_eq!(refused.body["parameters"]["retry_after"], json!(1));
    // Edits count against the same budget.
    let edit = h
        .call(
            "editMessageText",
            json!({ "chat_id": h.chat(), "message_id": 1, "text": "y" }),
        )
        .await;
    assert_eq!(edit.status, 429);
    // The control API shows the running wait.
    let bot = h.fake.control().bot(None).unwrap();
    assert_eq!(
        bot["flood_waits"],
        json!([{ "chat_id": h.chat(), "retry_after": 1 }])
    );
    // Not counted: reads and chat actions.
    assert!(h.call("getMe", json!({})).await.ok());
    assert!(
        h.call(
            "sendChatAction",
            json!({ "chat_id": h.chat(), "action": "typing" })
        )
        .await
        .ok()
    );
    h.fake.control().advance_clock(Duration::from_millis(1000));
    assert!(h.call("sendMessage", msg.clone()).await.ok());
    // One token per second after the burst.
    assert_eq!(h.call("sendMessage", msg.clone()).await.status, 429);
    h.fake.control().advance_clock(Duration::from_secs(1));
    assert!(h.call("sendMessage", msg).await.ok());
}

#[tokio::test]
async fn retries_during_the_wait_extend_it_when_configured() {
    let mut cfg = flood_on();
    cfg.flood.extend_on_retry_secs = 5;
    cfg.flood.per_chat_burst = 1;
    let h = Harness::with(cfg).await;
    let msg = json!({ "chat_id": h.chat(), "text": "x" });
    assert!(h.call("sendMessage", msg.clone()).await.ok());
    assert_eq!(
        h.call("sendMessage", msg.clone()).await.body["parameters"]["retry_after"],
        json!(1)
    );
    // A client that hammers during the wait makes it longer.
    assert_eq!(
        h.call("sendMessage", msg.clone()).await.body["parameters"]["retry_after"],
        json!(6)
    );
    h.fake.control().advance_clock(Duration::from_secs(6));
    assert!(h.call("sendMessage", msg).await.ok());
}

#[tokio::test]
async fn global_budget_spans_chats() {
    let mut cfg = flood_on();
    cfg.flood.global_burst = 4;
    cfg.flood.global_per_sec = 2.0;
    let h = Harness::with(cfg).await;
    for uid in [2001, 2002, 2003, 2004, 2005] {
        h.fake
            .control()
            .send_text(tg_fake::control::SendText {
                text: "hi".into(),
                user_id: Some(uid),
                ..Default::default()
            })
            .unwrap();
    }
    for uid in [2001, 2002, 2003, 2004] {
        assert!(
            h.call("sendMessage", json!({ "chat_id": uid, "text": "x" }))
                .await
                .ok()
        );
    }
    let refused = h
        .call("sendMessage", json!({ "chat_id": 2005, "text": "x" }))
        .await;
    refused.expect_error(429, "Too Many Requests: retry after 1");
    let bot = h.fake.control().bot(None).unwrap();
    assert_eq!(bot["flood_waits"][0]["chat_id"], json!(null));
    h.fake.control().advance_clock(Duration::from_secs(1));
    assert!(
        h.call("sendMessage", json!({ "chat_id": 2005, "text": "x" }))
            .await
            .ok()
    );
}

#[tokio::test]
async fn the_model_can_be_switched_on_at_runtime() {
    let h = Harness::start().await;
    let msg = json!({ "chat_id": h.chat(), "text": "x" });
    for _ in 0..10 {
        assert!(h.call("sendMessage", msg.clone()).await.ok());
    }
    h.fake
        .control()
        .settings(tg_fake::control::SettingsChange {
            flood: Some(FloodConfig {
                enabled: true,
                per_chat_burst: 1,
                ..FloodConfig::default()
            }),
            ..Default::default()
        })
        .unwrap();
    assert!(h.call("sendMessage", msg.clone()).await.ok());
    assert_eq!(h.call("sendMessage", msg).await.status, 429);
}
