//! A turn's answer: pi's result stored, and what the person gets queued in the same commit
//! (the tools it ran, the answer, spoken versions, files pi attached).

use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError, kv};
use wire::TurnResult;

use super::{Conductor, is_own, save_states, tools};
use crate::activity;
use crate::assistant::{self, Rendering};
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Durability;
use crate::error::HubError;
use crate::instance::{Command, InstanceId};
use crate::outbound;
use crate::texts;

/// What an answer row needs.
pub(super) struct AnswerCtx<'a> {
    pub(super) label: Option<&'a str>,
    pub(super) identity: &'a str,
    pub(super) rendering: Rendering,
    /// `voice.replyMode` and `voice.sendTranscript`.
    pub(super) voice: (assistant::VoiceReply, bool),
    /// The hub's clock (button tokens).
    pub(super) clock: &'a Clock,
}

impl Conductor {
    pub(super) async fn turn_done(
        &mut self,
        id: &InstanceId,
        result: TurnResult,
    ) -> Result<(), HubError> {
        // The turn this hub handed the instance is its own without asking the store (the
        // transaction below checks again); one from before a restart is looked up.
        let outstanding = self.live.get(id).and_then(|l| l.outstanding);
        let known = result.turn_id.number().filter(|n| outstanding == Some(*n));
        let n = match known {
            Some(n) => Some(n),
            None => self.own_turn(id, &result.turn_id).await?,
        };
        let Some(n) = n else {
            // Not ours to finish; acknowledged all the same, so pi stops reporting it.
            if let Some(l) = self.live.get(id) {
                let _ = l.commands.try_send(Command::DoneAck(result.turn_id));
            }
            return Ok(());
        };
        let (identity, label, reach) = match self.live.get(id) {
            Some(l) => (l.identity.clone(), l.label.clone(), l.reach),
            None => return Ok(()),
        };
        let several = self.live.len() > 1;
        // Nothing preview-like for this turn once its answer is queued.
        self.fence(n).await;
        let tools = self
            .live
            .get_mut(id)
            .map(|l| std::mem::take(&mut l.tools))
            .unwrap_or_default();
        let settings = self.assistant.current();
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let r = result.clone();
        let rendering = settings.rendering;
        let voice = (settings.voice_reply, settings.voice_transcript);
        let show_tools = settings.activity.tools();
        let instance = id.clone();
        let states = std::mem::take(&mut self.unsaved_states);
        let opening = self.handoff.open();
        let ((claimed, spoken), commit) = self
            .db
            .write_numbered(
                Durability::BeforeTelling(reach),
                move |tx| {
                    save_states(tx, &states)?;
                    let (mut claimed, mut spoken) = (None, false);
                    if let Some(t) = turns::get(tx, n)?.filter(|t| is_own(t, &instance)) {
                        if show_tools && !tools.is_empty() && t.state != TurnState::Done {
                            let place = outbound::place_of_turn(tx, &t, &identity)?;
                            let (h, p) = activity::tools_message(&tools);
                            outbound::enqueue_html(
                                tx,
                                place,
                                (&h, &p),
                                outbound::Meta {
                                    purpose: &format!("tools:{n}:last"),
                                    source_update_id: t.source_update_id,
                                    identity: &identity,
                                    turn_id: Some(n),
                                    resend: false,
                                },
                                now,
                            )?;
                        }
                        let label = several.then_some(label.as_str());
                        spoken = finish(
                            tx,
                            &t,
                            &r,
                            &AnswerCtx {
                                label,
                                identity: &identity,
                                rendering,
                                voice,
                                clock: &clock,
                            },
                            now,
                        )?;
                        if let Some(opening) = opening {
                            claimed = crate::sender::Handoff::claim(tx, opening, n, now)?;
                        }
                    }
                    crashpoint::hit(crashpoint::CrashPoint::TurnDoneBeforeCommit);
                    Ok((claimed, spoken))
                },
                // A claimed row is called next: its commit goes to disk in this store call,
                // before the sender wakes, so no second call off the runtime and no wake-up
                // of the sender by the flush's end stand between the commit and the call.
                |(claimed, _)| claimed.is_some(),
            )
            .await?;
        crashpoint::hit(crashpoint::CrashPoint::TurnDoneAfterCommit);
        crate::latency::mark(crate::latency::Step::Queued, n);
        // The sender first: after a store call this thread has usually handed its scheduler
        // to another thread, so every wake-up below is a system call and another thread's
        // wake-up, and the answer's should start first.
        match claimed {
            Some(row) => self.handoff.give(row, commit),
            None => self.wakes.sender.notify_one(),
        }
        if spoken {
            self.wakes.voice.notify_one();
        }
        if let Some(l) = self.live.get_mut(id) {
            if l.outstanding == Some(n) {
                l.outstanding = None;
            }
            let _ = l.commands.try_send(Command::DoneAck(result.turn_id));
        }
        // The sender starts on the answer before the conductor's next store call (pi's "idle"
        // comes right behind its answer) holds the thread.
        tokio::task::yield_now().await;
        Ok(())
    }
}

