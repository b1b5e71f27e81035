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
    const REPEATABLE: [&str; 24] = [
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

#[cfg(test)]
mod tests {
    use super::*;

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
