//! People besides the owner: who a sender is, what members and viewers may do, invites
//! (`/start CODE` from someone the bot does not know yet) and the owner's `/people`.
//!
//! A person's role is read for every update they send, from `telegram.json` (`people`: the
//! owner's own word, re-read each time, so an edit there applies to the next update) and the
//! store (people an invite let in). Removing someone deletes them there and their buttons and
//! drops what they wrote that has not reached pi, in the tap's transaction: their next update
//! is a stranger's.

use serde_json::{Value, json};
use store::journal::Outcome;
use store::outbox::Purpose;
use store::people::{self as table, InviteState, Role};
use store::{Connection, StoreError, callbacks, instances, turns};
use telegram::view::{MessageView, UpdateKind, UpdateView};

use super::{HandlerCtx, Say, commands, messages, queue, taps};
use crate::buttons::{Button, Paged, Section};
use crate::config::ConfigFile;
use crate::outgoing::texts::people as words;
use crate::outgoing::{menu, outbound};

/// Wrong invite codes one sender may send while invites are open (per invite opened).
const INVITE_ATTEMPTS: i64 = crate::pairing::CODE_ATTEMPTS;
/// How long an invite's code works.
pub const INVITE_TTL_MS: i64 = crate::pairing::CODE_TTL_MS;

/// The owner's commands a member is refused (besides the menu's sections).
const OWNER_ONLY: &[&str] = &[
    "abort", "stop", "next", "continue", "steer", "retry", "compact", "new", "sessions", "close",
    "people",
];

/// Someone other than the owner whom the bot knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Person {
    pub user_id: i64,
    pub role: Role,
    /// As pi is told it (`[telegram|from:<name>]`) and `/people` shows it.
    pub name: String,
    /// Listed in telegram.json rather than let in by an invite.
    pub listed: bool,
    /// A member who may use pi's controls too (`memberControls`).
    pub controls: bool,
}

/// The controls `memberControls` gives members: their commands, and the buttons they show.
const CONTROLS: &[&str] = &[
    "abort", "stop", "next", "continue", "steer", "retry", "compact", "model", "thinking",
];

/// What `telegram.json` says of people for this profile: those it lists, and whether members
/// may use pi's controls (nobody, and no, when it cannot be read: the hub warned about the
/// file when it started, and an unreadable file lets nobody in).
fn configured(ctx: &HandlerCtx) -> (Vec<(i64, Role)>, bool) {
    ConfigFile::load(&ctx.config_path)
        .map(|f| {
            let p = f.profile(&ctx.profile);
            (p.people, p.member_controls)
        })
        .unwrap_or_default()
}

fn listed(ctx: &HandlerCtx) -> Vec<(i64, Role)> {
    configured(ctx).0
}

/// Who `sender` is, when not the owner: `None` for a stranger.
pub(super) fn known(
    tx: &Connection,
    ctx: &HandlerCtx,
    sender: i64,
    update: &UpdateView<'_>,
) -> Result<Option<Person>, StoreError> {
    let stored = table::get(tx, sender)?;
    let (listed, controls) = configured(ctx);
    let listed = listed
        .into_iter()
        .find(|(id, _)| *id == sender)
        .map(|(_, role)| role);
    let name = stored
        .as_ref()
        .map(|p| p.name.clone())
        .or_else(|| update.sender_name())
        .unwrap_or_else(|| format!("user {sender}"));
    // Someone telegram.json lists is known by id only: their name, as Telegram gives it, is
    // kept for `/people`.
    if listed.is_some() && stored.is_none() && listed_name(tx, sender)?.as_deref() != Some(&name) {
        store::kv::set(tx, &name_key(sender), &name)?;
    }
    Ok(match (listed, stored) {
        (Some(role), _) => Some(Person {
            user_id: sender,
            role,
            name,
            listed: true,
            controls: controls && role == Role::Member,
        }),
        (None, Some(p)) => Some(Person {
            user_id: sender,
            role: p.role,
            name,
            listed: false,
            controls: controls && p.role == Role::Member,
        }),
        (None, None) => None,
    })
}

fn name_key(user: i64) -> String {
    format!("people.name.{user}")
}

/// The name last seen of someone telegram.json lists.
fn listed_name(tx: &Connection, user: i64) -> Result<Option<String>, StoreError> {
    store::kv::get(tx, &name_key(user))
}

