//! The client against tg-fake: results, raw updates, and every error class.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;
use telegram::{ApiErrorKind, CallError, Client, ClientOptions, Token};
use tg_fake::{FakeConfig, FakeServer, FaultKind, FaultSpec};

async fn setup() -> (FakeServer, Client) {
    let fake = FakeServer::start(FakeConfig {
        has_topics_enabled: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let client = Client::new(
        fake.base_url(),
        Token::new(tg_fake::DEFAULT_TOKEN).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    (fake, client)
}

fn fault(fake: &FakeServer, method: &str, kind: FaultKind) {
    fake.control()
        .add_fault(FaultSpec {
            method: method.into(),
            kind,
            count: Some(1),
            probability: None,
            retry_after: Some(4),
            delay_ms: None,
        })
        .unwrap();
}

#[tokio::test]
async fn calls_return_results_and_updates_stay_raw() {
    let (fake, client) = setup().await;
    let me = client.call("getMe", &json!({})).await.unwrap();
    assert_eq!(me["has_topics_enabled"], json!(true));
    fake.control()
        .send_text(tg_fake::control::SendText {
            text: "héllo \u{1F600}".into(),
            ..Default::default()
        })
        .unwrap();
    let ups = client
        .get_updates(None, 100, Duration::from_secs(1), &["message"])
        .await
        .unwrap();
    assert_eq!(ups.len(), 1);
    let v: serde_json::Value = serde_json::from_str(&ups[0].json).unwrap();
    assert_eq!(v["message"]["text"], json!("héllo \u{1F600}"));
    assert_eq!(v["update_id"], json!(ups[0].update_id));
    let sent = client
        .call_multipart(
            "sendDocument",
            &json!({ "chat_id": 1001, "caption": "c", "reply_markup": { "inline_keyboard": [[{ "text": "x", "callback_data": "y" }]] } }),
            vec![telegram::Upload { field: "document".into(), file_name: "a.txt".into(), mime_type: Some("text/plain".into()), bytes: "abc".into() }],
        )
        .await
        .unwrap();
    let path = client
        .call(
            "getFile",
            &json!({ "file_id": sent["document"]["file_id"] }),
        )
        .await
        .unwrap();
    let bytes = client
        .download(path["file_path"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"abc");
}

#[tokio::test]
async fn lost_answers_are_commit_unknown_only_for_non_repeatable_methods() {
    let (fake, client) = setup().await;
    let send = json!({ "chat_id": 1001, "text": "x" });
    for kind in [
        FaultKind::CommitThenDrop,
        FaultKind::DropBefore,
        FaultKind::Http500,
    ] {
        fault(&fake, "sendMessage", kind);
        let e = client.call("sendMessage", &send).await.unwrap_err();
        assert!(matches!(e, CallError::CommitUnknown(_)), "{kind:?}: {e:?}");
    }
    fault(&fake, "createForumTopic", FaultKind::CommitThenDrop);
    let e = client
        .call("createForumTopic", &json!({ "chat_id": 1001, "name": "t" }))
        .await
        .unwrap_err();
    assert!(matches!(e, CallError::CommitUnknown(_)), "{e:?}");
    let m = client.call("sendMessage", &send).await.unwrap();
    for kind in [FaultKind::CommitThenDrop, FaultKind::Http500] {
        fault(&fake, "editMessageText", kind);
        let e = client
            .call(
                "editMessageText",
                &json!({ "chat_id": 1001, "message_id": m["message_id"], "text": "y" }),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::Retryable(_)), "{kind:?}: {e:?}");
    }
    fault(&fake, "getMe", FaultKind::Http500);
    assert!(matches!(
        client.call("getMe", &json!({})).await.unwrap_err(),
        CallError::Retryable(_)
    ));
}

#[tokio::test]
async fn nothing_sent_is_retryable_even_for_sends() {
    let (fake, _) = setup().await;
    let addr = fake.addr();
    drop(fake);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let client = Client::new(
        &format!("http://{addr}"),
        Token::new("1000:fake-token").unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let e = client
        .call("sendMessage", &json!({ "chat_id": 1, "text": "x" }))
        .await
        .unwrap_err();
    assert!(matches!(e, CallError::Retryable(_)), "{e:?}");
    assert!(
        !format!("{e} {e:?}").contains("fake-token"),
        "the token leaked: {e}"
    );
}

#[tokio::test]
async fn flood_waits_and_terminal_errors_are_classified() {
    let (fake, client) = setup().await;
    fault(&fake, "sendMessage", FaultKind::Flood);
    match client
        .call("sendMessage", &json!({ "chat_id": 1001, "text": "x" }))
        .await
        .unwrap_err()
    {
        CallError::Flood {
            retry_after,
            chat_id,
        } => {
            assert_eq!((retry_after, chat_id), (Duration::from_secs(4), Some(1001)));
        }
        other => panic!("{other:?}"),
    }
    fake.control().advance_clock(Duration::from_secs(5));
    let cases = [
        (
            json!({ "chat_id": 1001, "text": "x", "message_thread_id": 999 }),
            ApiErrorKind::ThreadNotFound,
        ),
        (
            json!({ "chat_id": 1001, "text": "<b>", "parse_mode": "HTML" }),
            ApiErrorKind::ParseEntities,
        ),
        (
            json!({ "chat_id": 1001, "text": "x".repeat(5000) }),
            ApiErrorKind::TooLong,
        ),
        (
            json!({ "chat_id": 42, "text": "x" }),
            ApiErrorKind::ChatNotFound,
        ),
    ];
    for (params, kind) in cases {
        let e = client.call("sendMessage", &params).await.unwrap_err();
        assert_eq!(e.api_kind(), Some(kind), "{e:?}");
    }
    let m = client
        .call("sendMessage", &json!({ "chat_id": 1001, "text": "same" }))
        .await
        .unwrap();
    let e = client
        .call(
            "editMessageText",
            &json!({ "chat_id": 1001, "message_id": m["message_id"], "text": "same" }),
        )
        .await
        .unwrap_err();
    assert_eq!(e.api_kind(), Some(ApiErrorKind::NotModified));
    let bad = Client::new(
        fake.base_url(),
        Token::new("1000:wrong").unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let e = bad.call("getMe", &json!({})).await.unwrap_err();
    assert_eq!(e.api_kind(), Some(ApiErrorKind::Unauthorized));
    assert!(!format!("{e} {e:?}").contains("wrong"));
}

#[tokio::test]
async fn conflicting_pollers_see_conflict() {
    let (_fake, client) = setup().await;
    let c2 = client.clone();
    let first = tokio::spawn(async move {
        c2.get_updates(None, 100, Duration::from_secs(10), &["message"])
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = client
        .get_updates(None, 100, Duration::from_secs(1), &["message"])
        .await;
    assert!(second.unwrap().is_empty());
    let e = first.await.unwrap().unwrap_err();
    assert_eq!(e.api_kind(), Some(ApiErrorKind::Conflict));
}
