//! What the hub does with one journaled update. A handler only writes to the store, inside the
//! worker's transaction that also marks the update handled, so its effects and "handled" commit
//! together or not at all.

use serde_json::{Value, json};
use store::threads::{self as tables, BindingState};
use store::{
    Connection, StoreError, callbacks, instances, journal, kv, outbox, pairing as codes, routes,
    turns,
};
use telegram::view::{MessageView, UpdateKind, UpdateView};

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
                let mut text = texts::help(&ctx.bot_username);
                let mut markup = None;
                if cmd == "start" {
                    let (intro, keyboard) = instance_chooser(tx, ctx, update.sender_id())?;
                    text = format!("{text}\n\n{intro}");
                    if !topics::threaded(tx)? {
                        text = format!("{text}\n\n{}", texts::enable_tip());
                    }
                    markup = keyboard;
                }
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
            let (text, outcome) = match action.as_deref() {
                Some(action) => button(tx, ctx, action, chat, after)?,
                None => (texts::unknown_button(), "answered:callback".to_owned()),
            };
            let params = json!({ "callback_query_id": id, "text": text });
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
            Ok(outcome)
        }
        UpdateKind::MyChatMember => Ok("noted:membership".into()),
        UpdateKind::EditedMessage => Ok("ignored:edit".into()),
        UpdateKind::MessageReaction => Ok("ignored:reaction".into()),
        UpdateKind::Other(kind) => Ok(format!("ignored:{kind}")),
    }
}

/// What a button does. Returns the text the tap is answered with and the outcome recorded.
fn button(
    tx: &Connection,
    ctx: &HandlerCtx,
    action: &str,
    chat: i64,
    after: &mut AfterCommit,
) -> Result<(String, String), StoreError> {
    let parts: Vec<&str> = action.split(':').collect();
    let gone = || {
        Ok((
            "That pi instance is not connected any more.".to_owned(),
            "button:gone".to_owned(),
        ))
    };
    match parts.as_slice() {
        ["select", identity] => {
            let live = instances::live(tx)?;
            let Some(i) = live.iter().find(|i| i.identity == *identity) else {
                return gone();
            };
            kv::set(tx, crate::conductor::SELECTED, identity)?;
            after.turns = true;
            Ok((format!("New messages go to {}", i.label), "selected".into()))
        }
        ["send", turn, identity] => {
            let Ok(turn) = turn.parse::<i64>() else {
                return Ok((texts::unknown_button(), "button:malformed".into()));
            };
            if !turns::assign(tx, turn, identity)? {
                return Ok((texts::already_sent(), "send:taken".into()));
            }
            after.turns = true;
            Ok((
                format!("Sent to {}", crate::conductor::label_of(identity)),
                "sent".into(),
            ))
        }
        ["move", turn, identity, thread] => {
            let (Ok(turn), Ok(thread)) = (turn.parse::<i64>(), thread.parse::<i64>()) else {
                return Ok((texts::unknown_button(), "button:malformed".into()));
            };
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
                thread,
                ctx.epoch,
                ctx.now_ms,
            )?;
            let Some(b) = bound else {
                return Ok((texts::move_refused(), "move:refused".into()));
            };
            // The person chose this topic for it: a forgotten intent no longer matters.
            kv::delete(tx, &topics::skip_key(identity))?;
            turns::assign(tx, turn, identity)?;
            after.turns = true;
            after.topics = true;
            let label = crate::conductor::label_of(identity);
            topics::notice(
                tx,
                b.chat_id,
                Some(b.thread_id),
                &texts::moved_here(&label, &b.cwd),
                &format!("notice:moved:{identity}:{thread}"),
            )?;
            after.outbox = true;
            Ok((format!("{label} lives in this topic now"), "moved".into()))
        }
        ["intent", choice, id] => {
            let Ok(id) = id.parse::<i64>() else {
                return Ok((texts::unknown_button(), "button:malformed".into()));
            };
            let create = *choice == "create";
            if topics::resolve_intent(tx, id, create)?.is_none() {
                return Ok((texts::intent_settled(), "intent:settled".into()));
            }
            after.topics = true;
            Ok(if create {
                ("Creating a new thread".into(), "intent:create".into())
            } else {
                ("Forgotten".into(), "intent:forget".into())
            })
        }
        _ => Ok((texts::unknown_button(), "answered:callback".into())),
    }
}

