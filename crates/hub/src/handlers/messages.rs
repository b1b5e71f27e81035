//! An owner message becomes a turn for the pi it belongs to.

use serde_json::json;
use store::threads as tables;
use store::turns::{self, Target, Waits};
use store::{Connection, StoreError, instances, kv, routes};
use telegram::view::MessageView;

use super::Say;
use crate::buttons::Button;
use crate::names::{folder_of, label_of};
use crate::outbound;
use crate::state::{self, HELD_NOTICE, SELECTED, waits_notice_key};
use crate::texts;

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
    let bound = if state::threaded(tx)? {
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

/// Turns an owner message into a turn (see [`route`]), with `text` instead of the message's
/// own when given (a pi command mapped to its real name). A pi that is away gets the message
/// when it is back; the person is told, and offered the pi that are live.
pub(super) fn to_turn(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<String, StoreError> {
    to_turn_as(say, msg, None, turns::Lane::Normal)
}

/// [`to_turn`] with the text pi gets and the lane given.
pub(super) fn to_turn_as(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    text_override: Option<&str>,
    lane: turns::Lane,
) -> Result<String, StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    let (Some(chat), Some(message_id)) = (msg.chat_id(), msg.id()) else {
        return Ok("ignored:malformed".into());
    };
    let attachment = msg.attachment();
    let Some(text) = text_override
        .or_else(|| msg.text())
        .or_else(|| msg.caption())
        .filter(|t| !t.trim().is_empty())
    else {
        let text = texts::attachment_not_delivered(attachment.unwrap_or_default(), false);
        say.reply(msg, &text, None, "reply:text-only")?;
        return Ok("replied:text-only".into());
    };
    if let Some(field) = attachment {
        let text = texts::attachment_not_delivered(field, true);
        say.reply(msg, &text, None, "reply:attachment")?;
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
            source_update_id: Some(say.entry.update_id),
            chat_id: chat,
            thread_id: msg.thread_id(),
            message_id: Some(message_id),
            target,
            text,
            lane,
        },
        ctx.now_ms,
    )?;
    say.after.turns = true;
    let Some(turn) = turn else {
        return Ok("queued".into());
    };
    let owner = msg.from_id().unwrap_or(chat);
    match route {
        Route::To(identity) if live.iter().any(|i| i.identity == identity) => Ok("queued".into()),
        // Reconnecting after a hub restart: it gets the message in a moment.
        Route::To(identity) if state::returning(tx, &identity)? => Ok("queued:returning".into()),
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
                    say.reply(msg, &text, None, "reply:waits")?;
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
                rows.push(json!([outbound::button(
                    tx,
                    owner,
                    &format!("Send to {}", o.label),
                    &action,
                    ctx.now_ms,
                    outbound::QUESTION_TTL_MS,
                )?]));
            }
            let markup = json!({ "inline_keyboard": rows });
            say.reply(
                msg,
                &texts::waits_for(&label, folder, true),
                Some(markup),
                "reply:waits",
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
                let ttl = outbound::QUESTION_TTL_MS;
                let label = format!("Send to {}", i.label);
                let mut row = vec![outbound::button(tx, owner, &label, &send, ctx.now_ms, ttl)?];
                if let Some(thread) = msg.thread_id() {
                    let here = Button::Move {
                        turn,
                        identity: i.identity.clone(),
                        thread,
                    };
                    let label = format!("Move {} here", i.label);
                    row.push(outbound::button(tx, owner, &label, &here, ctx.now_ms, ttl)?);
                }
                rows.push(json!(row));
            }
            let text = if msg.thread_id().is_some() {
                texts::unbound_topic()
            } else {
                texts::main_chat_chooser()
            };
            let markup = json!({ "inline_keyboard": rows });
            say.reply(msg, &text, Some(markup), "reply:chooser")?;
            Ok("chooser".into())
        }
        Route::Hold => {
            if kv::get(tx, HELD_NOTICE)?.is_none() {
                // One notice per episode, in the main chat wherever the message was written.
                if let Some(id) = say.post(chat, None, &texts::no_instance(), "notice:held")? {
                    kv::set_i64(tx, HELD_NOTICE, id)?;
                }
            }
            Ok("held".into())
        }
    }
}
