//! pi's technical activity as a person can follow it: completed tool calls and thinking, shown
//! compactly (collapsed quotes that open on a tap), with secrets taken out.
//!
//! These messages are evidence of what pi did, not the answer: they use Telegram HTML with an
//! expandable blockquote in both renderings (the reference keeps thinking that way too), with
//! the plain text as fallback.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use tg_format::html;

/// A tool call that finished.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    /// The tool (`bash`, `read`, ...).
    pub name: String,
    /// Its arguments.
    pub args: Value,
    /// Whether it succeeded.
    pub ok: bool,
    /// The start of what it returned.
    pub result: String,
}

impl ToolRecord {
    /// From a `tool_execution_end` event.
    pub fn from_event(e: &Value) -> Option<ToolRecord> {
        let name = e.get("toolName").and_then(Value::as_str)?.to_owned();
        let result = e
            .get("result")
            .map(|r| match r.get("content") {
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => r.as_str().map(str::to_owned).unwrap_or_default(),
            })
            .unwrap_or_default();
        Some(ToolRecord {
            name,
            args: e.get("args").cloned().unwrap_or(Value::Null),
            ok: !e.get("isError").and_then(Value::as_bool).unwrap_or(false),
            result: clip(&result, RESULT_CHARS),
        })
    }
}

/// How much of a tool's arguments a message shows.
const ARGS_CHARS: usize = 600;
/// How much of a tool's result a message shows.
const RESULT_CHARS: usize = 600;
/// How much thinking a message keeps (its latest part).
const THINKING_CHARS: usize = 3000;

/// Text cut to `max` characters, with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max).collect();
    s.push('…');
    s
}

/// The latest `max` characters of `text`, with `…` when cut.
pub fn tail(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_owned();
    }
    let s: String = text.chars().skip(n - max).collect();
    format!("…{s}")
}

static SECRETS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // `Authorization: Bearer …`, `Authorization: Basic …`, and the header as JSON.
        (
            r#"(?i)(authorization["']?\s*[:=]\s*["']?)(?:bearer\s+|basic\s+|token\s+)?[^\s"',}]+"#,
            "${1}[redacted]",
        ),
        (r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", "${1}[redacted]"),
        // `API_KEY=…`, `GITHUB_TOKEN: …`, `"password": "…"`, `--token …`.
        (
            r#"(?i)([A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|pwd)["']?\s*[:=]\s*["']?)[^\s"',;&}]+"#,
            "${1}[redacted]",
        ),
        (
            r"(?i)(--(?:api-?key|token|secret|password)[= ])\S+",
            "${1}[redacted]",
        ),
        // Well-known token shapes, wherever they are.
        (r"\b\d{6,12}:[A-Za-z0-9_-]{30,}\b", "[redacted bot token]"),
        (r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}\b", "[redacted key]"),
        (r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}\b", "[redacted token]"),
        (r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b", "[redacted token]"),
        (r"\bAKIA[0-9A-Z]{16}\b", "[redacted key]"),
    ]
    .into_iter()
    .filter_map(|(re, with)| Regex::new(re).ok().map(|r| (r, with)))
    .collect()
});

/// `text` with secrets it may carry replaced (tokens, keys, passwords, authorization headers).
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for (re, with) in SECRETS.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, *with).into_owned();
        }
    }
    out
}

/// A tool call's arguments as one short line: the command for `bash`, the path for file tools,
/// compact JSON otherwise; secrets redacted.
pub fn short_args(name: &str, args: &Value) -> String {
    let pick = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    let text = match name {
        "bash" => pick("command"),
        "read" | "write" | "edit" | "ls" => pick("path").or_else(|| pick("file_path")),
        "grep" | "find" => pick("pattern"),
        _ => None,
    }
    .unwrap_or_else(|| match args {
        Value::Null => String::new(),
        Value::Object(o) if o.is_empty() => String::new(),
        v => v.to_string(),
    });
    clip(&redact(&text).replace('\n', " ⏎ "), ARGS_CHARS)
}