/// Turns an owner message into a turn for the instance it belongs to: the one whose message it
/// replies to, else the selected one; with no instance connected it waits for the first (one
/// notice per episode).
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
    let Some(text) = msg
        .text()
        .or_else(|| msg.caption())
        .filter(|t| !t.trim().is_empty())
    else {
        reply(
            tx,
            ctx,
            entry,
            msg,
            &texts::text_only(),
            "reply:text-only",
            after,
        )?;
        return Ok("replied:text-only".into());
    };
    let routed = match msg.reply_to_message_id() {
        Some(r) => routes::lookup(tx, chat, r)?,
        None => None,
    };
    // Where the message goes: the instance whose message it answers; in Threaded Mode the
    // topic's instance, or the person's choice; in classic mode the selected instance.
    let threaded = topics::threaded(tx)?;
    let (identity, wants_choice) = match (routed, threaded, msg.thread_id()) {
        (Some(i), _, _) => (Some(i), false),
        (None, true, Some(thread)) => match tables::binding_by_thread(tx, chat, thread)? {
            Some(b) => {
                if b.state == BindingState::Offline {
                    let project = crate::conductor::label_of(&b.identity);
                    reply(
                        tx,
                        ctx,
                        entry,
                        msg,
                        &texts::offline_topic(&project, &b.cwd),
                        "reply:offline",
                        after,
                    )?;
                }
                (Some(b.identity), false)
            }
            None => (None, true),
        },
        (None, true, None) => (None, true),
        (None, false, _) => (kv::get(tx, crate::conductor::SELECTED)?, false),
    };
    let turn = turns::create(
        tx,
        &turns::NewTurn {
            source_update_id: Some(entry.update_id),
            chat_id: chat,
            thread_id: msg.thread_id(),
            message_id: Some(message_id),
            identity: identity.as_deref(),
            text,
        },
        ctx.now_ms,
    )?;
    after.turns = true;
    // With no instance live there is nothing to choose: it waits for the first one.
    let live = if wants_choice {
        instances::live(tx)?
    } else {
        Vec::new()
    };
    if !live.is_empty() {
        let owner = msg.from_id().unwrap_or(chat);
        let turn = turn.unwrap_or(0);
        let mut rows = Vec::new();
        for i in &live {
            let button = |label: String, action: String| {
                button_token(tx, owner, &action, ctx.now_ms, BUTTON_TTL_MS)
                    .map(|token| json!({ "text": label, "callback_data": token }))
            };
            let mut row = vec![button(
                format!("Send to {}", i.label),
                format!("send:{turn}:{}", i.identity),
            )?];
            if let Some(thread) = msg.thread_id() {
                row.push(button(
                    format!("Move {} here", i.label),
                    format!("move:{turn}:{}:{thread}", i.identity),
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
        return Ok("chooser".into());
    }
    if identity.is_none() && kv::get(tx, HELD_NOTICE)?.is_none() {
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
    Ok(if identity.is_some() {
        "queued".into()
    } else {
        "held".into()
    })
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

/// The list of live instances with a button each (opaque tokens, owner-bound, 24 h).
fn instance_chooser(
    tx: &Connection,
    ctx: &HandlerCtx,
    owner: Option<i64>,
) -> Result<(String, Option<Value>), StoreError> {
    let live = instances::live(tx)?;
    let selected = kv::get(tx, crate::conductor::SELECTED)?;
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
    let intro = texts::instances_intro(&list);
    let Some(owner) = owner.filter(|_| !live.is_empty()) else {
        return Ok((intro, None));
    };
    let mut rows = Vec::new();
    for i in &live {
        let action = format!("select:{}", i.identity);
        let token = button_token(tx, owner, &action, ctx.now_ms, BUTTON_TTL_MS)?;
        let mark = if selected.as_deref() == Some(i.identity.as_str()) {
            "▶ "
        } else {
            ""
        };
        rows.push(json!([{ "text": format!("{mark}{}", i.label), "callback_data": token }]));
    }
    Ok((intro, Some(json!({ "inline_keyboard": rows }))))
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
        },
        ctx.now_ms,
    )?;
    after.outbox |= id.is_some();
    Ok(id)
}
