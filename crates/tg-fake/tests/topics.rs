//! Private-chat topics (Threaded Mode): the whole lifecycle from both sides.
#![allow(clippy::unwrap_used)]

mod common;

use common::Harness;
use serde_json::json;
use tg_fake::control::{NewTopic, ThreadFilter};
use tg_fake::world::TopicState;

#[tokio::test]
async fn topics_need_threaded_mode() {
    let h = Harness::start().await;
    assert_eq!(
        h.call("getMe", json!({})).await.result()["has_topics_enabled"],
        json!(false)
    );
    h.call(
        "createForumTopic",
        json!({ "chat_id": h.chat(), "name": "x" }),
    )
    .await
    .expect_error(400, "Bad Request: the chat is not a forum");
    h.call(
        "sendMessage",
        json!({ "chat_id": h.chat(), "text": "x", "message_thread_id": 5 }),
    )
    .await
    .expect_error(400, "Bad Request: message thread not found");
    let err = h.fake.control().create_topic(NewTopic {
        name: "mine".into(),
        user_id: None,
        token: None,
    });
    assert_eq!(err.unwrap_err().status, 409);
    h.enable_topics();
    assert_eq!(
        h.call("getMe", json!({})).await.result()["has_topics_enabled"],
        json!(true)
    );
    assert!(
        h.call(
            "createForumTopic",
            json!({ "chat_id": h.chat(), "name": "x" })
        )
        .await
        .ok()
    );
}

#[tokio::test]
async fn bot_topic_lifecycle_create_edit_close_reopen_delete() {
    let h = Harness::start().await;
    h.enable_topics();
    let chat = h.chat();
    let t = h
        .call(
            "createForumTopic",
            json!({ "chat_id": chat, "name": "A · web", "icon_color": 16766590 }),
        )
        .await;
    let thread = t.result()["message_thread_id"].as_i64().unwrap();
    assert_eq!(t.result()["icon_color"], json!(16766590));
    // Bad names and colours.
    h.call(
        "createForumTopic",
        json!({ "chat_id": chat, "name": "n".repeat(129) }),
    )
    .await
    .expect_error(400, "Bad Request: TOPIC_TITLE_TOO_LONG");
    h.call(
        "createForumTopic",
        json!({ "chat_id": chat, "name": "x", "icon_color": 1 }),
    )
    .await
    .expect_error(400, "Bad Request: TOPIC_ICON_COLOR_INVALID");
    // Edit: a real change, then the same name again.
    assert!(
        h.call(
            "editForumTopic",
            json!({ "chat_id": chat, "message_thread_id": thread, "name": "A · api" })
        )
        .await
        .ok()
    );
    h.call(
        "editForumTopic",
        json!({ "chat_id": chat, "message_thread_id": thread, "name": "A · api" }),
    )
    .await
    .expect_error(400, "Bad Request: TOPIC_NOT_MODIFIED");
    // Close: sends are refused; closing twice is not a change; reopen restores.
    assert!(
        h.call(
            "closeForumTopic",
            json!({ "chat_id": chat, "message_thread_id": thread })
        )
        .await
        .ok()
    );
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "message_thread_id": thread, "text": "x" }),
    )
    .await
    .expect_error(400, "Bad Request: TOPIC_CLOSED");
    h.call(
        "closeForumTopic",
        json!({ "chat_id": chat, "message_thread_id": thread }),
    )
    .await
    .expect_error(400, "Bad Request: TOPIC_NOT_MODIFIED");
    assert!(
        h.call(
            "reopenForumTopic",
            json!({ "chat_id": chat, "message_thread_id": thread })
        )
        .await
        .ok()
    );
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "message_thread_id": thread, "text": "x" })
        )
        .await
        .ok()
    );
    // Delete: gone with its messages; a second delete and any use say thread not found.
    assert!(
        h.call(
            "deleteForumTopic",
            json!({ "chat_id": chat, "message_thread_id": thread })
        )
        .await
        .ok()
    );
    for (method, extra) in [
        ("deleteForumTopic", json!({})),
        ("editForumTopic", json!({ "name": "z" })),
        ("closeForumTopic", json!({})),
        ("sendMessage", json!({ "text": "x" })),
        ("sendChatAction", json!({ "action": "typing" })),
        ("sendMessageDraft", json!({ "draft_id": 1, "text": "x" })),
    ] {
        let mut p = json!({ "chat_id": chat, "message_thread_id": thread });
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        h.call(method, p)
            .await
            .expect_error(400, "Bad Request: message thread not found");
    }
    let topics = h.fake.control().topics(None, None).unwrap();
    assert_eq!(
        (
            topics[0].state,
            topics[0].name.as_str(),
            topics[0].created_by_bot
        ),
        (TopicState::Deleted, "A · api", true)
    );
    let msgs = h
        .fake
        .control()
        .transcript(None, ThreadFilter::Thread(thread), None)
        .unwrap();
    assert!(msgs.iter().all(|m| m.deleted));
    let services: Vec<_> = msgs.iter().filter_map(|m| m.service.clone()).collect();
    assert_eq!(
        services,
        vec![
            "forum_topic_created",
            "forum_topic_edited",
            "forum_topic_closed",
            "forum_topic_reopened"
        ]
    );
    // A never-existing thread id is also "not found".
    h.call(
        "deleteForumTopic",
        json!({ "chat_id": chat, "message_thread_id": 424242 }),
    )
    .await
    .expect_error(400, "Bad Request: message thread not found");
}

