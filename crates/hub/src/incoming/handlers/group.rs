//! The forum group linked as the team's workspace: `/link` there (the owner only, confirmed in
//! the owner's private chat), what the people in it may send, and the group going away (the
//! bot removed from it, or `/unlink`).
//!
//! Linked, the group is where pi's topics are made (`state::workspace`): one per live pi, by
//! the same provisioning as the private chat's. In it the owner and members are heard in pi's
//! topics, and in the General topic only when they address the bot (a command, a mention, a
//! reply to the bot): a team's chatter there is not a prompt. Viewers and strangers are heard
//! nowhere, and told nothing. An anonymous admin cannot be told apart from the group: refused,
//! with the reason.

use serde_json::{Value, json};
use store::journal::Outcome;
use store::outbox::Purpose;
use store::threads::{self as tables, BindingState};
use store::{StoreError, kv};
use telegram::view::{MessageView, UpdateKind, UpdateView};

use super::{Say, from_owner, people};
use crate::buttons::Button;
use crate::outgoing::outbound;
use crate::state;

/// The user Telegram names as `from` of an anonymous admin's message.
const GROUP_ANONYMOUS_BOT: i64 = 1_087_968_824;

/// An update from a group or channel (anything that is not a private chat).
pub(super) fn update(
    say: &mut Say<'_>,
    update: &UpdateView<'_>,
    sender: i64,
) -> Result<Outcome, StoreError> {
    let Some(chat) = update.chat_id() else {
        return Ok(Outcome::IgnoredMalformed);
    };
    let owner = kv::get_i64(say.tx, kv::OWNER)?;
    let linked = state::linked_group(say.tx)? == Some(chat);
    if update.kind() == UpdateKind::MyChatMember {
        return membership(say, update, chat, linked);
    }
    let msg = update
        .message()
        .filter(|_| update.kind() == UpdateKind::Message);
    if let Some(msg) = &msg
        && let Some((cmd, _)) = msg.command()
        && owner == Some(sender)
    {
        match cmd.to_ascii_lowercase().as_str() {
            "link" => return ask_to_link(say, msg, chat),
            "unlink" if linked => return unlink(say, chat, "/unlink"),
            _ => {}
        }
    }
    if !linked {
        return Ok(Outcome::IgnoredNotPrivate);
    }
    if let Some(msg) = &msg {
        if msg.0.get("sender_chat").is_some() || sender == GROUP_ANONYMOUS_BOT {
            say.reply(msg, &texts::anonymous(), None, &Purpose::ReplyGroup)?;
            return Ok(Outcome::GroupAnonymous);
        }
        if msg.topic_service().is_some() {
            return Ok(Outcome::IgnoredTopicService);
        }
        if !addressed(say, msg, chat, owner == Some(sender))? {
            return Ok(Outcome::GroupNotAddressed);
        }
    }
    if owner == Some(sender) {
        return from_owner(say, update);
    }
    match people::known(say.tx, say.ctx, sender, update)? {
        Some(person) if person.role == store::people::Role::Member => {
            say.person = Some(person.clone());
            people::from_person(say, update, &person)
        }
        // Viewers read; strangers are not heard. Nothing is said to either in a group.
        _ => Ok(Outcome::IgnoredNotOwner),
    }
}

/// Whether a message in the linked group is for the bot: anything in a pi's topic; in the
/// General topic (or another topic of nobody's) a command, a mention of the bot or a reply
/// to one of its messages. While a topic's creation has an unknown outcome, the owner's
/// messages in any topic are heard: writing in the topic that was made is how the owner
/// settles it ("Move … here").
fn addressed(
    say: &Say<'_>,
    msg: &MessageView<'_>,
    chat: i64,
    by_owner: bool,
) -> Result<bool, StoreError> {
    if let Some(thread) = msg.thread_id() {
        if tables::binding_by_thread(say.tx, chat, thread)?.is_some() {
            return Ok(true);
        }
        if by_owner
            && tables::intents(say.tx)?
                .iter()
                .any(|i| i.chat_id == chat && i.state == tables::IntentState::Ambiguous)
        {
            return Ok(true);
        }
    }
    if msg.command().is_some() {
        return Ok(true);
    }
    let bot = &say.ctx.bot_username;
    let mentioned = !bot.is_empty()
        && msg.text().or_else(|| msg.caption()).is_some_and(|t| {
            t.to_ascii_lowercase()
                .contains(&format!("@{}", bot.to_ascii_lowercase()))
        });
    let to_bot = msg
        .0
        .pointer("/reply_to_message/from/username")
        .and_then(Value::as_str)
        .is_some_and(|u| u.eq_ignore_ascii_case(bot));
    Ok(mentioned || to_bot)
}

