//! What the hub does with one journaled update. A handler only writes to the store, inside the
//! worker's transaction that also marks the update handled, so its effects and "handled" commit
//! together or not at all. What needs pi (abort, compact, a menu with pi's models) is recorded
//! as a control for the conductor, in the same transaction.
//!
//! - [`messages`]: an owner message becomes a turn (routing, choosers, waits notices);
//! - [`commands`]: `/start`, `/help`, the controls, the menu shortcuts, pi's own commands;
//! - [`queue`]: reactions and edits on waiting prompts;
//! - [`taps`]: what every button does;
//! - [`pairing`](mod@pairing): establishing the owner;
//! - [`people`]: members and viewers, invites, the owner's `/people`;
//! - [`group`]: the forum group linked as the workspace.

mod commands;
mod dialogs;
mod gather;
mod group;
mod messages;
mod pairing;
mod people;
mod queue;
mod taps;

use serde_json::Value;
use store::journal::Outcome;
use store::outbox::Purpose;
use store::{Connection, StoreError, controls, instances, journal, kv};
use telegram::view::{MessageView, UpdateKind, UpdateView};

use crate::buttons::Section;
use crate::config::PairingMode;
use crate::outgoing::outbound;
use crate::state;

/// Inputs a handler needs besides the store.
#[derive(Debug, Clone)]
pub struct HandlerCtx {
    /// The bot's username, for texts.
    pub bot_username: String,
    /// How an owner is established.
    pub pairing: PairingMode,
    pub now_ms: i64,
    /// The hub's clock, for the random draws a handler makes (button tokens, pairing codes).
    pub clock: crate::clock::Clock,
    /// The hub's lease epoch: binding changes made here are fenced by it.
    pub epoch: store::lease::Epoch,
    /// Topic title template.
    pub title_template: String,
    /// `telegram.json` (the settings menu writes it).
    pub config_path: std::path::PathBuf,
    pub profile: crate::paths::ProfileName,
}

/// Effects the worker acts on after the commit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AfterCommit {
    /// Something was queued in the outbox: wake the sender.
    pub outbox: bool,
    /// The owner changed: mirror it into the config file.
    pub new_owner: Option<i64>,
    /// Turns or controls were created or the selection changed: wake the conductor.
    pub turns: bool,
    /// A control was created: the conductor looks at controls when it wakes.
    pub controls: bool,
    /// Bindings, intents or cleanups changed: wake the topics task.
    pub topics: bool,
    /// A turn waits for its files or its group: wake the inbound task.
    pub inbound: bool,
}

/// Handles one update and marks it handled, in the caller's transaction.
pub fn handle(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    after: &mut AfterCommit,
) -> Result<Outcome, StoreError> {
    let outcome = decide(tx, ctx, entry, after)?;
    journal::mark_handled(tx, entry.update_id, &outcome, ctx.now_ms)?;
    Ok(outcome)
}

fn decide(
    tx: &Connection,
    ctx: &HandlerCtx,
    entry: &journal::Entry,
    after: &mut AfterCommit,
) -> Result<Outcome, StoreError> {
    let value: Value = match serde_json::from_str(&entry.raw) {
        Ok(v) => v,
        Err(_) => return Ok(Outcome::IgnoredUnreadable),
    };
    let update = UpdateView(&value);
    let Some(sender) = update.sender_id() else {
        return Ok(Outcome::IgnoredNoSender);
    };
    let private = update
        .message()
        .is_none_or(|m| m.chat_type() == Some("private"))
        && update
            .callback()
            .and_then(|c| c.message())
            .is_none_or(|m| m.chat_type().is_none_or(|t| t == "private"))
        && ["/message_reaction/chat/type", "/my_chat_member/chat/type"]
            .iter()
            .all(|p| {
                value
                    .pointer(p)
                    .and_then(Value::as_str)
                    .is_none_or(|t| t == "private")
            });
    let mut say = Say {
        tx,
        ctx,
        entry,
        after,
        person: None,
    };
    if !private {
        return group::update(&mut say, &update, sender);
    }
    let owner = kv::get_i64(tx, kv::OWNER)?;
    match owner {
        Some(owner) if owner == sender => from_owner(&mut say, &update),
        Some(_) => {
            if let Some(person) = people::known(tx, ctx, sender, &update)? {
                say.person = Some(person.clone());
                return people::from_person(&mut say, &update, &person);
            }
            if let Some(msg) = update.message()
                && update.kind() == UpdateKind::Message
                && let Some(("start", code)) = msg.command()
                && let Some(outcome) =
                    people::start_with_code(&mut say, &msg, &update, sender, code)?
            {
                return Ok(outcome);
            }
            // Logged by user id only; never the content. A stranger's tap does nothing; it
            // is answered (no spinning button) only now and then, never ahead of the owner.
            tracing::info!(
                update_id = entry.update_id,
                user_id = sender,
                "ignored an update from someone who is not the owner"
            );
            if let Some(id) = update.callback().and_then(|c| c.id())
                && state::answer_stranger(tx, sender, ctx.now_ms)?
            {
                outbound::answer_stranger_tap(
                    tx,
                    id,
                    sender,
                    &crate::outgoing::texts::unknown_button(),
                    Some(entry.update_id),
                    ctx.now_ms,
                )?;
                say.after.outbox = true;
            }
            Ok(Outcome::IgnoredNotOwner)
        }
        None => pairing::unpaired(&mut say, &update, sender),
    }
}

