//! Streaming drafts, rich messages and chat actions as the person sees them.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::json;

#[tokio::test]
async fn drafts_animate_expire_and_give_way_to_the_final_message() {
    let h = Harness::start().await;
    let chat = h.chat();
    assert!(
        h.call(
            "sendMessageDraft",
            json!({ "chat_id": chat, "draft_id": 7, "text": "" })
        )
        .await
        .ok()
    );
    assert!(
        h.call(
            "sendMessageDraft",
            json!({ "chat_id": chat, "draft_id": 7, "text": "Hel" })
        )
        .await
        .ok()
    );
    assert!(
        h.call(
            "sendMessageDraft",
            json!({ "chat_id": chat, "draft_id": 7, "text": "<i>Hello</i>", "parse_mode": "HTML" })
        )
        .await
        .ok()
    );
    h.call(
        "sendMessageDraft",
        json!({ "chat_id": chat, "draft_id": 0, "text": "x" }),
    )
    .await
    .expect_error(400, "Bad Request: draft_id must be non-zero");
    h.call(
        "sendMessageDraft",
        json!({ "chat_id": chat, "draft_id": 7, "text": "y".repeat(4097) }),
    )
    .await
    .expect_error(400, "Bad Request: message is too long");
    let view = h.fake.control().chat(None, None).unwrap();
    let shown: Vec<_> = view
        .drafts
        .iter()
        .map(|d| (d.draft.text.as_str(), d.visible))
        .collect();
    // The first draft is the "Thinking…" placeholder; only the latest state is on screen.
    assert_eq!(shown, vec![("", false), ("Hel", false), ("Hello", true)]);
    assert_eq!(view.drafts[2].draft.entities[0]["type"], json!("italic"));
    // Drafts vanish after 30 s without updates...
    h.fake.control().advance_clock(Duration::from_secs(31));
    assert!(!h.fake.control().chat(None, None).unwrap().drafts[2].visible);
    // ...and once the bot sends the real message.
    h.call(
        "sendMessageDraft",
        json!({ "chat_id": chat, "draft_id": 8, "text": "Hello wor" }),
    )
    .await;
    assert!(h.fake.control().chat(None, None).unwrap().drafts[3].visible);
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "Hello world" }),
    )
    .await;
    assert!(!h.fake.control().chat(None, None).unwrap().drafts[3].visible);
}