/// An update from a member or viewer.
pub(super) fn from_person(
    say: &mut Say<'_>,
    update: &UpdateView<'_>,
    person: &Person,
) -> Result<Outcome, StoreError> {
    let member = person.role == Role::Member;
    match update.kind() {
        UpdateKind::Message => {
            let Some(msg) = update.message() else {
                return Ok(Outcome::IgnoredMalformed);
            };
            if msg.topic_service().is_some() {
                return Ok(Outcome::IgnoredTopicService);
            }
            if let Some((cmd, args)) = msg.command() {
                return command(say, &msg, person, &cmd.to_ascii_lowercase(), args);
            }
            if !member {
                say.reply(
                    &msg,
                    &words::viewer_read_only(),
                    None,
                    &Purpose::ReplyPeople,
                )?;
                return Ok(Outcome::ViewerReadOnly);
            }
            messages::to_turn(say, &msg)
        }
        // In their private chat every prompt is their own: the queue finds it by its chat.
        UpdateKind::EditedMessage if member => match update.message() {
            Some(msg) => queue::edited(say, &msg),
            None => Ok(Outcome::IgnoredMalformed),
        },
        UpdateKind::MessageReaction if member => queue::reaction(say, update.0),
        UpdateKind::EditedMessage | UpdateKind::MessageReaction => Ok(Outcome::ViewerReadOnly),
        UpdateKind::CallbackQuery => taps::tap(say, update),
        UpdateKind::MyChatMember => Ok(Outcome::NotedMembership),
        UpdateKind::Other(kind) => Ok(Outcome::IgnoredKind(kind.to_owned())),
    }
}

/// A member's or viewer's command.
fn command(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    person: &Person,
    cmd: &str,
    args: &str,
) -> Result<Outcome, StoreError> {
    let reply =
        |say: &mut Say<'_>, text: &str| say.reply(msg, text, None, &Purpose::ReplyPeople).map(drop);
    match cmd {
        // An invite's code sent again, or by someone let in otherwise.
        "start" if !args.trim().is_empty() => {
            reply(say, &words::already_in(person.role))?;
            Ok(Outcome::AlreadyIn)
        }
        "start" | "help" => {
            reply(say, &words::help(person.role))?;
            Ok(Outcome::PeopleHelp)
        }
        "status" => {
            let text = status(say.tx)?;
            reply(say, &text)?;
            Ok(Outcome::PeopleStatus)
        }
        _ if person.role == Role::Viewer => {
            reply(say, &words::viewer_read_only())?;
            Ok(Outcome::ViewerReadOnly)
        }
        // The owner let members use pi's controls: as the owner would.
        c if person.controls && CONTROLS.contains(&c) => {
            Ok(commands::handle(say, msg)?.unwrap_or(Outcome::CommandUnknown))
        }
        c if OWNER_ONLY.contains(&c) || Section::of_command(c).is_some() => {
            reply(say, &words::owner_only(&format!("/{c}")))?;
            Ok(Outcome::OwnerOnly)
        }
        // One of pi's commands (a prompt template, an extension's): a prompt like any other.
        c => commands::pi_command(say, msg, c, args),
    }
}

/// The pi instances as a member sees them: names and whether they work now.
fn status(tx: &Connection) -> Result<String, StoreError> {
    let live = instances::live(tx)?;
    if live.is_empty() {
        return Ok(
            "No pi instance is connected now. Messages wait for one and are handed over in order."
                .to_owned(),
        );
    }
    let busy: Vec<String> = turns::outstanding(tx)?
        .into_iter()
        .filter_map(|t| t.identity)
        .collect();
    let mut out = String::from("pi instances:\n");
    for i in &live {
        let state = if busy.contains(&i.identity) {
            "working"
        } else {
            "idle"
        };
        out.push_str(&format!("• {}: {state}\n", i.label));
    }
    Ok(out)
}