/// The owner's `/link` in a group: a forum is offered as the workspace, in the owner's
/// private chat (a command anyone in the group can see must not be the confirmation).
fn ask_to_link(say: &mut Say<'_>, msg: &MessageView<'_>, chat: i64) -> Result<Outcome, StoreError> {
    let forum = msg
        .0
        .pointer("/chat/is_forum")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !forum {
        say.reply(msg, &texts::not_a_forum(), None, &Purpose::ReplyGroup)?;
        return Ok(Outcome::GroupNotForum);
    }
    let title = msg
        .0
        .pointer("/chat/title")
        .and_then(Value::as_str)
        .unwrap_or("this group")
        .to_owned();
    let owner = msg.from_id().unwrap_or_default();
    kv::set_i64(say.tx, state::GROUP_ASKED, chat)?;
    let ctx = say.ctx;
    let ttl = outbound::QUESTION_TTL_MS;
    let button = |label: &str, link: bool| {
        let action = Button::LinkGroup {
            chat,
            title: title.clone(),
            link,
        };
        outbound::button(say.tx, &ctx.clock, owner, label, &action, ctx.now_ms, ttl)
    };
    let markup = json!({ "inline_keyboard": [[
        button("🔗 Link it", true)?,
        button("Cancel", false)?,
    ]] });
    outbound::text(
        say.tx,
        &outbound::Text {
            chat: owner,
            thread: None,
            text: &texts::link_question(&title),
            reply_to: None,
            markup: Some(markup),
            purpose: &Purpose::NoticeGroup,
            source_update_id: Some(say.entry.update_id),
            resend: false,
        },
        ctx.now_ms,
    )?;
    say.reply(msg, &texts::link_asked(), None, &Purpose::ReplyGroup)?;
    say.after.outbox = true;
    Ok(Outcome::GroupLinkAsked)
}

/// The owner's answer to a `/link` question: the group becomes the workspace. The topics of
/// pi in the private chat stay there as they are; each live pi gets a topic in the group.
pub(super) fn confirm(
    say: &mut Say<'_>,
    chat: i64,
    title: &str,
    link: bool,
) -> Result<(String, Outcome), StoreError> {
    if kv::get_i64(say.tx, state::GROUP_ASKED)? != Some(chat) {
        return Ok((
            "That question was answered already".to_owned(),
            Outcome::GroupLinkDeclined,
        ));
    }
    kv::delete(say.tx, state::GROUP_ASKED)?;
    if !link {
        return Ok(("Not linked".to_owned(), Outcome::GroupLinkDeclined));
    }
    kv::set_i64(say.tx, state::GROUP, chat)?;
    say.post(chat, None, &texts::linked_here(), &Purpose::ReplyGroup)?;
    say.after.topics = true;
    say.after.turns = true;
    tracing::info!(chat, "linked a forum group as the workspace");
    Ok((texts::linked(title), Outcome::GroupLinked))
}

/// The group stops being the workspace: its bindings are lost (the bot may no longer reach
/// those topics), so pi's topics come back in the private chat where Threaded Mode is on.
fn unlink(say: &mut Say<'_>, chat: i64, why: &str) -> Result<Outcome, StoreError> {
    kv::delete(say.tx, state::GROUP)?;
    let now = say.ctx.now_ms;
    for b in tables::bindings(say.tx)?
        .into_iter()
        .filter(|b| b.chat_id == chat)
    {
        tables::set_binding_state(say.tx, &b.identity, BindingState::Lost, None, now)?;
    }
    if let Some(owner) = kv::get_i64(say.tx, kv::OWNER)? {
        say.post(owner, None, &texts::unlinked(why), &Purpose::NoticeGroup)?;
    }
    say.after.topics = true;
    say.after.turns = true;
    tracing::info!(chat, why, "the forum group is no longer the workspace");
    Ok(Outcome::GroupUnlinked)
}

/// The bot's own membership changed: removed from the linked group, it is unlinked.
fn membership(
    say: &mut Say<'_>,
    update: &UpdateView<'_>,
    chat: i64,
    linked: bool,
) -> Result<Outcome, StoreError> {
    let status = update
        .0
        .pointer("/my_chat_member/new_chat_member/status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if linked && matches!(status, "left" | "kicked") {
        return unlink(say, chat, "the bot was removed from the group");
    }
    Ok(Outcome::NotedMembership)
}

/// What the bot says about the group.
mod texts {
    pub fn anonymous() -> String {
        "Messages of anonymous admins cannot reach pi: the bot cannot tell who wrote them. \
         Turn off \"Remain anonymous\" in your admin rights to talk to pi here."
            .to_owned()
    }

    pub fn not_a_forum() -> String {
        "This group has no topics: turn Topics on in the group's settings, then send /link \
         again."
            .to_owned()
    }

    pub fn link_asked() -> String {
        "The owner is asked in their private chat with the bot to confirm.".to_owned()
    }

    pub fn link_question(title: &str) -> String {
        format!(
            "Make the group «{title}» the workspace? Each pi gets a topic there, and the people \
             you allow (/people) can talk to it. The bot needs to be an admin with the right to \
             manage topics. Your private chat keeps working."
        )
    }

    pub fn linked(title: &str) -> String {
        format!("«{title}» is the workspace now")
    }

    pub fn linked_here() -> String {
        "This group is the workspace now: each pi gets a topic here. Write in a pi's topic to \
         talk to it; in General, mention the bot."
            .to_owned()
    }

    pub fn unlinked(why: &str) -> String {
        format!(
            "The group is no longer the workspace ({why}): pi's answers come to this chat again."
        )
    }
}
