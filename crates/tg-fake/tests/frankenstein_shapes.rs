//! Independent check of the fake's shapes: every kind of result it returns deserializes into
//! `frankenstein`'s types (Bot API 10.3, written by others), and requests serialized from
//! `frankenstein`'s parameter types pass the fake's strict mode.
#![allow(clippy::unwrap_used)]

mod common;

use base64::Engine;
use common::{Answer, Harness};
use frankenstein::ParseMode;
use frankenstein::methods::{
    AnswerCallbackQueryParams, CreateForumTopicParams, EditMessageTextParams, GetUpdatesParams,
    SendChatActionParams, SendMessageDraftParams, SendMessageParams, SendRichMessageParams,
    SetMyCommandsParams,
};
use frankenstein::response::{ErrorResponse, MessageOrBool, MethodResponse};
use frankenstein::rich_message::InputRichMessage;
use frankenstein::types::{
    BotCommand, ChatAction, File, ForumTopic, InlineKeyboardButton, InlineKeyboardMarkup, Message,
    ReplyMarkup, ReplyParameters, User,
};
use frankenstein::updates::{Update, UpdateContent, WebhookInfo};
use reqwest::multipart::{Form, Part};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tg_fake::control::{MediaItem, Press, React, SendMedia, SendMediaGroup, SendText};
use tg_fake::world::MediaKind;

fn typed<T: DeserializeOwned>(answer: &Answer) -> T {
    match serde_json::from_value::<MethodResponse<T>>(answer.body.clone()) {
        Ok(r) => r.result,
        Err(e) => panic!(
            "frankenstein cannot read {}: {e}\n{}",
            std::any::type_name::<T>(),
            answer.body
        ),
    }
}

async fn call_with<P: serde::Serialize>(h: &Harness, method: &str, params: &P) -> Answer {
    let body = serde_json::to_value(params).unwrap();
    let answer = h.call(method, body).await;
    assert!(
        answer.ok(),
        "{method} with frankenstein's params failed in strict mode: {}",
        answer.body
    );
    answer
}

