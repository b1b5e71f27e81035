//! Telegram's error answers, each with the text Telegram gives.
#![allow(clippy::unwrap_used)]

mod common;

use common::Harness;
use serde_json::json;

#[tokio::test]
async fn wrong_token_unknown_method_and_unknown_chat() {
    let h = Harness::start().await;
    let resp = h
        .http
        .post(h.fake.method_url("1000:wrong", "getMe"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({ "ok": false, "error_code": 401, "description": "Unauthorized" })
    );
    h.call("sendMesage", json!({}))
        .await
        .expect_error(404, "Not Found");
    // Method names are case-insensitive.
    assert!(h.call("GETME", json!({})).await.ok());
    h.call("sendMessage", json!({ "chat_id": 424242, "text": "x" }))
        .await
        .expect_error(400, "Bad Request: chat not found");
    h.call(
        "sendMessage",
        json!({ "chat_id": "@somechannel", "text": "x" }),
    )
    .await
    .expect_error(400, "Bad Request: chat not found");
}

#[tokio::test]
async fn missing_and_empty_required_parameters() {
    let h = Harness::start().await;
    let chat = h.chat();
    h.call("sendMessage", json!({ "text": "x" }))
        .await
        .expect_error(400, "Bad Request: chat_id is empty");
    h.call("sendMessage", json!({ "chat_id": chat }))
        .await
        .expect_error(400, "Bad Request: message text is empty");
    h.call("sendMessage", json!({ "chat_id": chat, "text": "" }))
        .await
        .expect_error(400, "Bad Request: message text is empty");
    // Whitespace is trimmed as Telegram does, so it is empty too.
    h.call("sendMessage", json!({ "chat_id": chat, "text": "  \n " }))
        .await
        .expect_error(400, "Bad Request: message text is empty");
    // Markup that parses to nothing is empty.
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "<b> </b>", "parse_mode": "HTML" }),
    )
    .await
    .expect_error(400, "Bad Request: message text is empty");
    h.call("deleteMessage", json!({ "chat_id": chat }))
        .await
        .expect_error(400, "Bad Request: message identifier is not specified");
    h.call("sendDocument", json!({ "chat_id": chat }))
        .await
        .expect_error(400, "Bad Request: there is no document in the request");
    h.call("createForumTopic", json!({ "chat_id": chat }))
        .await
        .expect_error(400, "Bad Request: name is empty");
}

#[tokio::test]
async fn text_length_counts_utf16_units_after_entity_parsing() {
    let h = Harness::start().await;
    let chat = h.chat();
    let exact = "a".repeat(4096);
    assert!(
        h.call("sendMessage", json!({ "chat_id": chat, "text": exact }))
            .await
            .ok()
    );
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "a".repeat(4097) }),
    )
    .await
    .expect_error(400, "Bad Request: message is too long");
    // Tags do not count: 4096 visible characters wrapped in markup are fine.
    let wrapped = format!("<b>{}</b><i></i>", "b".repeat(4096));
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": wrapped, "parse_mode": "HTML" })
        )
        .await
        .ok()
    );
    // An emoji outside the BMP is two UTF-16 units: 2048 fit, 2049 do not.
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "😀".repeat(2048) })
        )
        .await
        .ok()
    );
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "😀".repeat(2049) }),
    )
    .await
    .expect_error(400, "Bad Request: message is too long");
    // Entities escape: &amp; is one character.
    let escaped = "&amp;".repeat(4096);
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": escaped, "parse_mode": "HTML" })
        )
        .await
        .ok()
    );
    // An edit cannot grow past the limit either.
    let m = h
        .call("sendMessage", json!({ "chat_id": chat, "text": "short" }))
        .await;
    h.call(
        "editMessageText",
        json!({ "chat_id": chat, "message_id": m.result()["message_id"], "text": "x".repeat(4097) }),
    )
    .await
    .expect_error(400, "Bad Request: message is too long");
}

