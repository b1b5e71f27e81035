//! The control API over HTTP: the fixed minimum scripts outside the project rely on.
#![allow(clippy::unwrap_used)]

mod common;

use common::Harness;
use serde_json::{Value, json};

async fn control(
    h: &Harness,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}/__control{}", h.fake.base_url(), path);
    let mut req = h.http.request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

async fn post(h: &Harness, path: &str, body: Value) -> Value {
    let (status, v) = control(h, reqwest::Method::POST, path, Some(body)).await;
    assert_eq!(status, 200, "{path}: {v}");
    v
}

async fn get(h: &Harness, path: &str) -> Value {
    let (status, v) = control(h, reqwest::Method::GET, path, None).await;
    assert_eq!(status, 200, "{path}: {v}");
    v
}

#[tokio::test]
async fn the_fixed_minimum_of_the_control_api() {
    let h = Harness::start().await;
    // settings: toggle Threaded Mode
    post(&h, "/settings", json!({ "has_topics_enabled": true })).await;
    assert_eq!(
        h.call("getMe", json!({})).await.result()["has_topics_enabled"],
        json!(true)
    );

    // send: {"text","thread_id"?,"user_id"?,"reply_to_message_id"?} -> {"update_id","message_id","chat_id"}
    let sent = post(&h, "/send", json!({ "text": "hello" })).await;
    assert_eq!(sent["chat_id"], json!(1001));
    assert_eq!(sent["message_id"], json!(1));
    assert!(sent["update_id"].is_i64());
    let other = post(&h, "/send", json!({ "text": "hi", "user_id": 4242 })).await;
    assert_eq!(other["chat_id"], json!(4242));

    // The bot replies with a button; the person presses it.
    let kb = json!({ "inline_keyboard": [[{ "text": "OK", "callback_data": "ok:1" }]] });
    let m = h
        .call(
            "sendMessage",
            json!({ "chat_id": 1001, "text": "choose", "reply_markup": kb }),
        )
        .await;
    let mid = m.result()["message_id"].clone();
    let pressed = post(&h, "/press", json!({ "message_id": mid, "data": "ok:1" })).await;
    assert!(pressed["callback_query_id"].is_string());
    let reply = post(
        &h,
        "/send",
        json!({ "text": "re", "reply_to_message_id": mid }),
    )
    .await;
    assert!(reply["update_id"].is_i64());

    // topics: the person creates one; list; delete
    let topic = post(&h, "/topics", json!({ "name": "from the UI" })).await;
    let thread = topic["thread_id"].as_i64().unwrap();
    let in_topic = post(
        &h,
        "/send",
        json!({ "text": "in thread", "thread_id": thread }),
    )
    .await;
    assert!(in_topic["update_id"].is_i64());
    let topics = get(&h, "/topics?chat_id=1001").await;
    assert_eq!(topics[0]["thread_id"], json!(thread));
    assert_eq!(topics[0]["state"], json!("open"));
    let (status, _) = control(
        &h,
        reqwest::Method::DELETE,
        &format!("/topics/{thread}"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        get(&h, "/topics?chat_id=1001").await[0]["state"],
        json!("deleted")
    );

    // transcript: [{"message_id","from_bot","thread_id","text","rich","reply_markup","deleted","edited"}]
    let t = get(&h, "/transcript?chat_id=1001").await;
    let first = &t[0];
    for key in [
        "message_id",
        "from_bot",
        "thread_id",
        "text",
        "rich",
        "reply_markup",
        "deleted",
        "edited",
    ] {
        assert!(
            first.get(key).is_some(),
            "transcript entry lacks {key}: {first}"
        );
    }
    let bot_msg = t
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["from_bot"] == json!(true) && m["text"] == json!("choose"))
        .unwrap();
    assert_eq!(bot_msg["reply_markup"], kb);
    let threaded = get(&h, &format!("/transcript?chat_id=1001&thread_id={thread}")).await;
    assert!(
        threaded
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["thread_id"] == json!(thread) && m["deleted"] == json!(true))
    );

    // faults: {"method","kind","count"?,"probability"?,"retry_after"?,"delay_ms"?}
    post(
        &h,
        "/faults",
        json!({ "method": "sendMessage", "kind": "flood", "count": 1, "retry_after": 9 }),
    )
    .await;
    let f = h
        .call("sendMessage", json!({ "chat_id": 1001, "text": "x" }))
        .await;
    f.expect_error(429, "Too Many Requests: retry after 9");
    for kind in [
        "http_500",
        "delay",
        "drop_before",
        "commit_then_drop",
        "thread_not_found",
    ] {
        post(
            &h,
            "/faults",
            json!({ "method": "getWebhookInfo", "kind": kind, "count": 1, "delay_ms": 1 }),
        )
        .await;
    }
    let listed = get(&h, "/faults").await;
    assert_eq!(listed.as_array().unwrap().len(), 5);
    let (status, _) = control(&h, reqwest::Method::DELETE, "/faults", None).await;
    assert_eq!(status, 200);
    let (status, err) = control(
        &h,
        reqwest::Method::POST,
        "/faults",
        Some(json!({ "method": "x", "kind": "meteor" })),
    )
    .await;
    assert_eq!(status, 400, "{err}");
    assert!(err["error"].as_str().unwrap().contains("meteor"), "{err}");

    // requests: the log, filterable
    let log = get(&h, "/requests?method=sendMessage").await;
    let statuses: Vec<_> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(statuses, vec![json!(200), json!(429)]);
    let since = log[0]["seq"].as_u64().unwrap();
    assert_eq!(
        get(&h, &format!("/requests?method=sendMessage&since={since}"))
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // chat view, bot view, clock
    let chat = get(&h, "/chat?chat_id=1001").await;
    assert!(chat["messages"].as_array().unwrap().len() >= 4);
    let bot = get(&h, "/bot").await;
    assert_eq!(bot["me"]["username"], json!("fake_1000_bot"));
    let before = bot["now_ms"].as_u64().unwrap();
    let after = post(&h, "/clock", json!({ "advance_ms": 60_000 })).await["now_ms"]
        .as_u64()
        .unwrap();
    assert!(after >= before + 60_000);

    // reset: back to the start
    post(&h, "/reset", json!({})).await;
    assert_eq!(get(&h, "/transcript?chat_id=1001").await, json!([]));
    assert_eq!(h.call("getUpdates", json!({})).await.result(), &json!([]));
    assert_eq!(
        h.call("getMe", json!({})).await.result()["has_topics_enabled"],
        json!(false)
    );
    // the log restarted: only the two calls made since the reset
    assert_eq!(get(&h, "/requests").await.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn control_errors_are_clear() {
    let h = Harness::start().await;
    let (status, v) = control(
        &h,
        reqwest::Method::POST,
        "/press",
        Some(json!({ "message_id": 99, "data": "x" })),
    )
    .await;
    assert_eq!(status, 404);
    assert!(v["error"].as_str().unwrap().contains("button"));
    let (status, _) = control(
        &h,
        reqwest::Method::POST,
        "/send",
        Some(json!({ "text": "x", "thread_id": 5 })),
    )
    .await;
    assert_eq!(status, 409, "Threaded Mode is off");
    let (status, _) = control(
        &h,
        reqwest::Method::POST,
        "/send",
        Some(json!({ "text": "x", "token": "9:nope" })),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = control(&h, reqwest::Method::GET, "/transcript?chat_id=777", None).await;
    assert_eq!(status, 404);
    let (status, _) = control(
        &h,
        reqwest::Method::POST,
        "/send",
        Some(json!({ "text": "   " })),
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn person_edits_forwards_reactions_and_media_via_http() {
    let h = Harness::start().await;
    let sent = post(&h, "/send", json!({ "text": "tpyo" })).await;
    post(
        &h,
        "/edit",
        json!({ "message_id": sent["message_id"], "text": "typo" }),
    )
    .await;
    post(
        &h,
        "/send",
        json!({ "text": "fwd", "forward": { "sender_name": "Someone" } }),
    )
    .await;
    post(&h, "/send_media", json!({ "kind": "document", "data_base64": "aGVsbG8=", "filename": "h.txt", "caption": "see" })).await;
    post(&h, "/send_media_group", json!({ "items": [
        { "kind": "photo", "data_base64": "aGVsbG8=" }, { "kind": "photo", "data_base64": "aGVsbG8=" } ] })).await;
    post(
        &h,
        "/react",
        json!({ "message_id": sent["message_id"], "emoji": "👍" }),
    )
    .await;
    let up = h.call("getUpdates", json!({ "allowed_updates": [] })).await;
    let kinds: Vec<String> = up
        .result()
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            u.as_object()
                .unwrap()
                .keys()
                .find(|k| *k != "update_id")
                .unwrap()
                .clone()
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "message",
            "edited_message",
            "message",
            "message",
            "message",
            "message"
        ]
    );
    let list = up.result().as_array().unwrap();
    assert_eq!(list[1]["edited_message"]["text"], json!("typo"));
    assert_eq!(
        list[2]["message"]["forward_origin"]["type"],
        json!("hidden_user")
    );
    assert_eq!(list[3]["message"]["document"]["file_name"], json!("h.txt"));
    assert_eq!(
        list[4]["message"]["media_group_id"],
        list[5]["message"]["media_group_id"]
    );
    let uploads = get(&h, "/uploads").await;
    assert_eq!(uploads.as_array().unwrap().len(), 3);
    let id = list[3]["message"]["document"]["file_id"].as_str().unwrap();
    let bytes = h
        .http
        .get(format!("{}/__control/files/{id}", h.fake.base_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(bytes, "hello");
}
