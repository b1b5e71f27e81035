//! What the hub does with one journaled update. A handler only writes to the store, inside the
//! worker's transaction that also marks the update handled, so its effects and "handled" commit
//! together or not at all.

use serde_json::{Value, json};
use store::threads as tables;
use store::turns::{Target, Waits};
use store::{
    Connection, StoreError, callbacks, instances, journal, kv, outbox, pairing as codes, routes,
    turns,
};
use telegram::view::{MessageView, UpdateKind, UpdateView};

use crate::buttons::Button;
use crate::conductor::{SELECTED, folder_of, label_of};
use crate::config::PairingMode;
use crate::pairing;
use crate::texts;
use crate::topics;
use threads::events;

/// Inputs a handler needs besides the store.
#[derive(Debug, Clone)]
pub struct HandlerCtx {
    /// The bot's username, for texts.
    pub bot_username: String,
    /// How an owner is established.
    pub pairing: PairingMode,
    /// Now.
    pub now_ms: i64,
    /// The hub's lease epoch: binding changes made here are fenced by it.
    pub epoch: store::lease::Epoch,
    /// Topic title template.
    pub title_template: String,
}

/// Effects the worker acts on after the commit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AfterCommit {
    /// Something was queued in the outbox: wake the sender.
    pub outbox: bool,
    /// The owner changed: mirror it into the config file.
    pub new_owner: Option<i64>,
    /// Turns were created or the selection changed: wake the conductor.
    pub turns: bool,
    /// Bindings, intents or cleanups changed: wake the topics task.
    pub topics: bool,
}

/// Key of the outbox id of the current "no instance connected" notice; present while an episode
/// of messages waiting for any instance is open (one notice per episode, never one per message).
pub const HELD_NOTICE: &str = "notice.held.outbox_id";

/// Handles one update and marks it handled, in the caller's transaction.
pub fn handle(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    after: &mut AfterCommit,
) -> Result<String, StoreError> {
    let outcome = decide(tx, ctx, entry, after)?;
    journal::mark_handled(tx, entry.update_id, &outcome, ctx.now_ms)?;
    Ok(outcome)
}

fn decide(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    after: &mut AfterCommit,
) -> Result<String, StoreError> {
    let value: Value = match serde_json::from_str(&entry.raw) {
        Ok(v) => v,
        Err(_) => return Ok("ignored:unreadable".into()),
    };
    let update = UpdateView(&value);
    let Some(sender) = update.sender_id() else {
        return Ok("ignored:no-sender".into());
    };
    let private = update
        .message()
        .is_none_or(|m| m.chat_type() == Some("private"))
        && update
            .callback()
            .and_then(|c| c.message())
            .is_none_or(|m| m.chat_type().is_none_or(|t| t == "private"));
    if !private {
        return Ok("ignored:not-private".into());
    }
    let owner = kv::get_i64(tx, kv::OWNER)?;
    match owner {
        Some(owner) if owner == sender => from_owner(tx, ctx, entry, &update, after),
        Some(_) => {
            // Logged by user id only; never the content.
            tracing::info!(
                update_id = entry.update_id,
                user_id = sender,
                "ignored an update from someone who is not the owner"
            );
            Ok("ignored:not-owner".into())
        }
        None => unpaired(tx, ctx, entry, &update, sender, after),
    }
}

