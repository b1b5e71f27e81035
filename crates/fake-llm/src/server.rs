//! The HTTP side: routes, the OpenAI response shapes and the SSE stream.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::plan::{self, Reply, ScriptEntryError};

/// Request bodies carry whole conversations and base64 images; axum's 2 MB default is too small.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// State shared by the handlers and the [`crate::FakeLlm`] handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) model_id: String,
    pub(crate) slow_delay: Duration,
    log_file: Option<PathBuf>,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    script: VecDeque<Reply>,
    requests: Vec<Value>,
    /// When each request of `requests` arrived, in microseconds since the Unix epoch.
    arrivals_us: Vec<u64>,
    /// The `usage` of every completion answered, in order (errors report none).
    usages: Vec<Value>,
    /// Numbers response and tool-call ids. Never reset, so ids stay unique for a pi session
    /// that outlives a `/__reset`.
    next_id: u64,
}

impl Shared {
    pub(crate) fn new(model_id: String, slow_delay: Duration, log_file: Option<PathBuf>) -> Self {
        Self {
            model_id,
            slow_delay,
            log_file,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the queue or log half-updated, so a
        // poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn requests(&self) -> Vec<Value> {
        self.lock().requests.clone()
    }

    pub(crate) fn arrivals_us(&self) -> Vec<u64> {
        self.lock().arrivals_us.clone()
    }

    pub(crate) fn usages(&self) -> Vec<Value> {
        self.lock().usages.clone()
    }

    fn log_usage(&self, usage: &Value) {
        self.lock().usages.push(usage.clone());
    }

    pub(crate) fn reset(&self) {
        let mut inner = self.lock();
        inner.script.clear();
        inner.requests.clear();
        inner.arrivals_us.clear();
        inner.usages.clear();
    }

    /// Validates every entry first, so a bad entry queues nothing. Returns the queue length.
    pub(crate) fn script(&self, entries: &[Value]) -> Result<usize, ScriptEntryError> {
        let replies = entries
            .iter()
            .map(Reply::from_script_entry)
            .collect::<Result<Vec<_>, _>>()?;
        let mut inner = self.lock();
        inner.script.extend(replies);
        Ok(inner.script.len())
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.lock().script.push_back(reply);
    }

    /// Logs the request and decides the reply: the script queue first, then the marker rules.
    fn take_reply(&self, body: &Value) -> (Reply, u64) {
        let mut inner = self.lock();
        inner.requests.push(body.clone());
        inner.arrivals_us.push(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
        );
        inner.next_id += 1;
        let id = inner.next_id;
        if let Some(path) = &self.log_file {
            // The log is a debugging aid; failing to write it must not fail the request.
            let line = format!("{body}\n");
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = written {
                tracing::warn!("fake-llm: cannot append to {}: {e}", path.display());
            }
        }
        let reply = match inner.script.pop_front() {
            Some(reply) => reply,
            None => plan::plan(body),
        };
        (reply, id)
    }
}

pub(crate) fn app(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/chat/completions", post(chat_completions))
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({ "ok": true })) }),
        )
        .route("/__requests", get(requests))
        .route("/__script", post(script))
        .route("/__reset", post(reset))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(status: StatusCode, message: &str, kind: &str) -> Response {
    json_response(
        status,
        &json!({ "error": { "message": message, "type": kind, "code": status.as_u16() } }),
    )
}

async fn not_found(uri: axum::http::Uri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        &format!("not found: {uri}"),
        "not_found",
    )
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({ "object": "list", "data": [
            { "id": shared.model_id, "object": "model", "created": 0, "owned_by": "fake" }
        ]}),
    )
}

async fn requests(State(shared): State<Arc<Shared>>) -> Response {
    json_response(StatusCode::OK, &Value::Array(shared.requests()))
}

async fn reset(State(shared): State<Arc<Shared>>) -> Response {
    shared.reset();
    json_response(StatusCode::OK, &json!({ "ok": true }))
}

