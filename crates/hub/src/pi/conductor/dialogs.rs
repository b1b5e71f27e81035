//! pi's dialogs as the person's questions (`store::dialogs`). A headless pi's select, confirm,
//! input and editor become a question in its chat or topic: buttons for select and confirm, a
//! reply for input and editor, Cancel for all; the answer is recorded by the handler
//! (`incoming::handlers::dialogs`) with a control (`dialog`) that brings it here, and goes to
//! pi as `extension_ui_response`. A pi with the extension that waits at its terminal gets a
//! notice instead, edited when it stops waiting.
//!
//! Crash points: a dialog and its question are one commit; killed before it, the question is
//! never asked (and the headless pi that asked dies with the hub). The answer and its control
//! are one commit; killed after it, the restarted hub finds the dialog's pi gone and says so
//! in the question ([`void_stranded`]): no question stays open with nobody to answer it.

use serde_json::{Value, json};
use store::controls::Control;
use store::dialogs::{self, Dialog, Kind, NewDialog, State};
use store::outbox::{self, Purpose};
use store::{Connection, StoreError, controls, kv};

use super::Conductor;
use crate::buttons::{Button, DialogChoice};
use crate::clock::Clock;
use crate::db::Durability;
use crate::error::HubError;
use crate::names::label_of;
use crate::outgoing::outbound;
use crate::outgoing::texts::{self, DialogOver};
use crate::pi::dialog::{Asked, Ended};
use crate::pi::instance::{Command, InstanceId};

impl Conductor {
    /// pi opened a dialog: the person is asked.
    pub(super) async fn dialog_asked(
        &mut self,
        id: &InstanceId,
        asked: Asked,
    ) -> Result<(), HubError> {
        let Some(live) = self.live.get(id) else {
            return Ok(());
        };
        let identity = live.identity.clone();
        let instance = id.0.clone();
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        tracing::info!(instance = %id, kind = asked.kind.as_str(), "pi asks the person");
        // The sender syncs before it sends: the question is never told before it is stored.
        self.db
            .write(Durability::Lazy, move |tx| {
                let expires = asked
                    .timeout_ms
                    .map(|t| now + i64::try_from(t).unwrap_or(i64::MAX / 2));
                open(
                    tx,
                    &clock,
                    &identity,
                    &instance,
                    &asked.request_id,
                    asked.kind,
                    &asked.title,
                    &asked.body,
                    expires,
                    now,
                )
            })
            .await?;
        self.wakes.sender.notify_one();
        Ok(())
    }