#[tokio::test]
async fn the_person_creates_closes_and_deletes_topics() {
    let h = Harness::start().await;
    h.enable_topics();
    let created = h
        .fake
        .control()
        .create_topic(NewTopic {
            name: "my thread".into(),
            user_id: None,
            token: None,
        })
        .unwrap();
    let updates = h.call("getUpdates", json!({})).await;
    let m = &updates.result()[0]["message"];
    assert_eq!(
        updates.result()[0]["update_id"],
        json!(created.update_id.unwrap())
    );
    assert_eq!(m["forum_topic_created"]["name"], json!("my thread"));
    assert_eq!(m["message_thread_id"], json!(created.thread_id));
    assert_eq!(m["is_topic_message"], json!(true));
    assert_eq!(m["from"]["is_bot"], json!(false));
    // The bot can use the person's topic.
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": h.chat(), "message_thread_id": created.thread_id, "text": "hi" })
        )
        .await
        .ok()
    );
    h.fake
        .control()
        .set_topic_state(created.thread_id, true, None, None)
        .unwrap();
    assert_eq!(
        h.fake.control().topics(None, None).unwrap()[0].state,
        TopicState::Closed
    );
    // The person cannot post in a closed topic either.
    let err = h.fake.control().send_text(tg_fake::control::SendText {
        text: "x".into(),
        thread_id: Some(created.thread_id),
        ..Default::default()
    });
    assert_eq!(err.unwrap_err().status, 409);
    h.fake
        .control()
        .delete_topic(created.thread_id, None, None)
        .unwrap();
    assert_eq!(
        h.fake
            .control()
            .delete_topic(created.thread_id, None, None)
            .unwrap_err()
            .status,
        404
    );
    // Bots are not told about deletions.
    let offset = created.update_id.unwrap() + 1;
    assert_eq!(
        h.call("getUpdates", json!({ "offset": offset }))
            .await
            .result(),
        &json!([])
    );
}

#[tokio::test]
async fn threaded_mode_can_be_switched_off_under_a_running_bot() {
    let h = Harness::start().await;
    h.enable_topics();
    let t = h
        .call(
            "createForumTopic",
            json!({ "chat_id": h.chat(), "name": "x" }),
        )
        .await;
    let thread = t.result()["message_thread_id"].as_i64().unwrap();
    h.fake
        .control()
        .settings(tg_fake::control::SettingsChange {
            has_topics_enabled: Some(false),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        h.call("getMe", json!({})).await.result()["has_topics_enabled"],
        json!(false)
    );
    h.call(
        "sendMessage",
        json!({ "chat_id": h.chat(), "message_thread_id": thread, "text": "x" }),
    )
    .await
    .expect_error(400, "Bad Request: message thread not found");
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": h.chat(), "text": "main chat still works" })
        )
        .await
        .ok()
    );
}