fn from_owner(say: &mut Say<'_>, update: &UpdateView<'_>) -> Result<Outcome, StoreError> {
    match update.kind() {
        UpdateKind::Message => {
            let Some(msg) = update.message() else {
                return Ok(Outcome::IgnoredMalformed);
            };
            if msg.topic_service().is_some() {
                return Ok(Outcome::IgnoredTopicService);
            }
            if let Some(outcome) = commands::handle(say, &msg)? {
                return Ok(outcome);
            }
            messages::to_turn(say, &msg)
        }
        UpdateKind::EditedMessage => match update.message() {
            Some(msg) => queue::edited(say, &msg),
            None => Ok(Outcome::IgnoredMalformed),
        },
        UpdateKind::MessageReaction => queue::reaction(say, update.0),
        UpdateKind::CallbackQuery => taps::tap(say, update),
        UpdateKind::MyChatMember => Ok(Outcome::NotedMembership),
        UpdateKind::Other(kind) => Ok(Outcome::IgnoredKind(kind.to_owned())),
    }
}

/// The outcome of opening the menu at `section` (`menu:` and the section's lower-case title).
fn menu_outcome(section: Section) -> Outcome {
    match section {
        Section::Main => Outcome::MenuMain,
        Section::Status => Outcome::MenuStatus,
        Section::Model => Outcome::MenuModel,
        Section::Thinking => Outcome::MenuThinking,
        Section::Queue => Outcome::MenuQueue,
        Section::Settings => Outcome::MenuSettings,
        Section::Instances => Outcome::MenuInstances,
        Section::Help => Outcome::MenuHelp,
    }
}

/// The purpose of a reply that opens the menu at `section`.
fn menu_purpose(section: Section) -> Purpose {
    match section {
        Section::Main => Purpose::ReplyMenuMain,
        Section::Status => Purpose::ReplyMenuStatus,
        Section::Model => Purpose::ReplyMenuModel,
        Section::Thinking => Purpose::ReplyMenuThinking,
        Section::Queue => Purpose::ReplyMenuQueue,
        Section::Settings => Purpose::ReplyMenuSettings,
        Section::Instances => Purpose::ReplyMenuInstances,
        Section::Help => Purpose::ReplyMenuHelp,
    }
}

/// Writing what one update's handling says and records: the outbox rows it queues (through
/// [`outbound`]), the controls for the conductor, and the effects the worker acts on after the
/// commit.
pub(crate) struct Say<'a> {
    tx: &'a Connection,
    ctx: &'a HandlerCtx,
    entry: &'a journal::Entry,
    after: &'a mut AfterCommit,
    /// Who wrote, when not the owner.
    person: Option<people::Person>,
}

