//! pi's stream: each event goes to the preview task; what lasts (activity, commentary, work
//! that did not come from Telegram) goes into the outbox at a message's end.

use serde_json::Value;
use store::outbox::Purpose;
use store::turns::{self, TurnState};
use store::{Connection, StoreError, kv};
use wire::{EventKind, PiEvent, ToolPhase, TurnId};

use super::{Conductor, Live};
use crate::assistant::Rendering;
use crate::db::Durability;
use crate::error::HubError;
use crate::outgoing::activity::{self, ToolRecord};
use crate::outgoing::outbound;
use crate::outgoing::preview::PreviewMsg;
use crate::outgoing::texts;
use crate::pi::instance::InstanceId;

/// What an assistant message's end puts in the outbox, decided before any store call.
struct Lasting {
    text: String,
    thinking: String,
    /// The tools that finished since the last message end.
    tools: Vec<ToolRecord>,
    /// The message's time (ms): its rows' purposes name it.
    at: i64,
    show_tools: bool,
    show_thinking: bool,
    /// Text pi wrote before calling tools.
    commentary: bool,
    rendering: Rendering,
}

impl Conductor {
    /// One of pi's streamed events: to the preview task, and what lasts into the outbox:
    /// activity (tools, thinking), commentary before the final answer, and work pi did that
    /// did not come from Telegram.
    pub(super) async fn pi_event(
        &mut self,
        id: &InstanceId,
        turn: Option<TurnId>,
        event: PiEvent,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        let turn = turn.as_ref().and_then(TurnId::number);
        let kind = event.kind();
        if let (Some(_), EventKind::ToolExecution(phase)) = (turn, &kind) {
            note_tool(l, *phase, &event);
        }
        if let Some(n) = turn {
            // Best effort: a full queue drops a delta; the next block end corrects the text.
            let _ = self.previews.try_send(PreviewMsg::Event {
                turn: n,
                event: event.clone(),
            });
        }
        if turn.is_none() {
            self.local_event(id, &kind, &event).await?;
        }
        match kind {
            EventKind::CompactionStart => return self.compaction_started(id, &event).await,
            EventKind::CompactionEnd => return self.compaction_ended(id, &event).await,
            _ => {}
        }
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        if kind == EventKind::AgentSettled {
            // pi compacts inside a run and settles after it: a compaction whose end this hub
            // missed must not hold dispatch for good.
            l.compacting = None;
        }
        if let (Some(n), EventKind::TurnStart) = (turn, &kind)
            && l.answered_before.as_ref().is_some_and(|(t, ..)| *t == n)
            && let Some((_, text, at)) = l.answered_before.take()
        {
            let said = (text, at);
            // pi goes on after an answer (the person steered it): that answer is not the
            // turn's last, and would be lost under the next; it arrives as commentary.
            return self.write_earlier_answer(id, n, said).await;
        }
        if turn.is_none() && kind == EventKind::AgentStart {
            // Work of pi's own: what waited behind an aborted turn runs after it as it is
            // (the reference's rule), not folded into a later message.
            let identity = l.identity.clone();
            self.db
                .write(Durability::Lazy, move |tx| {
                    crate::state::clear_fold(tx, &identity)
                })
                .await?;
            return Ok(());
        }
        if kind != EventKind::MessageEnd {
            return Ok(());
        }
        self.message_end(id, turn, &event).await
    }

