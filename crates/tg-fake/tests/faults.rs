//! Fault injection: every kind, by count and by probability.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::Harness;
use serde_json::json;
use tg_fake::{FaultKind, FaultSpec};

fn fault(method: &str, kind: FaultKind, count: Option<u32>) -> FaultSpec {
    FaultSpec {
        method: method.into(),
        kind,
        count,
        probability: None,
        retry_after: None,
        delay_ms: None,
    }
}

fn bot_messages(h: &Harness) -> usize {
    h.fake
        .control()
        .transcript(None, tg_fake::control::ThreadFilter::All, None)
        .unwrap()
        .iter()
        .filter(|m| m.from_bot)
        .count()
}

#[tokio::test]
async fn http_500_answers_without_effect_then_clears() {
    let h = Harness::start().await;
    h.fake
        .control()
        .add_fault(fault("sendMessage", FaultKind::Http500, Some(2)))
        .unwrap();
    let msg = json!({ "chat_id": h.chat(), "text": "x" });
    h.call("sendMessage", msg.clone())
        .await
        .expect_error(500, "Internal Server Error");
    h.call("sendMessage", msg.clone())
        .await
        .expect_error(500, "Internal Server Error");
    assert_eq!(bot_messages(&h), 0);
    assert!(h.call("sendMessage", msg).await.ok());
    assert_eq!(bot_messages(&h), 1);
    // Other methods were never affected.
    let log = h.fake.control().requests(0, Some("sendMessage"));
    assert_eq!(
        log.iter().map(|e| e.status).collect::<Vec<_>>(),
        vec![Some(500), Some(500), Some(200)]
    );
    assert_eq!(log[0].fault.as_deref(), Some("http_500"));
    assert!(!log[0].committed && log[2].committed);
}

#[tokio::test]
async fn delay_holds_the_answer() {
    let h = Harness::start().await;
    let mut spec = fault("getMe", FaultKind::Delay, Some(1));
    spec.delay_ms = Some(300);
    h.fake.control().add_fault(spec).unwrap();
    let started = Instant::now();
    assert!(h.call("getMe", json!({})).await.ok());
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn drop_before_closes_the_connection_and_nothing_happens() {
    let h = Harness::start().await;
    h.fake
        .control()
        .add_fault(fault("sendMessage", FaultKind::DropBefore, None))
        .unwrap();
    let err = h
        .try_call(
            "sendMessage",
            json!({ "chat_id": h.chat(), "text": "lost" }),
        )
        .await;
    assert!(err.is_err(), "expected a transport error, got {err:?}");
    assert_eq!(bot_messages(&h), 0);
    let log = h.fake.control().requests(0, Some("sendMessage"));
    assert_eq!((log[0].status, log[0].committed), (None, false));
    // The fault fired once; the next call works.
    assert!(
        h.call("sendMessage", json!({ "chat_id": h.chat(), "text": "ok" }))
            .await
            .ok()
    );
}

#[tokio::test]
async fn hang_holds_every_request_unanswered_until_the_client_gives_up() {
    let h = Harness::start().await;
    let mut spec = fault("*", FaultKind::Hang, None);
    spec.probability = Some(1.0);
    h.fake.control().add_fault(spec).unwrap();
    let msg = json!({ "chat_id": h.chat(), "text": "held" });
    for method in ["sendMessage", "getUpdates"] {
        let held = h
            .http
            .post(h.url(method))
            .json(&msg)
            .timeout(Duration::from_millis(400))
            .send()
            .await;
        let err = held.expect_err("a held request is never answered");
        assert!(
            err.is_timeout(),
            "{method}: expected the client's timeout, got {err:?}"
        );
    }
    assert_eq!(bot_messages(&h), 0, "a held request does nothing");
    let log = h.fake.control().requests(0, None);
    assert!(
        log.iter()
            .all(|e| e.fault.as_deref() == Some("hang") && e.status.is_none() && !e.committed),
        "{log:?}"
    );
    // The network is back: new requests are answered.
    h.fake.control().clear_faults();
    assert!(h.call("sendMessage", msg).await.ok());
    assert_eq!(bot_messages(&h), 1);
}

#[tokio::test]
async fn commit_then_drop_applies_the_effect_but_the_client_sees_a_broken_connection() {
    let h = Harness::start().await;
    h.enable_topics();
    h.fake
        .control()
        .add_fault(fault(
            "createForumTopic",
            FaultKind::CommitThenDrop,
            Some(1),
        ))
        .unwrap();
    let err = h
        .try_call(
            "createForumTopic",
            json!({ "chat_id": h.chat(), "name": "maybe" }),
        )
        .await;
    assert!(err.is_err(), "expected a transport error, got {err:?}");
    // The topic exists although the client never learned its id.
    let topics = h.fake.control().topics(None, None).unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].name, "maybe");
    let log = h.fake.control().requests(0, Some("createForumTopic"));
    assert_eq!(
        (log[0].status, log[0].committed, log[0].fault.as_deref()),
        (None, true, Some("commit_then_drop"))
    );
}

