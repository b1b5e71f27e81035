//! What the bot says. Plain text (no parse mode), so nothing here can fail entity parsing.

/// Reply to `/start` and `/help` from the owner.
pub fn help(bot_username: &str) -> String {
    format!(
        "pi-telegram is running for @{bot_username}.\n\n\
         To work with pi from here, open a terminal where pi runs and type /telegram-connect \
         (install the extension once with `pi-telegram install-extension`).\n\n\
         Messages you send before a pi instance connects are kept and handed over in order.\n\n\
         Commands: /help shows this."
    )
}

/// The one notice for owner messages that wait for an instance.
pub fn held_notice() -> String {
    "No pi instance is connected yet, so I am keeping your messages: they will be handed over \
     in order when one connects. In pi, type /telegram-connect."
        .to_owned()
}

/// A successful pairing.
pub fn paired(bot_username: &str) -> String {
    format!(
        "Paired: you own @{bot_username} now. Only your messages will reach pi.\n\n{}",
        help(bot_username)
    )
}

/// First-contact pairing.
pub fn paired_first_contact(bot_username: &str) -> String {
    format!(
        "You are the owner of @{bot_username} now (first-contact pairing). Only your messages will reach pi.\n\n{}",
        help(bot_username)
    )
}

/// A wrong pairing code.
pub fn wrong_code(attempts_left: i64) -> String {
    if attempts_left > 0 {
        format!("That pairing code is not right. {attempts_left} attempt(s) left.")
    } else {
        "That pairing code is not right, and it is no longer valid. Run `pi-telegram setup` for a new one.".to_owned()
    }
}

/// `/start` while no code is open.
pub fn no_code_open() -> String {
    "This bot is not paired with anyone yet. On your computer run `pi-telegram setup`, then send \
     the /start command with the code it prints."
        .to_owned()
}

/// `/start` without a code while one is open.
pub fn code_needed() -> String {
    "This bot is not paired yet. Send /start followed by the code `pi-telegram setup` printed, \
     for example: /start ABCD2345"
        .to_owned()
}

/// Answer to a button the hub does not know (yet).
pub fn unknown_button() -> String {
    "This button is no longer active.".to_owned()
}
