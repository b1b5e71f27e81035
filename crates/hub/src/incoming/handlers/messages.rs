//! An owner message becomes a turn for the pi it belongs to.

use store::instances::InstanceRow;
use store::journal::Outcome;
use store::outbox::Purpose;
use store::threads as tables;
use store::turns::{self, Target, Waits};
use store::{Connection, StoreError, instances, kv, routes};
use telegram::view::MessageView;

use super::{Say, gather};
use crate::names::{folder_of, label_of};
use crate::outgoing::texts;
use crate::outgoing::{menu, outbound};
use crate::pi::inbound;
use crate::state::{self, HELD_NOTICE, SELECTED, waits_notice_key};

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
    now_ms: i64,
) -> Result<Route, StoreError> {
    if let Some(r) = msg.reply_to_message_id()
        && let Some(identity) = routes::lookup(tx, chat, r)?
    {
        // A route the person replies to is in use: retention keeps it another period.
        routes::used(tx, chat, r, now_ms)?;
        return Ok(Route::To(identity));
    }
    let bound = if state::routes_by_topic(tx, chat)? {
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
pub(super) fn to_turn(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<Outcome, StoreError> {
    to_turn_as(say, msg, None, turns::Lane::Normal)
}

/// [`to_turn`] with the text pi gets and the lane given.
pub(super) fn to_turn_as(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    text_override: Option<&str>,
    lane: turns::Lane,
) -> Result<Outcome, StoreError> {
    let (Some(chat), Some(message_id)) = (msg.chat_id(), msg.id()) else {
        return Ok(Outcome::IgnoredMalformed);
    };
    let media = inbound::media::of_message(msg.0);
    let words = text_override
        .or_else(|| msg.text())
        .or_else(|| msg.caption())
        .unwrap_or_default();
    // A reply to the question of one of pi's dialogs is its answer, not a prompt.
    if text_override.is_none()
        && let Some(question) = msg.reply_to_message_id()
        && let Some(d) = store::dialogs::open_replied(say.tx, chat, question)?
    {
        return super::dialogs::replied(say, msg, &d, question, words);
    }
    let forward_from = gather::forward_origin(msg);
    let unsupported = inbound::media::unsupported(msg.0);
    if media.is_empty() && words.trim().is_empty() && forward_from.is_none() {
        let text = texts::attachment_not_delivered(unsupported.unwrap_or_default(), false);
        say.reply_to_prompt(msg, &text, None, &Purpose::ReplyTextOnly)?;
        return Ok(Outcome::RepliedTextOnly);
    }
    if let Some(field) = unsupported {
        let text = texts::attachment_not_delivered(field, true);
        say.reply(msg, &text, None, &Purpose::ReplyAttachment)?;
    }
    let part = gather::Part {
        msg,
        text: words,
        media: &media,
        forward_from,
    };
    if let Some(outcome) = gather::join(say, &part)? {
        say.after.turns = true;
        return Ok(outcome);
    }
    let created = create_turn(say, &part, chat, message_id, lane)?;
    say.after.turns = true;
    let Some(turn) = created.turn else {
        return Ok(Outcome::Queued);
    };
    let live = &created.live;
    match created.route {
        Route::To(identity) if live.iter().any(|i| i.identity == identity) => Ok(Outcome::Queued),
        // Reconnecting after a hub restart: it gets the message in a moment.
        Route::To(identity) if state::returning(say.tx, &identity)? => Ok(Outcome::QueuedReturning),
        Route::To(identity) => waits(say, msg, turn, &identity, live),
        Route::Choose => choose(say, msg, turn, live),
        Route::Hold => hold(say, chat),
    }
}

/// A turn made of a message, where [`route`] sent it, and the pi that were live.
struct Created {
    /// `None` when the update had made its turn before.
    turn: Option<i64>,
    route: Route,
    live: Vec<InstanceRow>,
}

/// Creates the turn `part` becomes, with its context (what was forwarded, or the message it
/// replies to) and its files.
fn create_turn(
    say: &mut Say<'_>,
    part: &gather::Part<'_>,
    chat: i64,
    message_id: i64,
    lane: turns::Lane,
) -> Result<Created, StoreError> {
    let (tx, ctx, msg) = (say.tx, say.ctx, part.msg);
    // What was forwarded is context; the person's own words (a comment) are the turn's text.
    let text = if part.forward_from.is_some() {
        ""
    } else {
        part.text
    };
    let group = gather::starts(say, part)?;
    let prepare = match (&group, part.media.is_empty()) {
        (Some((key, until)), _) => Some(turns::Prepare {
            group_key: Some(key.as_str()),
            gather_until_ms: *until,
        }),
        (None, false) => Some(turns::Prepare::default()),
        (None, true) => None,
    };
    let live = instances::live(tx)?;
    let route = route(tx, msg, chat, !live.is_empty(), ctx.now_ms)?;
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
            prepare,
            sent_ms: msg.date().map(|s| s.saturating_mul(1000)),
            from_user: say.person.as_ref().map(|p| p.user_id),
            from_name: say.person.as_ref().map(|p| p.name.as_str()),
        },
        ctx.now_ms,
    )?;
    if let Some(turn) = turn {
        if let Some(from) = &part.forward_from {
            turns::append_context(tx, turn, &inbound::prompt::forward_block(from, part.text))?;
        } else if let Some(quote) = replied_quote(msg) {
            turns::append_context(tx, turn, &quote)?;
        }
        gather::add_files_to(say, turn, part)?;
        if prepare.is_some() {
            say.after.inbound = true;
        }
    }
    Ok(Created { turn, route, live })
}

/// A turn for `identity`, whose pi is away: the person is told, and offered the pi that are
/// live.
fn waits(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    turn: i64,
    identity: &str,
    live: &[InstanceRow],
) -> Result<Outcome, StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    let owner = msg.from_id().or(msg.chat_id()).unwrap_or_default();
    let label = label_of(identity);
    let folder = folder_of(identity);
    let others: Vec<_> = live.iter().filter(|i| i.identity != identity).collect();
    if others.is_empty() {
        // One notice per absence, not one per message.
        let key = waits_notice_key(identity);
        if kv::get(tx, &key)?.is_none() {
            kv::set(tx, &key, "1")?;
            let text = texts::waits_for(&label, folder, false);
            say.reply(msg, &text, None, &Purpose::ReplyWaits)?;
        }
        return Ok(Outcome::QueuedWaits);
    }
    let rows = menu::chooser(turn, &choices(live), None, Some(identity), 0);
    let markup = menu::keyboard(
        tx,
        &ctx.clock,
        owner,
        &rows,
        ctx.now_ms,
        outbound::QUESTION_TTL_MS,
    )?;
    say.reply(
        msg,
        &texts::waits_for(&label, folder, true),
        markup,
        &Purpose::ReplyWaits,
    )?;
    Ok(Outcome::QueuedWaits)
}

