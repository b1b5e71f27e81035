//! Deciding what to answer to one chat request: the markers in the last user message, tool
//! results, pi's summary requests, and canned replies from the script queue.

use serde_json::{Value, json};

/// The fixed answer to pi's compaction and branch-summary requests.
pub const SUMMARY_TEXT: &str = "## Goal\nfake summary of the conversation\n## Progress\n- done";

/// How much of a tool result is quoted back in `tool said: …`.
const TOOL_RESULT_QUOTE_CHARS: usize = 2000;

/// What the fake answers to one chat request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An assistant text message. `slow` streams it word by word with the configured delay.
    Text {
        /// The exact assistant text.
        text: String,
        /// Stream word by word with a delay between words.
        slow: bool,
    },
    /// One call to the tool `name` with the JSON arguments `args`, after `text` if any (what a
    /// model says before it calls a tool).
    ToolCall {
        /// Tool name, e.g. `bash`.
        name: String,
        /// Tool arguments (a JSON object for every pi tool).
        args: Value,
        /// Text the same message has before the call.
        text: Option<String>,
    },
    /// An assistant text streamed as these pieces of UTF-16 code units, one chunk each, written
    /// with `\uXXXX` escapes: a piece may hold half a character, as a JavaScript string can (a
    /// lone surrogate; an emoji whose halves a provider streams in two chunks), which a Rust
    /// string cannot.
    Utf16 {
        /// The chunks.
        pieces: Vec<Vec<u16>>,
    },
    /// An HTTP error with an OpenAI-style error body.
    Error {
        /// HTTP status code.
        status: u16,
        /// The `error.message` of the body.
        message: String,
    },
}

impl Reply {
    /// A plain text reply, streamed at full speed.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            slow: false,
        }
    }

    /// A call to `name` with `args`.
    pub fn tool(name: impl Into<String>, args: Value) -> Self {
        Self::ToolCall {
            name: name.into(),
            args,
            text: None,
        }
    }

    /// A call to `name` with `args`, after `text`.
    pub fn tool_after(name: impl Into<String>, args: Value, text: impl Into<String>) -> Self {
        Self::ToolCall {
            name: name.into(),
            args,
            text: Some(text.into()),
        }
    }

    /// An HTTP error `status` with the message `fake error <status>`.
    pub fn error(status: u16) -> Self {
        Self::Error {
            status,
            message: format!("fake error {status}"),
        }
    }

    /// Parses one `/__script` entry: `"text"`, `{"text": "…", "slow"?: bool}`,
    /// `{"tool": "name", "args"?: {…}}` or `{"error": code}`.
    pub fn from_script_entry(entry: &Value) -> Result<Self, ScriptEntryError> {
        if let Some(text) = entry.as_str() {
            return Ok(Self::text(text));
        }
        let Some(obj) = entry.as_object() else {
            return Err(ScriptEntryError::new(
                entry,
                "expected a string or an object",
            ));
        };
        if let Some(name) = obj.get("tool") {
            let Some(name) = name.as_str().filter(|n| !n.is_empty()) else {
                return Err(ScriptEntryError::new(entry, "\"tool\" must be a tool name"));
            };
            let args = obj.get("args").cloned().unwrap_or_else(|| json!({}));
            return Ok(Self::tool(name, args));
        }
        if let Some(code) = obj.get("error") {
            let Some(status) = code.as_u64().and_then(valid_status) else {
                return Err(ScriptEntryError::new(
                    entry,
                    "\"error\" must be an HTTP status code (100-599)",
                ));
            };
            return Ok(Self::error(status));
        }
        if let Some(text) = obj.get("text") {
            let Some(text) = text.as_str() else {
                return Err(ScriptEntryError::new(entry, "\"text\" must be a string"));
            };
            let slow = obj.get("slow").and_then(Value::as_bool).unwrap_or(false);
            return Ok(Self::Text {
                text: text.to_owned(),
                slow,
            });
        }
        Err(ScriptEntryError::new(
            entry,
            "expected one of the keys \"text\", \"tool\", \"error\"",
        ))
    }
}

/// A `/__script` entry that is none of the accepted shapes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid script entry {entry}: {reason}")]
pub struct ScriptEntryError {
    entry: String,
    reason: &'static str,
}

impl ScriptEntryError {
    fn new(entry: &Value, reason: &'static str) -> Self {
        Self {
            entry: entry.to_string(),
            reason,
        }
    }
}

fn valid_status(code: u64) -> Option<u16> {
    u16::try_from(code).ok().filter(|c| (100..=599).contains(c))
}