fn from_owner(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    update: &UpdateView<'_>,
    after: &mut AfterCommit,
) -> Result<String, StoreError> {
    match update.kind() {
        UpdateKind::Message => {
            let Some(msg) = update.message() else {
                return Ok("ignored:malformed".into());
            };
            if msg.topic_service().is_some() {
                return Ok("ignored:topic-service".into());
            }
            if let Some((cmd, _)) = msg.command()
                && (cmd == "start" || cmd == "help")
            {
                let (text, markup) = if cmd == "start" {
                    start_message(tx, ctx, update.sender_id())?
                } else {
                    (texts::help(&ctx.bot_username), None)
                };
                reply_with(
                    tx,
                    ctx,
                    entry,
                    &msg,
                    &text,
                    markup,
                    &format!("reply:{cmd}"),
                    after,
                )?;
                return Ok(format!("replied:{cmd}"));
            }
            to_turn(tx, ctx, entry, &msg, after)
        }
        UpdateKind::CallbackQuery => {
            let Some(cb) = update.callback() else {
                return Ok("ignored:malformed".into());
            };
            let Some(id) = cb.id() else {
                return Ok("ignored:malformed".into());
            };
            let chat = update.chat_id().unwrap_or_default();
            let action = match (cb.data(), update.sender_id()) {
                (Some(token), Some(owner)) => callbacks::lookup(tx, token, owner, ctx.now_ms)?,
                _ => None,
            };
            let tapped = cb.message();
            let tap = match action.as_deref().and_then(Button::decode) {
                Some(b) => button(
                    tx,
                    ctx,
                    &b,
                    chat,
                    tapped.as_ref(),
                    update.sender_id(),
                    after,
                )?,
                None => Tap::answer(texts::unknown_button(), "answered:callback"),
            };
            let params = json!({ "callback_query_id": id, "text": tap.answer });
            enqueue(
                tx,
                ctx,
                chat,
                None,
                "answerCallbackQuery",
                &params,
                "answer:callback",
                entry,
                after,
            )?;
            // The message with the buttons shows what the tap did (and loses buttons that
            // have nothing left to do).
            if let Some(edit) = tap.edit
                && let Some((chat, message)) = tapped.and_then(|m| m.chat_id().zip(m.id()))
            {
                let params = json!({
                    "chat_id": chat,
                    "message_id": message,
                    "text": edit.text,
                    "reply_markup": edit.markup.unwrap_or_else(|| json!({ "inline_keyboard": [] })),
                });
                enqueue(
                    tx,
                    ctx,
                    chat,
                    None,
                    "editMessageText",
                    &params,
                    "edit:callback",
                    entry,
                    after,
                )?;
            }
            Ok(tap.outcome)
        }
        UpdateKind::MyChatMember => Ok("noted:membership".into()),
        UpdateKind::EditedMessage => Ok("ignored:edit".into()),
        UpdateKind::MessageReaction => Ok("ignored:reaction".into()),
        UpdateKind::Other(kind) => Ok(format!("ignored:{kind}")),
    }
}

/// What a tap does: the short answer Telegram shows, the outcome recorded in the journal, and
/// the new form of the message that carried the button.
struct Tap {
    answer: String,
    outcome: String,
    edit: Option<Edit>,
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
        }
    }

    fn with_edit(mut self, edit: Option<Edit>) -> Self {
        self.edit = edit;
        self
    }
}

/// What a button does.
fn button(
    tx: &Connection,
    ctx: &HandlerCtx,
    action: &Button,
    chat: i64,
    tapped: Option<&MessageView<'_>>,
    owner: Option<i64>,
    after: &mut AfterCommit,
) -> Result<Tap, StoreError> {
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
                    after.turns = true;
                    Tap::answer(format!("New messages go to {}", i.label), "selected")
                }
                None => Tap::answer("That pi instance is not connected any more.", "button:gone"),
            };
            // The /start message shows the selection and the instances as they are now.
            let (text, markup) = start_message(tx, ctx, owner)?;
            Ok(tap.with_edit(Some(Edit { text, markup })))
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
                        .with_edit(settled(texts::chosen_before(went.as_deref()))),
                );
            }
            after.turns = true;
            let label = label_of(to);
            let live = instances::live(tx)?.iter().any(|i| i.identity == *to);
            // In classic mode the choice also holds for the messages that follow.
            if live && !topics::threaded(tx)? {
                kv::set(tx, SELECTED, to)?;
            }
            let answer = if live {
                format!("Sent to {label}")
            } else {
                format!("{label} is offline: the message waits for it")
            };
            Ok(Tap::answer(answer, "sent").with_edit(settled(texts::chosen(&label))))
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
            kv::delete(tx, &topics::skip_key(identity))?;
            turns::assign(tx, *turn, identity, None)?;
            after.turns = true;
            after.topics = true;
            let label = label_of(identity);
            topics::notice(
                tx,
                b.chat_id,
                Some(b.thread_id),
                &texts::moved_here(&label, &b.cwd),
                &format!("notice:moved:{identity}:{thread}"),
            )?;
            after.outbox = true;
            Ok(
                Tap::answer(format!("{label} lives in this topic now"), "moved")
                    .with_edit(settled(format!("→ {label} lives in this topic now."))),
            )
        }
        Button::Intent { id, create } => {
            if topics::resolve_intent(tx, *id, *create)?.is_none() {
                return Ok(Tap::answer(texts::intent_settled(), "intent:settled")
                    .with_edit(settled("→ Settled already.".into())));
            }
            after.topics = true;
            Ok(if *create {
                Tap::answer("Creating a new thread", "intent:create")
                    .with_edit(settled("→ Creating a new thread.".into()))
            } else {
                Tap::answer("Forgotten", "intent:forget").with_edit(settled("→ Forgotten.".into()))
            })
        }
    }
}

