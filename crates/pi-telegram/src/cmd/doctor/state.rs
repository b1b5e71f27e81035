//! Checks of what the state database knows (read-only, as `status` reads it while a hub
//! runs): the owner, running flood waits, and topic creations not settled.

use store::{flood, kv, pairing, threads};

use hub::clock::system_now_ms as now_ms;
use hub::config::PairingMode;

use super::{Check, Ctx, profile_flag};

const OWNER: (&str, &str) = ("owner", "Owner");
const FLOOD: (&str, &str) = ("flood_waits", "Flood waits");
const INTENTS: (&str, &str) = ("intents", "Topic intents");
const HEARING: (&str, &str) = ("hearing", "Hub hears Telegram");

/// Runs the state checks.
pub(crate) fn checks(ctx: &Ctx, checks: &mut Vec<Check>) {
    owner(ctx, checks);
    let Some(store) = &ctx.store else {
        let why = "no readable state database";
        checks.push(Check::pass(FLOOD.0, FLOOD.1, format!("none ({why})")));
        checks.push(Check::pass(INTENTS.0, INTENTS.1, format!("none ({why})")));
        return;
    };
    let now = now_ms();
    hearing(ctx, store, now, checks);
    match store.read(|c| flood::active(c, now)) {
        Ok(waits) if waits.is_empty() => {
            checks.push(Check::pass(FLOOD.0, FLOOD.1, "none running"));
        }
        Ok(waits) => {
            let list: Vec<String> = waits
                .iter()
                .map(|w| {
                    format!(
                        "{} for {} s more (Telegram asked for {} s)",
                        w.scope,
                        (w.until_ms - now + 999) / 1000,
                        w.retry_after_s
                    )
                })
                .collect();
            checks.push(Check::warn(
                FLOOD.0,
                FLOOD.1,
                format!(
                    "Telegram paused this bot's sends (429): {}",
                    list.join("; ")
                ),
                "nothing to do: the hub sends what waits once the pause is over, also after a restart; many messages in a short time cause it",
            ));
        }
        Err(e) => checks.push(Check::skip(FLOOD.0, FLOOD.1, format!("cannot read: {e}"))),
    }
    match store.read(threads::intents) {
        Ok(intents) if intents.is_empty() => {
            checks.push(Check::pass(INTENTS.0, INTENTS.1, "none unsettled"));
        }
        Ok(intents) => {
            let mut unsettled = Vec::new();
            let mut fixes = Vec::new();
            for i in &intents {
                match i.state {
                    threads::IntentState::Ambiguous => {
                        unsettled.push(format!(
                            "#{} (slot {}, {}): Telegram may or may not have made its topic",
                            i.id, i.slot, i.identity
                        ));
                        fixes.push(format!(
                            "pi-telegram threads resolve {} --create{}   (or --forget; if the topic appeared, write in it and tap \"Move here\" instead)",
                            i.id,
                            profile_flag(&ctx.opts.profile)
                        ));
                    }
                    threads::IntentState::InFlight if ctx.hub_pid.is_none() => {
                        unsettled.push(format!(
                            "#{} (slot {}, {}): a topic creation the last hub did not finish",
                            i.id, i.slot, i.identity
                        ));
                        fixes.push(format!(
                            "start the hub: it asks you about #{} in Telegram (or settle it now: pi-telegram threads resolve {} --create|--forget{})",
                            i.id,
                            i.id,
                            profile_flag(&ctx.opts.profile)
                        ));
                    }
                    threads::IntentState::InFlight => {}
                }
            }
            if unsettled.is_empty() {
                checks.push(Check::pass(
                    INTENTS.0,
                    INTENTS.1,
                    format!("{} topic creation(s) in progress", intents.len()),
                ));
            } else {
                checks.push(Check::warn(
                    INTENTS.0,
                    INTENTS.1,
                    format!(
                        "{} unsettled (those pi work in the main chat meanwhile): {}",
                        unsettled.len(),
                        unsettled.join("; ")
                    ),
                    fixes.join("\n"),
                ));
            }
        }
        Err(e) => checks.push(Check::skip(
            INTENTS.0,
            INTENTS.1,
            format!("cannot read: {e}"),
        )),
    }
}

