//! Supergroups: the bot added (as admin or not), members' messages, forum topics in a group
//! and the rights they need, anonymous admins, drafts only in private chats, the bot's standing
//! through `getChatMember`, and a group's lower message rate.
#![allow(clippy::unwrap_used)]

mod common;

use common::Harness;
use serde_json::json;
use tg_fake::FakeConfig;
use tg_fake::control::{NewGroup, SendText};

const GROUP: i64 = -100_500;
const ANN: i64 = 2002;
const STRANGER: i64 = 3003;

fn group(admin: bool, topics: bool) -> NewGroup {
    NewGroup {
        chat_id: GROUP,
        title: "team".into(),
        forum: true,
        members: vec![ANN],
        bot_admin: admin,
        can_manage_topics: topics,
        ..NewGroup::default()
    }
}

#[tokio::test]
async fn the_bot_added_to_a_forum_group_hears_of_it_and_its_members() {
    let h = Harness::start().await;
    h.fake.control().add_to_group(group(true, true)).unwrap();
    assert_eq!(
        h.fake
            .control()
            .add_to_group(group(true, true))
            .unwrap_err()
            .status,
        409
    );
    let sent = h
        .fake
        .control()
        .send_text(SendText {
            text: "hello team".into(),
            user_id: Some(ANN),
            chat_id: Some(GROUP),
            ..SendText::default()
        })
        .unwrap();
    assert_eq!(sent.chat_id, GROUP);
    let stranger = h.fake.control().send_text(SendText {
        text: "me too".into(),
        user_id: Some(STRANGER),
        chat_id: Some(GROUP),
        ..SendText::default()
    });
    assert_eq!(stranger.unwrap_err().status, 409, "not a member");
    let updates = h.call("getUpdates", json!({})).await.result().clone();
    let u = updates.as_array().unwrap();
    assert_eq!(u[0]["my_chat_member"]["chat"]["type"], json!("supergroup"));
    assert_eq!(
        u[0]["my_chat_member"]["new_chat_member"]["status"],
        json!("administrator")
    );
    let m = &u[1]["message"];
    assert_eq!(
        m["chat"],
        json!({ "id": GROUP, "type": "supergroup", "title": "team", "is_forum": true })
    );
    assert_eq!(m["from"]["id"], json!(ANN));
    // The bot writes in the group; a draft there is refused (drafts are for private chats).
    assert!(
        h.call("sendMessage", json!({ "chat_id": GROUP, "text": "hi all" }))
            .await
            .ok()
    );
    h.call(
        "sendMessageDraft",
        json!({ "chat_id": GROUP, "draft_id": 1, "text": "…" }),
    )
    .await
    .expect_error(400, "Bad Request: TEXTDRAFT_PEER_INVALID");
    let me = h
        .call(
            "getChatMember",
            json!({ "chat_id": GROUP, "user_id": 1000 }),
        )
        .await;
    assert_eq!(me.result()["status"], json!("administrator"));
    assert_eq!(me.result()["can_manage_topics"], json!(true));
    let ann = h
        .call("getChatMember", json!({ "chat_id": GROUP, "user_id": ANN }))
        .await;
    assert_eq!(ann.result()["status"], json!("member"));
}

#[tokio::test]
async fn topics_in_a_group_need_a_forum_and_the_bots_right_to_manage_them() {
    let h = Harness::start().await;
    h.fake.control().add_to_group(group(false, false)).unwrap();
    h.call(
        "createForumTopic",
        json!({ "chat_id": GROUP, "name": "A · web" }),
    )
    .await
    .expect_error(400, "Bad Request: not enough rights to create a topic");
    let member = h
        .call(
            "getChatMember",
            json!({ "chat_id": GROUP, "user_id": 1000 }),
        )
        .await;
    assert_eq!(member.result()["status"], json!("member"));

    let h = Harness::start().await;
    h.fake.control().add_to_group(group(true, true)).unwrap();
    // The bot's Threaded Mode (private chats) is off: a forum group has topics all the same.
    let t = h
        .call(
            "createForumTopic",
            json!({ "chat_id": GROUP, "name": "A · web" }),
        )
        .await;
    let thread = t.result()["message_thread_id"].as_i64().unwrap();
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": GROUP, "text": "in the topic", "message_thread_id": thread })
        )
        .await
        .ok()
    );
    let sent = h
        .fake
        .control()
        .send_text(SendText {
            text: "for web".into(),
            user_id: Some(ANN),
            chat_id: Some(GROUP),
            thread_id: Some(thread),
            ..SendText::default()
        })
        .unwrap();
    let updates = h.call("getUpdates", json!({})).await.result().clone();
    let m = updates
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["message"]["message_id"] == json!(sent.message_id))
        .unwrap()["message"]
        .clone();
    assert_eq!(m["message_thread_id"], json!(thread));
    assert_eq!(m["is_topic_message"], json!(true));
}

#[tokio::test]
async fn an_anonymous_admins_message_shows_the_group_as_its_sender() {
    let h = Harness::start().await;
    h.fake.control().add_to_group(group(true, true)).unwrap();
    h.fake
        .control()
        .send_text(SendText {
            text: "who am I".into(),
            user_id: Some(ANN),
            chat_id: Some(GROUP),
            anonymous: true,
            ..SendText::default()
        })
        .unwrap();
    let updates = h.call("getUpdates", json!({})).await.result().clone();
    let m = &updates.as_array().unwrap()[1]["message"];
    assert_eq!(m["from"]["username"], json!("GroupAnonymousBot"));
    assert_eq!(m["sender_chat"]["id"], json!(GROUP));
}

#[tokio::test]
async fn a_group_takes_twenty_messages_a_minute() {
    let mut config = FakeConfig::default();
    config.flood.enabled = true;
    config.flood.per_chat_burst = 3;
    let h = Harness::with(config).await;
    h.fake.control().add_to_group(group(true, true)).unwrap();
    let mut ok = 0;
    for n in 0..6 {
        let a = h
            .call(
                "sendMessage",
                json!({ "chat_id": GROUP, "text": format!("m{n}") }),
            )
            .await;
        if a.ok() {
            ok += 1;
        } else {
            assert_eq!(a.description(), "Too Many Requests: retry after 3");
            break;
        }
    }
    assert_eq!(ok, 3, "the burst, then one every 3 s");
}