#[tokio::test]
async fn malformed_html_is_refused_with_the_parse_error() {
    let h = Harness::start().await;
    let chat = h.chat();
    let cases = [
        (
            "<b>bold",
            "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\"",
        ),
        (
            "<foo>x</foo>",
            "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0",
        ),
        (
            "<b>x</i>",
            "Bad Request: can't parse entities: Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\"",
        ),
        (
            "x</b>",
            "Bad Request: can't parse entities: Unexpected end tag at byte offset 1",
        ),
        (
            "1 < 2",
            "Bad Request: can't parse entities: Unsupported start tag \"\" at byte offset 2",
        ),
    ];
    for (text, expected) in cases {
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": text, "parse_mode": "HTML" }),
        )
        .await
        .expect_error(400, expected);
    }
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "x", "parse_mode": "Klingon" }),
    )
    .await
    .expect_error(400, "Bad Request: unsupported parse_mode");
    // Valid HTML with nesting, links and code yields entities.
    let ok = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat, "parse_mode": "HTML",
                    "text": "<b>bold <i>both</i></b> <a href=\"https://example.com\">link</a> <pre><code class=\"language-rust\">fn x() {}</code></pre>" }),
        )
        .await;
    let r = ok.result();
    assert_eq!(r["text"], json!("bold both link fn x() {}"));
    // Telegram splits a bold entity around the italic nested in it.
    let types: Vec<_> = r["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, vec!["bold", "bold", "italic", "text_link", "pre"]);
    let pre = r["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "pre")
        .unwrap();
    assert_eq!(pre["language"], json!("rust"));
    assert_eq!(
        (pre["offset"].as_u64(), pre["length"].as_u64()),
        (Some(15), Some(9))
    );
}

#[tokio::test]
async fn identical_edits_are_not_modified_and_edits_drop_unrepeated_keyboards() {
    let h = Harness::start().await;
    let chat = h.chat();
    let kb = json!({ "inline_keyboard": [[{ "text": "Go", "callback_data": "go" }]] });
    let m = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "same", "reply_markup": kb }),
        )
        .await;
    let id = m.result()["message_id"].clone();
    assert_eq!(m.result()["reply_markup"], kb);
    h.call("editMessageText", json!({ "chat_id": chat, "message_id": id, "text": "same", "reply_markup": kb }))
        .await
        .expect_error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    h.call("editMessageReplyMarkup", json!({ "chat_id": chat, "message_id": id, "reply_markup": kb }))
        .await
        .expect_error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    // Same text without the keyboard is a change: the keyboard goes.
    let e = h
        .call(
            "editMessageText",
            json!({ "chat_id": chat, "message_id": id, "text": "same" }),
        )
        .await;
    assert!(e.result().get("reply_markup").is_none());
    h.call(
        "editMessageText",
        json!({ "chat_id": chat, "message_id": 9999, "text": "y" }),
    )
    .await
    .expect_error(400, "Bad Request: message to edit not found");
    let person = h.person_says("mine");
    h.call(
        "editMessageText",
        json!({ "chat_id": chat, "message_id": person.message_id, "text": "y" }),
    )
    .await
    .expect_error(400, "Bad Request: message can't be edited");
    assert!(
        h.call(
            "deleteMessage",
            json!({ "chat_id": chat, "message_id": id })
        )
        .await
        .ok()
    );
    h.call(
        "deleteMessage",
        json!({ "chat_id": chat, "message_id": id }),
    )
    .await
    .expect_error(400, "Bad Request: message to delete not found");
    h.call(
        "editMessageText",
        json!({ "chat_id": chat, "message_id": id, "text": "z" }),
    )
    .await
    .expect_error(400, "Bad Request: message to edit not found");
}

#[tokio::test]
async fn callback_data_captions_and_buttons_are_bounded() {
    let h = Harness::start().await;
    let chat = h.chat();
    let long = "d".repeat(65);
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "x", "reply_markup": { "inline_keyboard": [[{ "text": "b", "callback_data": long }]] } }),
    )
    .await
    .expect_error(400, "Bad Request: BUTTON_DATA_INVALID");
    let exact = "d".repeat(64);
    assert!(h
        .call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "x", "reply_markup": { "inline_keyboard": [[{ "text": "b", "callback_data": exact }]] } }),
        )
        .await
        .ok());
    // Multi-byte: 22 × 3-byte euro signs = 66 bytes.
    let cyr = "€".repeat(22);
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "x", "reply_markup": { "inline_keyboard": [[{ "text": "b", "callback_data": cyr }]] } }),
    )
    .await
    .expect_error(400, "Bad Request: BUTTON_DATA_INVALID");
    // 100 buttons in all fit (10 rows of 10); 101 do not, however they are laid out.
    let keyboard = |rows: usize, per_row: usize| {
        let row: Vec<serde_json::Value> = (0..per_row)
            .map(|n| json!({ "text": format!("b{n}"), "callback_data": "d" }))
            .collect();
        json!({ "inline_keyboard": vec![row; rows] })
    };
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "x", "reply_markup": keyboard(10, 10) }),
        )
        .await
        .ok()
    );
    for (rows, per_row) in [(101, 1), (1, 101), (17, 6)] {
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "x", "reply_markup": keyboard(rows, per_row) }),
        )
        .await
        .expect_error(400, "Bad Request: reply markup is too long");
    }
    let form = reqwest::multipart::Form::new()
        .text("chat_id", chat.to_string())
        .text("caption", "c".repeat(1025))
        .part(
            "document",
            reqwest::multipart::Part::bytes(b"data".to_vec()).file_name("a.txt"),
        );
    h.call_multipart("sendDocument", form)
        .await
        .expect_error(400, "Bad Request: message caption is too long");
    // Reply markup sent as a JSON string in a form body is parsed like Telegram does.
    let kb = json!({ "inline_keyboard": [[{ "text": "b", "callback_data": "ok" }]] }).to_string();
    let ans = h
        .call_form(
            "sendMessage",
            &[
                ("chat_id", &chat.to_string()),
                ("text", "form"),
                ("reply_markup", &kb),
            ],
        )
        .await;
    assert_eq!(
        ans.result()["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
        json!("ok")
    );
}

