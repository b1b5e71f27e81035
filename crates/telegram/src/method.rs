//! Whether a method may be repeated when its outcome is unknown.

/// What repeating a call whose outcome is unknown would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safety {
    /// Repeating is harmless: reads, and writes that converge (an edit to the same content, a
    /// chat action, a draft, a delete).
    Repeatable,
    /// Repeating may duplicate an effect the person sees (a second message, a second topic).
    NonRepeatable,
}

/// The repeat safety of `method` (case-insensitive). Unknown methods are non-repeatable: the
/// careful default.
pub fn safety(method: &str) -> Safety {
    const REPEATABLE: [&str; 26] = [
        "getme",
        "getupdates",
        "getfile",
        "getchat",
        "getmycommands",
        "getwebhookinfo",
        "deletewebhook",
        "setmycommands",
        "deletemycommands",
        "sendchataction",
        "sendmessagedraft",
        "sendrichmessagedraft",
        "editmessagetext",
        "editmessagereplymarkup",
        "editmessagecaption",
        "editforumtopic",
        "closeforumtopic",
        "reopenforumtopic",
        "deletemessage",
        "deletemessages",
        "deleteforumtopic",
        "setmessagereaction",
        "pinchatmessage",
        "unpinchatmessage",
        "answercallbackquery",
        "logout",
    ];
    let lower = method.to_ascii_lowercase();
    if REPEATABLE.contains(&lower.as_str()) {
        Safety::Repeatable
    } else {
        Safety::NonRepeatable
    }
}

/// Whether `method` puts something into a chat, and so counts against that chat's pace (about
/// a message a second). Answers to button taps and bot-wide settings are not messages of any
/// chat: only the global pace applies, and they need not wait behind a chat's messages.
pub fn paced_per_chat(method: &str) -> bool {
    const NOT_IN_A_CHAT: [&str; 7] = [
        "answercallbackquery",
        // A pin, an unpin and a reaction change a message that is there; Telegram counts
        // them apart from the chat's messages (tg-fake's flood model counts none of them).
        "pinchatmessage",
        "unpinchatmessage",
        "setmessagereaction",
        "setmycommands",
        "deletemycommands",
        "deletewebhook",
    ];
    !NOT_IN_A_CHAT.contains(&method.to_ascii_lowercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_answers_and_settings_are_not_chat_messages() {
        assert!(!paced_per_chat("answerCallbackQuery"));
        assert!(!paced_per_chat("setMyCommands"));
        assert!(paced_per_chat("sendMessage"));
        assert!(paced_per_chat("editMessageText"));
        assert!(paced_per_chat("sendRichMessage"));
    }

    #[test]
    fn sends_and_topic_creation_are_not_repeatable() {
        for m in [
            "sendMessage",
            "sendDocument",
            "sendRichMessage",
            "createForumTopic",
            "copyMessage",
            "whatever",
        ] {
            assert_eq!(safety(m), Safety::NonRepeatable, "{m}");
        }
        for m in [
            "getUpdates",
            "editMessageText",
            "deleteForumTopic",
            "sendChatAction",
            "GETME",
        ] {
            assert_eq!(safety(m), Safety::Repeatable, "{m}");
        }
    }
}