/// `/start CODE` from someone the bot does not know: an invite's code lets them in. `None`
/// when no invite is open and the code is none of them: a stranger's message, which gets
/// nothing.
pub(super) fn start_with_code(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    update: &UpdateView<'_>,
    sender: i64,
    code: &str,
) -> Result<Option<Outcome>, StoreError> {
    let (tx, now) = (say.tx, say.ctx.now_ms);
    if code.trim().is_empty() {
        return Ok(None);
    }
    let found = table::invite_by_hash(tx, &crate::pairing::hash(code))?;
    if found.is_none() && table::usable_invites(tx, now)?.is_empty() {
        return Ok(None);
    }
    // Out of attempts: told once, then not answered at all (a flood must not make the bot
    // talk), not even with the right code.
    if table::attempts_left(tx, sender, INVITE_ATTEMPTS)? == 0 {
        tracing::debug!(
            user_id = sender,
            "ignored an invite code of a sender without attempts left"
        );
        return Ok(Some(Outcome::IgnoredInviteRefused));
    }
    let reply =
        |say: &mut Say<'_>, text: &str| say.reply(msg, text, None, &Purpose::ReplyJoined).map(drop);
    match found {
        Some(invite) if invite.usable(now) => {
            // Read in this transaction, so still open: two people racing for one code are
            // two updates the worker handles one after the other.
            let used = table::use_invite(tx, invite.id, sender, now)?;
            crate::never!(
                !used,
                "invite {} was usable and could not be used",
                invite.id
            );
            let name = update
                .sender_name()
                .unwrap_or_else(|| format!("user {sender}"));
            table::add(tx, sender, invite.role, &name, now)?;
            tracing::info!(
                user_id = sender,
                role = invite.role.as_str(),
                "someone joined with an invite"
            );
            reply(say, &words::joined(invite.role, &say.ctx.bot_username))?;
            if let Some(owner) = store::kv::get_i64(tx, store::kv::OWNER)? {
                say.post(
                    owner,
                    None,
                    &words::someone_joined(&name, sender, invite.role),
                    &Purpose::NoticeJoined,
                )?;
            }
            Ok(Some(Outcome::JoinedInvite))
        }
        Some(invite) => {
            let why = match invite.state {
                InviteState::Used => "was used already",
                InviteState::Revoked => "was withdrawn",
                InviteState::Open => "expired",
            };
            table::record_wrong(tx, sender, INVITE_ATTEMPTS, now)?;
            reply(say, &words::invite_spent(why))?;
            Ok(Some(Outcome::InviteSpent))
        }
        None => {
            let left = table::record_wrong(tx, sender, INVITE_ATTEMPTS, now)?;
            tracing::info!(user_id = sender, attempts_left = left, "wrong invite code");
            reply(say, &words::wrong_code(left))?;
            Ok(Some(Outcome::InviteWrongCode))
        }
    }
}

/// Whether `person` may use a button bound to them with `action`. Buttons are shown to
/// people for their own prompts (the chooser, a waiting notice, pi's buttons under an answer
/// to them, a stale question in their chat); what acts on pi, its settings, the queue or
/// other people is the owner's, whatever a button says.
pub(super) fn may_tap(
    tx: &Connection,
    person: &Person,
    action: &Button,
) -> Result<bool, StoreError> {
    let own = |turn: i64| -> Result<bool, StoreError> {
        Ok(turns::get(tx, turn)?.is_some_and(|t| t.from_user == Some(person.user_id)))
    };
    Ok(match (person.role, action) {
        (_, Button::Settled { .. } | Button::Dismiss) => true,
        (Role::Viewer, _) => false,
        // The queue's buttons show everyone's prompts: a member's queue is their reactions
        // and edits.
        (Role::Member, Button::Send { turn, .. }) => own(*turn)?,
        (
            Role::Member,
            Button::Page {
                of: Paged::Chooser { turn, .. },
                ..
            },
        ) => own(*turn)?,
        (Role::Member, Button::Prompt { .. } | Button::Stale { .. }) => true,
        (
            Role::Member,
            Button::Stop { .. }
            | Button::Compact { .. }
            | Button::Model { .. }
            | Button::ModelPage { .. }
            | Button::Thinking { .. }
            | Button::Menu {
                section: Section::Model | Section::Thinking,
                ..
            },
        ) => person.controls,
        (Role::Member, _) => false,
    })
}

/// `/people` as text and buttons, for the owner: the people [`menu::PER_PAGE`] a page (`page`
/// from 0; a page past the end shows the last), the open invites and the invite buttons on
/// every page.
pub(super) fn view(say: &Say<'_>, owner: i64, page: usize) -> Result<(String, Value), StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    let stored = table::list(tx)?;
    let listed = listed(ctx);
    let mut people = Vec::new();
    for (id, role) in &listed {
        let name = match stored.iter().find(|p| p.user_id == *id) {
            Some(p) => p.name.clone(),
            None => listed_name(tx, *id)?.unwrap_or_else(|| format!("user {id}")),
        };
        people.push(Person {
            controls: false,
            user_id: *id,
            role: *role,
            name,
            listed: true,
        });
    }
    people.extend(
        stored
            .iter()
            .filter(|p| !listed.iter().any(|(id, _)| *id == p.user_id))
            .map(|p| Person {
                user_id: p.user_id,
                role: p.role,
                name: p.name.clone(),
                listed: false,
                controls: false,
            }),
    );
    let page = menu::Page::of(people.len(), menu::PER_PAGE, page);
    let shown = page.slice(&people);
    let invites = table::usable_invites(tx, ctx.now_ms)?;
    let lines: Vec<words::Line<'_>> = shown
        .iter()
        .map(|p| words::Line {
            name: &p.name,
            user_id: p.user_id,
            role: p.role,
            listed: p.listed,
        })
        .collect();
    let mut text = words::people(&lines, invites.len());
    if let Some(line) = page.line() {
        text.push_str(&format!("\n{line}"));
    }
    let ttl = outbound::BUTTON_TTL_MS;
    let button = |label: &str, action: &Button| {
        outbound::button(tx, &ctx.clock, owner, label, action, ctx.now_ms, ttl)
    };
    let mut rows = Vec::new();
    for p in shown {
        let label = format!("✖ Remove {}", menu::short(&p.name));
        let remove = Button::RemovePerson {
            user: p.user_id,
            page: page.index,
        };
        rows.push(json!([button(&label, &remove)?]));
    }
    if let Some(paging) = page.row(page.index, menu::to_page(&Paged::People)) {
        let row: Result<Vec<Value>, StoreError> =
            paging.iter().map(|(l, b)| button(l, b)).collect();
        rows.push(Value::Array(row?));
    }
    for i in &invites {
        let label = format!("Withdraw the {} invite", words::role_name(i.role));
        let revoke = Button::RevokeInvite {
            invite: i.id,
            page: page.index,
        };
        rows.push(json!([button(&label, &revoke)?]));
    }
    rows.push(json!([
        button("➕ Invite a member", &Button::Invite { role: Role::Member })?,
        button("➕ Invite a viewer", &Button::Invite { role: Role::Viewer })?,
    ]));
    Ok((text, json!({ "inline_keyboard": rows })))
}