#[tokio::test]
async fn callback_queries_are_answered_once() {
    let h = Harness::start().await;
    let chat = h.chat();
    let kb = json!({ "inline_keyboard": [[{ "text": "Yes", "callback_data": "yes" }]] });
    let m = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "ok?", "reply_markup": kb }),
        )
        .await;
    let id = m.result()["message_id"].as_i64().unwrap();
    let pressed = h
        .fake
        .control()
        .press(tg_fake::control::Press {
            message_id: id,
            data: "yes".into(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    let updates = h.call("getUpdates", json!({})).await;
    let cq = &updates.result()[0]["callback_query"];
    assert_eq!(cq["data"], json!("yes"));
    assert_eq!(cq["message"]["message_id"], json!(id));
    assert_eq!(cq["id"], json!(pressed.callback_query_id));
    assert!(
        h.call(
            "answerCallbackQuery",
            json!({ "callback_query_id": cq["id"], "text": "Done" })
        )
        .await
        .ok()
    );
    h.call(
        "answerCallbackQuery",
        json!({ "callback_query_id": cq["id"] }),
    )
    .await
    .expect_error(
        400,
        "Bad Request: query is too old and response timeout expired or query ID is invalid",
    );
    let view = h.fake.control().chat(None, None).unwrap();
    assert_eq!(view.callback_answers[0].text.as_deref(), Some("Done"));
    // Buttons that do not exist cannot be pressed.
    assert!(
        h.fake
            .control()
            .press(tg_fake::control::Press {
                message_id: id,
                data: "no".into(),
                user_id: None,
                token: None,
                chat_id: None,
            })
            .is_err()
    );
}

#[tokio::test]
async fn strict_mode_rejects_undocumented_parameters_and_lenient_mode_ignores_them() {
    let h = Harness::start().await;
    let chat = h.chat();
    // reply_to_message_id was removed from sendMessage's documented parameters in favour of
    // reply_parameters.
    h.call("sendMessage", json!({ "chat_id": chat, "text": "x", "reply_to_message_id": 1 }))
        .await
        .expect_error(
            400,
            "Bad Request: parameter \"reply_to_message_id\" is not documented for sendMessage (tg-fake strict mode)",
        );
    h.call("getMe", json!({ "foo": 1 })).await.expect_error(
        400,
        "Bad Request: parameter \"foo\" is not documented for getMe (tg-fake strict mode)",
    );
    h.fake
        .control()
        .settings(tg_fake::control::SettingsChange {
            strict: Some(false),
            ..Default::default()
        })
        .unwrap();
    assert!(
        h.call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "x", "reply_to_message_id": 1 })
        )
        .await
        .ok()
    );
}

#[tokio::test]
async fn blocked_person_gives_403_and_missing_reply_target_400() {
    let h = Harness::start().await;
    let chat = h.chat();
    h.call(
        "sendMessage",
        json!({ "chat_id": chat, "text": "x", "reply_parameters": { "message_id": 777 } }),
    )
    .await
    .expect_error(400, "Bad Request: message to be replied not found");
    let ok = h
        .call(
            "sendMessage",
            json!({ "chat_id": chat, "text": "x", "reply_parameters": { "message_id": 777, "allow_sending_without_reply": true } }),
        )
        .await;
    assert!(ok.result().get("reply_to_message").is_none());
    h.fake
        .control()
        .block(tg_fake::control::Block {
            blocked: true,
            user_id: None,
            token: None,
        })
        .unwrap();
    h.call("sendMessage", json!({ "chat_id": chat, "text": "x" }))
        .await
        .expect_error(403, "Forbidden: bot was blocked by the user");
}
