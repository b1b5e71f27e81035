//! Prompts that waited while the hub or their pi was away ([`crate::pi::waited`]) are held at
//! dispatch, in the dispatching transaction, and asked about: one question per pi and place,
//! whose message is rewritten (before it leaves) or edited (after) as more join it. Its
//! buttons (the tap handler, `incoming::handlers::taps`) clear them to run or drop them.
//!
//! Crash points: holding a turn and writing its question are one commit, so a hub killed
//! before it dispatches nothing and asks again after; killed after it, the turn is held and
//! the question on its way (the outbox). The answer is a commit of its own: before it, the
//! prompts stay held; after it, they run (or are gone) whatever happens next.

use store::outbox::{self, Purpose};
use store::turns::{self, Turn};
use store::{Connection, StoreError, kv, stale};

use crate::buttons::Button;
use crate::clock::Clock;
use crate::outgoing::outbound;
use crate::outgoing::texts;

/// Holds queued turn `t` of `identity` and asks about it (with the others its question holds).
/// `false` when it was not queued (then nothing is written).
pub(super) fn hold(
    tx: &Connection,
    clock: &Clock,
    t: &Turn,
    identity: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let place = outbound::place_of_turn(tx, t, identity)?;
    let question = match stale::open_for(tx, identity, place.chat, place.thread)? {
        Some(q) => q.id,
        None => stale::create(tx, identity, place.chat, place.thread, now)?,
    };
    if !turns::hold_for(tx, t.id, question)? {
        return Ok(false);
    }
    ask(tx, clock, question, identity, now)?;
    Ok(true)
}

/// Writes question `id`'s message as its prompts are now: rewritten while it has not left,
/// edited once it has, a new one when its fate is unknown (its buttons answer the same
/// question).
fn ask(
    tx: &Connection,
    clock: &Clock,
    id: i64,
    identity: &str,
    now: i64,
) -> Result<(), StoreError> {
    let Some(q) = stale::get(tx, id)? else {
        return Ok(());
    };
    let held = turns::held_by(tx, id)?;
    let Some(first) = held.first() else {
        return Ok(());
    };
    // A member's chat is asked of its own prompts: the question is theirs to answer.
    let owner = match first.from_user {
        Some(user) if user == q.chat_id => user,
        _ => kv::get_i64(tx, kv::OWNER)?.unwrap_or(q.chat_id),
    };
    let words: Vec<(i64, String)> = held.iter().map(|t| (t.sent_ms, t.prompt())).collect();
    let words: Vec<(i64, &str)> = words.iter().map(|(at, w)| (*at, w.as_str())).collect();
    let text = texts::stale_question(&words, now);
    let ttl = outbound::QUESTION_TTL_MS;
    let markup = serde_json::json!({ "inline_keyboard": [[
        outbound::button(tx, clock, owner, "▶️ Run now", &Button::Stale { question: id, run: true }, now, ttl)?,
        outbound::button(tx, clock, owner, "✖️ Skip", &Button::Stale { question: id, run: false }, now, ttl)?,
    ]] });
    let place = outbound::place_of_turn(tx, first, identity)?;
    let purpose = Purpose::Stale {
        question: id,
        at: now,
    };
    let message = outbound::Text {
        chat: place.chat,
        thread: place.thread,
        text: &text,
        reply_to: place.reply_to,
        markup: Some(markup.clone()),
        purpose: &purpose,
        source_update_id: None,
        // The only trace of what became of the person's messages until they answer.
        resend: true,
    };
    if let Some(row) = q
        .outbox_id
        .map(|o| outbox::get(tx, o))
        .transpose()?
        .flatten()
    {
        if outbound::rewrite_text(tx, row.id, &message)? {
            return Ok(());
        }
        if let (outbox::State::Sent, Some(sent)) = (row.state, row.sent_message_id) {
            return outbound::edit(
                tx,
                row.chat_id,
                sent,
                &text,
                Some(markup),
                &purpose,
                None,
                now,
            );
        }
    }
    if let Some(row) = outbound::text(tx, &message, now)? {
        // Prompts that arrive together (the backlog a restarted hub reads at once) join
        // the question while it waits this long, rather than edit it after it was sent.
        outbox::hold(
            tx,
            row,
            now + GATHER_MS,
            "gathering the prompts it asks about",
        )?;
        stale::set_outbox(tx, id, row)?;
    }
    Ok(())
}

/// How long a new question waits for other prompts to join it before it is sent. Not on the
/// way from the person to pi: these prompts waited half an hour or more already.
const GATHER_MS: i64 = 1000;