impl Say<'_> {
    /// Replies to `msg` where it was written.
    fn reply(
        &mut self,
        msg: &MessageView<'_>,
        text: &str,
        markup: Option<Value>,
        purpose: &Purpose,
    ) -> Result<Option<i64>, StoreError> {
        self.reply_with(msg, text, markup, purpose, false)
    }

    /// A reply that is the only trace of what became of `msg` (it did not reach pi, or it
    /// waits for a choice only this reply offers): sent again, marked, after an unknown
    /// outcome, like an answer.
    fn reply_to_prompt(
        &mut self,
        msg: &MessageView<'_>,
        text: &str,
        markup: Option<Value>,
        purpose: &Purpose,
    ) -> Result<Option<i64>, StoreError> {
        self.reply_with(msg, text, markup, purpose, true)
    }

    fn reply_with(
        &mut self,
        msg: &MessageView<'_>,
        text: &str,
        markup: Option<Value>,
        purpose: &Purpose,
        resend: bool,
    ) -> Result<Option<i64>, StoreError> {
        self.reply_formatted(msg, (text, &[]), markup, purpose, resend)
    }

    /// A reply of formatted words (`(text, entities)`: `outbound::formatted`).
    fn reply_formatted(
        &mut self,
        msg: &MessageView<'_>,
        (text, entities): (&str, &[Value]),
        markup: Option<Value>,
        purpose: &Purpose,
        resend: bool,
    ) -> Result<Option<i64>, StoreError> {
        let Some(chat) = msg.chat_id() else {
            return Ok(None);
        };
        let id = outbound::formatted(
            self.tx,
            &outbound::Text {
                chat,
                thread: msg.thread_id(),
                text,
                reply_to: msg.id(),
                markup,
                purpose,
                source_update_id: Some(self.entry.update_id),
                resend,
            },
            entities,
            self.ctx.now_ms,
        )?;
        self.after.outbox |= id.is_some();
        Ok(id)
    }

    /// A message of the hub's own in `chat` (its main chat or a topic), not a reply.
    fn post(
        &mut self,
        chat: i64,
        thread: Option<i64>,
        text: &str,
        purpose: &Purpose,
    ) -> Result<Option<i64>, StoreError> {
        let id = outbound::text(
            self.tx,
            &outbound::Text {
                chat,
                thread,
                text,
                reply_to: None,
                markup: None,
                purpose,
                source_update_id: Some(self.entry.update_id),
                resend: false,
            },
            self.ctx.now_ms,
        )?;
        self.after.outbox |= id.is_some();
        Ok(id)
    }

    /// Replaces one of the bot's messages.
    fn edit(
        &mut self,
        chat: i64,
        message_id: i64,
        (text, entities): (&str, &[Value]),
        markup: Option<Value>,
    ) -> Result<(), StoreError> {
        outbound::edit_formatted(
            self.tx,
            chat,
            message_id,
            (text, entities),
            markup,
            &Purpose::EditCallback,
            Some(self.entry.update_id),
            self.ctx.now_ms,
        )?;
        self.after.outbox = true;
        Ok(())
    }

    /// Answers a tap.
    fn answer_tap(&mut self, query_id: &str, text: &str) -> Result<(), StoreError> {
        outbound::answer_tap(
            self.tx,
            query_id,
            text,
            Some(self.entry.update_id),
            self.ctx.now_ms,
        )?;
        self.after.outbox = true;
        Ok(())
    }

    /// Records a control for the conductor.
    fn control(&mut self, c: controls::NewControl<'_>) -> Result<Option<i64>, StoreError> {
        let id = controls::create(
            self.tx,
            &controls::NewControl {
                source_update_id: Some(self.entry.update_id),
                ..c
            },
            self.ctx.now_ms,
        )?;
        self.after.turns = true;
        self.after.controls = true;
        Ok(id)
    }
}

/// The instance a control written in `msg`'s place acts on: in Threaded Mode the topic's pi
/// (in the main chat, the only live one if there is just one); in classic mode the selected
/// one. `None` when there is no such pi.
fn target_identity(
    tx: &Connection,
    chat: i64,
    thread: Option<i64>,
) -> Result<Option<String>, StoreError> {
    if state::routes_by_topic(tx, chat)? {
        if let Some(t) = thread
            && let Some(b) = store::threads::binding_by_thread(tx, chat, t)?
        {
            return Ok(Some(b.identity));
        }
        let live = instances::live(tx)?;
        return Ok(match live.as_slice() {
            [only] => Some(only.identity.clone()),
            _ => None,
        });
    }
    if let Some(s) = state::selected(tx)? {
        return Ok(Some(s));
    }
    Ok(instances::live(tx)?.into_iter().next().map(|i| i.identity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_menu_outcome_names_its_section() {
        for section in [
            Section::Main,
            Section::Status,
            Section::Model,
            Section::Thinking,
            Section::Queue,
            Section::Settings,
            Section::Instances,
            Section::Help,
        ] {
            assert_eq!(
                menu_outcome(section).to_string(),
                format!("menu:{}", section.title().to_ascii_lowercase())
            );
            assert_eq!(
                menu_purpose(section).to_string(),
                format!("reply:menu:{}", section.title())
            );
        }
    }
}