/// `hearing`: a running hub completed a `getUpdates` within its long-poll timeout and a margin
/// (else it is deaf: messages wait at Telegram).
fn hearing(ctx: &Ctx, store: &store::Store, now: i64, checks: &mut Vec<Check>) {
    if ctx.hub_pid.is_none() {
        checks.push(Check::skip(HEARING.0, HEARING.1, "no hub runs"));
        return;
    }
    let read = store.read(|c| {
        let started = kv::get_i64(c, kv::HUB_STARTED_MS)?;
        Ok::<_, store::StoreError>((hub::status::poll_status(c, true, now)?, started))
    });
    let (poll, started) = match read {
        Ok((Some(p), started)) => (p, started),
        Ok((None, _)) => {
            checks.push(Check::skip(
                HEARING.0,
                HEARING.1,
                "the hub recorded no poll yet",
            ));
            return;
        }
        Err(e) => {
            checks.push(Check::skip(
                HEARING.0,
                HEARING.1,
                format!("cannot read: {e}"),
            ));
            return;
        }
    };
    match poll.deaf_ms(started, now) {
        None => checks.push(Check::pass(HEARING.0, HEARING.1, poll.summary())),
        Some(ms) => checks.push(Check::warn(
            HEARING.0,
            HEARING.1,
            format!(
                "the hub has heard nothing from Telegram for {} (its long poll lasts {}): {}",
                hub::status::PollStatus::duration(ms),
                hub::status::PollStatus::duration(i64::try_from(poll.timeout_ms).unwrap_or(0)),
                poll.summary()
            ),
            "messages wait at Telegram meanwhile (none is lost): check this machine's network, proxy (HTTPS_PROXY) and DNS; the hub polls again within seconds of their return and says \"Back after …\" in Telegram",
        )),
    }
}

/// `owner`: someone is paired (else nobody can use the bot).
fn owner(ctx: &Ctx, checks: &mut Vec<Check>) {
    let Some(settings) = &ctx.settings else {
        checks.push(Check::skip(
            OWNER.0,
            OWNER.1,
            "telegram.json must be fixed first",
        ));
        return;
    };
    let stored = ctx.store.as_ref().and_then(|s| {
        s.read(|c| -> Result<_, store::StoreError> {
            Ok((kv::get_i64(c, kv::OWNER)?, pairing::current(c)?))
        })
        .ok()
    });
    let (stored_owner, code) = stored.unwrap_or((None, None));
    if let Some(o) = settings.allowed_user_id.or(stored_owner) {
        checks.push(Check::pass(OWNER.0, OWNER.1, format!("user {o}")));
        return;
    }
    let setup = format!("pi-telegram setup{}", profile_flag(&ctx.opts.profile));
    if settings.pairing == PairingMode::FirstContact {
        checks.push(Check::warn(
            OWNER.0,
            OWNER.1,
            "not paired, and pairing is \"first-contact\": the first person who writes to the bot becomes its owner",
            "write to the bot yourself now (with the hub running), or set allowedUserId in telegram.json",
        ));
        return;
    }
    let now = now_ms();
    match code {
        Some(p) if p.state == pairing::PairingState::Open && p.expires_ms > now => {
            checks.push(Check::warn(
                OWNER.0,
                OWNER.1,
                format!(
                    "not paired yet; the pairing code `setup` printed is valid for {} more minute(s)",
                    (p.expires_ms - now) / 60_000 + 1
                ),
                format!(
                    "send /start CODE to the bot while the hub runs (lost the code? `{setup}` prints a new one)"
                ),
            ));
        }
        _ => checks.push(Check::warn(
            OWNER.0,
            OWNER.1,
            "not paired: the bot answers nobody",
            format!(
                "run `{setup}` for a pairing code and send /start CODE to the bot, or set allowedUserId in telegram.json"
            ),
        )),
    }
}
