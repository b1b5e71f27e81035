//! Private-chat topics (Threaded Mode): create, edit, close, reopen, delete.

use serde_json::{Value, json};

use super::chat_id;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::world::{Message, Sender, Topic, TopicState, World};

/// Icon colors Telegram accepts for new topics.
pub const ICON_COLORS: [i64; 6] = [
    7_322_096, 16_766_590, 13_338_331, 9_367_192, 16_749_490, 16_478_047,
];
/// Topic names are 1-128 characters.
pub const MAX_TOPIC_NAME: usize = 128;

fn check_name(name: &str) -> Result<(), ApiError> {
    let len = name.chars().count();
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("TOPIC_TITLE_EMPTY"));
    }
    if len > MAX_TOPIC_NAME {
        return Err(ApiError::bad_request("TOPIC_TITLE_TOO_LONG"));
    }
    Ok(())
}

/// Adds a service message to `thread` of `chat` (or the thread it creates, when `thread` is
/// `None`); returns the message id.
pub fn add_service(
    world: &mut World,
    bot: usize,
    chat: i64,
    thread: Option<i64>,
    sender: Sender,
    field: &str,
    value: Value,
) -> i64 {
    let date = world.clock.now_unix();
    let at_ms = world.clock.now_ms();
    let c = world.bots[bot].chat_mut(chat);
    let id = c.next_message_id;
    c.add_message(Message {
        thread_id: Some(thread.unwrap_or(id)),
        sender: Some(sender),
        date,
        at_ms,
        service: Some((field.to_owned(), value)),
        ..Message::default()
    })
}

/// Creates a topic as `sender`; returns it as `ForumTopic` and the service message id.
pub fn create_topic(
    world: &mut World,
    bot: usize,
    chat: i64,
    sender: Sender,
    name: &str,
    icon_color: i64,
    icon_custom_emoji_id: Option<String>,
) -> (Value, i64) {
    let mut created = json!({ "name": name, "icon_color": icon_color });
    if let Some(e) = &icon_custom_emoji_id {
        created["icon_custom_emoji_id"] = json!(e);
    }
    let thread_id = add_service(
        world,
        bot,
        chat,
        None,
        sender,
        "forum_topic_created",
        created.clone(),
    );
    let created_ms = world.clock.now_ms();
    world.bots[bot].chat_mut(chat).topics.insert(
        thread_id,
        Topic {
            thread_id,
            name: name.to_owned(),
            icon_color,
            icon_custom_emoji_id,
            state: TopicState::Open,
            created_by_bot: sender == Sender::Bot,
            created_ms,
        },
    );
    let mut topic = created;
    topic["message_thread_id"] = json!(thread_id);
    (topic, thread_id)
}

pub(super) fn create(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let chat = chat_id(&world.bots[bot], p)?;
    let b = &world.bots[bot];
    let c = &b.chats[&chat];
    if !c.has_topics(b) {
        return Err(ApiError::bad_request("the chat is not a forum"));
    }
    if c.group
        .as_ref()
        .is_some_and(|g| !g.bot_admin || !g.bot_can_manage_topics)
    {
        return Err(ApiError::bad_request("not enough rights to create a topic"));
    }
    let name = p.string("name")?.unwrap_or_default();
    check_name(&name)?;
    let color = p.int("icon_color")?.unwrap_or(ICON_COLORS[0]);
    if !ICON_COLORS.contains(&color) {
        return Err(ApiError::bad_request("TOPIC_ICON_COLOR_INVALID"));
    }
    let emoji = p.string("icon_custom_emoji_id")?.filter(|e| !e.is_empty());
    Ok(create_topic(world, bot, chat, Sender::Bot, &name, color, emoji).0)
}