#[tokio::test]
async fn rich_messages_are_sent_edited_and_read_back() {
    let h = Harness::start().await;
    let chat = h.chat();
    let sent = h
        .call(
            "sendRichMessage",
            json!({ "chat_id": chat, "rich_message": { "markdown": "# Title\n\nSome **bold** text.\n\n- one\n- two" } }),
        )
        .await;
    let msg = sent.result().clone();
    let blocks = msg["rich_message"]["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], json!("heading"));
    assert!(blocks.iter().any(|b| b["type"] == "list"));
    assert!(msg.get("text").is_none());
    let t = h
        .fake
        .control()
        .transcript(None, tg_fake::control::ThreadFilter::All, None)
        .unwrap();
    let text = t[0].text.clone().unwrap();
    assert!(
        text.contains("Title") && text.contains("bold") && text.contains("two"),
        "{text}"
    );
    // Edit it into other rich content, then into plain text.
    let id = msg["message_id"].clone();
    let e = h
        .call(
            "editMessageText",
            json!({ "chat_id": chat, "message_id": id, "rich_message": { "html": "<p>Done</p>" } }),
        )
        .await;
    assert_eq!(
        e.result()["rich_message"]["blocks"][0]["type"],
        json!("paragraph")
    );
    h.call("editMessageText", json!({ "chat_id": chat, "message_id": id, "rich_message": { "html": "<p>Done</p>" } }))
        .await
        .expect_error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    let e = h
        .call(
            "editMessageText",
            json!({ "chat_id": chat, "message_id": id, "text": "plain now" }),
        )
        .await;
    assert_eq!(e.result()["text"], json!("plain now"));
    assert!(e.result().get("rich_message").is_none());
    // Rich drafts.
    assert!(
        h.call(
            "sendRichMessageDraft",
            json!({ "chat_id": chat, "draft_id": 3, "rich_message": { "markdown": "*thinking*" } })
        )
        .await
        .ok()
    );
    let view = h.fake.control().chat(None, None).unwrap();
    assert!(view.drafts[0].draft.rich.is_some() && view.drafts[0].visible);
    // Invalid rich input is refused.
    let bad = h
        .call(
            "sendRichMessage",
            json!({ "chat_id": chat, "rich_message": { "markdown": "a", "html": "b" } }),
        )
        .await;
    assert_eq!(bad.status, 400);
    let too_long = h
        .call(
            "sendRichMessage",
            json!({ "chat_id": chat, "rich_message": { "markdown": "x".repeat(40_000) } }),
        )
        .await;
    assert_eq!(too_long.status, 400);
}

#[tokio::test]
async fn chat_actions_show_for_five_seconds_unless_a_message_ends_them() {
    let h = Harness::start().await;
    let chat = h.chat();
    assert!(
        h.call(
            "sendChatAction",
            json!({ "chat_id": chat, "action": "typing" })
        )
        .await
        .ok()
    );
    h.call(
        "sendChatAction",
        json!({ "chat_id": chat, "action": "dancing" }),
    )
    .await
    .expect_error(400, "Bad Request: wrong parameter action in request");
    assert!(h.fake.control().chat(None, None).unwrap().chat_actions[0].visible);
    h.call("sendMessage", json!({ "chat_id": chat, "text": "done" }))
        .await;
    assert!(!h.fake.control().chat(None, None).unwrap().chat_actions[0].visible);
    // A late "typing" after the final answer keeps showing: the bug this view exists to catch.
    h.call(
        "sendChatAction",
        json!({ "chat_id": chat, "action": "typing" }),
    )
    .await;
    assert!(h.fake.control().chat(None, None).unwrap().chat_actions[1].visible);
    h.fake.control().advance_clock(Duration::from_secs(5));
    assert!(!h.fake.control().chat(None, None).unwrap().chat_actions[1].visible);
}

#[tokio::test]
async fn commands_reactions_and_deletions_by_the_bot() {
    let h = Harness::start().await;
    let chat = h.chat();
    let cmds = json!([{ "command": "start", "description": "Start" }, { "command": "status", "description": "Status" }]);
    assert!(
        h.call("setMyCommands", json!({ "commands": cmds }))
            .await
            .ok()
    );
    assert_eq!(h.call("getMyCommands", json!({})).await.result(), &cmds);
    h.call(
        "setMyCommands",
        json!({ "commands": [{ "command": "Bad-Name", "description": "x" }] }),
    )
    .await
    .expect_error(400, "Bad Request: BOT_COMMAND_INVALID");
    assert!(h.call("deleteMyCommands", json!({})).await.ok());
    assert_eq!(
        h.call("getMyCommands", json!({})).await.result(),
        &json!([])
    );
    let m = h.person_says("please ack");
    assert!(h
        .call("setMessageReaction", json!({ "chat_id": chat, "message_id": m.message_id, "reaction": [{ "type": "emoji", "emoji": "👀" }] }))
        .await
        .ok());
    // The bot may delete the person's messages in a private chat.
    assert!(
        h.call(
            "deleteMessages",
            json!({ "chat_id": chat, "message_ids": [m.message_id, 999] })
        )
        .await
        .ok()
    );
    let t = h
        .fake
        .control()
        .transcript(None, tg_fake::control::ThreadFilter::Main, None)
        .unwrap();
    assert_eq!(
        t[0].bot_reactions,
        vec![json!({ "type": "emoji", "emoji": "👀" })]
    );
    assert!(t[0].deleted);
}
