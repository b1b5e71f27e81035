//! Shortcuts on waiting prompts: reactions move a prompt to the priority lane or mark it to be
//! skipped (removing the reaction undoes it); an edit changes what pi will get. On a prompt pi
//! has already, a reaction does nothing and says nothing; an edit gets a short reply.

use serde_json::Value;
use store::StoreError;
use store::turns::{self, Lane, TurnState};
use telegram::view::MessageView;

use super::Say;
use crate::texts;

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
pub(super) fn reaction(say: &mut Say<'_>, update: &Value) -> Result<String, StoreError> {
    let r = update.get("message_reaction").unwrap_or(&Value::Null);
    let (Some(chat), Some(message)) = (
        r.pointer("/chat/id").and_then(Value::as_i64),
        r.get("message_id").and_then(Value::as_i64),
    ) else {
        return Ok("ignored:malformed".into());
    };
    let Some(turn) = turns::by_message(say.tx, chat, message)? else {
        return Ok("reaction:not-a-prompt".into());
    };
    if turn.state != TurnState::Queued {
        return Ok("reaction:too-late".into());
    }
    let (old_pos, old_neg) = categories(r.get("old_reaction"));
    let (new_pos, new_neg) = categories(r.get("new_reaction"));
    // Only the category that changed moves: a new thumbs-down keeps the priority, a new heart
    // keeps the skip.
    let mut outcome = Vec::new();
    if old_pos != new_pos {
        let lane = if new_pos {
            Lane::Priority
        } else {
            Lane::Normal
        };
        turns::set_lane(say.tx, turn.id, lane)?;
        outcome.push(lane.as_str());
    }
    if old_neg != new_neg {
        turns::set_skip(say.tx, turn.id, new_neg)?;
        outcome.push(if new_neg { "skip" } else { "keep" });
    }
    say.after.turns = true;
    Ok(if outcome.is_empty() {
        "reaction:unchanged".into()
    } else {
        format!("reaction:{}", outcome.join("+"))
    })
}

/// An edited owner message.
pub(super) fn edited(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<String, StoreError> {
    let (Some(chat), Some(id)) = (msg.chat_id(), msg.id()) else {
        return Ok("ignored:malformed".into());
    };
    let Some(turn) = turns::by_message(say.tx, chat, id)? else {
        return Ok("ignored:edit".into());
    };
    let Some(text) = msg
        .text()
        .or_else(|| msg.caption())
        .filter(|t| !t.trim().is_empty())
    else {
        return Ok("ignored:edit".into());
    };
    if turn.state != TurnState::Queued {
        say.reply(msg, &texts::edit_too_late(), None, "reply:edit")?;
        return Ok("edit:too-late".into());
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
                    say.reply(msg, &texts::edit_into_command(), None, "reply:edit")?;
                    return Ok("edit:command-refused".into());
                }
            }
        }
    };
    if turns::edit_text(say.tx, turn.id, &text)? {
        return Ok("edit:applied".into());
    }
    say.reply(msg, &texts::edit_too_late(), None, "reply:edit")?;
    Ok("edit:too-late".into())
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
