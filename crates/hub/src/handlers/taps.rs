//! What a button does. Telegram carries an opaque token; the action is the stored
//! [`Button`], bound to the owner and valid for a while: a forged, replayed, stale or
//! stranger's token does nothing. Every tap is answered (no spinning button), and the message
//! with the buttons is edited to show what the tap did.

use serde_json::{Value, json};
use store::turns::{self, Lane};
use store::{StoreError, callbacks, controls, instances, kv};
use telegram::view::{MessageView, UpdateView};
use threads::events;

use super::Say;
use super::commands::render_local;
use crate::buttons::{Button, QueueOp, Section};
use crate::config::ConfigFile;
use crate::names::label_of;
use crate::outbound;
use crate::state::{self, SELECTED};
use crate::texts;

/// What a tap does: the short answer Telegram shows, the outcome recorded in the journal, and
/// the new form of the message that carried the button.
struct Tap {
    answer: String,
    outcome: String,
    edit: Option<Edit>,
    /// New buttons only (the text stays as sent).
    restyle: Option<Value>,
    /// What a later tap on this question's buttons is told, when this tap settles it.
    replay: Option<String>,
}

/// A new text (and keyboard; `None` removes it) for a message with buttons.
struct Edit {
    text: String,
    markup: Option<Value>,
}

impl Tap {
    fn answer(answer: impl Into<String>, outcome: &str) -> Self {
        Self {
            answer: answer.into(),
            outcome: outcome.to_owned(),
            edit: None,
            restyle: None,
            replay: None,
        }
    }

    fn replayed_as(mut self, answer: String) -> Self {
        self.replay = Some(answer);
        self
    }

    fn with_edit(mut self, edit: Option<Edit>) -> Self {
        self.edit = edit;
        self
    }
}

/// A `callback_query` from the owner.
pub(super) fn tap(say: &mut Say<'_>, update: &UpdateView<'_>) -> Result<String, StoreError> {
    let Some(cb) = update.callback() else {
        return Ok("ignored:malformed".into());
    };
    let Some(id) = cb.id() else {
        return Ok("ignored:malformed".into());
    };
    let chat = update.chat_id().unwrap_or_default();
    let action = match (cb.data(), update.sender_id()) {
        (Some(token), Some(owner)) => callbacks::lookup(say.tx, token, owner, say.ctx.now_ms)?,
        _ => None,
    };
    let tapped = cb.message();
    let owner = update.sender_id().unwrap_or(chat);
    let tap = match action.as_deref().and_then(Button::decode) {
        Some(b) => button(
            say,
            &b,
            chat,
            tapped.as_ref(),
            owner,
            cb.data().unwrap_or_default(),
        )?,
        None => Tap::answer(texts::unknown_button(), "button:unknown"),
    };
    say.answer_tap(id, &tap.answer)?;
    // A settled question loses its buttons, here and in the store: data sent again later (a
    // double tap, a replay) only hears how it was settled.
    if let Some(edit) = tap.edit.as_ref().filter(|e| e.markup.is_none()) {
        let answer = tap.replay.clone().unwrap_or_else(|| {
            let line = edit.text.lines().last().unwrap_or_default();
            texts::settled_already(line.trim_start_matches('→').trim())
        });
        let settled = Button::Settled { answer }.encode();
        let keyboard = tapped
            .as_ref()
            .and_then(|m| m.0.pointer("/reply_markup/inline_keyboard"))
            .and_then(Value::as_array);
        let tokens = keyboard
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|b| b.get("callback_data").and_then(Value::as_str));
        for token in tokens.chain(cb.data()) {
            callbacks::replace(say.tx, token, &settled)?;
        }
    }
    if let Some(markup) = tap.restyle
        && let Some((chat, message)) = tapped.as_ref().and_then(|m| m.chat_id().zip(m.id()))
    {
        outbound::edit_markup(
            say.tx,
            chat,
            message,
            markup,
            Some(say.entry.update_id),
            say.ctx.now_ms,
        )?;
        say.after.outbox = true;
    }
    if let Some(edit) = tap.edit
        && let Some((chat, message)) = tapped.and_then(|m| m.chat_id().zip(m.id()))
    {
        say.edit(chat, message, &edit.text, edit.markup)?;
    }
    Ok(tap.outcome)
}

