//! The person's answer to one of pi's dialogs (`store::dialogs`): a tap on the question's
//! buttons (`taps`), or a reply to the question of an input or editor (`messages`). The
//! answer and a `dialog` control that takes it to pi commit with the update; only an open
//! dialog takes one, so a second tap, a replayed one or a late reply changes nothing.

use serde_json::{Value, json};
use store::StoreError;
use store::controls::NewControl;
use store::dialogs::{self, Dialog, Kind, State};
use store::journal::Outcome;
use store::outbox::Purpose;
use telegram::view::MessageView;

use super::Say;
use crate::buttons::DialogChoice;
use crate::outgoing::texts::{self, DialogOver};
use crate::pi::conductor::dialog_answer_shown;

/// What became of an answer.
pub(super) enum Answered {
    /// Recorded, on its way to pi: the question's new text.
    Taken(String),
    /// The dialog was over (or unknown): what the person is told, and the question's text
    /// as it is now, when known.
    Over(String, Option<String>),
}

/// The answer a button gives, from the dialog's options.
pub(super) fn of_choice(d: &Dialog, choice: DialogChoice) -> Option<Value> {
    Some(match choice {
        DialogChoice::Option(i) if d.kind == Kind::Select => {
            json!({ "value": d.options().get(i)? })
        }
        DialogChoice::Yes if d.kind == Kind::Confirm => json!({ "confirmed": true }),
        DialogChoice::No if d.kind == Kind::Confirm => json!({ "confirmed": false }),
        DialogChoice::Cancel => crate::pi::dialog::cancelled(),
        _ => return None,
    })
}

/// Records `answer` to dialog `d` (as read in this transaction) if it is open, with the control
/// that takes it to pi.
pub(super) fn answer(
    say: &mut Say<'_>,
    d: &Dialog,
    answer: Option<Value>,
    thread: Option<i64>,
    message_id: Option<i64>,
) -> Result<Answered, StoreError> {
    if d.state != State::Open {
        let now = texts::dialog_over(d, &over_of(d));
        return Ok(Answered::Over(texts::dialog_answered_before(), Some(now)));
    }
    let Some(answer) = answer else {
        return Ok(Answered::Over(texts::dialog_unknown(), None));
    };
    if !dialogs::answer(say.tx, d.id, &answer, say.ctx.now_ms)? {
        return Ok(Answered::Over(texts::dialog_answered_before(), None));
    }
    say.control(NewControl {
        source_update_id: None,
        kind: "dialog",
        identity: Some(&d.identity),
        turn_id: None,
        chat_id: d.chat_id,
        thread_id: thread.or(d.thread_id),
        message_id,
        params: &json!({ "dialog": d.id }),
    })?;
    let shown = dialog_answer_shown(d, &answer);
    Ok(Answered::Taken(texts::dialog_over(
        d,
        &DialogOver::Answered(shown),
    )))
}

/// A reply to the question of an open dialog: its answer (the text of an input or editor; for
/// a select, the text of one of its options).
pub(super) fn replied(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    d: &Dialog,
    question: i64,
    words: &str,
) -> Result<Outcome, StoreError> {
    let answer = match d.kind {
        Kind::Select => d
            .options()
            .into_iter()
            .find(|o| o.trim().eq_ignore_ascii_case(words.trim()))
            .map(|o| json!({ "value": o })),
        _ if words.trim().is_empty() => None,
        _ => Some(json!({ "value": words })),
    };
    let Some(answer) = answer else {
        let told = if d.kind == Kind::Select {
            texts::dialog_not_an_option()
        } else {
            texts::dialog_needs_text()
        };
        say.reply(msg, &told, None, &Purpose::ReplyDialog)?;
        return Ok(Outcome::DialogOver);
    };
    match self::answer(say, d, Some(answer), msg.thread_id(), Some(question))? {
        Answered::Taken(text) => {
            say.edit(d.chat_id, question, (&text, &[]), None)?;
            crate::outgoing::outbound::unpin_question(say.tx, d.chat_id, question, say.ctx.now_ms)?;
            Ok(Outcome::DialogAnswered)
        }
        Answered::Over(told, _) => {
            say.reply(msg, &told, None, &Purpose::ReplyDialog)?;
            Ok(Outcome::DialogOver)
        }
    }
}

/// How a dialog that is not open reads now.
fn over_of(d: &Dialog) -> DialogOver {
    let shown = || {
        d.answer
            .as_ref()
            .map(|a| dialog_answer_shown(d, a))
            .unwrap_or_default()
    };
    match d.state {
        State::Open | State::Answered | State::Delivered => DialogOver::Answered(shown()),
        State::TimedOut => DialogOver::TimedOut,
        State::Ended if d.kind == Kind::Terminal => DialogOver::Terminal,
        State::Ended => DialogOver::InPi,
        State::Gone => DialogOver::Gone,
    }
}