    /// A message's end: its activity and commentary (a Telegram turn's) or its text (work
    /// from elsewhere) into the outbox, when the settings show them.
    async fn message_end(
        &mut self,
        id: &InstanceId,
        turn: Option<i64>,
        event: &PiEvent,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        let Some((text, stop, _)) = event.assistant_message() else {
            return Ok(());
        };
        // Commentary and pushed work show none of pi's comments (their actions do not act:
        // only a final answer's and telegram_message's do).
        let text = crate::outgoing::markup::visible(&text).into_owned();
        let thinking = event
            .message()
            .map(activity::thinking_of)
            .unwrap_or_default();
        let at = event
            .message()
            .and_then(|m| m.get("timestamp"))
            .and_then(Value::as_i64)
            .unwrap_or_else(|| self.db.now_ms());
        let settings = self.assistant.current();
        let tools = std::mem::take(&mut l.tools);
        // What this message end shows: for a Telegram turn its tools, its thinking and the
        // text before a tool call; for work from elsewhere the text, pushed. Most show nothing
        // (a final answer comes with the turn's result): no store call for them, right before
        // the answer.
        let said = !text.trim().is_empty();
        let show_tools = settings.activity.tools() && !tools.is_empty();
        let show_thinking = settings.activity.thinking() && !thinking.trim().is_empty();
        let commentary = stop.as_deref() == Some("toolUse") && said;
        if turn.is_some() && stop.as_deref() == Some("stop") && said {
            // The turn's answer, unless pi goes on (`TurnStart`, above).
            l.answered_before = turn.map(|n| (n, text.clone(), at));
        }
        let push =
            settings.proactive_push && matches!(stop.as_deref(), Some("stop" | "toolUse")) && said;
        let shown = match turn {
            Some(_) => show_tools || show_thinking || commentary,
            None => push,
        };
        if !shown {
            return Ok(());
        }
        let lasting = Lasting {
            text,
            thinking,
            tools,
            at,
            show_tools,
            show_thinking,
            commentary,
            rendering: settings.rendering,
        };
        let identity = l.identity.clone();
        let label = l.label.clone();
        let several = self.live.len() > 1;
        if turn.is_none() {
            // No draft of it after the message.
            self.end_local_preview(id).await?;
        }
        let now = self.db.now_ms();
        // Outbox rows only: they reach Telegram after the sender's synced mark.
        let written = self
            .db
            .write(Durability::Lazy, move |tx| match turn {
                Some(n) => write_turn_activity(tx, n, &identity, &lasting, now),
                // Work that did not come from Telegram: pushed where this pi lives.
                None => {
                    let label = several.then_some(label.as_str());
                    write_local_work(tx, &identity, label, &lasting, now)
                }
            })
            .await?;
        if written > 0 {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }
}

impl Conductor {
    /// An answer pi wrote before it went on in the same turn, as that turn's commentary.
    async fn write_earlier_answer(
        &mut self,
        id: &InstanceId,
        turn: i64,
        (text, at): (String, i64),
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get(id) else {
            return Ok(());
        };
        let identity = l.identity.clone();
        let lasting = Lasting {
            text,
            thinking: String::new(),
            tools: Vec::new(),
            at,
            show_tools: false,
            show_thinking: false,
            commentary: true,
            rendering: self.assistant.current().rendering,
        };
        let now = self.db.now_ms();
        let written = self
            .db
            .write(Durability::Lazy, move |tx| {
                write_turn_activity(tx, turn, &identity, &lasting, now)
            })
            .await?;
        if written > 0 {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }
}

/// Keeps what the activity message shows of a tool: pi names a tool's arguments when it
/// starts, not when it ends.
fn note_tool(l: &mut Live, phase: ToolPhase, event: &PiEvent) {
    let call = || {
        event
            .0
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match phase {
        ToolPhase::Start => {
            let args = event.0.get("args").cloned().unwrap_or(Value::Null);
            l.tool_args.insert(call(), args);
        }
        ToolPhase::End => {
            if let Some(mut r) = ToolRecord::from_event(&event.0) {
                if let Some(args) = l.tool_args.remove(&call()) {
                    r.args = args;
                }
                l.tools.push(r);
            }
        }
        ToolPhase::Update => {}
    }
}

/// A Telegram turn's tools, thinking and commentary, unless its answer is queued already.
/// Returns how many rows were queued.
fn write_turn_activity(
    tx: &Connection,
    n: i64,
    identity: &str,
    m: &Lasting,
    now: i64,
) -> Result<usize, StoreError> {
    let mut written = 0;
    let Some(t) = turns::get(tx, n)? else {
        return Ok(0);
    };
    if t.state == TurnState::Done {
        return Ok(0);
    }
    let place = outbound::place_of_turn(tx, &t, identity)?;
    let at = m.at;
    let tools = Purpose::Tools { turn: n, at };
    let thinking = Purpose::Thinking { turn: n, at };
    let commentary = Purpose::Commentary { turn: n, at };
    let meta = |purpose| outbound::Meta {
        purpose,
        source_update_id: t.source_update_id,
        identity,
        turn_id: Some(n),
        resend: false,
    };
    if m.show_tools {
        let (h, p) = activity::tools_message(&m.tools);
        outbound::enqueue_html(tx, place, (&h, &p), meta(&tools), now)?;
        written += 1;
    }
    if m.show_thinking {
        let (h, p) = activity::thinking_message(&m.thinking);
        outbound::enqueue_html(tx, place, (&h, &p), meta(&thinking), now)?;
        written += 1;
    }
    // Text pi wrote before calling tools: delivered once, before the final answer (which
    // comes with the turn's result).
    if m.commentary {
        written += outbound::enqueue_markdown(
            tx,
            place,
            texts::trim_invisible(&m.text),
            m.rendering,
            outbound::Meta {
                resend: true,
                ..meta(&commentary)
            },
            now,
        )?;
    }
    Ok(written)
}

/// Work pi did that did not come from Telegram, pushed where this pi lives; `label` when
/// several pis talk (left out in the instance's own topic). Returns how many rows were queued.
fn write_local_work(
    tx: &Connection,
    identity: &str,
    label: Option<&str>,
    m: &Lasting,
    now: i64,
) -> Result<usize, StoreError> {
    let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
        return Ok(0);
    };
    let place = outbound::place_of_instance(tx, identity, owner)?;
    let label = label.filter(|_| !place.own_topic);
    let markdown = texts::local_work_markdown(label, texts::trim_invisible(&m.text));
    let purpose = Purpose::Local {
        identity: identity.to_owned(),
        at: m.at,
    };
    outbound::enqueue_markdown(
        tx,
        place,
        &markdown,
        m.rendering,
        outbound::Meta {
            purpose: &purpose,
            source_update_id: None,
            identity,
            turn_id: None,
            resend: true,
        },
        now,
    )
}