/// What a button does.
fn button(
    say: &mut Say<'_>,
    action: &Button,
    chat: i64,
    tapped: Option<&MessageView<'_>>,
    owner: i64,
    token: &str,
) -> Result<Tap, StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    // A settled question keeps its text, gains a line saying how it was settled, and loses
    // its buttons.
    let original = tapped.and_then(|m| m.text()).unwrap_or_default();
    let settled = |line: String| {
        Some(Edit {
            text: format!("{original}\n\n{line}"),
            markup: None,
        })
    };
    match action {
        Button::Select { identity } => {
            let live = instances::live(tx)?;
            let tap = match live.iter().find(|i| i.identity == *identity) {
                Some(i) => {
                    kv::set(tx, SELECTED, identity)?;
                    say.after.turns = true;
                    Tap::answer(format!("New messages go to {}", i.label), "selected")
                }
                None => Tap::answer("That pi instance is not connected any more.", "button:gone"),
            };
            // The menu shows the selection and the instances as they are now.
            let edit = render_local(say, owner, Some(identity), Section::Main)?
                .map(|(text, markup)| Edit { text, markup });
            Ok(tap.with_edit(edit))
        }
        Button::Send {
            turn,
            to,
            instead_of,
        } => {
            if !turns::assign(tx, *turn, to, instead_of.as_deref())? {
                let went = turns::get(tx, *turn)?
                    .and_then(|t| t.identity)
                    .map(|i| label_of(&i));
                return Ok(
                    Tap::answer(texts::already_sent(went.as_deref()), "send:taken")
                        .with_edit(settled(texts::chosen_before(went.as_deref())))
                        .replayed_as(texts::already_sent(went.as_deref())),
                );
            }
            say.after.turns = true;
            let label = label_of(to);
            let live = instances::live(tx)?.iter().any(|i| i.identity == *to);
            // In classic mode the choice also holds for the messages that follow.
            if live && !state::threaded(tx)? {
                kv::set(tx, SELECTED, to)?;
            }
            let answer = if live {
                format!("Sent to {label}")
            } else {
                format!("{label} is offline: the message waits for it")
            };
            Ok(Tap::answer(answer, "sent")
                .with_edit(settled(texts::chosen(&label)))
                .replayed_as(texts::already_sent(Some(&label))))
        }
        Button::Move {
            turn,
            identity,
            thread,
        } => {
            let live = instances::live(tx)?;
            let newcomer =
                live.iter()
                    .find(|i| i.identity == *identity)
                    .map(|i| events::Newcomer {
                        identity,
                        instance_id: Some(&i.id),
                        cwd: &i.cwd,
                        project: &i.label,
                        title_template: &ctx.title_template,
                    });
            let bound = events::bind_topic(
                tx,
                identity,
                newcomer.as_ref(),
                chat,
                *thread,
                ctx.epoch,
                ctx.now_ms,
            )?;
            let Some(b) = bound else {
                return Ok(Tap::answer(texts::move_refused(), "move:refused"));
            };
            // The person chose this topic for it: a forgotten intent no longer matters.
            kv::delete(tx, &state::skip_key(identity))?;
            turns::assign(tx, *turn, identity, None)?;
            say.after.turns = true;
            say.after.topics = true;
            let label = label_of(identity);
            outbound::notice(
                tx,
                b.chat_id,
                Some(b.thread_id),
                &texts::moved_here(&label, &b.cwd),
                &format!("notice:moved:{identity}:{thread}"),
                ctx.now_ms,
            )?;
            say.after.outbox = true;
            Ok(
                Tap::answer(format!("{label} lives in this topic now"), "moved")
                    .with_edit(settled(format!("→ {label} lives in this topic now."))),
            )
        }
        Button::Intent { id, create } => {
            if crate::topics::resolve_intent(tx, *id, *create)?.is_none() {
                return Ok(Tap::answer(texts::intent_settled(), "intent:settled")
                    .with_edit(settled("→ Settled already.".into())));
            }
            say.after.topics = true;
            Ok(if *create {
                Tap::answer("Creating a new thread", "intent:create")
                    .with_edit(settled("→ Creating a new thread.".into()))
            } else {
                Tap::answer("Forgotten", "intent:forget").with_edit(settled("→ Forgotten.".into()))
            })
        }
        Button::Menu { identity, section } => menu_section(
            say,
            chat,
            tapped,
            owner,
            identity.as_deref(),
            *section,
            None,
        ),
        Button::Model {
            identity,
            provider,
            id,
        } => {
            let params = json!({ "provider": provider, "id": id });
            pi_control(
                say,
                chat,
                tapped,
                identity,
                "set_model",
                &params,
                "Switching the model…",
            )
        }
        Button::Thinking { identity, level } => {
            let params = json!({ "level": level });
            pi_control(
                say,
                chat,
                tapped,
                identity,
                "set_thinking",
                &params,
                "Setting the thinking level…",
            )
        }
        Button::Compact { identity } => {
            let tap = pi_control(
                say,
                chat,
                tapped,
                identity,
                "compact",
                &json!({}),
                "Compacting…",
            )?;
            Ok(tap.with_edit(settled("→ Compacting…".into())))
        }
        Button::Settled { answer } => Ok(Tap::answer(answer.clone(), "button:settled")),
        Button::NewSession { identity } => {
            let tap = pi_control(
                say,
                chat,
                tapped,
                identity,
                "new_session",
                &json!({}),
                "Starting a new session…",
            )?;
            Ok(tap)
        }
        Button::Resume { identity, path } => pi_control(
            say,
            chat,
            tapped,
            identity,
            "switch_session",
            &json!({ "path": path }),
            "Resuming…",
        ),
        Button::NewPi { cwd } => {
            // The workspaces may have changed since the buttons were made.
            let roots = super::commands::workspace_roots(ctx);
            match crate::workspaces::resolve(cwd, &roots) {
                Ok(folder) => {
                    let folder = folder.display().to_string();
                    say.control(controls::NewControl {
                        source_update_id: None,
                        kind: "spawn",
                        identity: None,
                        turn_id: None,
                        chat_id: chat,
                        thread_id: tapped.and_then(MessageView::thread_id),
                        message_id: tapped.and_then(MessageView::id),
                        params: &json!({ "cwd": folder }),
                    })?;
                    Ok(Tap::answer("Starting pi…", "control:spawn")
                        .with_edit(settled(format!("→ Starting pi in {folder}…"))))
                }
                Err(e) => Ok(Tap::answer(
                    texts::folder_refused(&e.to_string()),
                    "spawn:refused",
                )),
            }
        }
        Button::Prompt {
            identity,
            prompt,
            style,
        } => {
            let Some(message) = tapped else {
                return Ok(Tap::answer(texts::unknown_button(), "prompt:no-message"));
            };
            let created = turns::create(
                tx,
                &turns::NewTurn {
                    source_update_id: Some(say.entry.update_id),
                    chat_id: chat,
                    thread_id: message.thread_id(),
                    message_id: message.id(),
                    target: turns::Target::Identity(identity),
                    text: prompt,
                    lane: Lane::Normal,
                    prepare: None,
                },
                ctx.now_ms,
            )?;
            say.after.turns = true;
            let label = label_of(identity);
            let live = instances::live(tx)?.iter().any(|i| i.identity == *identity);
            let answer = if live {
                format!("Sent to {label}")
            } else {
                format!("{label} is offline: it gets this when it is back")
            };
            // The chosen button shows it was chosen; the others stay as they were.
            let restyle = message.0.get("reply_markup").cloned().map(|mut m| {
                if let Some(rows) = m.get_mut("inline_keyboard").and_then(Value::as_array_mut) {
                    for b in rows.iter_mut().filter_map(Value::as_array_mut).flatten() {
                        if b.get("callback_data").and_then(Value::as_str) == Some(token) {
                            b["style"] = json!(style.as_deref().unwrap_or("primary"));
                        }
                    }
                }
                m
            });
            let mut tap = Tap::answer(
                answer,
                if created.is_some() {
                    "prompt"
                } else {
                    "prompt:again"
                },
            );
            tap.restyle = restyle;
            Ok(tap)
        }
        Button::Dismiss => {
            Ok(Tap::answer("Cancelled", "dismissed").with_edit(settled("→ Cancelled.".into())))
        }
        Button::Queue { turn, op } => {
            let Some(t) = turns::get(tx, *turn)? else {
                return Ok(Tap::answer(texts::unknown_button(), "queue:unknown"));
            };
            let done = match op {
                QueueOp::Priority => turns::set_lane(tx, t.id, Lane::Priority)?,
                QueueOp::Normal => turns::set_lane(tx, t.id, Lane::Normal)?,
                QueueOp::Skip => turns::set_skip(tx, t.id, true)?,
                QueueOp::Keep => turns::set_skip(tx, t.id, false)?,
                QueueOp::Remove => turns::cancel(tx, t.id, "removed", ctx.now_ms)?,
            };
            say.after.turns = true;
            let answer = if done {
                texts::queue_changed(*op)
            } else {
                texts::queue_too_late()
            };
            // The queue view again, as it is now.
            let identity = t.identity.clone();
            menu_section(
                say,
                chat,
                tapped,
                owner,
                identity.as_deref(),
                Section::Queue,
                Some(answer),
            )
        }
        Button::Setting { key, value } => {
            let value: Value = serde_json::from_str(value).unwrap_or(Value::Null);
            let known = matches!(
                key.as_str(),
                "rendering" | "draftPreviews" | "activity" | "proactivePush"
            );
            if !known || value.is_null() {
                return Ok(Tap::answer(texts::unknown_button(), "setting:unknown"));
            }
            let written = ConfigFile::load(&ctx.config_path).and_then(|mut file| {
                file.set_assistant(&ctx.profile, key, value.clone());
                file.save()
            });
            let answer = match written {
                Ok(()) => format!("{key} is {value} now"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not write a setting");
                    "Could not write telegram.json (see the hub's log)".to_owned()
                }
            };
            let identity = state::selected(tx)?;
            menu_section(
                say,
                chat,
                tapped,
                owner,
                identity.as_deref(),
                Section::Settings,
                Some(answer),
            )
        }
    }
}

