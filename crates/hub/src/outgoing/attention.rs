//! Which messages make the phone buzz: one pure judgement per outbox row, from why it is sent
//! (its [`Purpose`]) and the `notifications` setting. The sender applies it to the call it
//! makes (`Outgoing::call`), so no producer decides it and a change of the setting applies to
//! the next message sent.
//!
//! The smart default: the final answer notifies (once: its first message), and so does a
//! question that waits for the person (a stale prompt's, the chooser, an ambiguous topic) and
//! what pi sends of its own accord (`telegram_message`, files outside any turn, an interrupted
//! turn's notice: nothing else would tell the person); everything intermediate (commentary,
//! tools, thinking, pushed terminal work, the hub's replies to what the person just did,
//! notices of no consequence) is silent.

use store::outbox::Purpose;

use crate::assistant::Notifications;

/// Whether a message notifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// The phone buzzes (Telegram's default).
    Notify,
    /// Sent with `disable_notification`.
    Silent,
}

/// What a row is, as far as the person's attention goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The first message of a turn's final answer.
    Answer,
    /// A question that holds up work until the person answers it (pinned while open).
    Question,
    /// What pi or the hub says that the person would otherwise never learn of.
    News,
    /// Everything else.
    Intermediate,
}

/// The attention row `purpose`'s message `part` (of its plan) gets under `mode`.
pub fn of(purpose: &Purpose, part: usize, mode: Notifications) -> Attention {
    let kind = kind(purpose, part);
    let notify = match mode {
        Notifications::All => true,
        Notifications::Smart => kind != Kind::Intermediate,
        // Questions still notify: work waits on them, and the person asked to hear of answers.
        Notifications::Answers => matches!(kind, Kind::Answer | Kind::Question),
    };
    if notify {
        Attention::Notify
    } else {
        Attention::Silent
    }
}

/// Whether a row's message is a question that waits for the person: pinned once sent, until
/// it is settled (`outbound::pin_question` / `unpin_question`). A new kind of question (pi's
/// dialogs) adds its purpose here.
pub fn waits_for_person(purpose: &Purpose) -> bool {
    match purpose {
        Purpose::ReplyChooser
        | Purpose::Stale { .. }
        | Purpose::NoticeIntent { .. }
        | Purpose::Dialog { .. } => true,
        Purpose::Piece { of, .. } => waits_for_person(of),
        _ => false,
    }
}

fn kind(purpose: &Purpose, part: usize) -> Kind {
    if waits_for_person(purpose) {
        return Kind::Question;
    }
    match purpose {
        // One buzz per answer, however many messages it takes.
        Purpose::Piece { of, n } if matches!(**of, Purpose::Answer { .. }) => {
            if *n == 0 && part == 0 {
                Kind::Answer
            } else {
                Kind::Intermediate
            }
        }
        Purpose::Answer { .. } if part == 0 => Kind::Answer,
        Purpose::NoticeInterrupted { .. }
        | Purpose::Message { .. }
        | Purpose::AttachOf { .. }
        | Purpose::NoticeRetention { .. }
        | Purpose::NoticeJoined
        | Purpose::NoticeRemoved => Kind::News,
        Purpose::Piece { of, .. }
            if matches!(**of, Purpose::Message { .. } | Purpose::AttachOf { .. }) =>
        {
            Kind::News
        }
        // An older hub's row: as Telegram would send it.
        Purpose::Other(_) => Kind::News,
        _ => Kind::Intermediate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Attention::{Notify, Silent};

    #[test]
    fn what_buzzes_in_each_mode() {
        let answer = Purpose::Answer { turn: 7 };
        let message = Purpose::Message {
            identity: "a".into(),
            at: 1,
        };
        // purpose, part, smart, answers (`all` notifies everything).
        let table: Vec<(Purpose, usize, Attention, Attention)> = vec![
            (answer.piece(0), 0, Notify, Notify),
            (answer.piece(0), 1, Silent, Silent),
            (answer.piece(1), 0, Silent, Silent),
            (
                Purpose::Commentary { turn: 7, at: 1 }.piece(0),
                0,
                Silent,
                Silent,
            ),
            (Purpose::Tools { turn: 7, at: 1 }, 0, Silent, Silent),
            (Purpose::ToolsLast { turn: 7 }, 0, Silent, Silent),
            (Purpose::Thinking { turn: 7, at: 1 }, 0, Silent, Silent),
            (
                Purpose::Local {
                    identity: "a".into(),
                    at: 1,
                }
                .piece(0),
                0,
                Silent,
                Silent,
            ),
            (Purpose::Voice { turn: 7, n: 0 }, 0, Silent, Silent),
            (Purpose::Attach { turn: 7 }.piece(0), 0, Silent, Silent),
            (Purpose::ReplyChooser, 0, Notify, Notify),
            (Purpose::Stale { question: 1, at: 2 }, 0, Notify, Notify),
            (Purpose::NoticeIntent { id: 1 }, 0, Notify, Notify),
            (Purpose::NoticeInterrupted { turn: 7 }, 0, Notify, Silent),
            (message.piece(0), 0, Notify, Silent),
            (Purpose::ReplyMenuMain, 0, Silent, Silent),
            (Purpose::ReplyWaits, 0, Silent, Silent),
            (Purpose::Skipped { turn: 7 }, 0, Silent, Silent),
            (
                Purpose::NoticeConnected {
                    instance: "i".into(),
                },
                0,
                Silent,
                Silent,
            ),
            (Purpose::Other("old:1".into()), 0, Notify, Silent),
        ];
        for (purpose, part, smart, answers) in table {
            assert_eq!(
                of(&purpose, part, Notifications::Smart),
                smart,
                "smart: {purpose}"
            );
            assert_eq!(
                of(&purpose, part, Notifications::Answers),
                answers,
                "answers: {purpose}"
            );
            assert_eq!(
                of(&purpose, part, Notifications::All),
                Notify,
                "all: {purpose}"
            );
        }
    }

    #[test]
    fn questions_are_pinned_and_nothing_else() {
        assert!(waits_for_person(&Purpose::ReplyChooser));
        assert!(waits_for_person(&Purpose::Stale { question: 1, at: 2 }));
        assert!(waits_for_person(&Purpose::NoticeIntent { id: 3 }));
        assert!(waits_for_person(&Purpose::Dialog { id: 3, at: 4 }));
        assert!(!waits_for_person(&Purpose::Answer { turn: 1 }.piece(0)));
        assert!(!waits_for_person(&Purpose::ReplyMenuMain));
    }
}
