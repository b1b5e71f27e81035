//! A turn's answer: pi's result stored, and what the person gets queued in the same commit
//! (the tools it ran, the answer, spoken versions, files pi attached).

use store::outbox::OutboxRow;
use store::outbox::Purpose;
use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError, kv};
use wire::TurnResult;

use super::{Conductor, is_own, save_states, tools};
use crate::assistant::{self, Rendering};
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Durability;
use crate::error::HubError;
use crate::outgoing::activity::{self, ToolRecord};
use crate::outgoing::outbound;
use crate::outgoing::reactions::Fate;
use crate::outgoing::sender::Opening;
use crate::outgoing::texts;
use crate::pi::instance::{Command, InstanceId};

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

/// A finished turn's answer, as its transaction needs it.
struct Answer {
    n: i64,
    instance: InstanceId,
    identity: String,
    /// When several pis talk.
    label: Option<String>,
    result: TurnResult,
    /// The tools it ran since pi's last message (shown when the settings say so).
    tools: Vec<ToolRecord>,
    show_tools: bool,
    rendering: Rendering,
    /// `voice.replyMode` and `voice.sendTranscript`.
    voice: (assistant::VoiceReply, bool),
    clock: Clock,
}

impl Conductor {
    /// pi says it answered this prompt before and that answer was acknowledged: the hub
    /// that did so lost its record (its machine crashed before the disk had it) and sent the
    /// prompt again. No answer will come, so the turn ends interrupted, and the person is
    /// told, rather than waiting for good with this pi's queue stopped behind it.
    pub(super) async fn answered_before(
        &mut self,
        id: &InstanceId,
        turn: wire::TurnId,
    ) -> Result<(), HubError> {
        let Some(n) = self.own_turn(id, &turn).await? else {
            return Ok(());
        };
        let Some(l) = self.live.get(id) else {
            return Ok(());
        };
        let (label, identity) = (l.label.clone(), l.identity.clone());
        tracing::warn!(instance = %id, turn = n, "pi had answered this prompt before; that answer is not in the hub's state: the turn ends interrupted");
        let now = self.db.now_ms();
        let ended = self
            .db
            .write(Durability::OnDisk, move |tx| {
                let Some(t) = turns::get(tx, n)? else {
                    return Ok(false);
                };
                if !turns::mark_interrupted(tx, n, texts::ANSWER_LOST, now)? {
                    return Ok(false);
                }
                outbound::prompt_notice(
                    tx,
                    t.chat_id,
                    t.thread_id,
                    &texts::answer_lost(&label, &t.text),
                    &Purpose::NoticeInterrupted { turn: n },
                    now,
                )?;
                tools::send_waiting(tx, &t, &identity, now)?;
                Ok(true)
            })
            .await?;
        if !ended {
            return Ok(());
        }
        self.wakes.sender.notify_one();
        if self.assistant.current().reactions {
            self.fates.moved(n, Fate::Interrupted);
        }
        if let Some(l) = self.live.get_mut(id)
            && l.outstanding == Some(n)
        {
            l.outstanding = None;
        }
        Ok(())
    }