/// Where a new message goes.
enum Route {
    /// To this identity's pi (it waits while that pi is away).
    To(String),
    /// The person is asked; only their tap assigns it.
    Choose,
    /// No pi is live: the first that connects takes it (the person is told so).
    Hold,
}

/// Decides where a message goes: the pi whose message it answers; in Threaded Mode the
/// topic's pi, or the person's choice; in classic mode the selected pi.
fn route(
    tx: &Connection,
    msg: &MessageView<'_>,
    chat: i64,
    anyone_live: bool,
) -> Result<Route, StoreError> {
    if let Some(r) = msg.reply_to_message_id()
        && let Some(identity) = routes::lookup(tx, chat, r)?
    {
        return Ok(Route::To(identity));
    }
    let bound = if topics::threaded(tx)? {
        match msg.thread_id() {
            Some(thread) => tables::binding_by_thread(tx, chat, thread)?.map(|b| b.identity),
            None => None,
        }
    } else {
        kv::get(tx, SELECTED)?
    };
    Ok(match bound {
        Some(identity) => Route::To(identity),
        None if anyone_live => Route::Choose,
        None => Route::Hold,
    })
}

/// Turns an owner message into a turn (see [`route`]). A pi that is away gets the message
/// when it is back; the person is told, and offered the pi that are live.
fn to_turn(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    msg: &MessageView<'_>,
    after: &mut AfterCommit,
) -> Result<String, StoreError> {
    let (Some(chat), Some(message_id)) = (msg.chat_id(), msg.id()) else {
        return Ok("ignored:malformed".into());
    };
    let attachment = msg.attachment();
    let Some(text) = msg
        .text()
        .or_else(|| msg.caption())
        .filter(|t| !t.trim().is_empty())
    else {
        let text = texts::attachment_not_delivered(attachment.unwrap_or_default(), false);
        reply(tx, ctx, entry, msg, &text, "reply:text-only", after)?;
        return Ok("replied:text-only".into());
    };
    if let Some(field) = attachment {
        let text = texts::attachment_not_delivered(field, true);
        reply(tx, ctx, entry, msg, &text, "reply:attachment", after)?;
    }
    let live = instances::live(tx)?;
    let route = route(tx, msg, chat, !live.is_empty())?;
    let target = match &route {
        Route::To(identity) => Target::Identity(identity),
        Route::Choose => Target::Unassigned(Waits::Choice),
        Route::Hold => Target::Unassigned(Waits::Any),
    };
    let turn = turns::create(
        tx,
        &turns::NewTurn {
            source_update_id: Some(entry.update_id),
            chat_id: chat,
            thread_id: msg.thread_id(),
            message_id: Some(message_id),
            target,
            text,
        },
        ctx.now_ms,
    )?;
    after.turns = true;
    let Some(turn) = turn else {
        return Ok("queued".into());
    };
    let owner = msg.from_id().unwrap_or(chat);
    match route {
        Route::To(identity) if live.iter().any(|i| i.identity == identity) => Ok("queued".into()),
        // Reconnecting after a hub restart: it gets the message in a moment.
        Route::To(identity) if crate::conductor::returning(tx, &identity)? => {
            Ok("queued:returning".into())
        }
        Route::To(identity) => {
            let label = label_of(&identity);
            let folder = folder_of(&identity);
            let others: Vec<_> = live.iter().filter(|i| i.identity != identity).collect();
            if others.is_empty() {
                // One notice per absence, not one per message.
                let key = waits_notice_key(&identity);
                if kv::get(tx, &key)?.is_none() {
                    kv::set(tx, &key, "1")?;
                    let text = texts::waits_for(&label, folder, false);
                    reply(tx, ctx, entry, msg, &text, "reply:waits", after)?;
                }
                return Ok("queued:waits".into());
            }
            let mut rows = Vec::new();
            for o in others {
                let action = Button::Send {
                    turn,
                    to: o.identity.clone(),
                    instead_of: Some(identity.clone()),
                };
                rows.push(json!([button_json(
                    tx,
                    owner,
                    &format!("Send to {}", o.label),
                    &action,
                    ctx.now_ms
                )?]));
            }
            reply_with(
                tx,
                ctx,
                entry,
                msg,
                &texts::waits_for(&label, folder, true),
                Some(json!({ "inline_keyboard": rows })),
                "reply:waits",
                after,
            )?;
            Ok("queued:waits".into())
        }
        Route::Choose => {
            let mut rows = Vec::new();
            for i in &live {
                let send = Button::Send {
                    turn,
                    to: i.identity.clone(),
                    instead_of: None,
                };
                let mut row = vec![button_json(
                    tx,
                    owner,
                    &format!("Send to {}", i.label),
                    &send,
                    ctx.now_ms,
                )?];
                if let Some(thread) = msg.thread_id() {
                    let here = Button::Move {
                        turn,
                        identity: i.identity.clone(),
                        thread,
                    };
                    row.push(button_json(
                        tx,
                        owner,
                        &format!("Move {} here", i.label),
                        &here,
                        ctx.now_ms,
                    )?);
                }
                rows.push(json!(row));
            }
            let text = if msg.thread_id().is_some() {
                texts::unbound_topic()
            } else {
                texts::main_chat_chooser()
            };
            reply_with(
                tx,
                ctx,
                entry,
                msg,
                &text,
                Some(json!({ "inline_keyboard": rows })),
                "reply:chooser",
                after,
            )?;
            Ok("chooser".into())
        }
        Route::Hold => {
            if kv::get(tx, HELD_NOTICE)?.is_none() {
                // One notice per episode, in the main chat wherever the message was written.
                let params = json!({ "chat_id": chat, "text": texts::no_instance() });
                if let Some(id) = enqueue(
                    tx,
                    ctx,
                    chat,
                    None,
                    "sendMessage",
                    &params,
                    "notice:held",
                    entry,
                    after,
                )? {
                    kv::set_i64(tx, HELD_NOTICE, id)?;
                }
            }
            Ok("held".into())
        }
    }
}