/// A turn nothing routes: the person chooses among the live pi (or, in a topic, moves one
/// here).
fn choose(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    turn: i64,
    live: &[InstanceRow],
) -> Result<Outcome, StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    let owner = msg.from_id().or(msg.chat_id()).unwrap_or_default();
    let rows = menu::chooser(turn, &choices(live), msg.thread_id(), None, 0);
    let markup = menu::keyboard(
        tx,
        &ctx.clock,
        owner,
        &rows,
        ctx.now_ms,
        outbound::QUESTION_TTL_MS,
    )?;
    let text = if msg.thread_id().is_some() {
        texts::unbound_topic()
    } else {
        texts::main_chat_chooser()
    };
    // The message waits for this choice: without the question it would wait unseen.
    say.reply_to_prompt(msg, &text, markup, &Purpose::ReplyChooser)?;
    Ok(Outcome::Chooser)
}

/// The live pi as the chooser offers them.
pub(super) fn choices(live: &[InstanceRow]) -> Vec<menu::Choice> {
    live.iter()
        .map(|i| (i.identity.clone(), i.label.clone()))
        .collect()
}

/// A turn for the first pi that connects: the person is told no pi is there.
fn hold(say: &mut Say<'_>, chat: i64) -> Result<Outcome, StoreError> {
    if kv::get(say.tx, HELD_NOTICE)?.is_none() {
        // One notice per episode, in the main chat wherever the message was written.
        if let Some(id) = say.post(chat, None, &texts::no_instance(), &Purpose::NoticeHeld)? {
            kv::set_i64(say.tx, HELD_NOTICE, id)?;
        }
    }
    Ok(Outcome::Held)
}

/// The text of the message `msg` replies to, as context for pi (who wrote it, what it said).
fn replied_quote(msg: &MessageView<'_>) -> Option<String> {
    let r = msg.0.get("reply_to_message")?;
    let quoted = match r
        .get("text")
        .or_else(|| r.get("caption"))
        .and_then(serde_json::Value::as_str)
    {
        Some(t) => t.to_owned(),
        // A rich message (the bot's answers): its words, block by block.
        None => {
            let mut out = String::new();
            rich_words(r.get("rich_message")?, &mut out);
            out
        }
    };
    if quoted.trim().is_empty() {
        return None;
    }
    let from = r.get("from");
    let who = if from
        .and_then(|f| f.get("is_bot"))
        .and_then(serde_json::Value::as_bool)
        == Some(true)
    {
        "pi".to_owned()
    } else {
        from.and_then(|f| f.get("first_name"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("someone")
            .to_owned()
    };
    Some(inbound::prompt::reply_block(&who, &quoted))
}

/// The words of a rich message: every `text` string, in order, a line per block.
fn rich_words(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(o) => {
            if let Some(t) = o.get("text").and_then(serde_json::Value::as_str) {
                out.push_str(t);
            }
            for (k, child) in o {
                if k != "text" {
                    rich_words(child, out);
                }
            }
            if o.contains_key("type") && !out.ends_with('\n') && !out.is_empty() {
                let block = o
                    .get("type")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|t| !t.starts_with("text") && t != "bold" && t != "italic");
                if block {
                    out.push('\n');
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|c| rich_words(c, out)),
        _ => {}
    }
}