/// Stores a turn's result and queues its answer (once: a result reported twice is ignored).
pub(super) fn finish(
    tx: &Connection,
    t: &Turn,
    r: &TurnResult,
    ctx: &AnswerCtx<'_>,
    now: i64,
) -> Result<bool, StoreError> {
    if !turns::mark_done(tx, t.id, &r.text, r.aborted, r.error.as_deref(), now)? {
        return Ok(false);
    }
    let place = outbound::place_of_turn(tx, t, ctx.identity)?;
    // In its own topic the instance is known; elsewhere a label says which pi answers when
    // several talk.
    let label = if place.own_topic { None } else { ctx.label };
    // Hidden actions pi wrote (buttons) leave the visible text.
    let extracted = crate::markup::extract(&r.text);
    for rejected in &extracted.rejected {
        // The reason may quote the comment (pi's words): only at debug.
        tracing::info!(turn = t.id, line = rejected.line, kind = %rejected.kind, "an action comment in an answer was not understood");
        tracing::debug!(turn = t.id, problem = %rejected, "the action comment's problem");
    }
    let handled = r.handled.then_some(t.text.as_str());
    let markdown = texts::answer_markdown(
        label,
        &extracted.text,
        r.aborted,
        r.error.as_deref(),
        handled,
    );
    let owner = kv::get_i64(tx, kv::OWNER)?.unwrap_or(t.chat_id);
    let markup =
        crate::menu::prompt_buttons(tx, ctx.clock, owner, ctx.identity, &extracted.buttons, now)?;
    // Files pi attached during the turn go right after the answer.
    let (files, caption) = tools::take_waiting(tx, t.id)?;
    // Spoken when the person's voice reply mode says so (a voice note in `mirror`, every
    // answer in `always`), unless pi chose what to say itself.
    let (mode, transcript) = ctx.voice;
    let from_voice = store::files::of_turn(tx, t.id)?
        .iter()
        .any(|f| matches!(f.kind.as_str(), "voice" | "audio"));
    let automatic = match mode {
        assistant::VoiceReply::Always => true,
        assistant::VoiceReply::Mirror => from_voice,
        assistant::VoiceReply::Hidden => false,
    } && extracted.voices.is_empty()
        && !r.aborted
        && r.error.is_none()
        && !extracted.text.trim().is_empty();
    let spoken = automatic.then(|| crate::voice::Spoken {
        text: extracted.text.trim().to_owned(),
        lang: None,
        rate: None,
        transcript,
    });
    outbound::enqueue_markdown_with(
        tx,
        place,
        &markdown,
        ctx.rendering,
        markup,
        spoken.as_ref(),
        outbound::Meta {
            purpose: &format!("answer:{}", t.id),
            source_update_id: t.source_update_id,
            identity: ctx.identity,
            turn_id: Some(t.id),
            // A final answer must arrive: after a crash mid-send it is sent again.
            resend: true,
        },
        now,
    )?;
    for (i, v) in extracted.voices.iter().enumerate() {
        let spoken = crate::voice::Spoken {
            text: v.text.clone(),
            lang: v.lang.clone(),
            rate: v.rate.clone(),
            transcript,
        };
        outbound::enqueue_voice(
            tx,
            outbound::Place {
                reply_to: None,
                ..place
            },
            &spoken,
            outbound::Meta {
                purpose: &format!("voice:{}:{i}", t.id),
                source_update_id: t.source_update_id,
                identity: ctx.identity,
                turn_id: Some(t.id),
                resend: false,
            },
            now,
        )?;
    }
    if !files.is_empty() {
        outbound::enqueue_files(
            tx,
            outbound::Place {
                reply_to: None,
                ..place
            },
            &files,
            caption.as_deref(),
            outbound::Meta {
                purpose: &format!("attach:{}", t.id),
                source_update_id: t.source_update_id,
                identity: ctx.identity,
                turn_id: Some(t.id),
                resend: false,
            },
            now,
        )?;
    }
    Ok(spoken.is_some() || !extracted.voices.is_empty())
}