/// The live topic a topic method targets.
fn target(world: &World, bot: usize, p: &Params) -> Result<(i64, i64), ApiError> {
    let b = &world.bots[bot];
    let chat = chat_id(b, p)?;
    let t = p.int("message_thread_id")?.unwrap_or(0);
    let c = &b.chats[&chat];
    let live = c.has_topics(b)
        && c.topics
            .get(&t)
            .is_some_and(|t| t.state != TopicState::Deleted);
    if !live {
        return Err(ApiError::thread_not_found());
    }
    Ok((chat, t))
}

pub(super) fn edit(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let (chat, t) = target(world, bot, p)?;
    let name = p.string("name")?.filter(|n| !n.is_empty());
    if let Some(n) = &name {
        check_name(n)?;
    }
    let emoji = p.string("icon_custom_emoji_id")?;
    let topic = &world.bots[bot].chats[&chat].topics[&t];
    let name_changes = name.as_ref().is_some_and(|n| *n != topic.name);
    // An empty icon_custom_emoji_id removes the icon.
    let emoji_changes = emoji
        .as_ref()
        .is_some_and(|e| Some(e.as_str()) != topic.icon_custom_emoji_id.as_deref().or(Some("")));
    if !name_changes && !emoji_changes {
        return Err(ApiError::bad_request("TOPIC_NOT_MODIFIED"));
    }
    let mut edited = json!({});
    if let (true, Some(n)) = (name_changes, &name) {
        edited["name"] = json!(n);
    }
    if let (true, Some(e)) = (emoji_changes, &emoji) {
        edited["icon_custom_emoji_id"] = json!(e);
    }
    let topic = world.bots[bot]
        .chat_mut(chat)
        .topics
        .get_mut(&t)
        .ok_or_else(ApiError::thread_not_found)?;
    if name_changes {
        topic.name = name.unwrap_or_default();
    }
    if emoji_changes {
        topic.icon_custom_emoji_id = emoji.filter(|e| !e.is_empty());
    }
    add_service(
        world,
        bot,
        chat,
        Some(t),
        Sender::Bot,
        "forum_topic_edited",
        edited,
    );
    Ok(Value::Bool(true))
}

/// Closes or reopens a topic as `sender` (the bot, or the person in the Telegram UI).
pub fn change_state(
    world: &mut World,
    bot: usize,
    chat: i64,
    t: i64,
    state: TopicState,
    sender: Sender,
) -> Result<(), ApiError> {
    let topic = world.bots[bot]
        .chat_mut(chat)
        .topics
        .get_mut(&t)
        .filter(|t| t.state != TopicState::Deleted)
        .ok_or_else(ApiError::thread_not_found)?;
    if topic.state == state {
        return Err(ApiError::bad_request("TOPIC_NOT_MODIFIED"));
    }
    topic.state = state;
    let field = if state == TopicState::Closed {
        "forum_topic_closed"
    } else {
        "forum_topic_reopened"
    };
    add_service(world, bot, chat, Some(t), sender, field, json!({}));
    Ok(())
}

pub(super) fn set_state(world: &mut World, bot: usize, p: &Params, state: TopicState) -> ApiResult {
    let (chat, t) = target(world, bot, p)?;
    change_state(world, bot, chat, t, state, Sender::Bot)?;
    Ok(Value::Bool(true))
}

/// Deletes a topic with all its messages.
pub fn delete_topic(world: &mut World, bot: usize, chat: i64, t: i64) -> Result<(), ApiError> {
    let c = world.bots[bot].chat_mut(chat);
    let topic = c
        .topics
        .get_mut(&t)
        .filter(|t| t.state != TopicState::Deleted)
        .ok_or_else(ApiError::thread_not_found)?;
    topic.state = TopicState::Deleted;
    for m in c.messages.values_mut().filter(|m| m.thread_id == Some(t)) {
        m.deleted = true;
    }
    Ok(())
}

pub(super) fn delete(world: &mut World, bot: usize, p: &Params) -> ApiResult {
    let (chat, t) = target(world, bot, p)?;
    delete_topic(world, bot, chat, t)?;
    Ok(Value::Bool(true))
}
