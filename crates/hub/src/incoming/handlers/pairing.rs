//! Establishing the owner: a one-time code sent as `/start CODE`, or (when configured) the first
//! person who writes.

use store::journal::Outcome;
use store::outbox::Purpose;
use store::{StoreError, kv, pairing as codes};
use telegram::view::{UpdateKind, UpdateView};

use super::Say;
use crate::config::PairingMode;
use crate::outgoing::texts;

/// An update while no owner is paired.
pub(super) fn unpaired(
    say: &mut Say<'_>,
    update: &UpdateView<'_>,
    sender: i64,
) -> Result<Outcome, StoreError> {
    let Some(msg) = update
        .message()
        .filter(|_| update.kind() == UpdateKind::Message)
    else {
        return Ok(Outcome::IgnoredUnpaired);
    };
    if msg.from_is_bot() {
        return Ok(Outcome::IgnoredBot);
    }
    let ctx = say.ctx;
    if ctx.pairing == PairingMode::FirstContact {
        become_owner(say, sender)?;
        say.reply(
            &msg,
            &texts::paired_first_contact(&ctx.bot_username),
            None,
            &Purpose::ReplyPaired,
        )?;
        return Ok(Outcome::PairedFirstContact);
    }
    let Some(("start", code)) = msg.command() else {
        tracing::info!(
            update_id = say.entry.update_id,
            user_id = sender,
            "ignored a message while no owner is paired"
        );
        return Ok(Outcome::IgnoredUnpaired);
    };
    let current = codes::current(say.tx)?;
    let open = current
        .as_ref()
        .filter(|p| p.state == codes::PairingState::Open && p.expires_ms > ctx.now_ms);
    let Some(open) = open else {
        say.reply(&msg, &texts::no_code_open(), None, &Purpose::ReplyPairing)?;
        return Ok(Outcome::PairingNoCode);
    };
    // Refused: this sender used up their attempts with this code and was told so. Not
    // answered again (a flood must not make the bot talk), not even with the right code.
    if codes::attempts_left(say.tx, sender)? == 0 {
        tracing::debug!(
            update_id = say.entry.update_id,
            user_id = sender,
            "ignored a pairing attempt of a sender without attempts left"
        );
        return Ok(Outcome::IgnoredPairingRefused);
    }
    if code.is_empty() {
        say.reply(&msg, &texts::code_needed(), None, &Purpose::ReplyPairing)?;
        return Ok(Outcome::PairingCodeNeeded);
    }
    if wire::secrets_match(&crate::pairing::hash(code), &open.code_hash) {
        codes::mark_used(say.tx)?;
        become_owner(say, sender)?;
        tracing::info!(user_id = sender, "paired a new owner");
        say.reply(
            &msg,
            &texts::paired(&ctx.bot_username),
            None,
            &Purpose::ReplyPaired,
        )?;
        return Ok(Outcome::PairedCode);
    }
    // Counted for this sender only: a stranger's guesses never spend the owner's attempts.
    let left = codes::record_wrong(say.tx, sender, ctx.now_ms)?;
    tracing::info!(user_id = sender, attempts_left = left, "wrong pairing code");
    say.reply(&msg, &texts::wrong_code(left), None, &Purpose::ReplyPairing)?;
    Ok(if left == 0 {
        Outcome::PairingRefused
    } else {
        Outcome::PairingWrongCode
    })
}

fn become_owner(say: &mut Say<'_>, user: i64) -> Result<(), StoreError> {
    kv::set_i64(say.tx, kv::OWNER, user)?;
    say.after.new_owner = Some(user);
    Ok(())
}