#[tokio::test]
async fn forced_flood_refuses_until_the_wait_passes() {
    let h = Harness::start().await;
    let mut spec = fault("sendMessage", FaultKind::Flood, Some(1));
    spec.retry_after = Some(7);
    h.fake.control().add_fault(spec).unwrap();
    let msg = json!({ "chat_id": h.chat(), "text": "x" });
    let first = h.call("sendMessage", msg.clone()).await;
    first.expect_error(429, "Too Many Requests: retry after 7");
    assert_eq!(first.body["parameters"]["retry_after"], json!(7));
    // The fault fired once, but the chat stays penalised until the wait has passed.
    let again = h.call("sendMessage", msg.clone()).await;
    assert_eq!(again.status, 429);
    assert!(again.body["parameters"]["retry_after"].as_u64().unwrap() <= 7);
    // Other chats and non-counted methods are unaffected.
    assert!(h.call("getMe", json!({})).await.ok());
    h.fake.control().advance_clock(Duration::from_secs(7));
    assert!(h.call("sendMessage", msg).await.ok());
    assert_eq!(bot_messages(&h), 1);
}

#[tokio::test]
async fn forced_flood_carries_retry_after_header_too() {
    let h = Harness::start().await;
    let mut spec = fault("sendMessage", FaultKind::Flood, Some(1));
    spec.retry_after = Some(3);
    h.fake.control().add_fault(spec).unwrap();
    let resp = h
        .http
        .post(h.url("sendMessage"))
        .json(&json!({ "chat_id": h.chat(), "text": "x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("3")
    );
}

#[tokio::test]
async fn forced_thread_not_found() {
    let h = Harness::start().await;
    h.fake
        .control()
        .add_fault(fault("sendMessage", FaultKind::ThreadNotFound, Some(1)))
        .unwrap();
    h.call("sendMessage", json!({ "chat_id": h.chat(), "text": "x" }))
        .await
        .expect_error(400, "Bad Request: message thread not found");
    assert_eq!(bot_messages(&h), 0);
}

#[tokio::test]
async fn probabilistic_faults_replay_with_the_same_seed() {
    async fn run(seed: u64) -> Vec<u16> {
        let h = Harness::with(tg_fake::FakeConfig {
            seed,
            ..Default::default()
        })
        .await;
        let mut spec = fault("*", FaultKind::Http500, None);
        spec.probability = Some(0.5);
        h.fake.control().add_fault(spec).unwrap();
        let mut statuses = Vec::new();
        for _ in 0..40 {
            statuses.push(h.call("getMe", json!({})).await.status);
        }
        statuses
    }
    let a = run(42).await;
    assert_eq!(a, run(42).await);
    let failures = a.iter().filter(|s| **s == 500).count();
    assert!((5..=35).contains(&failures), "{failures} of 40 failed");
    assert_ne!(a, run(43).await);
}

#[tokio::test]
async fn faults_can_be_listed_and_cleared() {
    let h = Harness::start().await;
    h.fake
        .control()
        .add_fault(fault("getMe", FaultKind::Http500, Some(3)))
        .unwrap();
    assert_eq!(h.fake.control().faults().len(), 1);
    h.fake.control().clear_faults();
    assert!(h.fake.control().faults().is_empty());
    assert!(h.call("getMe", json!({})).await.ok());
    let bad = h.fake.control().add_fault(FaultSpec {
        probability: Some(2.0),
        ..fault("getMe", FaultKind::Http500, None)
    });
    assert!(bad.is_err());
}

#[tokio::test]
async fn reset_mid_body_applies_the_effect_and_cuts_the_answer_after_its_headers() {
    let h = Harness::start().await;
    h.fake
        .control()
        .add_fault(fault("sendMessage", FaultKind::ResetMidBody, Some(1)))
        .unwrap();
    let resp = h
        .http
        .post(h.url("sendMessage"))
        .json(&json!({ "chat_id": h.chat(), "text": "cut" }))
        .send()
        .await
        .expect("the headers arrive");
    assert_eq!(resp.status().as_u16(), 200);
    let announced = resp.content_length().expect("a Content-Length");
    let body = resp.bytes().await;
    assert!(
        body.is_err(),
        "the body ends early: {body:?} of {announced} bytes"
    );
    assert_eq!(bot_messages(&h), 1, "the effect happened");
    let log = h.fake.control().requests(0, Some("sendMessage"));
    assert_eq!(
        (log[0].status, log[0].committed, log[0].fault.as_deref()),
        (None, true, Some("reset_mid_body"))
    );
    // On the wire: the whole answer announced, half of it written, then the end.
    h.fake
        .control()
        .add_fault(fault("getMe", FaultKind::ResetMidBody, Some(1)))
        .unwrap();
    let (raw, announced) = raw_get(&h, "getMe").await;
    let text = String::from_utf8_lossy(&raw);
    let head_end = text.find("\r\n\r\n").expect("whole headers") + 4;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let got = raw.len() - head_end;
    assert!(
        got > 0 && got < announced,
        "{got} of {announced} body bytes: {text}"
    );
    // Once: the next call is answered whole.
    assert!(h.call("getMe", json!({})).await.ok());
}

/// A GET over a bare TCP connection, read until the server closes it: the bytes and the
/// `Content-Length` the answer announced.
async fn raw_get(h: &Harness, method: &str) -> (Vec<u8>, usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = reqwest::Url::parse(&h.url(method)).unwrap();
    let mut conn = tokio::net::TcpStream::connect((
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap(),
    ))
    .await
    .unwrap();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: fake\r\nConnection: keep-alive\r\n\r\n",
        url.path()
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut raw))
        .await
        .expect("the server closes the connection")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let announced = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length header");
    (raw, announced)
}
