//! pi's events, as `pi --mode rpc` prints them and as the extension forwards them. Kept as raw
//! JSON so event types and fields pi adds later pass through untouched; accessors read what the
//! hub needs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds the hub acts on; everything else is [`EventKind::Other`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A run started.
    AgentStart,
    /// A run ended (not final: retries and follow-ups may follow).
    AgentEnd,
    /// pi is idle: the turn is over.
    AgentSettled,
    /// A model turn started.
    TurnStart,
    /// A model turn ended.
    TurnEnd,
    /// A message started.
    MessageStart,
    /// Streaming delta.
    MessageUpdate,
    /// A message is complete.
    MessageEnd,
    /// A tool's run, at the phase the event reports.
    ToolExecution(ToolPhase),
    /// Steering/follow-up queue changed.
    QueueUpdate,
    /// Compaction started.
    CompactionStart,
    /// Compaction ended.
    CompactionEnd,
    /// An extension asks the client for UI (RPC only).
    ExtensionUiRequest,
    /// Anything else, by name.
    Other(String),
}

/// Which step of a tool's run a `tool_execution_*` event reports: matched as this enum, so a
/// phase pi renames is one place here, not strings spread through the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPhase {
    /// `tool_execution_start`: the tool's name and arguments.
    Start,
    /// `tool_execution_update`: partial output while it runs.
    Update,
    /// `tool_execution_end`: its result, and whether it failed.
    End,
}

/// One pi event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PiEvent(pub Value);

impl PiEvent {
    /// The event's `type`.
    pub fn kind(&self) -> EventKind {
        match self.0.get("type").and_then(Value::as_str).unwrap_or("") {
            "agent_start" => EventKind::AgentStart,
            "agent_end" => EventKind::AgentEnd,
            "agent_settled" => EventKind::AgentSettled,
            "turn_start" => EventKind::TurnStart,
            "turn_end" => EventKind::TurnEnd,
            "message_start" => EventKind::MessageStart,
            "message_update" => EventKind::MessageUpdate,
            "message_end" => EventKind::MessageEnd,
            "tool_execution_start" => EventKind::ToolExecution(ToolPhase::Start),
            "tool_execution_update" => EventKind::ToolExecution(ToolPhase::Update),
            "tool_execution_end" => EventKind::ToolExecution(ToolPhase::End),
            "queue_update" => EventKind::QueueUpdate,
            "compaction_start" => EventKind::CompactionStart,
            "compaction_end" => EventKind::CompactionEnd,
            "extension_ui_request" => EventKind::ExtensionUiRequest,
            other => EventKind::Other(other.to_owned()),
        }
    }

    /// `agent_settled.aborted`.
    pub fn aborted(&self) -> bool {
        self.0
            .get("aborted")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The message of `message_start`/`message_end`.
    pub fn message(&self) -> Option<&Value> {
        self.0.get("message")
    }

    /// For an assistant `message_end`: `(text, stop_reason, error_message)`.
    pub fn assistant_message(&self) -> Option<(String, Option<String>, Option<String>)> {
        let m = self.message()?;
        if m.get("role").and_then(Value::as_str) != Some("assistant") {
            return None;
        }
        let text = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        };
        let stop = m
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let error = m
            .get("errorMessage")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Some((text, stop, error))
    }

    /// Steering plus follow-up messages waiting (`queue_update`).
    pub fn queued_count(&self) -> usize {
        let n = |k: &str| self.0.get(k).and_then(Value::as_array).map_or(0, Vec::len);
        n("steering") + n("followUp")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_assistant_text_and_tolerates_unknown_events() {
        let e = PiEvent(json!({"type":"message_end","message":{"role":"assistant",
            "content":[{"type":"text","text":"echo: "},{"type":"toolCall"},{"type":"text","text":"hi"}],"stopReason":"stop"}}));
        assert_eq!(e.kind(), EventKind::MessageEnd);
        assert_eq!(
            e.assistant_message(),
            Some(("echo: hi".into(), Some("stop".into()), None))
        );
        let u = PiEvent(json!({"type":"brand_new_event","x":1}));
        assert_eq!(u.kind(), EventKind::Other("brand_new_event".into()));
        for (name, phase) in [
            ("tool_execution_start", ToolPhase::Start),
            ("tool_execution_update", ToolPhase::Update),
            ("tool_execution_end", ToolPhase::End),
        ] {
            let e = PiEvent(json!({"type": name, "toolCallId": "c"}));
            assert_eq!(e.kind(), EventKind::ToolExecution(phase), "{name}");
        }
        let user = PiEvent(json!({"type":"message_end","message":{"role":"user","content":"q"}}));
        assert_eq!(user.assistant_message(), None);
        assert_eq!(
            PiEvent(json!({"type":"queue_update","steering":[1],"followUp":[2,3]})).queued_count(),
            3
        );
    }
}