/// Flattens OpenAI message content (a string, or an array of parts) into its text; image parts
/// and other non-text parts contribute nothing.
pub fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn role(msg: &Value) -> Option<&str> {
    msg.get("role").and_then(Value::as_str)
}

/// Whether this is pi's compaction or branch-summary call. Its prompt quotes the history,
/// markers included, so it must never be answered by the marker rules.
fn is_summary_request(messages: &[Value]) -> bool {
    let Some(first) = messages.first() else {
        return false;
    };
    if !matches!(role(first), Some("system" | "developer")) {
        return false;
    }
    let head: String = text_of(first.get("content")).chars().take(200).collect();
    head.contains("summarization")
}

/// The reply the marker rules give to a chat completion request body (the script queue is the
/// caller's business and comes first).
pub fn plan(body: &Value) -> Reply {
    let messages: &[Value] = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    if is_summary_request(messages) {
        return Reply::text(SUMMARY_TEXT);
    }
    if let Some(last) = messages.last()
        && role(last) == Some("tool")
    {
        let result = text_of(last.get("content"));
        let quoted: String = result
            .trim()
            .chars()
            .take(TOOL_RESULT_QUOTE_CHARS)
            .collect();
        return Reply::text(format!("tool said: {quoted}"));
    }
    let user = messages
        .iter()
        .rev()
        .find(|m| role(m) == Some("user"))
        .map(|m| text_of(m.get("content")))
        .unwrap_or_default();
    let slow = user.contains("[[slow]]");

    if let Some(status) = find_error_marker(&user) {
        return Reply::error(status);
    }
    if let Some(command) = find_marker(&user, "[[bash:") {
        return Reply::tool_after(
            "bash",
            json!({ "command": command }),
            format!("Running `{command}`."),
        );
    }
    if let Some(reply) = find_tool_marker(&user) {
        return reply;
    }
    if user.contains("[[lone-surrogate]]") {
        return Reply::Utf16 {
            pieces: vec![utf16("lone "), vec![0xD800], utf16(" surrogate")],
        };
    }
    if user.contains("[[split-emoji]]") {
        // 😀 is U+1F600: D83D DE00 in UTF-16.
        return Reply::Utf16 {
            pieces: vec![utf16("split "), vec![0xD83D], vec![0xDE00], utf16(" emoji")],
        };
    }
    if let Some(text) = find_marker(&user, "[[reply:") {
        return Reply::Text {
            text: text.to_owned(),
            slow,
        };
    }
    Reply::Text {
        text: format!("echo: {}", without_preamble(&user).trim()),
        slow,
    }
}

/// The person's words of a Telegram prompt: without the lines the hub puts before them
/// (`[telegram…]` and the tags after it, up to a blank line), so an echo says what the person
/// wrote. The whole prompt, lines included, stays in the request log.
pub fn without_preamble(user: &str) -> &str {
    if !user.starts_with("[telegram") {
        return user;
    }
    user.split_once("\n\n").map_or(user, |(_, words)| words)
}

fn utf16(text: &str) -> Vec<u16> {
    text.encode_utf16().collect()
}

/// UTF-16 code units as a JSON string (quotes included): ASCII as itself, everything else as
/// `\uXXXX`, so that a unit without its other half survives.
pub fn json_utf16(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for &u in units {
        match u8::try_from(u) {
            Ok(b'"') => out.push_str("\\\""),
            Ok(b'\\') => out.push_str("\\\\"),
            Ok(b) if (0x20..0x7f).contains(&b) => out.push(char::from(b)),
            _ => out.push_str(&format!("\\u{u:04x}")),
        }
    }
    out.push('"');
    out
}

/// The text between the first `open` and the next `]]` (which may span lines).
fn find_marker<'a>(text: &'a str, open: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find("]]")?;
    Some(&text[start..start + len])
}

/// The first `[[error:NNN]]` with exactly three digits.
fn find_error_marker(text: &str) -> Option<u16> {
    const OPEN: &str = "[[error:";
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        if let Some(digits) = after.get(..3)
            && digits.bytes().all(|b| b.is_ascii_digit())
            && after[3..].starts_with("]]")
            && let Ok(code) = digits.parse::<u16>()
            && let Some(code) = valid_status(u64::from(code))
        {
            return Some(code);
        }
        rest = after;
    }
    None
}