#[tokio::test]
async fn every_result_kind_deserializes_into_frankenstein_types() {
    let h = Harness::start().await;
    h.enable_topics();
    let chat = h.chat();

    let me: User = typed(&h.call("getMe", json!({})).await);
    assert!(me.is_bot);
    assert_eq!(me.has_topics_enabled, Some(true));

    let keyboard = ReplyMarkup::InlineKeyboardMarkup(
        InlineKeyboardMarkup::builder()
            .inline_keyboard(vec![vec![
                InlineKeyboardButton::builder()
                    .text("Yes")
                    .callback_data("y")
                    .build(),
            ]])
            .build(),
    );
    let first: Message = typed(
        &call_with(
            &h,
            "sendMessage",
            &SendMessageParams::builder()
                .chat_id(chat)
                .text("<b>hi</b> https://example.com")
                .parse_mode(ParseMode::Html)
                .reply_markup(keyboard.clone())
                .build(),
        )
        .await,
    );
    assert_eq!(first.text.as_deref(), Some("hi https://example.com"));
    let reply: Message = typed(
        &call_with(
            &h,
            "sendMessage",
            &SendMessageParams::builder()
                .chat_id(chat)
                .text("reply")
                .reply_parameters(
                    ReplyParameters::builder()
                        .message_id(first.message_id)
                        .build(),
                )
                .build(),
        )
        .await,
    );
    assert!(reply.reply_to_message.is_some());

    let rich: Message = typed(
        &call_with(
            &h,
            "sendRichMessage",
            &SendRichMessageParams::builder()
                .chat_id(chat)
                .rich_message(
                    InputRichMessage::builder()
                        .markdown("# T\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done")
                        .build(),
                )
                .build(),
        )
        .await,
    );
    assert!(rich.rich_message.is_some());

    let edited: MessageOrBool = typed(
        &call_with(
            &h,
            "editMessageText",
            &EditMessageTextParams::builder()
                .chat_id(chat)
                .message_id(first.message_id)
                .text("edited")
                .reply_markup(
                    InlineKeyboardMarkup::builder()
                        .inline_keyboard(vec![vec![
                            InlineKeyboardButton::builder()
                                .text("No")
                                .callback_data("n")
                                .build(),
                        ]])
                        .build(),
                )
                .build(),
        )
        .await,
    );
    assert!(matches!(edited, MessageOrBool::Message(_)));

    let topic: ForumTopic = typed(
        &call_with(
            &h,
            "createForumTopic",
            &CreateForumTopicParams::builder()
                .chat_id(chat)
                .name("B · api")
                .build(),
        )
        .await,
    );
    let in_topic: Message = typed(
        &call_with(
            &h,
            "sendMessage",
            &SendMessageParams::builder()
                .chat_id(chat)
                .message_thread_id(topic.message_thread_id)
                .text("t")
                .build(),
        )
        .await,
    );
    assert_eq!(in_topic.message_thread_id, Some(topic.message_thread_id));

    let ok: bool = typed(
        &call_with(
            &h,
            "sendChatAction",
            &SendChatActionParams::builder()
                .chat_id(chat)
                .action(ChatAction::Typing)
                .build(),
        )
        .await,
    );
    assert!(ok);
    let drafted: bool = typed(
        &call_with(
            &h,
            "sendMessageDraft",
            &SendMessageDraftParams::builder()
                .chat_id(chat)
                .draft_id(5)
                .text("dr")
                .build(),
        )
        .await,
    );
    assert!(drafted);
    let commands = SetMyCommandsParams::builder()
        .commands(vec![
            BotCommand::builder()
                .command("status")
                .description("Status")
                .build(),
        ])
        .build();
    assert!(typed::<bool>(
        &call_with(&h, "setMyCommands", &commands).await
    ));
    let listed: Vec<BotCommand> = typed(&h.call("getMyCommands", json!({})).await);
    assert_eq!(listed[0].command, "status");

    // Media sent by the bot.
    let png = {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        b.extend_from_slice(&[0, 0, 1, 0, 0, 0, 0, 200]);
        b
    };
    for (method, field, name, bytes) in [
        ("sendDocument", "document", "a.pdf", b"%PDF".to_vec()),
        ("sendPhoto", "photo", "p.png", png.clone()),
        ("sendVoice", "voice", "v.ogg", b"OggS".to_vec()),
        ("sendAudio", "audio", "a.mp3", b"ID3".to_vec()),
    ] {
        let form = Form::new()
            .text("chat_id", chat.to_string())
            .text("caption", "cap")
            .part(field, Part::bytes(bytes).file_name(name));
        let m: Message = typed(&h.call_multipart(method, form).await);
        assert_eq!(m.caption.as_deref(), Some("cap"));
        let file_id = match field {
            "document" => m.document.unwrap().file_id,
            "photo" => m.photo.unwrap().pop().unwrap().file_id,
            "voice" => m.voice.unwrap().file_id,
            _ => m.audio.unwrap().file_id,
        };
        let f: File = typed(&h.call("getFile", json!({ "file_id": file_id })).await);
        assert!(f.file_path.is_some());
    }

    // Every kind of update the person can cause.
    let control = h.fake.control();
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let said = control
        .send_text(SendText {
            text: "/start hello @someone #tag".into(),
            ..Default::default()
        })
        .unwrap();
    control
        .send_text(SendText {
            text: "in reply".into(),
            reply_to_message_id: Some(reply.message_id.into()),
            thread_id: None,
            ..Default::default()
        })
        .unwrap();
    control
        .send_text(SendText {
            text: "forwarded".into(),
            forward: Some(tg_fake::control::Forward {
                from_user_id: Some(77),
                sender_name: None,
                date: None,
            }),
            ..Default::default()
        })
        .unwrap();
    control
        .send_text(SendText {
            text: "in topic".into(),
            thread_id: Some(topic.message_thread_id.into()),
            ..Default::default()
        })
        .unwrap();
    control
        .edit_text(tg_fake::control::EditText {
            message_id: said.message_id,
            text: "edited".into(),
            user_id: None,
            token: None,
        })
        .unwrap();
    for kind in [
        MediaKind::Photo,
        MediaKind::Document,
        MediaKind::Voice,
        MediaKind::Audio,
        MediaKind::Video,
    ] {
        control
            .send_media(SendMedia {
                item: MediaItem {
                    kind,
                    data_base64: b64(&png),
                    filename: Some("f.bin".into()),
                    mime_type: None,
                    caption: Some("c".into()),
                },
                thread_id: None,
                user_id: None,
                reply_to_message_id: None,
                token: None,
                chat_id: None,
            })
            .unwrap();
    }
    control
        .send_media_group(SendMediaGroup {
            items: vec![
                MediaItem {
                    kind: MediaKind::Photo,
                    data_base64: b64(&png),
                    filename: None,
                    mime_type: None,
                    caption: None,
                },
                MediaItem {
                    kind: MediaKind::Photo,
                    data_base64: b64(&png),
                    filename: None,
                    mime_type: None,
                    caption: None,
                },
            ],
            thread_id: None,
            user_id: None,
            token: None,
        })
        .unwrap();
    let pressed = control
        .press(Press {
            message_id: first.message_id.into(),
            data: "n".into(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    control
        .create_topic(tg_fake::control::NewTopic {
            name: "person's".into(),
            user_id: None,
            token: None,
        })
        .unwrap();
    let params = GetUpdatesParams::builder()
        .allowed_updates(vec![
            frankenstein::types::AllowedUpdate::Message,
            frankenstein::types::AllowedUpdate::EditedMessage,
            frankenstein::types::AllowedUpdate::CallbackQuery,
            frankenstein::types::AllowedUpdate::MessageReaction,
        ])
        .build();
    let _: Vec<Update> = typed(&call_with(&h, "getUpdates", &params).await);
    control
        .react(React {
            message_id: said.message_id,
            emoji: Some("👍".into()),
            user_id: None,
            token: None,
        })
        .unwrap();
    let updates: Vec<Update> = typed(&h.call("getUpdates", json!({})).await);
    let mut kinds = std::collections::BTreeSet::new();
    for u in &updates {
        kinds.insert(match &u.content {
            UpdateContent::Message(m) if m.forum_topic_created.is_some() => "topic_created",
            UpdateContent::Message(m) if m.media_group_id.is_some() => "album",
            UpdateContent::Message(m) if m.forward_origin.is_some() => "forward",
            UpdateContent::Message(m) if m.reply_to_message.is_some() => "reply",
            UpdateContent::Message(m) if m.message_thread_id.is_some() => "in_topic",
            UpdateContent::Message(m) if m.photo.is_some() => "photo",
            UpdateContent::Message(m) if m.voice.is_some() => "voice",
            UpdateContent::Message(m) if m.video.is_some() => "video",
            UpdateContent::Message(m) if m.audio.is_some() => "audio",
            UpdateContent::Message(m) if m.document.is_some() => "document",
            UpdateContent::Message(m) if m.entities.is_some() => "command",
            UpdateContent::EditedMessage(_) => "edited",
            UpdateContent::CallbackQuery(q) => {
                assert_eq!(q.id, pressed.callback_query_id);
                "callback"
            }
            UpdateContent::MessageReaction(_) => "reaction",
            other => panic!("unexpected update {other:?}"),
        });
    }
    let expected = [
        "album",
        "audio",
        "callback",
        "command",
        "document",
        "edited",
        "forward",
        "in_topic",
        "photo",
        "reaction",
        "reply",
        "topic_created",
        "video",
        "voice",
    ];
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), expected);

    let cq = AnswerCallbackQueryParams::builder()
        .callback_query_id(pressed.callback_query_id)
        .text("ok")
        .build();
    assert!(typed::<bool>(
        &call_with(&h, "answerCallbackQuery", &cq).await
    ));
    let info: WebhookInfo = typed(&h.call("getWebhookInfo", json!({})).await);
    assert_eq!(info.url, "");
}

#[tokio::test]
async fn error_answers_deserialize_as_frankenstein_error_responses() {
    let h = Harness::start().await;
    h.fake
        .control()
        .add_fault(tg_fake::FaultSpec {
            method: "sendMessage".into(),
            kind: tg_fake::FaultKind::Flood,
            count: Some(1),
            probability: None,
            retry_after: Some(12),
            delay_ms: None,
        })
        .unwrap();
    let flood = h
        .call("sendMessage", json!({ "chat_id": h.chat(), "text": "x" }))
        .await;
    let e: ErrorResponse = serde_json::from_value(flood.body.clone()).unwrap();
    assert_eq!(
        (e.error_code, e.parameters.and_then(|p| p.retry_after)),
        (429, Some(12))
    );
    for body in [
        h.call(
            "sendMessage",
            json!({ "chat_id": h.chat(), "text": "<b>", "parse_mode": "HTML" }),
        )
        .await
        .body,
        h.call("nope", json!({})).await.body,
        h.call("getUpdates", json!({ "offset": "x" })).await.body,
    ] {
        let e: Result<ErrorResponse, _> = serde_json::from_value::<ErrorResponse>(body.clone());
        assert!(e.is_ok(), "{body}");
    }
    let v: Value = h
        .http
        .get(h.fake.method_url("1:bad", "getMe"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_value::<ErrorResponse>(v)
            .unwrap()
            .error_code,
        401
    );
}