/// Key marking that the person was told their messages wait for `identity` (cleared when it
/// connects).
pub fn waits_notice_key(identity: &str) -> String {
    format!("notice.waits.{identity}")
}

/// How long the buttons of a message that waits for the person's choice work.
const CHOICE_TTL_MS: i64 = 7 * 24 * 3_600_000;

/// One inline button for `action`, owner-bound.
fn button_json(
    tx: &Connection,
    owner: i64,
    label: &str,
    action: &Button,
    now_ms: i64,
) -> Result<Value, StoreError> {
    let token = button_token(tx, owner, &action.encode(), now_ms, CHOICE_TTL_MS)?;
    Ok(json!({ "text": label, "callback_data": token }))
}

/// How long a button of a hub message works.
pub(crate) const BUTTON_TTL_MS: i64 = 24 * 3_600_000;

/// An opaque button token for `action`, bound to the owner, valid for `ttl_ms`.
pub(crate) fn button_token(
    tx: &Connection,
    owner: i64,
    action: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<String, StoreError> {
    let token =
        pairing::new_code().map_err(|e| StoreError::Corrupt(format!("no randomness: {e}")))?;
    callbacks::create(tx, &token, owner, action, now_ms, ttl_ms)?;
    Ok(token)
}

/// The `/start` message: help, the live instances with a button each (the selected one
/// marked), and the Threaded Mode tip when it is off.
fn start_message(
    tx: &Connection,
    ctx: &HandlerCtx,
    owner: Option<i64>,
) -> Result<(String, Option<Value>), StoreError> {
    let live = instances::live(tx)?;
    let selected = kv::get(tx, SELECTED)?;
    let list: Vec<(String, String, bool)> = live
        .iter()
        .map(|i| {
            (
                i.label.clone(),
                i.cwd.clone(),
                selected.as_deref() == Some(i.identity.as_str()),
            )
        })
        .collect();
    let mut text = format!(
        "{}\n\n{}",
        texts::help(&ctx.bot_username),
        texts::instances_intro(&list)
    );
    if !topics::threaded(tx)? {
        text = format!("{text}\n\n{}", texts::enable_tip());
    }
    let Some(owner) = owner.filter(|_| !live.is_empty()) else {
        return Ok((text, None));
    };
    let mut rows = Vec::new();
    for i in &live {
        let action = Button::Select {
            identity: i.identity.clone(),
        };
        let token = button_token(tx, owner, &action.encode(), ctx.now_ms, BUTTON_TTL_MS)?;
        let mark = if selected.as_deref() == Some(i.identity.as_str()) {
            "▶ "
        } else {
            ""
        };
        rows.push(json!([{ "text": format!("{mark}{}", i.label), "callback_data": token }]));
    }
    Ok((text, Some(json!({ "inline_keyboard": rows }))))
}

fn unpaired(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    update: &UpdateView<'_>,
    sender: i64,
    after: &mut AfterCommit,
) -> Result<String, StoreError> {
    let Some(msg) = update
        .message()
        .filter(|_| update.kind() == UpdateKind::Message)
    else {
        return Ok("ignored:unpaired".into());
    };
    if msg.from_is_bot() {
        return Ok("ignored:bot".into());
    }
    if ctx.pairing == PairingMode::FirstContact {
        become_owner(tx, sender, after)?;
        reply(
            tx,
            ctx,
            entry,
            &msg,
            &texts::paired_first_contact(&ctx.bot_username),
            "reply:paired",
            after,
        )?;
        return Ok("paired:first-contact".into());
    }
    let Some(("start", code)) = msg.command() else {
        tracing::info!(
            update_id = entry.update_id,
            user_id = sender,
            "ignored a message while no owner is paired"
        );
        return Ok("ignored:unpaired".into());
    };
    let current = codes::current(tx)?;
    let open = current
        .as_ref()
        .filter(|p| p.state == codes::PairingState::Open && p.expires_ms > ctx.now_ms);
    let Some(open) = open else {
        reply(
            tx,
            ctx,
            entry,
            &msg,
            &texts::no_code_open(),
            "reply:pairing",
            after,
        )?;
        return Ok("pairing:no-code".into());
    };
    if code.is_empty() {
        reply(
            tx,
            ctx,
            entry,
            &msg,
            &texts::code_needed(),
            "reply:pairing",
            after,
        )?;
        return Ok("pairing:code-needed".into());
    }
    if wire::secrets_match(&pairing::hash(code), &open.code_hash) {
        codes::mark_used(tx)?;
        become_owner(tx, sender, after)?;
        tracing::info!(user_id = sender, "paired a new owner");
        reply(
            tx,
            ctx,
            entry,
            &msg,
            &texts::paired(&ctx.bot_username),
            "reply:paired",
            after,
        )?;
        return Ok("paired:code".into());
    }
    let left = codes::record_wrong(tx)?;
    tracing::info!(user_id = sender, attempts_left = left, "wrong pairing code");
    reply(
        tx,
        ctx,
        entry,
        &msg,
        &texts::wrong_code(left),
        "reply:pairing",
        after,
    )?;
    Ok("pairing:wrong-code".into())
}

fn become_owner(tx: &Connection, user: i64, after: &mut AfterCommit) -> Result<(), StoreError> {
    kv::set_i64(tx, kv::OWNER, user)?;
    after.new_owner = Some(user);
    Ok(())
}

fn reply(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    msg: &MessageView<'_>,
    text: &str,
    purpose: &str,
    after: &mut AfterCommit,
) -> Result<(), StoreError> {
    reply_with(tx, ctx, entry, msg, text, None, purpose, after)
}

#[allow(clippy::too_many_arguments)]
fn reply_with(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    msg: &MessageView<'_>,
    text: &str,
    markup: Option<Value>,
    purpose: &str,
    after: &mut AfterCommit,
) -> Result<(), StoreError> {
    let Some(chat) = msg.chat_id() else {
        return Ok(());
    };
    let mut params = json!({ "chat_id": chat, "text": text });
    if let Some(t) = msg.thread_id() {
        params["message_thread_id"] = json!(t);
    }
    if let Some(id) = msg.id() {
        params["reply_parameters"] =
            json!({ "message_id": id, "allow_sending_without_reply": true });
    }
    if let Some(m) = markup {
        params["reply_markup"] = m;
    }
    enqueue(
        tx,
        ctx,
        chat,
        msg.thread_id(),
        "sendMessage",
        &params,
        purpose,
        entry,
        after,
    )
    .map(drop)
}

#[allow(clippy::too_many_arguments)]
fn enqueue(
    tx: &Connection,
    ctx: &HandlerCtx,
    chat: i64,
    thread: Option<i64>,
    method: &str,
    params: &Value,
    purpose: &str,
    entry: &journal::Entry,
    after: &mut AfterCommit,
) -> Result<Option<i64>, StoreError> {
    let id = outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: chat,
            thread_id: thread,
            method,
            params,
            purpose,
            source_update_id: Some(entry.update_id),
            resend_if_unknown: false,
            identity: None,
            turn_id: None,
            plan: None,
        },
        ctx.now_ms,
    )?;
    after.outbox |= id.is_some();
    Ok(id)
}
