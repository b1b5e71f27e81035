//! What the bot says about people besides the owner: invites, joining, roles, removal.

use store::people::Role;

/// A role as the person reads it.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Member => "member",
        Role::Viewer => "viewer",
    }
}

/// What a role may do, in a few words.
fn role_can(role: Role) -> &'static str {
    match role {
        Role::Member => "write to pi, and reorder, edit or skip your own waiting messages",
        Role::Viewer => "read; you cannot write to pi",
    }
}

/// One line of `/people`.
pub struct Line<'a> {
    pub name: &'a str,
    pub user_id: i64,
    pub role: Role,
    /// Listed in telegram.json (`people`), not added by an invite.
    pub listed: bool,
}

/// `/people`: who may use the bot besides the owner, and the invites still open.
pub fn people(lines: &[Line<'_>], open_invites: usize) -> String {
    let mut out = String::from("People who may use this bot\n\n• you: the owner\n");
    for l in lines {
        out.push_str(&format!(
            "• {} (id {}): {}{}\n",
            l.name,
            l.user_id,
            role_name(l.role),
            if l.listed { ", from telegram.json" } else { "" }
        ));
    }
    if lines.is_empty() {
        out.push_str("\nNobody else yet. An invite is a one-time code for one person.");
    }
    if open_invites > 0 {
        out.push_str(&format!(
            "\n{open_invites} invite{} open: its code works once, for 10 minutes.",
            if open_invites == 1 { "" } else { "s" }
        ));
    }
    out
}

/// The code of a new invite, to pass on.
pub fn invite(code: &str, role: Role, bot_username: &str, minutes: i64) -> String {
    format!(
        "Invite for a {}: send this to the person. It works once, for {minutes} minutes.\n\n\
         Open @{bot_username} in Telegram and send:\n/start {code}",
        role_name(role)
    )
}

/// The joiner's welcome.
pub fn joined(role: Role, bot_username: &str) -> String {
    format!(
        "Welcome: you are a {} of @{bot_username} now. You can {}.\n\n{}",
        role_name(role),
        role_can(role),
        help(role)
    )
}

/// The owner hears that someone joined.
pub fn someone_joined(name: &str, user_id: i64, role: Role) -> String {
    format!(
        "{name} (id {user_id}) joined as a {} with your invite. /people to see or remove them.",
        role_name(role)
    )
}

/// A member's or viewer's `/help` and `/start`.
pub fn help(role: Role) -> String {
    match role {
        Role::Member => "Write here and your message goes to pi; its answer replies to you. \
                         React 👍 to a waiting message of yours to move it to the front, 👎 to \
                         skip it; edit it to change what pi gets. /status shows the pi \
                         instances. Stopping pi, models, settings and /people are the owner's."
            .to_owned(),
        Role::Viewer => {
            "You can read along; writing to pi needs the owner to make you a member.".to_owned()
        }
    }
}

/// A viewer wrote.
pub fn viewer_read_only() -> String {
    "You are a viewer here: you can read, not write to pi. Ask the owner to make you a member."
        .to_owned()
}

/// A member used something only the owner may.
pub fn owner_only(what: &str) -> String {
    format!("Only the owner can use {what}.")
}

/// A wrong invite code.
pub fn wrong_code(left: i64) -> String {
    if left == 0 {
        "That code is not right, and that was your last try. Ask the owner for a new invite."
            .to_owned()
    } else {
        format!(
            "That code is not right. {left} more tr{} before you need a new invite.",
            if left == 1 { "y" } else { "ies" }
        )
    }
}

/// A code of an invite that cannot be used any more.
pub fn invite_spent(why: &str) -> String {
    format!("That invite {why}. Ask the owner for a new one.")
}

/// Someone with a role sent an invite's code.
pub fn already_in(role: Role) -> String {
    format!("You are a {} here already.", role_name(role))
}

/// Told to the person removed.
pub fn you_were_removed(bot_username: &str) -> String {
    format!("The owner removed your access to @{bot_username}. Your waiting messages were dropped.")
}

/// The owner removed someone.
pub fn removed(name: &str, dropped: usize) -> String {
    match dropped {
        0 => format!("{name} was removed."),
        n => format!(
            "{name} was removed; {n} waiting message{} of theirs dropped.",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// A removal of someone listed in telegram.json that could not be written there.
pub fn remove_failed(name: &str, error: &str) -> String {
    format!("{name} is listed in telegram.json, which could not be changed: {error}")
}
