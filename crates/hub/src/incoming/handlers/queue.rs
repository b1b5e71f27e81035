//! Shortcuts on waiting prompts: reactions move a prompt to the priority lane or mark it to be
//! skipped (removing the reaction undoes it); an edit changes what pi will get. On a prompt pi
//! has already, a reaction does nothing and says nothing; an edit gets a short reply.

use serde_json::Value;
use store::StoreError;
use store::journal::Outcome;
use store::outbox::Purpose;
use store::turns::{self, Lane, TurnState};
use telegram::view::MessageView;

use super::Say;
use crate::outgoing::texts;

/// Reactions that move a prompt to the priority lane.
const POSITIVE: [&str; 14] = [
    "👍",
    "⚡",
    "❤",
    "🕊",
    "🔥",
    "👏",
    "🎉",
    "🤩",
    "💯",
    "🙏",
    "👌",
    "🥰",
    "😍",
    "❤‍🔥",
];
/// Reactions that mark a prompt to be skipped.
const NEGATIVE: [&str; 7] = ["👎", "👻", "💔", "💩", "🗑", "🤮", "🙈"];

/// `(positive, negative)` present in a reaction list.
fn categories(list: Option<&Value>) -> (bool, bool) {
    let emojis: Vec<String> = list
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter(|r| r.get("type").and_then(Value::as_str) == Some("emoji"))
                .filter_map(|r| r.get("emoji").and_then(Value::as_str))
                // Variation selectors come and go between clients.
                .map(|e| e.replace('\u{fe0f}', ""))
                .collect()
        })
        .unwrap_or_default();
    let has = |set: &[&str]| emojis.iter().any(|e| set.contains(&e.as_str()));
    (has(&POSITIVE), has(&NEGATIVE))
}

/// A `message_reaction` update from the owner.
pub(super) fn reaction(say: &mut Say<'_>, update: &Value) -> Result<Outcome, StoreError> {
    let r = update.get("message_reaction").unwrap_or(&Value::Null);
    let (Some(chat), Some(message)) = (
        r.pointer("/chat/id").and_then(Value::as_i64),
        r.get("message_id").and_then(Value::as_i64),
    ) else {
        return Ok(Outcome::IgnoredMalformed);
    };
    let Some(turn) = turns::by_message(say.tx, chat, message)? else {
        return Ok(Outcome::ReactionNotAPrompt);
    };
    // In a group a member's reactions move only their own prompts; the owner's move any.
    if let Some(p) = &say.person
        && turn.from_user != Some(p.user_id)
    {
        return Ok(Outcome::ReactionNotTheirs);
    }
    if turn.state != TurnState::Queued {
        return Ok(Outcome::ReactionTooLate);
    }
    let (old_pos, old_neg) = categories(r.get("old_reaction"));
    let (new_pos, new_neg) = categories(r.get("new_reaction"));
    // Only the category that changed moves: a new thumbs-down keeps the priority, a new heart
    // keeps the skip.
    let (mut moved_to, mut skip) = (None, None);
    if old_pos != new_pos {
        let lane = if new_pos {
            Lane::Priority
        } else {
            Lane::Normal
        };
        turns::set_lane(say.tx, turn.id, lane)?;
        moved_to = Some(lane);
    }
    if old_neg != new_neg {
        turns::set_skip(say.tx, turn.id, new_neg)?;
        skip = Some(new_neg);
    }
    say.after.turns = true;
    Ok(Outcome::Reaction {
        lane: moved_to,
        skip,
    })
}

/// An edited owner message.
pub(super) fn edited(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<Outcome, StoreError> {
    let (Some(chat), Some(id)) = (msg.chat_id(), msg.id()) else {
        return Ok(Outcome::IgnoredMalformed);
    };
    let Some(turn) = turns::by_message(say.tx, chat, id)? else {
        return Ok(Outcome::IgnoredEdit);
    };
    let Some(text) = msg
        .text()
        .or_else(|| msg.caption())
        .filter(|t| !t.trim().is_empty())
    else {
        return Ok(Outcome::IgnoredEdit);
    };
    if turn.state != TurnState::Queued {
        say.reply(msg, &texts::edit_too_late(), None, &Purpose::ReplyEdit)?;
        return Ok(Outcome::EditTooLate);
    }
    // What pi gets is what the message would have become had it been sent like this: one of
    // pi's commands under pi's name. The hub's own commands act when they are sent, so an edit
    // cannot turn a waiting prompt into one.
    let text = match msg.command() {
        None => text.to_owned(),
        Some((cmd, args)) => {
            match super::commands::pi_text(say.tx, &cmd.to_ascii_lowercase(), args)? {
                Some(t) => t,
                None => {
                    say.reply(msg, &texts::edit_into_command(), None, &Purpose::ReplyEdit)?;
                    return Ok(Outcome::EditCommandRefused);
                }
            }
        }
    };
    if turns::edit_text(say.tx, turn.id, &text)? {
        return Ok(Outcome::EditApplied);
    }
    say.reply(msg, &texts::edit_too_late(), None, &Purpose::ReplyEdit)?;
    Ok(Outcome::EditTooLate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reactions_fall_in_two_categories() {
        let r = |e: &[&str]| {
            json!(
                e.iter()
                    .map(|e| json!({ "type": "emoji", "emoji": e }))
                    .collect::<Vec<_>>()
            )
        };
        assert_eq!(categories(Some(&r(&["👍"]))), (true, false));
        assert_eq!(
            categories(Some(&r(&["❤️"]))),
            (true, false),
            "with a variation selector"
        );
        assert_eq!(categories(Some(&r(&["👎", "🔥"]))), (true, true));
        assert_eq!(categories(Some(&r(&["🤔"]))), (false, false));
        assert_eq!(categories(None), (false, false));
    }
}