/// Capitalised tool names read as labels: `bash` → `Bash`, `telegram_attach` → `Telegram
/// Attach`.
fn title(name: &str) -> String {
    name.split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A message (HTML and its plain text) for tool calls that finished one after another: a
/// summary line, and the calls in a collapsed quote.
pub fn tools_message(records: &[ToolRecord]) -> (String, String) {
    let summary: Vec<String> = records
        .iter()
        .map(|r| format!("{} {}", title(&r.name), if r.ok { "✓" } else { "✗" }))
        .collect();
    let head = format!("🔧 {}", summary.join(" · "));
    let mut lines_html = Vec::new();
    let mut lines_plain = Vec::new();
    for r in records {
        let args = short_args(&r.name, &r.args);
        let result = redact(r.result.trim());
        let status = if r.ok { "ok" } else { "error" };
        lines_plain.push(format!("{} {args} → {status}", title(&r.name)));
        lines_html.push(format!(
            "<b>{}</b> <code>{}</code> → {status}",
            html::escape(&title(&r.name)),
            html::escape(&args)
        ));
        if !result.is_empty() {
            lines_plain.push(result.clone());
            lines_html.push(html::escape(&result));
        }
    }
    let plain = format!("{head}\n{}", lines_plain.join("\n"));
    let html = format!(
        "{}\n<blockquote expandable>{}</blockquote>",
        html::escape(&head),
        lines_html.join("\n")
    );
    (html, plain)
}

/// A message (HTML and its plain text) for thinking pi exposed: its latest part in a collapsed
/// quote.
pub fn thinking_message(text: &str) -> (String, String) {
    let body = redact(&tail(text.trim(), THINKING_CHARS));
    let plain = format!("💭 Thinking\n{body}");
    let html = format!(
        "💭 Thinking\n<blockquote expandable>{}</blockquote>",
        html::escape(&body)
    );
    (html, plain)
}

/// The thinking text of an assistant message.
pub fn thinking_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("thinking"))
            .filter_map(|p| p.get("thinking").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    // Telegram's HTML parser reads the messages back (tg-format's `html` only escapes).
    use tg_model::html;

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(SECRETS.len(), 9, "every pattern compiles");
        for (input, secret) in [
            (
                "curl -H 'Authorization: Bearer abcdefghijklmnop' x",
                "abcdefghijklmnop",
            ),
            (
                "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv make",
                "sk-abcdefghijklmnopqrstuv",
            ),
            (r#"{"password": "hunter22"}"#, "hunter22"),
            ("tool --token s3cr3t-value run", "s3cr3t-value"),
            (
                "bot 123456789:AAabcdefghijklmnopqrstuvwxyz0123456 ok",
                "AAabcdefghijklmnopqrstuvwxyz0123456",
            ),
            (
                "push ghp_abcdefghijklmnopqrstuvwxyz012345",
                "ghp_abcdefghijklmnopqrstuvwxyz012345",
            ),
            ("GITHUB_TOKEN: abc123def456", "abc123def456"),
        ] {
            let out = redact(input);
            assert!(!out.contains(secret), "{input} -> {out}");
            assert!(out.contains("[redacted"), "{input} -> {out}");
        }
        assert_eq!(
            redact("ls -la /tmp && echo done"),
            "ls -la /tmp && echo done"
        );
    }

    #[test]
    fn a_tool_message_parses_as_telegram_html() {
        let records = vec![
            ToolRecord {
                name: "bash".into(),
                args: json!({ "command": "cat <a> && API_KEY=xyz123 run" }),
                ok: true,
                result: "line <1>\nline & 2".into(),
            },
            ToolRecord {
                name: "telegram_attach".into(),
                args: json!({ "paths": ["a.png"] }),
                ok: false,
                result: String::new(),
            },
        ];
        let (h, plain) = tools_message(&records);
        let parsed = html::parse(&h).unwrap_or_default();
        assert_eq!(parsed.text, plain);
        assert!(
            plain.starts_with("🔧 Bash ✓ · Telegram Attach ✗"),
            "{plain}"
        );
        assert!(!plain.contains("xyz123"));
        assert!(
            parsed
                .entities
                .iter()
                .any(|e| e["type"] == "expandable_blockquote")
        );
        let (h, plain) = thinking_message("weighing <options> & more");
        assert_eq!(html::parse(&h).unwrap_or_default().text, plain);
    }

    #[test]
    fn records_come_from_events() {
        let e = json!({ "type": "tool_execution_end", "toolCallId": "c", "toolName": "bash",
            "args": { "command": "echo hi" }, "isError": false,
            "result": { "content": [{ "type": "text", "text": "hi\n" }] } });
        let r = ToolRecord::from_event(&e).unwrap_or_else(|| panic!("no record"));
        assert_eq!(
            (r.name.as_str(), r.ok, r.result.as_str()),
            ("bash", true, "hi\n")
        );
        assert_eq!(short_args(&r.name, &r.args), "echo hi");
    }
}