    /// A dialog ended in pi without the person's answer (or with it, too late).
    pub(super) async fn dialog_ended(
        &mut self,
        id: &InstanceId,
        request_id: String,
        why: Ended,
    ) -> Result<(), HubError> {
        let instance = id.0.clone();
        let now = self.db.now_ms();
        let wrote = self
            .db
            .write(Durability::Lazy, move |tx| {
                let Some(d) = dialogs::by_request(tx, &instance, &request_id)? else {
                    return Ok(false);
                };
                let (to, over) = match (why, d.state) {
                    // The link answered it before its own deadline: pi had it in time.
                    (Ended::TimedOut, State::Delivered) => (State::TimedOut, too_late(&d)),
                    (Ended::TimedOut, _) => (State::TimedOut, DialogOver::TimedOut),
                    (Ended::InPi, _) => (State::Ended, DialogOver::InPi),
                };
                let from = [State::Open, State::Answered, State::Delivered];
                if !dialogs::end(tx, d.id, &from, to, now)? {
                    return Ok(false);
                }
                close_question(tx, &d, &over, now)?;
                Ok(true)
            })
            .await?;
        if wrote {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }

    /// A pi with the extension started or stopped waiting for the person at its terminal.
    pub(super) async fn terminal_prompt(
        &mut self,
        id: &InstanceId,
        waiting: bool,
        title: Option<String>,
    ) -> Result<(), HubError> {
        let Some(live) = self.live.get(id) else {
            return Ok(());
        };
        let identity = live.identity.clone();
        let instance = id.0.clone();
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        self.db
            .write(Durability::Lazy, move |tx| {
                // One notice at a time: pi coalesces nested prompts into one waiting span.
                for d in dialogs::open_of(tx, &instance)? {
                    if d.kind == Kind::Terminal
                        && dialogs::end(tx, d.id, &[State::Open], State::Ended, now)?
                    {
                        close_question(tx, &d, &DialogOver::Terminal, now)?;
                    }
                }
                if waiting {
                    let request = format!("terminal:{now}");
                    let title = title.unwrap_or_default();
                    open(
                        tx,
                        &clock,
                        &identity,
                        &instance,
                        &request,
                        Kind::Terminal,
                        &title,
                        &Value::Null,
                        None,
                        now,
                    )?;
                }
                Ok(())
            })
            .await?;
        self.wakes.sender.notify_one();
        Ok(())
    }

    /// Control `dialog`: the person's answer to pi, if the pi that asked is still here (the
    /// link sends it only while pi still waits, and says so otherwise: [`Ended`]).
    pub(super) async fn deliver_answer(&mut self, c: Control) -> Result<(), HubError> {
        let dialog = c.params.get("dialog").and_then(Value::as_i64);
        // The answer is journaled, pi does not have it: a restarted hub finds its pi gone.
        crate::crashpoint::hit(crate::crashpoint::CrashPoint::ControlBeforeEffect);
        let now = self.db.now_ms();
        let live: Vec<(String, tokio::sync::mpsc::Sender<Command>)> = self
            .live
            .iter()
            .map(|(id, l)| (id.0.clone(), l.commands.clone()))
            .collect();
        let wrote = self
            .db
            .write(Durability::Lazy, move |tx| {
                let mut wrote = false;
                if let Some(d) = dialog.map(|d| dialogs::get(tx, d)).transpose()?.flatten()
                    && d.state == State::Answered
                {
                    match live.iter().find(|(id, _)| *id == d.instance_id) {
                        Some((_, commands)) => {
                            let answer = d
                                .answer
                                .clone()
                                .unwrap_or_else(crate::pi::dialog::cancelled);
                            let sent = commands
                                .try_send(Command::AnswerDialog {
                                    request_id: d.request_id.clone(),
                                    answer,
                                })
                                .is_ok();
                            let to = if sent { State::Delivered } else { State::Gone };
                            dialogs::end(tx, d.id, &[State::Answered], to, now)?;
                            if !sent {
                                close_question(tx, &d, &DialogOver::Gone, now)?;
                                wrote = true;
                            }
                        }
                        None => {
                            dialogs::end(tx, d.id, &[State::Answered], State::Gone, now)?;
                            close_question(tx, &d, &DialogOver::Gone, now)?;
                            wrote = true;
                        }
                    }
                }
                controls::mark_done(tx, c.id, now)?;
                Ok(wrote)
            })
            .await?;
        if wrote {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }
}

/// The answer that reached pi after it stopped waiting.
fn too_late(d: &Dialog) -> DialogOver {
    DialogOver::TooLate(d.answer.as_ref().map(|a| shown(d, a)).unwrap_or_default())
}

/// An answer as the person reads it back.
pub(crate) fn shown(d: &Dialog, answer: &Value) -> String {
    if answer.get("cancelled").and_then(Value::as_bool) == Some(true) {
        return "Cancelled".into();
    }
    if let Some(yes) = answer.get("confirmed").and_then(Value::as_bool) {
        return if yes { "Yes" } else { "No" }.into();
    }
    let value = answer
        .get("value")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if d.kind.takes_text() {
        texts::excerpt(value, 200)
    } else {
        value.to_owned()
    }
}

/// Records a dialog and asks the person (one commit).
#[allow(clippy::too_many_arguments)]
fn open(
    tx: &Connection,
    clock: &Clock,
    identity: &str,
    instance: &str,
    request_id: &str,
    kind: Kind,
    title: &str,
    body: &Value,
    expires_ms: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    let owner = kv::get_i64(tx, kv::OWNER)?.unwrap_or_default();
    if owner == 0 {
        return Ok(());
    }
    let place = outbound::place_of_instance(tx, identity, owner)?;
    let id = dialogs::create(
        tx,
        &NewDialog {
            identity,
            instance_id: instance,
            request_id,
            kind,
            title,
            body,
            asked_ms: now,
            expires_ms,
            chat_id: place.chat,
            thread_id: place.thread,
        },
    )?;
    let Some(d) = dialogs::get(tx, id)? else {
        return Ok(());
    };
    if d.outbox_id.is_some() {
        // Reported twice: asked already.
        return Ok(());
    }
    let label = (!place.own_topic).then(|| label_of(identity));
    let text = texts::dialog_question(&d, label.as_deref(), now);
    let markup = buttons(tx, clock, &d, owner, now)?;
    let purpose = Purpose::Dialog { id, at: now };
    let row = outbound::text(
        tx,
        &outbound::Text {
            chat: place.chat,
            thread: place.thread,
            text: &text,
            reply_to: None,
            markup,
            purpose: &purpose,
            source_update_id: None,
            // pi waits for it: it must arrive.
            resend: true,
        },
        now,
    )?;
    if let Some(row) = row {
        dialogs::set_outbox(tx, id, row)?;
    }
    Ok(())
}

/// The question's buttons, bound to the owner: one per option (select), Yes and No
/// (confirm), and Cancel for every dialog pi waits on.
fn buttons(
    tx: &Connection,
    clock: &Clock,
    d: &Dialog,
    owner: i64,
    now: i64,
) -> Result<Option<Value>, StoreError> {
    let ttl = outbound::QUESTION_TTL_MS;
    let button = |label: &str, choice: DialogChoice| {
        outbound::button(
            tx,
            clock,
            owner,
            label,
            &Button::Dialog {
                dialog: d.id,
                choice,
            },
            now,
            ttl,
        )
    };
    let mut rows: Vec<Vec<Value>> = Vec::new();
    match d.kind {
        Kind::Terminal => return Ok(None),
        Kind::Select => {
            for (i, o) in d.options().iter().enumerate().take(MAX_OPTIONS) {
                rows.push(vec![button(
                    &texts::excerpt(o, 60),
                    DialogChoice::Option(i),
                )?]);
            }
        }
        Kind::Confirm => rows.push(vec![
            button("✅ Yes", DialogChoice::Yes)?,
            button("❌ No", DialogChoice::No)?,
        ]),
        Kind::Input | Kind::Editor => {}
    }
    rows.push(vec![button("✖️ Cancel", DialogChoice::Cancel)?]);
    Ok(Some(json!({ "inline_keyboard": rows })))
}

/// A select shows at most this many options as buttons (Telegram allows 100 buttons; a phone
/// shows about this many without scrolling past the question).
pub(crate) const MAX_OPTIONS: usize = 40;

/// Says in the question how it ended, without buttons: rewritten while it has not left,
/// edited once it has (an unknown send is edited too: a copy of it would be answerable).
pub(crate) fn close_question(
    tx: &Connection,
    d: &Dialog,
    over: &DialogOver,
    now: i64,
) -> Result<(), StoreError> {
    let Some(row) = d
        .outbox_id
        .map(|o| outbox::get(tx, o))
        .transpose()?
        .flatten()
    else {
        return Ok(());
    };
    let text = texts::dialog_over(d, over);
    let purpose = Purpose::Dialog { id: d.id, at: now };
    let message = outbound::Text {
        chat: row.chat_id,
        thread: row.thread_id,
        text: &text,
        reply_to: None,
        markup: None,
        purpose: &purpose,
        source_update_id: None,
        resend: false,
    };
    if outbound::rewrite_text(tx, row.id, &message)? {
        return Ok(());
    }
    if let Some(sent) = row.sent_message_id {
        outbound::edit(tx, row.chat_id, sent, &text, None, &purpose, None, now)?;
        outbound::unpin_question(tx, row.chat_id, sent, now)?;
    }
    Ok(())
}

/// The dialogs of a pi process that went away: over, each question saying so.
pub(super) fn void_of(tx: &Connection, instance: &str, now: i64) -> Result<usize, StoreError> {
    let mut n = 0;
    for d in dialogs::unsettled(tx)?
        .into_iter()
        .filter(|d| d.instance_id == instance)
    {
        n += void(tx, &d, now)?;
    }
    Ok(n)
}

/// At the hub's start: every dialog not settled was asked by a pi process of the hub before,
/// which is gone (a headless pi dies with its hub; an extension's pi asks again if it still
/// waits): over, each question saying so.
pub(super) fn void_stranded(tx: &Connection, now: i64) -> Result<usize, StoreError> {
    let mut n = 0;
    for d in dialogs::unsettled(tx)? {
        n += void(tx, &d, now)?;
    }
    Ok(n)
}

fn void(tx: &Connection, d: &Dialog, now: i64) -> Result<usize, StoreError> {
    if !dialogs::end(tx, d.id, &[State::Open, State::Answered], State::Gone, now)? {
        return Ok(0);
    }
    let over = if d.kind == Kind::Terminal {
        DialogOver::Terminal
    } else {
        DialogOver::Gone
    };
    close_question(tx, d, &over, now)?;
    Ok(1)
}