/// Shows a section in the tapped message: now when the store knows it, else through the
/// conductor, which asks pi.
fn menu_section(
    say: &mut Say<'_>,
    chat: i64,
    tapped: Option<&MessageView<'_>>,
    owner: i64,
    identity: Option<&str>,
    section: Section,
    answer: Option<String>,
) -> Result<Tap, StoreError> {
    let answer = answer.unwrap_or_default();
    let outcome = format!("menu:{}", section.title().to_ascii_lowercase());
    if let Some((text, markup)) = render_local(say, owner, identity, section)? {
        return Ok(Tap::answer(answer, &outcome).with_edit(Some(Edit { text, markup })));
    }
    say.control(controls::NewControl {
        source_update_id: None,
        kind: "menu",
        identity,
        turn_id: None,
        chat_id: chat,
        thread_id: tapped.and_then(MessageView::thread_id),
        message_id: tapped.and_then(MessageView::id),
        params: &json!({ "section": section }),
    })?;
    Ok(Tap::answer(answer, &outcome))
}

/// A control for the conductor about the tapped message's pi.
#[allow(clippy::too_many_arguments)]
fn pi_control(
    say: &mut Say<'_>,
    chat: i64,
    tapped: Option<&MessageView<'_>>,
    identity: &str,
    kind: &str,
    params: &Value,
    answer: &str,
) -> Result<Tap, StoreError> {
    if !instances::live(say.tx)?
        .iter()
        .any(|i| i.identity == identity)
    {
        return Ok(Tap::answer(
            texts::not_connected(&label_of(identity)),
            "control:gone",
        ));
    }
    say.control(controls::NewControl {
        source_update_id: None,
        kind,
        identity: Some(identity),
        turn_id: None,
        chat_id: chat,
        thread_id: tapped.and_then(MessageView::thread_id),
        message_id: tapped.and_then(MessageView::id),
        params,
    })?;
    Ok(Tap::answer(answer, &format!("control:{kind}")))
}