async fn script(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("body is not JSON: {e}"),
                "invalid_request_error",
            );
        }
    };
    let Some(entries) = parsed.get("replies").and_then(Value::as_array) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "expected {\"replies\": [...]}",
            "invalid_request_error",
        );
    };
    match shared.script(entries) {
        Ok(queued) => json_response(StatusCode::OK, &json!({ "queued": queued })),
        Err(e) => error_response(
            StatusCode::BAD_REQUEST,
            &e.to_string(),
            "invalid_request_error",
        ),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    // Read like a lenient provider: a conversation that holds half a character (a lone
    // surrogate escape, from an earlier `[[lone-surrogate]]` answer) is still a conversation.
    let text = String::from_utf8_lossy(&body);
    let body: Value = match serde_json::from_str(&wire::repair_surrogates(&text)) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("body is not JSON: {e}"),
                "invalid_request_error",
            );
        }
    };
    let (reply, id) = shared.take_reply(&body);
    let answer = match &reply {
        Reply::Text { text, slow } => Answer::Text { text, slow: *slow },
        Reply::ToolCall { name, args, text } => Answer::Tool {
            name,
            args,
            text: text.as_deref(),
        },
        Reply::Utf16 { pieces } => Answer::Utf16 { pieces },
        Reply::Error { status, message } => {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error_response(status, message, "fake_error");
        }
    };
    let ids = Ids {
        completion: format!("chatcmpl-fake{id:06}"),
        call: format!("call_fake{id:06}"),
        created: unix_now(),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(&shared.model_id)
            .to_owned(),
    };
    let prompt_tokens = plan::cache_split(&body);
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        stream_response(&shared, &answer, &ids, prompt_tokens, shared.slow_delay)
    } else {
        plain_response(&shared, &answer, &ids, prompt_tokens)
    }
}

/// A reply that is answered with a completion (errors are answered before).
enum Answer<'a> {
    Text {
        text: &'a str,
        slow: bool,
    },
    Tool {
        name: &'a str,
        args: &'a Value,
        text: Option<&'a str>,
    },
    Utf16 {
        pieces: &'a [Vec<u16>],
    },
}

/// `value` serialized, its string `"content":""` (the one there is) replaced by `content`,
/// a JSON string written by [`plan::json_utf16`].
fn with_raw_content(value: &Value, content: &str) -> String {
    value
        .to_string()
        .replacen("\"content\":\"\"", &format!("\"content\":{content}"), 1)
}

struct Ids {
    completion: String,
    call: String,
    created: u64,
    model: String,
}

/// The usage the fake reports: its prompt tokens ([`plan::prompt_tokens`]) split as a prompt
/// cache would ([`plan::cache_split`]: OpenAI's `prompt_tokens_details.cached_tokens` and the
/// `cache_write_tokens` OpenRouter-compatible providers add), and the completion's pieces.
fn usage(prompt: plan::PromptTokens, completion: u64) -> Value {
    json!({
        "prompt_tokens": prompt.total(),
        "completion_tokens": completion,
        "total_tokens": prompt.total() + completion,
        "prompt_tokens_details": {
            "cached_tokens": prompt.cache_read,
            "cache_write_tokens": prompt.cache_write,
        },
    })
}

fn plain_response(
    shared: &Shared,
    answer: &Answer<'_>,
    ids: &Ids,
    prompt_tokens: plan::PromptTokens,
) -> Response {
    let (message, finish, completion_tokens) = match answer {
        Answer::Text { text, .. } => (
            json!({ "role": "assistant", "content": text }),
            "stop",
            plan::stream_pieces(text).len() as u64,
        ),
        Answer::Tool { name, args, text } => (
            json!({ "role": "assistant", "content": text, "tool_calls": [{
                "id": ids.call, "type": "function",
                "function": { "name": name, "arguments": args.to_string() },
            }]}),
            "tool_calls",
            10,
        ),
        Answer::Utf16 { pieces } => (
            json!({ "role": "assistant", "content": "" }),
            "stop",
            pieces.len() as u64,
        ),
    };
    let usage = usage(prompt_tokens, completion_tokens);
    shared.log_usage(&usage);
    let body = json!({
        "id": ids.completion,
        "object": "chat.completion",
        "created": ids.created,
        "model": ids.model,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
        "usage": usage,
    });
    match answer {
        Answer::Utf16 { pieces } => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            with_raw_content(&body, &plan::json_utf16(&pieces.concat())),
        )
            .into_response(),
        _ => json_response(StatusCode::OK, &body),
    }
}