/// `/people` (the owner's).
pub(super) fn list(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<Outcome, StoreError> {
    let owner = msg.from_id().unwrap_or_default();
    let (text, markup) = view(say, owner, 0)?;
    say.reply(msg, &text, Some(markup), &Purpose::ReplyPeople)?;
    Ok(Outcome::PeopleList)
}

/// The owner opens an invite: a code, shown once in a message of its own (the list shows the
/// invite without it).
pub(super) fn invite(
    say: &mut Say<'_>,
    owner: i64,
    role: Role,
) -> Result<(String, Outcome), StoreError> {
    let ctx = say.ctx;
    let code =
        crate::pairing::new_code(&ctx.clock).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    table::open_invite(
        say.tx,
        &crate::pairing::hash(&code),
        role,
        ctx.now_ms,
        INVITE_TTL_MS,
    )?;
    let minutes = INVITE_TTL_MS / 60_000;
    say.post(
        owner,
        None,
        &words::invite(&code, role, &ctx.bot_username, minutes),
        &Purpose::ReplyPeople,
    )?;
    tracing::info!(role = role.as_str(), "opened an invite");
    Ok((
        format!("Invite made: pass the code on within {minutes} minutes"),
        Outcome::InviteOpened,
    ))
}

/// The owner withdraws an invite.
pub(super) fn revoke(say: &mut Say<'_>, invite: i64) -> Result<(String, Outcome), StoreError> {
    let withdrawn = table::revoke_invite(say.tx, invite, say.ctx.now_ms)?;
    Ok((
        if withdrawn {
            "Invite withdrawn: its code no longer works".to_owned()
        } else {
            "That invite was used or had expired already".to_owned()
        },
        Outcome::InviteRevoked,
    ))
}

/// The owner removes someone: from telegram.json when listed there, from the store, with
/// their buttons and the messages of theirs that wait for pi. They are told, once.
pub(super) fn remove(say: &mut Say<'_>, user: i64) -> Result<(String, Outcome), StoreError> {
    let ctx = say.ctx;
    let name = match table::get(say.tx, user)? {
        Some(p) => p.name,
        None => listed_name(say.tx, user)?.unwrap_or_else(|| format!("user {user}")),
    };
    if listed(ctx).iter().any(|(id, _)| *id == user) {
        let written = ConfigFile::load(&ctx.config_path).and_then(|mut f| {
            f.remove_person(&ctx.profile, user);
            f.save()
        });
        if let Err(e) = written {
            return Ok((
                words::remove_failed(&name, &e.to_string()),
                Outcome::PersonRemoved,
            ));
        }
    }
    let was_stored = table::remove(say.tx, user)?;
    store::kv::delete(say.tx, &name_key(user))?;
    let buttons = callbacks::forget_user(say.tx, user)?;
    let waiting = turns::waiting_from(say.tx, user)?;
    for t in &waiting {
        turns::cancel(say.tx, t.id, "removed", ctx.now_ms)?;
    }
    say.after.turns |= !waiting.is_empty();
    tracing::info!(
        user_id = user,
        was_stored,
        buttons,
        dropped = waiting.len(),
        "removed someone"
    );
    // Their private chat's id is their user id.
    say.post(
        user,
        None,
        &words::you_were_removed(&ctx.bot_username),
        &Purpose::NoticeRemoved,
    )?;
    Ok((words::removed(&name, waiting.len()), Outcome::PersonRemoved))
}