/// The first `[[tool:NAME:{json}]]`. The JSON ends at the first `}]]` after which the text parses,
/// so nested objects work. A marker whose JSON never parses is answered with a 400, so that a
/// typo in a test shows up as an error rather than as an echo.
fn find_tool_marker(text: &str) -> Option<Reply> {
    const OPEN: &str = "[[tool:";
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        rest = after;
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let Some(json_text) = after[name_len..].strip_prefix(':') else {
            continue;
        };
        if name.is_empty() || !json_text.starts_with('{') {
            continue;
        }
        let mut search_from = 0;
        while let Some(end) = json_text[search_from..].find("}]]") {
            let candidate = &json_text[..search_from + end + 1];
            if let Ok(args) = serde_json::from_str::<Value>(candidate) {
                return Some(Reply::tool(name, args));
            }
            search_from += end + 1;
        }
        return Some(Reply::Error {
            status: 400,
            message: format!("fake-llm: the arguments of [[tool:{name}:…]] are not valid JSON"),
        });
    }
    None
}

/// Splits `text` into stream pieces of one word each with the whitespace after it (leading
/// whitespace stays with the first word), so that the pieces concatenate to exactly `text`.
pub fn stream_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut prev_ws = false;
    let mut seen_word = false;
    for (i, c) in text.char_indices() {
        let ws = c.is_whitespace();
        if !ws && prev_ws && seen_word {
            pieces.push(&text[start..i]);
            start = i;
        }
        seen_word |= !ws;
        prev_ws = ws;
    }
    if start < text.len() || pieces.is_empty() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// A request's prompt tokens as the fake reports them: read from and written to a prompt
/// cache, and the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptTokens {
    /// Not cached.
    pub input: u64,
    /// Read from the cache.
    pub cache_read: u64,
    /// Written to the cache.
    pub cache_write: u64,
}

