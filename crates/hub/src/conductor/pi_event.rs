//! pi's stream: each event goes to the preview task; what lasts (activity, commentary, work
//! that did not come from Telegram) goes into the outbox at a message's end.

use serde_json::Value;
use store::kv;
use store::turns::{self, TurnState};
use wire::{PiEvent, TurnId};

use super::Conductor;
use crate::activity::{self, ToolRecord};
use crate::db::Durability;
use crate::error::HubError;
use crate::instance::InstanceId;
use crate::outbound;
use crate::preview::PreviewMsg;
use crate::texts;

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
        let kind = event
            .0
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // pi names a tool's arguments when it starts, not when it ends.
        let call = || {
            event
                .0
                .get("toolCallId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        if kind == "tool_execution_start" && turn.is_some() {
            let args = event.0.get("args").cloned().unwrap_or(Value::Null);
            l.tool_args.insert(call(), args);
        }
        if kind == "tool_execution_end"
            && turn.is_some()
            && let Some(mut r) = ToolRecord::from_event(&event.0)
        {
            if let Some(args) = l.tool_args.remove(&call()) {
                r.args = args;
            }
            l.tools.push(r);
        }
        let message_end = kind == "message_end";
        if let Some(n) = turn {
            // Best effort: a full queue drops a delta; the next block end corrects the text.
            let _ = self.previews.try_send(PreviewMsg::Event {
                turn: n,
                event: event.clone(),
            });
        }
        if !message_end {
            return Ok(());
        }
        let Some((text, stop, _)) = event.assistant_message() else {
            return Ok(());
        };
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
        let push =
            settings.proactive_push && matches!(stop.as_deref(), Some("stop" | "toolUse")) && said;
        let shown = match turn {
            Some(_) => show_tools || show_thinking || commentary,
            None => push,
        };
        if !shown {
            return Ok(());
        }
        let identity = l.identity.clone();
        let label = l.label.clone();
        let several = self.live.len() > 1;
        let now = self.db.now_ms();
        // Outbox rows only: they reach Telegram after the sender's synced mark.
        let written = self
            .db
            .write(Durability::Lazy, move |tx| {
                let mut written = 0;
                match turn {
                    Some(n) => {
                        let Some(t) = turns::get(tx, n)? else {
                            return Ok(0);
                        };
                        if t.state == TurnState::Done {
                            return Ok(0);
                        }
                        let place = outbound::place_of_turn(tx, &t, &identity)?;
                        let meta = |purpose: &'static str| outbound::Meta {
                            purpose,
                            source_update_id: t.source_update_id,
                            identity: &identity,
                            turn_id: Some(n),
                            resend: false,
                        };
                        if show_tools {
                            let (h, p) = activity::tools_message(&tools);
                            let purpose = format!("tools:{n}:{at}");
                            outbound::enqueue_html(
                                tx,
                                place,
                                (&h, &p),
                                outbound::Meta {
                                    purpose: &purpose,
                                    ..meta("")
                                },
                                now,
                            )?;
                            written += 1;
                        }
                        if show_thinking {
                            let (h, p) = activity::thinking_message(&thinking);
                            let purpose = format!("thinking:{n}:{at}");
                            outbound::enqueue_html(
                                tx,
                                place,
                                (&h, &p),
                                outbound::Meta {
                                    purpose: &purpose,
                                    ..meta("")
                                },
                                now,
                            )?;
                            written += 1;
                        }
                        // Text pi wrote before calling tools: delivered once, before the
                        // final answer (which comes with the turn's result).
                        if commentary {
                            let purpose = format!("commentary:{n}:{at}");
                            written += outbound::enqueue_markdown(
                                tx,
                                place,
                                texts::trim_invisible(&text),
                                settings.rendering,
                                outbound::Meta {
                                    purpose: &purpose,
                                    resend: true,
                                    ..meta("")
                                },
                                now,
                            )?;
                        }
                    }
                    // Work that did not come from Telegram: pushed where this pi lives.
                    None => {
                        let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
                            return Ok(0);
                        };
                        let place = outbound::place_of_instance(tx, &identity, owner)?;
                        let label = (several && !place.own_topic).then_some(label.as_str());
                        let markdown =
                            texts::local_work_markdown(label, texts::trim_invisible(&text));
                        let purpose = format!("local:{identity}:{at}");
                        written += outbound::enqueue_markdown(
                            tx,
                            place,
                            &markdown,
                            settings.rendering,
                            outbound::Meta {
                                purpose: &purpose,
                                source_update_id: None,
                                identity: &identity,
                                turn_id: None,
                                resend: true,
                            },
                            now,
                        )?;
                    }
                }
                Ok(written)
            })
            .await?;
        if written > 0 {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }
}
