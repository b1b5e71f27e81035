//! A headless pi's turn that a hub crash cut off, judged from pi's own session file: answered
//! from there, run again, or (when pi had started a tool) left interrupted.
//!
//! Why the file can be trusted for this: pi appends each message to its session file when the
//! message ends, before the next step starts (the session's listener is awaited by pi's agent
//! loop, and the append is synchronous). So a tool pi ran is preceded in the file by the
//! assistant message that called it, and a prompt pi recorded but never acted on shows no such
//! message. A file that does not exist means pi recorded nothing of the session yet. What the
//! file cannot tell (no session file known, the old pi still running, a file that cannot be
//! read) is judged as the hub always did: interrupted.

use std::path::Path;

use serde_json::{Value, json};
use wire::PiEvent;

/// What a cut-off turn's session file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// pi never recorded the prompt: it runs again, as if new.
    NotStarted,
    /// pi recorded the prompt and nothing that acts on anything (no tool call): it runs again,
    /// and pi is told it sees the prompt a second time.
    Again,
    /// pi had finished it: the answer, from the file.
    Answered {
        /// The last assistant message's text.
        text: String,
        /// pi's error, when the turn ended with one.
        error: Option<String>,
    },
    /// pi had started these tools and not finished: never run blind a second time.
    ToolsStarted(Vec<String>),
    /// The file says nothing reliable (unreadable, not a regular file, the old pi alive).
    Unknown(String),
}

/// Judges the session file at `path` for a prompt containing `words`, dispatched at
/// `dispatched_ms` (the hub's clock, the machine's: pi's message timestamps are the same
/// clock's). Blocks on the disk.
pub fn judge_file(path: &Path, words: &str, dispatched_ms: i64) -> Resume {
    let text = match crate::regular::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Resume::NotStarted,
        Err(e) => return Resume::Unknown(format!("its session file could not be read: {e}")),
    };
    judge(&text, words, dispatched_ms)
}

/// [`judge_file`] on the file's text.
pub fn judge(session: &str, words: &str, dispatched_ms: i64) -> Resume {
    let messages: Vec<Value> = session
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("message"))
        .filter_map(|mut e| e.get_mut("message").map(Value::take))
        .collect();
    // The prompt: the first user message pi recorded at or after the dispatch that holds the
    // person's words (an earlier turn with the same words was recorded before this dispatch).
    let Some(start) = messages.iter().position(|m| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && m.get("timestamp")
                .and_then(Value::as_i64)
                .is_some_and(|at| at >= dispatched_ms)
            && content_text(m).contains(words.trim())
    }) else {
        return Resume::NotStarted;
    };
    let after = &messages[start + 1..];
    let mut tools = Vec::new();
    let mut last = None;
    for m in after {
        let Some((text, stop, error)) =
            PiEvent(json!({ "type": "message_end", "message": m })).assistant_message()
        else {
            continue;
        };
        for call in tool_calls(m) {
            if !tools.contains(&call) {
                tools.push(call);
            }
        }
        last = Some((text, stop, error));
    }
    match last {
        Some((text, Some(stop), error)) if stop == "stop" || stop == "length" => {
            Resume::Answered { text, error }
        }
        Some((text, Some(stop), error)) if stop == "error" => Resume::Answered {
            text,
            error: error.or_else(|| Some("model error".into())),
        },
        _ if !tools.is_empty() => Resume::ToolsStarted(tools),
        _ => Resume::Again,
    }
}

fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn tool_calls(message: &Value) -> Vec<String> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("toolCall"))
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("a tool")
                .to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn line(message: Value) -> String {
        json!({ "type": "message", "id": "x", "parentId": null,
                "timestamp": "2026-12-04T10:00:00.000Z", "message": message })
        .to_string()
    }

    fn user(text: &str, at: i64) -> String {
        line(
            json!({ "role": "user", "content": [{ "type": "text", "text": text }], "timestamp": at }),
        )
    }

    fn assistant(parts: Value, stop: &str) -> String {
        line(json!({ "role": "assistant", "content": parts, "stopReason": stop, "timestamp": 0 }))
    }

    fn file(lines: &[String]) -> String {
        let header = json!({ "type": "session", "id": "s", "cwd": "/p" }).to_string();
        std::iter::once(header)
            .chain(lines.iter().cloned())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_prompt_pi_never_recorded_runs_again() {
        let earlier = file(&[
            user("yes", 100),
            assistant(json!([{ "type": "text", "text": "done" }]), "stop"),
        ]);
        // The same words answered before this dispatch are another turn's.
        assert_eq!(judge(&earlier, "yes", 500), Resume::NotStarted);
        assert_eq!(judge("", "yes", 500), Resume::NotStarted);
    }

    #[test]
    fn a_recorded_prompt_without_tools_runs_again() {
        let f = file(&[
            user("[telegram]\nwrite a poem", 600),
            assistant(json!([{ "type": "text", "text": "Roses" }]), "aborted"),
        ]);
        assert_eq!(judge(&f, "write a poem", 500), Resume::Again);
        assert_eq!(
            judge(&file(&[user("write a poem", 600)]), "write a poem", 500),
            Resume::Again
        );
    }

    #[test]
    fn a_started_tool_is_never_run_blind_again() {
        let f = file(&[
            user("deploy", 600),
            assistant(
                json!([{ "type": "text", "text": "I will" },
                       { "type": "toolCall", "id": "1", "name": "bash", "arguments": {} }]),
                "toolUse",
            ),
        ]);
        assert_eq!(
            judge(&f, "deploy", 500),
            Resume::ToolsStarted(vec!["bash".into()])
        );
    }

    #[test]
    fn a_finished_answer_is_taken_from_the_file() {
        let f = file(&[
            user("deploy", 600),
            assistant(
                json!([{ "type": "toolCall", "id": "1", "name": "bash", "arguments": {} }]),
                "toolUse",
            ),
            line(json!({ "role": "toolResult", "toolCallId": "1", "content": [] })),
            assistant(json!([{ "type": "text", "text": "Deployed." }]), "stop"),
        ]);
        assert_eq!(
            judge(&f, "deploy", 500),
            Resume::Answered {
                text: "Deployed.".into(),
                error: None
            }
        );
    }

    #[test]
    fn a_model_error_is_the_turn_s_end() {
        let f = file(&[user("hi", 600), assistant(json!([]), "error")]);
        assert_eq!(
            judge(&f, "hi", 500),
            Resume::Answered {
                text: String::new(),
                error: Some("model error".into())
            }
        );
    }

    #[test]
    fn a_torn_last_line_is_ignored() {
        let mut f = file(&[user("hi", 600)]);
        f.push_str("\n{\"type\":\"message\",\"mess");
        assert_eq!(judge(&f, "hi", 500), Resume::Again);
    }
}