fn sse_event(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

fn stream_response(
    shared: &Shared,
    answer: &Answer<'_>,
    ids: &Ids,
    prompt_tokens: plan::PromptTokens,
    slow_delay: Duration,
) -> Response {
    let chunk = |delta: Value, finish: Option<&str>| {
        sse_event(&json!({
            "id": ids.completion,
            "object": "chat.completion.chunk",
            "created": ids.created,
            "model": ids.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        }))
    };
    // Each event with the delay to wait before sending it.
    let mut events: Vec<(Duration, Bytes)> = Vec::new();
    events.push((
        Duration::ZERO,
        chunk(json!({ "role": "assistant", "content": "" }), None),
    ));
    let (finish, completion_tokens) = match answer {
        Answer::Text { text, slow } => {
            let pieces = plan::stream_pieces(text);
            let delay = if *slow { slow_delay } else { Duration::ZERO };
            for piece in &pieces {
                events.push((delay, chunk(json!({ "content": piece }), None)));
            }
            ("stop", pieces.len() as u64)
        }
        Answer::Tool { name, args, text } => {
            for piece in text.map(plan::stream_pieces).unwrap_or_default() {
                events.push((Duration::ZERO, chunk(json!({ "content": piece }), None)));
            }
            let args = args.to_string();
            events.push((
                Duration::ZERO,
                chunk(
                    json!({ "tool_calls": [{ "index": 0, "id": ids.call, "type": "function",
                        "function": { "name": name, "arguments": "" } }] }),
                    None,
                ),
            ));
            // Arguments arrive in two pieces, as real providers split them, so clients must
            // concatenate the deltas.
            let mut half = args.len() / 2;
            while !args.is_char_boundary(half) {
                half += 1;
            }
            for piece in [&args[..half], &args[half..]] {
                events.push((
                    Duration::ZERO,
                    chunk(
                        json!({ "tool_calls": [{ "index": 0, "function": { "arguments": piece } }] }),
                        None,
                    ),
                ));
            }
            ("tool_calls", 10)
        }
        Answer::Utf16 { pieces } => {
            for piece in *pieces {
                let data = json!({
                    "id": ids.completion,
                    "object": "chat.completion.chunk",
                    "created": ids.created,
                    "model": ids.model,
                    "choices": [{ "index": 0, "delta": { "content": "" }, "finish_reason": null }],
                });
                let line = with_raw_content(&data, &plan::json_utf16(piece));
                events.push((Duration::ZERO, Bytes::from(format!("data: {line}\n\n"))));
            }
            ("stop", pieces.len() as u64)
        }
    };
    events.push((Duration::ZERO, chunk(json!({}), Some(finish))));
    // The include_usage-style last chunk: empty choices, usage only. Logged now: a client that
    // goes away before the end never reads it.
    let usage = usage(prompt_tokens, completion_tokens);
    shared.log_usage(&usage);
    events.push((
        Duration::ZERO,
        sse_event(&json!({
            "id": ids.completion,
            "object": "chat.completion.chunk",
            "created": ids.created,
            "model": ids.model,
            "choices": [],
            "usage": usage,
        })),
    ));
    events.push((Duration::ZERO, Bytes::from_static(b"data: [DONE]\n\n")));

    // When the client goes away the body stream is dropped, which ends the remaining sleeps.
    let stream = futures_util::stream::iter(events).then(|(delay, bytes)| async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok::<_, Infallible>(bytes)
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