impl PromptTokens {
    /// All of them: [`prompt_tokens`].
    pub fn total(self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// The fake's prompt cache: every message before the last is read from it (the prefix a
/// provider saw in the previous request), and half the last message's tokens (rounded down)
/// are written to it; the other half is plain input. Deterministic, so a test can add up what
/// pi was told.
pub fn cache_split(body: &Value) -> PromptTokens {
    let words: Vec<u64> = body
        .get("messages")
        .and_then(Value::as_array)
        .map(|msgs| {
            msgs.iter()
                .map(|m| text_of(m.get("content")).split_whitespace().count() as u64)
                .collect()
        })
        .unwrap_or_default();
    let (last, before) = words.split_last().map_or((0, &[][..]), |(l, b)| (*l, b));
    PromptTokens {
        input: last - last / 2,
        cache_read: before.iter().sum(),
        cache_write: last / 2,
    }
}

/// Counts whitespace-separated words in every message: the fake's notion of prompt tokens.
pub fn prompt_tokens(body: &Value) -> u64 {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(0, |msgs| {
            msgs.iter()
                .map(|m| text_of(m.get("content")).split_whitespace().count() as u64)
                .sum()
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn user(text: &str) -> Value {
        json!({ "messages": [
            { "role": "system", "content": "you are pi" },
            { "role": "user", "content": text },
        ]})
    }

    #[test]
    fn an_echo_says_the_persons_words_without_the_hubs_lines() {
        let body = json!({ "messages": [{ "role": "user",
            "content": "[telegram|thread:A]\n[time] 2026-12-02 14:05 Wed (UTC+00:00)\n\nhello there" }] });
        match plan(&body) {
            Reply::Text { text, .. } => assert_eq!(text, "echo: hello there"),
            other => panic!("{other:?}"),
        }
        assert_eq!(without_preamble("no tag\n\nat all"), "no tag\n\nat all");
    }

    #[test]
    fn echo_uses_last_user_message_with_parts() {
        let body = json!({ "messages": [
            { "role": "user", "content": "first" },
            { "role": "assistant", "content": "echo: first" },
            { "role": "user", "content": [
                { "type": "text", "text": " second " },
                { "type": "image_url", "image_url": { "url": "data:image/png;base64,AAAA" } },
            ]},
        ]});
        assert_eq!(plan(&body), Reply::text("echo: second"));
    }

    #[test]
    fn markers() {
        assert_eq!(
            plan(&user("run [[bash:echo a]] now")),
            Reply::tool_after("bash", json!({ "command": "echo a" }), "Running `echo a`.")
        );
        assert_eq!(
            plan(&user(r#"[[tool:read:{"path":"a.txt","x":{"y":1}}]]"#)),
            Reply::tool("read", json!({ "path": "a.txt", "x": { "y": 1 } }))
        );
        assert_eq!(plan(&user("x [[error:503]]")), Reply::error(503));
        assert_eq!(
            plan(&user("[[reply:line one\nline two]]")),
            Reply::text("line one\nline two")
        );
        assert_eq!(
            plan(&user("hi [[slow]]")),
            Reply::Text {
                text: "echo: hi [[slow]]".into(),
                slow: true
            }
        );
    }

    #[test]
    fn half_characters() {
        let Reply::Utf16 { pieces } = plan(&user("[[lone-surrogate]]")) else {
            panic!("not a UTF-16 reply")
        };
        let json: Vec<String> = pieces.iter().map(|p| json_utf16(p)).collect();
        assert_eq!(json, [r#""lone ""#, r#""\ud800""#, r#"" surrogate""#]);
        let Reply::Utf16 { pieces } = plan(&user("[[split-emoji]]")) else {
            panic!("not a UTF-16 reply")
        };
        assert_eq!(
            String::from_utf16(&pieces.concat()).ok().as_deref(),
            Some("split 😀 emoji")
        );
        assert_eq!(json_utf16(&utf16("a\"b\\c\né")), r#""a\"b\\c\u000a\u00e9""#);
    }

    #[test]
    fn malformed_markers() {
        assert_eq!(
            plan(&user("[[error:12]] [[error:abc]]")),
            Reply::text("echo: [[error:12]] [[error:abc]]")
        );
        assert_eq!(
            plan(&user("[[error:1234]] then [[error:429]]")),
            Reply::error(429)
        );
        assert!(matches!(
            plan(&user("[[tool:x:{nope}]]")),
            Reply::Error { status: 400, .. }
        ));
        assert_eq!(
            plan(&user("[[bash:unclosed")),
            Reply::text("echo: [[bash:unclosed")
        );
    }

    #[test]
    fn tool_result_is_quoted() {
        let body = json!({ "messages": [
            { "role": "user", "content": "[[bash:echo hi]]" },
            { "role": "assistant", "content": null, "tool_calls": [] },
            { "role": "tool", "tool_call_id": "c1", "content": "hi\n" },
        ]});
        assert_eq!(plan(&body), Reply::text("tool said: hi"));
    }

    #[test]
    fn summary_requests_ignore_markers() {
        let body = json!({ "messages": [
            { "role": "system", "content": "You are a context summarization assistant." },
            { "role": "user", "content": "<conversation>[[error:500]] [[bash:rm -rf /]]</conversation>" },
        ]});
        assert_eq!(plan(&body), Reply::text(SUMMARY_TEXT));
    }

    #[test]
    fn script_entries() {
        assert_eq!(
            Reply::from_script_entry(&json!("hi")).unwrap(),
            Reply::text("hi")
        );
        assert_eq!(
            Reply::from_script_entry(&json!({ "tool": "bash", "args": { "command": "ls" } }))
                .unwrap(),
            Reply::tool("bash", json!({ "command": "ls" }))
        );
        assert_eq!(
            Reply::from_script_entry(&json!({ "error": 429 })).unwrap(),
            Reply::error(429)
        );
        assert_eq!(
            Reply::from_script_entry(&json!({ "text": "t", "slow": true })).unwrap(),
            Reply::Text {
                text: "t".into(),
                slow: true
            }
        );
        assert!(Reply::from_script_entry(&json!(3)).is_err());
        assert!(Reply::from_script_entry(&json!({ "error": 42 })).is_err());
        assert!(Reply::from_script_entry(&json!({ "other": 1 })).is_err());
    }

    #[test]
    fn pieces_concatenate_to_the_text() {
        for text in [
            "",
            "a",
            "echo: hello world",
            "  lead\n\ntrail  ",
            "x\ny z\n",
        ] {
            let pieces = stream_pieces(text);
            assert_eq!(pieces.concat(), text, "{text:?} -> {pieces:?}");
        }
        assert_eq!(stream_pieces("echo: a b"), vec!["echo: ", "a ", "b"]);
        assert_eq!(stream_pieces("\n a b"), vec!["\n a ", "b"]);
    }

    #[test]
    fn the_cache_reads_the_earlier_messages_and_writes_half_the_last() {
        let body = json!({ "messages": [
            { "role": "system", "content": "you are pi" },
            { "role": "user", "content": "one two three four five" },
        ]});
        let split = cache_split(&body);
        assert_eq!(
            split,
            PromptTokens {
                input: 3,
                cache_read: 3,
                cache_write: 2
            }
        );
        assert_eq!(split.total(), prompt_tokens(&body));
        assert_eq!(cache_split(&json!({})).total(), 0);
    }
}
