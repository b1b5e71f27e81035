//! The fake over real HTTP: response shapes, markers, hooks.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use fake_llm::{FakeLlm, FakeLlmConfig, FakeLlmError, Reply};
use serde_json::{Value, json};

/// An HTTP client for the tests. reqwest is built without a rustls crypto provider
/// (`rustls-no-provider` in the workspace's Cargo.toml): ring is installed first.
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn start() -> FakeLlm {
    FakeLlm::start(FakeLlmConfig::default()).unwrap()
}

fn chat_body(user: &str, stream: bool) -> Value {
    json!({
        "model": "fake-model",
        "stream": stream,
        "messages": [
            { "role": "system", "content": "You are a test." },
            { "role": "user", "content": user },
        ],
    })
}

async fn post(llm: &FakeLlm, body: &Value) -> (u16, String, String) {
    let resp = http()
        .post(format!("{}/chat/completions", llm.base_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, resp.text().await.unwrap())
}

async fn complete(llm: &FakeLlm, user: &str) -> Value {
    let (status, content_type, text) = post(llm, &chat_body(user, false)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "application/json");
    serde_json::from_str(&text).unwrap()
}

/// The `data:` payloads of an SSE body; the last one must be `[DONE]`, which is dropped.
fn sse_chunks(text: &str) -> Vec<Value> {
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    let (last, chunks) = events.split_last().unwrap();
    assert_eq!(*last, "data: [DONE]");
    chunks
        .iter()
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

async fn stream(llm: &FakeLlm, user: &str) -> Vec<Value> {
    let (status, content_type, text) = post(llm, &chat_body(user, true)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "text/event-stream");
    sse_chunks(&text)
}

/// The streamed text content, finish reason and usage, checking the chunk framing on the way.
fn assemble_text(chunks: &[Value]) -> (String, String, Value) {
    let (usage_chunk, rest) = chunks.split_last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["object"], "chat.completion.chunk");
    let (finish_chunk, deltas) = rest.split_last().unwrap();
    assert_eq!(finish_chunk["choices"][0]["delta"], json!({}));
    assert_eq!(deltas[0]["choices"][0]["delta"]["role"], "assistant");
    let id = &chunks[0]["id"];
    let mut text = String::new();
    for chunk in rest {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(&chunk["id"], id);
        assert_eq!(chunk["model"], "fake-model");
        if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(piece);
        }
    }
    for chunk in deltas {
        assert!(chunk["choices"][0]["finish_reason"].is_null());
    }
    (
        text,
        finish_chunk["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_owned(),
        usage_chunk["usage"].clone(),
    )
}

#[tokio::test]
async fn models_and_healthz() {
    let llm = start();
    assert!(llm.base_url().starts_with("http://127.0.0.1:"));
    assert!(llm.base_url().ends_with("/v1"));
    let models: Value = http()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "fake-model");
    let health = http()
        .get(format!("http://{}/healthz", llm.addr()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let missing = http()
        .get(format!("http://{}/nope", llm.addr()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn plain_json_echo() {
    let llm = start();
    let resp = complete(&llm, "hello there").await;
    assert_eq!(resp["object"], "chat.completion");
    assert_eq!(resp["model"], "fake-model");
    let choice = &resp["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "echo: hello there");
    assert_eq!(choice["finish_reason"], "stop");
    let usage = &resp["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn plain_json_tool_call() {
    let llm = start();
    let resp = complete(&llm, "[[bash:ls -la]]").await;
    let choice = &resp["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    // What a model says before it calls a tool.
    assert_eq!(choice["message"]["content"], "Running `ls -la`.");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["function"]["name"], "bash");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({ "command": "ls -la" }));
}

#[tokio::test]
async fn streamed_echo() {
    let llm = start();
    let chunks = stream(&llm, "hello streaming world").await;
    let (text, finish, usage) = assemble_text(&chunks);
    assert_eq!(text, "echo: hello streaming world");
    assert_eq!(finish, "stop");
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0);
    // one chunk per word, so a client sees several deltas
    assert!(chunks.len() >= 4 + 3);
}

#[tokio::test]
async fn streamed_tool_call() {
    let llm = start();
    let chunks = stream(&llm, r#"[[tool:read:{"path":"notes.md"}]]"#).await;
    let (text, finish, _) = assemble_text(&chunks);
    assert_eq!(text, "");
    assert_eq!(finish, "tool_calls");
    let mut name = String::new();
    let mut args = String::new();
    let mut id = None;
    for chunk in &chunks {
        if let Some(calls) = chunk["choices"][0]["delta"]["tool_calls"].as_array() {
            assert_eq!(calls[0]["index"], 0);
            if let Some(i) = calls[0]["id"].as_str() {
                id = Some(i.to_owned());
            }
            name.push_str(calls[0]["function"]["name"].as_str().unwrap_or(""));
            args.push_str(calls[0]["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    assert!(id.unwrap().starts_with("call_"));
    assert_eq!(name, "read");
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({ "path": "notes.md" })
    );
}

#[tokio::test]
async fn reply_marker_keeps_newlines_when_streamed() {
    let llm = start();
    let (text, _, _) = assemble_text(&stream(&llm, "say [[reply:\n  line one\nline two\n]]").await);
    assert_eq!(text, "\n  line one\nline two\n");
    let resp = complete(&llm, "[[reply:exact]]").await;
    assert_eq!(resp["choices"][0]["message"]["content"], "exact");
}

#[tokio::test]
async fn tool_result_and_content_parts() {
    let llm = start();
    let body = json!({
        "stream": true,
        "messages": [
            { "role": "user", "content": [
                { "type": "text", "text": "look [[bash:echo hi]]" },
                { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgo=" } },
            ]},
            { "role": "assistant", "content": null, "tool_calls": [{ "id": "call_1", "type": "function",
              "function": { "name": "bash", "arguments": "{\"command\":\"echo hi\"}" } }] },
            { "role": "tool", "tool_call_id": "call_1", "content": [{ "type": "text", "text": "hi\n" }] },
        ],
    });
    let (status, _, text) = post(&llm, &body).await;
    assert_eq!(status, 200);
    let (text, _, _) = assemble_text(&sse_chunks(&text));
    assert_eq!(text, "tool said: hi");
}

#[tokio::test]
async fn error_codes() {
    let llm = start();
    for code in [400u16, 401, 429, 500, 503] {
        for streamed in [false, true] {
            let (status, content_type, text) =
                post(&llm, &chat_body(&format!("[[error:{code}]]"), streamed)).await;
            assert_eq!(status, code);
            assert_eq!(content_type, "application/json");
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["error"]["message"], format!("fake error {code}"));
            assert_eq!(body["error"]["type"], "fake_error");
            assert_eq!(body["error"]["code"], code);
        }
    }
}

#[tokio::test]
async fn summary_requests_get_the_fixed_summary() {
    let llm = start();
    let body = json!({ "messages": [
        { "role": "system", "content": "You are a context summarization assistant. Your task is ..." },
        { "role": "user", "content": "<conversation>[[error:500]] [[bash:false]]</conversation>" },
    ]});
    let (status, _, text) = post(&llm, &body).await;
    assert_eq!(status, 200);
    let resp: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        resp["choices"][0]["message"]["content"],
        fake_llm::plan::SUMMARY_TEXT
    );
}

#[tokio::test]
async fn script_queue_is_fifo_and_wins_over_markers() {
    let llm = start();
    llm.script(vec![
        json!("first canned"),
        json!({ "tool": "bash", "args": { "command": "pwd" } }),
        json!({ "error": 429 }),
    ])
    .unwrap();
    llm.push_reply(Reply::text("pushed"));
    let resp = complete(&llm, "[[reply:ignored]]").await;
    assert_eq!(resp["choices"][0]["message"]["content"], "first canned");
    let resp = complete(&llm, "x").await;
    assert_eq!(
        resp["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"command":"pwd"}"#
    );
    let (status, _, _) = post(&llm, &chat_body("x", false)).await;
    assert_eq!(status, 429);
    let (text, _, _) = assemble_text(&stream(&llm, "x").await);
    assert_eq!(text, "pushed");
    // queue drained: back to the rules
    let resp = complete(&llm, "rules again").await;
    assert_eq!(
        resp["choices"][0]["message"]["content"],
        "echo: rules again"
    );

    // an invalid entry queues nothing
    let err = llm
        .script(vec![json!("ok"), json!({ "bogus": true })])
        .unwrap_err();
    assert!(matches!(err, FakeLlmError::Script(_)));
    let resp = complete(&llm, "still rules").await;
    assert_eq!(
        resp["choices"][0]["message"]["content"],
        "echo: still rules"
    );
}

#[tokio::test]
async fn http_hooks() {
    let llm = start();
    let root = format!("http://{}", llm.addr());
    let client = http();
    let queued: Value = client
        .post(format!("{root}/__script"))
        .json(&json!({ "replies": ["one", { "text": "two" }] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(queued, json!({ "queued": 2 }));
    let bad = client
        .post(format!("{root}/__script"))
        .json(&json!({ "replies": [7] }))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    let resp = complete(&llm, "a").await;
    assert_eq!(resp["choices"][0]["message"]["content"], "one");
    let log: Value = client
        .get(format!("{root}/__requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(log, json!([chat_body("a", false)]));

    let reset = client.post(format!("{root}/__reset")).send().await.unwrap();
    assert_eq!(reset.status(), 200);
    assert!(llm.requests().is_empty());
    // the reset also dropped "two"
    let resp = complete(&llm, "b").await;
    assert_eq!(resp["choices"][0]["message"]["content"], "echo: b");
}

#[tokio::test]
async fn request_log_keeps_every_body_in_order() {
    let llm = start();
    complete(&llm, "one").await;
    stream(&llm, "two").await;
    post(&llm, &chat_body("[[error:500]]", false)).await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0], chat_body("one", false));
    assert_eq!(requests[1], chat_body("two", true));
    assert_eq!(requests[2]["messages"][1]["content"], "[[error:500]]");
    llm.reset();
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn bad_json_is_a_400() {
    let llm = start();
    let resp = http()
        .post(format!("{}/chat/completions", llm.base_url()))
        .body("{ not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("JSON"));
}

#[tokio::test]
async fn slow_replies_wait_between_words() {
    let delay = Duration::from_millis(40);
    let llm = FakeLlm::start(FakeLlmConfig {
        slow_delay: delay,
        ..FakeLlmConfig::default()
    })
    .unwrap();
    let started = Instant::now();
    let chunks = stream(&llm, "a b c [[slow]]").await;
    let elapsed = started.elapsed();
    let (text, _, _) = assemble_text(&chunks);
    assert_eq!(text, "echo: a b c [[slow]]");
    let words = text.split_whitespace().count() as u32;
    assert!(
        elapsed >= delay * words,
        "{elapsed:?} < {words} x {delay:?}"
    );
}

#[tokio::test]
async fn drop_stops_the_server() {
    let llm = start();
    let addr = llm.addr();
    drop(llm);
    // the listener closes once the server task has seen the stop signal
    let mut refused = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "still accepting on {addr}");
}

#[test]
fn start_needs_a_runtime_but_start_background_does_not() {
    assert!(matches!(
        FakeLlm::start(FakeLlmConfig::default()),
        Err(FakeLlmError::NoRuntime)
    ));
    let llm = FakeLlm::start_background(FakeLlmConfig::default()).unwrap();
    // a blocking client, as a synchronous test would use
    let mut stream = std::net::TcpStream::connect(llm.addr()).unwrap();
    use std::io::{Read as _, Write as _};
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

#[tokio::test]
async fn half_characters_are_streamed_as_escapes_and_read_back_leniently() {
    let llm = start();
    let (status, _, text) = post(&llm, &chat_body("[[split-emoji]]", true)).await;
    assert_eq!(status, 200, "{text}");
    // Each half in a chunk of its own, as JavaScript's JSON.parse reads them.
    assert!(text.contains(r#""content":"\ud83d""#), "{text}");
    assert!(text.contains(r#""content":"\ude00""#), "{text}");
    let (status, _, text) = post(&llm, &chat_body("[[lone-surrogate]]", false)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains(r#""content":"lone \ud800 surrogate""#),
        "{text}"
    );
    // The next request carries that answer back, as pi writes it: not refused.
    let body = r#"{"model":"fake-model","stream":false,"messages":[{"role":"assistant","content":"lone \ud800 surrogate"},{"role":"user","content":"next"}]}"#;
    let resp = http()
        .post(format!("{}/chat/completions", llm.base_url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "echo: next");
    assert_eq!(
        llm.requests()[2]["messages"][0]["content"],
        "lone \u{FFFD} surrogate"
    );
}
