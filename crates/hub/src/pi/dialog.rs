//! pi's dialogs (`ctx.ui.select/confirm/input/editor`) as a link reports them, and the answer
//! pi reads back. A headless pi asks over RPC (`extension_ui_request`, answered with
//! `extension_ui_response`, docs/rpc-extension-ui.md in pi's package); a pi with the extension
//! only says that it waits at its terminal (`ui_prompt_start`/`ui_prompt_end`), because pi's
//! extension API gives an extension no way to answer another one's dialog.

use serde_json::{Value, json};

pub use store::dialogs::Kind;

/// A dialog a headless pi opened: it waits until it is answered, its timeout passes, or the
/// run that asked ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// pi's id of the request (the answer names it).
    pub request_id: String,
    pub kind: Kind,
    pub title: String,
    /// `options` (select), `message` (confirm), `placeholder` (input), `prefill` (editor).
    pub body: Value,
    /// How long pi waits before it goes on with its default, if it said.
    pub timeout_ms: Option<u64>,
}

/// How a dialog ended in pi without an answer from Telegram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Its timeout passed: pi went on with its default.
    TimedOut,
    /// The run that asked ended (aborted, or done without waiting for it).
    InPi,
}

/// What a dialog was in pi's answer: `{"value": ..}`, `{"confirmed": ..}`, or
/// `{"cancelled": true}`, as `extension_ui_response` carries it.
pub fn cancelled() -> Value {
    json!({ "cancelled": true })
}

/// The dialog in one of pi's `extension_ui_request` lines; `None` for pi's fire-and-forget UI
/// calls (notify, setStatus...) and for a request without an id.
pub fn from_rpc(v: &Value) -> Option<Asked> {
    let kind = v
        .get("method")
        .and_then(Value::as_str)
        .and_then(Kind::parse)
        .filter(|k| *k != Kind::Terminal)?;
    let request_id = v.get("id").and_then(Value::as_str)?.to_owned();
    let field = |name: &str| v.get(name).cloned().unwrap_or(Value::Null);
    let body = match kind {
        Kind::Select => json!({ "options": options(v) }),
        Kind::Confirm => json!({ "message": field("message") }),
        Kind::Input => json!({ "placeholder": field("placeholder") }),
        Kind::Editor => json!({ "prefill": field("prefill") }),
        Kind::Terminal => Value::Null,
    };
    Some(Asked {
        request_id,
        kind,
        title: v
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        body,
        timeout_ms: v.get("timeout").and_then(Value::as_u64).filter(|t| *t > 0),
    })
}

/// A select's options as text (pi sends strings; anything else is shown as JSON).
fn options(v: &Value) -> Vec<String> {
    v.get("options")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The `extension_ui_response` line for `answer` (a stored answer; anything else cancels).
pub fn response(request_id: &str, answer: &Value) -> Value {
    let mut line = json!({ "type": "extension_ui_response", "id": request_id });
    let fields = ["value", "confirmed", "cancelled"];
    let mut any = false;
    for f in fields {
        if let Some(x) = answer.get(f) {
            line[f] = x.clone();
            any = true;
        }
    }
    if !any {
        line["cancelled"] = Value::Bool(true);
    }
    line
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pi_dialogs_are_read_and_fire_and_forget_calls_are_not() {
        let select = json!({ "type": "extension_ui_request", "id": "u1", "method": "select",
                             "title": "Pick", "options": ["a", "b", 3], "timeout": 10000 });
        let asked = from_rpc(&select).unwrap();
        assert_eq!(asked.kind, Kind::Select);
        assert_eq!(asked.request_id, "u1");
        assert_eq!(asked.body, json!({ "options": ["a", "b", "3"] }));
        assert_eq!(asked.timeout_ms, Some(10_000));
        let confirm =
            json!({ "id": "u2", "method": "confirm", "title": "Sure?", "message": "All lost." });
        let asked = from_rpc(&confirm).unwrap();
        assert_eq!(asked.body, json!({ "message": "All lost." }));
        assert_eq!(asked.timeout_ms, None);
        for v in [
            json!({ "id": "u3", "method": "notify", "message": "hi" }),
            json!({ "id": "u4", "method": "setStatus" }),
            json!({ "method": "input", "title": "no id" }),
            json!({ "id": "u5", "method": "terminal" }),
        ] {
            assert_eq!(from_rpc(&v), None, "{v}");
        }
    }

    #[test]
    fn the_response_carries_the_answer_or_cancels() {
        assert_eq!(
            response("u1", &json!({ "value": "b" })),
            json!({ "type": "extension_ui_response", "id": "u1", "value": "b" })
        );
        assert_eq!(
            response("u2", &json!({ "confirmed": false })),
            json!({ "type": "extension_ui_response", "id": "u2", "confirmed": false })
        );
        assert_eq!(
            response("u3", &json!({ "other": 1 })),
            json!({ "type": "extension_ui_response", "id": "u3", "cancelled": true })
        );
        assert_eq!(response("u4", &cancelled())["cancelled"], true);
    }
}