    /// pi finished a turn: its answer is stored and queued in one commit, handed to the
    /// sender, and pi is told it may forget the turn.
    pub(super) async fn turn_done(
        &mut self,
        id: &InstanceId,
        result: TurnResult,
    ) -> Result<(), HubError> {
        let Some(n) = self.turn_of_result(id, &result).await? else {
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
        let answer = Answer {
            n,
            instance: id.clone(),
            identity,
            label: several.then_some(label),
            result: result.clone(),
            tools,
            show_tools: settings.activity.tools(),
            rendering: settings.rendering,
            voice: (settings.voice_reply, settings.voice_transcript),
            clock: self.db.clock().clone(),
        };
        let states = std::mem::take(&mut self.unsaved_states);
        let opening = self.handoff.open();
        // A compaction pi ran after this answer, told after it.
        let compaction = self.live.get_mut(id).and_then(|l| {
            super::compaction::after_answer(&mut l.compacting, &mut l.compaction_ended)
        });
        let note_identity = answer.identity.clone();
        let (((claimed, spoken), note_row), commit) = self
            .db
            .write_numbered(
                Durability::BeforeTelling(reach),
                move |tx| {
                    save_states(tx, &states)?;
                    let stored = store_answer(tx, &answer, opening, now)?;
                    let note_row = match &compaction {
                        Some(words) => {
                            super::compaction::write_notice(tx, &note_identity, words, now)?
                        }
                        None => None,
                    };
                    crashpoint::hit(crashpoint::CrashPoint::TurnDoneBeforeCommit);
                    Ok((stored, note_row))
                },
                // A claimed row is called next: its commit goes to disk in this store call,
                // before the sender wakes, so no second call off the runtime and no wake-up
                // of the sender by the flush's end stand between the commit and the call.
                |((claimed, _), _)| claimed.is_some(),
            )
            .await?;
        if let Some(l) = self.live.get_mut(id) {
            super::compaction::noticed(&mut l.compacting, note_row);
        }
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
        // After the answer is on its way (the turn was shown running at dispatch).
        if settings.reactions {
            let fate = if result.aborted {
                Fate::Interrupted
            } else {
                Fate::Answered
            };
            self.fates.moved(n, fate);
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

    /// The number of the turn a result finishes, if it is the instance's own open turn. One
    /// that is not is acknowledged all the same, so pi stops reporting it.
    async fn turn_of_result(
        &self,
        id: &InstanceId,
        result: &TurnResult,
    ) -> Result<Option<i64>, HubError> {
        // The turn this hub handed the instance is its own without asking the store (the
        // answer's transaction checks again); one from before a restart is looked up.
        let outstanding = self.live.get(id).and_then(|l| l.outstanding);
        let known = result.turn_id.number().filter(|n| outstanding == Some(*n));
        let n = match known {
            Some(n) => Some(n),
            None => self.own_turn(id, &result.turn_id).await?,
        };
        if n.is_none()
            && let Some(l) = self.live.get(id)
        {
            let _ = l
                .commands
                .try_send(Command::DoneAck(result.turn_id.clone()));
        }
        Ok(n)
    }
}

/// The answer's transaction, if the turn is still the instance's own: its last tools, the
/// answer, and the answer's row claimed for a sender that waits (`opening`). Returns the
/// claimed row and whether anything is spoken.
fn store_answer(
    tx: &Connection,
    a: &Answer,
    opening: Option<Opening>,
    now: i64,
) -> Result<(Option<OutboxRow>, bool), StoreError> {
    let n = a.n;
    let Some(t) = turns::get(tx, n)?.filter(|t| is_own(t, &a.instance)) else {
        return Ok((None, false));
    };
    if a.show_tools && !a.tools.is_empty() && t.state != TurnState::Done {
        let place = outbound::place_of_turn(tx, &t, &a.identity)?;
        let (h, p) = activity::tools_message(&a.tools);
        outbound::enqueue_html(
            tx,
            place,
            (&h, &p),
            outbound::Meta {
                purpose: &Purpose::ToolsLast { turn: n },
                source_update_id: t.source_update_id,
                identity: &a.identity,
                turn_id: Some(n),
                resend: false,
            },
            now,
        )?;
    }
    let ctx = AnswerCtx {
        label: a.label.as_deref(),
        identity: &a.identity,
        rendering: a.rendering,
        voice: a.voice,
        clock: &a.clock,
    };
    let spoken = finish(tx, &t, &a.result, &ctx, now)?;
    let claimed = match opening {
        Some(opening) => crate::outgoing::sender::Handoff::claim(tx, opening, n, now)?,
        None => None,
    };
    Ok((claimed, spoken))
}

/// Stores a turn's result and queues its answer: the text with pi's buttons, spoken
/// versions, and files pi attached during the turn. The caller read `t` open in this
/// transaction (a result reported twice is ignored before it gets here). Returns whether
/// anything is spoken.
pub(super) fn finish(
    tx: &Connection,
    t: &Turn,
    r: &TurnResult,
    ctx: &AnswerCtx<'_>,
    now: i64,
) -> Result<bool, StoreError> {
    let done = turns::mark_done(tx, t.id, &r.text, r.aborted, r.error.as_deref(), now)?;
    if crate::never!(
        !done,
        "turn {} read {} in this transaction could not be marked done",
        t.id,
        t.state.as_str()
    ) {
        return Ok(false);
    }
    let place = outbound::place_of_turn(tx, t, ctx.identity)?;
    // In its own topic the instance is known; elsewhere a label says which pi answers when
    // several talk.
    let label = if place.own_topic { None } else { ctx.label };
    // Hidden actions pi wrote (buttons, voices) and every other comment leave the visible
    // text; refused actions are logged and kept for `status`.
    let extracted = crate::outgoing::markup::extract(&r.text);
    crate::outgoing::rejections::record(tx, now, "answer", Some(t.id), &extracted.rejected)?;
    // An answer of comments only said nothing to show on purpose: no text, no notice (its
    // voices and files still go).
    let silent = extracted.hidden > 0
        && texts::trim_invisible(&extracted.text).is_empty()
        && !r.aborted
        && r.error.is_none();
    let handled = r.handled.then_some(t.text.as_str());
    let markdown = texts::answer_markdown(
        label,
        &extracted.text,
        r.aborted,
        r.error.as_deref(),
        handled,
    );
    // pi's buttons belong to whoever wrote the prompt (a member, in their chat).
    let owner = match t.from_user {
        Some(user) => user,
        None => kv::get_i64(tx, kv::OWNER)?.unwrap_or(t.chat_id),
    };
    let markup = crate::outgoing::menu::prompt_buttons(
        tx,
        ctx.clock,
        owner,
        ctx.identity,
        &extracted.buttons,
        now,
    )?;
    // Files pi attached during the turn go right after the answer.
    let (files, caption) = tools::take_waiting(tx, t.id)?;
    let spoken = automatic_voice(tx, t, r, &extracted, ctx.voice)?;
    if !silent {
        outbound::enqueue_markdown_with(
            tx,
            place,
            &markdown,
            ctx.rendering,
            markup,
            spoken.as_ref(),
            outbound::Meta {
                purpose: &Purpose::Answer { turn: t.id },
                source_update_id: t.source_update_id,
                identity: ctx.identity,
                turn_id: Some(t.id),
                // A final answer must arrive: after a crash mid-send it is sent again.
                resend: true,
            },
            now,
        )?;
    }
    let after = outbound::Place {
        reply_to: None,
        ..place
    };
    queue_voices(tx, t, &extracted.voices, after, ctx, now)?;
    if !files.is_empty() {
        outbound::enqueue_files(
            tx,
            after,
            &files,
            caption.as_deref(),
            outbound::Meta {
                purpose: &Purpose::Attach { turn: t.id },
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

/// The answer spoken as a whole, when the person's voice reply mode says so (a voice note in
/// `mirror`, every answer in `always`), unless pi chose what to say itself.
fn automatic_voice(
    tx: &Connection,
    t: &Turn,
    r: &TurnResult,
    extracted: &crate::outgoing::markup::Extracted,
    (mode, transcript): (assistant::VoiceReply, bool),
) -> Result<Option<crate::outgoing::voice::Spoken>, StoreError> {
    let from_voice = store::files::of_turn(tx, t.id)?
        .iter()
        .any(|f| matches!(f.kind.as_str(), "voice" | "audio"));
    let automatic = match mode {
        assistant::VoiceReply::Always => true,
        assistant::VoiceReply::Mirror => from_voice,
        assistant::VoiceReply::Manual => false,
    } && extracted.voices.is_empty()
        && !r.aborted
        && r.error.is_none()
        && !extracted.text.trim().is_empty();
    Ok(automatic.then(|| crate::outgoing::voice::Spoken {
        text: extracted.text.trim().to_owned(),
        lang: None,
        rate: None,
        transcript,
    }))
}

/// The voice messages pi wrote into its answer, after it.
fn queue_voices(
    tx: &Connection,
    t: &Turn,
    voices: &[crate::outgoing::markup::VoiceSpec],
    place: outbound::Place,
    ctx: &AnswerCtx<'_>,
    now: i64,
) -> Result<(), StoreError> {
    let (_, transcript) = ctx.voice;
    for (i, v) in voices.iter().enumerate() {
        let spoken = crate::outgoing::voice::Spoken {
            text: v.text.clone(),
            lang: v.lang.clone(),
            rate: v.rate.clone(),
            transcript,
        };
        outbound::enqueue_voice(
            tx,
            place,
            &spoken,
            outbound::Meta {
                purpose: &Purpose::Voice { turn: t.id, n: i },
                source_update_id: t.source_update_id,
                identity: ctx.identity,
                turn_id: Some(t.id),
                resend: false,
            },
            now,
        )?;
    }
    Ok(())
}
