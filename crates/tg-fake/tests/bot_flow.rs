//! Drives the fake with a plain HTTP client exactly as a bot would: poll, reply, edit, create a
//! topic, send into it; the person deletes it; the next send fails with thread not found.
#![allow(clippy::unwrap_used)]

mod common;

use common::Harness;
use serde_json::json;

#[tokio::test]
async fn a_bot_conversation_through_a_topic_that_the_person_deletes() {
    let h = Harness::start().await;
    h.enable_topics();
    let me = h.call("getMe", json!({})).await;
    assert_eq!(me.result()["has_topics_enabled"], json!(true));
    assert_eq!(me.result()["is_bot"], json!(true));

    // The person writes; the bot long-polls and sees it.
    h.person_says("/start");
    let updates = h.call("getUpdates", json!({ "timeout": 5 })).await;
    let list = updates.result().as_array().unwrap().clone();
    assert_eq!(list.len(), 1);
    let msg = &list[0]["message"];
    assert_eq!(msg["text"], json!("/start"));
    assert_eq!(msg["entities"][0]["type"], json!("bot_command"));
    let chat_id = msg["chat"]["id"].as_i64().unwrap();
    let offset = list[0]["update_id"].as_i64().unwrap() + 1;

    // Reply, then edit the reply.
    let sent = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat_id, "text": "<b>Hello</b> there", "parse_mode": "HTML",
                    "reply_parameters": { "message_id": msg["message_id"] } }),
        )
        .await;
    let sent = sent.result().clone();
    assert_eq!(sent["text"], json!("Hello there"));
    assert_eq!(
        sent["entities"],
        json!([{ "type": "bold", "offset": 0, "length": 5 }])
    );
    assert_eq!(sent["reply_to_message"]["message_id"], msg["message_id"]);
    let edited = h
        .call(
            "editMessageText",
            json!({ "chat_id": chat_id, "message_id": sent["message_id"], "text": "Hello again" }),
        )
        .await;
    assert_eq!(edited.result()["text"], json!("Hello again"));
    assert!(edited.result()["edit_date"].is_i64());

    // Create a topic and talk in it.
    let topic = h
        .call(
            "createForumTopic",
            json!({ "chat_id": chat_id, "name": "A · project" }),
        )
        .await;
    let thread = topic.result()["message_thread_id"].as_i64().unwrap();
    assert_eq!(topic.result()["name"], json!("A · project"));
    let in_topic = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat_id, "message_thread_id": thread, "text": "in the topic" }),
        )
        .await;
    assert_eq!(in_topic.result()["message_thread_id"], json!(thread));
    assert_eq!(in_topic.result()["is_topic_message"], json!(true));

    // The person answers in the topic; the bot sees the thread id and confirms the first update.
    h.person_says_in(thread, "thanks");
    let updates = h
        .call("getUpdates", json!({ "offset": offset, "timeout": 5 }))
        .await;
    let list = updates.result().as_array().unwrap().clone();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["message"]["message_thread_id"], json!(thread));
    assert_eq!(list[0]["message"]["text"], json!("thanks"));

    // The person deletes the topic in the Telegram UI; the next send fails.
    h.fake.control().delete_topic(thread, None, None).unwrap();
    let after = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat_id, "message_thread_id": thread, "text": "still there?" }),
        )
        .await;
    after.expect_error(400, "Bad Request: message thread not found");

    // What the person sees: the main-chat messages, the topic's messages marked deleted.
    let transcript = h
        .fake
        .control()
        .transcript(None, tg_fake::control::ThreadFilter::All, None)
        .unwrap();
    let in_thread: Vec<_> = transcript
        .iter()
        .filter(|m| m.thread_id == Some(thread))
        .collect();
    assert!(in_thread.iter().all(|m| m.deleted), "{in_thread:?}");
    assert!(
        transcript
            .iter()
            .any(|m| m.text.as_deref() == Some("Hello again") && m.edited && !m.deleted)
    );
    let topics = h.fake.control().topics(None, None).unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].state, tg_fake::world::TopicState::Deleted);
}
