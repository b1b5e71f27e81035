//! What pi says, into the outbox: final answers, commentary (text pi wrote before calling
//! tools), activity (tools, thinking) and work started outside Telegram. All in the caller's
//! transaction, each piece one row with its delivery plan, so order and crash safety are the
//! outbox's.

use serde_json::{Value, json};
use store::threads::{self as tables, BindingState};
use store::turns::Turn;
use store::{Connection, StoreError, outbox};

use crate::assistant::Rendering;
use crate::delivery::{self, Alternative, Plan, Target};
use crate::topics;

/// Where a turn's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Chat.
    pub chat: i64,
    /// Topic.
    pub thread: Option<i64>,
    /// The instance's topic was deleted: rows wait for the new one.
    pub waiting: bool,
    /// The question's message, when the output goes where it was asked.
    pub reply_to: Option<i64>,
    /// It is the instance's own topic (no label needed to say who speaks).
    pub own_topic: bool,
}

/// Where output about turn `t` of `identity` goes: in Threaded Mode the instance's topic (rows
/// wait while that topic is being replaced), otherwise where the question was asked.
pub fn place_of_turn(tx: &Connection, t: &Turn, identity: &str) -> Result<Place, StoreError> {
    let binding = if topics::threaded(tx)? {
        tables::binding(tx, identity)?
    } else {
        None
    };
    Ok(match binding {
        Some(b) => Place {
            chat: t.chat_id,
            thread: Some(b.thread_id),
            waiting: b.state == BindingState::Lost,
            reply_to: t.message_id.filter(|_| Some(b.thread_id) == t.thread_id),
            own_topic: true,
        },
        None => Place {
            chat: t.chat_id,
            thread: t.thread_id,
            waiting: false,
            reply_to: t.message_id,
            own_topic: false,
        },
    })
}

/// Where output of an instance's own work (not a Telegram turn) goes: its topic in Threaded
/// Mode, else the owner's chat.
pub fn place_of_instance(tx: &Connection, identity: &str, owner: i64) -> Result<Place, StoreError> {
    let binding = if topics::threaded(tx)? {
        tables::binding(tx, identity)?
    } else {
        None
    };
    Ok(match binding {
        Some(b) => Place {
            chat: b.chat_id,
            thread: Some(b.thread_id),
            waiting: b.state == BindingState::Lost,
            reply_to: None,
            own_topic: true,
        },
        None => Place {
            chat: owner,
            thread: None,
            waiting: false,
            reply_to: None,
            own_topic: false,
        },
    })
}

/// What the rows are about.
#[derive(Debug, Clone, Copy)]
pub struct Meta<'a> {
    /// Purpose prefix; pieces get `:<n>`.
    pub purpose: &'a str,
    /// The update behind it (with the purpose, at most one row per cause).
    pub source_update_id: Option<i64>,
    /// The instance it speaks for (replies route there).
    pub identity: &'a str,
    /// The turn.
    pub turn_id: Option<i64>,
    /// Sent again when the outcome of a send is unknown (it must arrive).
    pub resend: bool,
}

/// Queues Markdown, rendered per `rendering`, one row per piece.
pub fn enqueue_markdown(
    tx: &Connection,
    place: Place,
    markdown: &str,
    rendering: Rendering,
    meta: Meta<'_>,
    now: i64,
) -> Result<usize, StoreError> {
    let target = Target {
        chat_id: place.chat,
        thread_id: place.thread,
        reply_to: place.reply_to,
    };
    let plans = delivery::plans(markdown, rendering, &target);
    let n = plans.len();
    for (i, plan) in plans.into_iter().enumerate() {
        enqueue_plan(
            tx,
            place,
            &plan,
            &format!("{}:{i}", meta.purpose),
            meta,
            now,
        )?;
    }
    Ok(n)
}

/// Queues one message already written as Telegram HTML (with its plain text as fallback).
pub fn enqueue_html(
    tx: &Connection,
    place: Place,
    (html, plain): (&str, &str),
    meta: Meta<'_>,
    now: i64,
) -> Result<(), StoreError> {
    let mut base = json!({ "chat_id": place.chat });
    if let Some(t) = place.thread {
        base["message_thread_id"] = json!(t);
    }
    base["link_preview_options"] = json!({ "is_disabled": true });
    let mut h = base.clone();
    h["text"] = json!(html);
    h["parse_mode"] = json!("HTML");
    let mut p = base;
    p["text"] = json!(
        tg_format::split::plain(plain, delivery::TEXT_PIECE)
            .into_iter()
            .next()
            .unwrap_or_default()
    );
    let plan = Plan {
        alternatives: vec![
            Alternative {
                name: "html".into(),
                method: "sendMessage".into(),
                messages: vec![h],
            },
            Alternative {
                name: "plain".into(),
                method: "sendMessage".into(),
                messages: vec![p],
            },
        ],
        alt: 0,
        part: 0,
        repeat: None,
    };
    enqueue_plan(tx, place, &plan, meta.purpose, meta, now)
}

fn enqueue_plan(
    tx: &Connection,
    place: Place,
    plan: &Plan,
    purpose: &str,
    meta: Meta<'_>,
    now: i64,
) -> Result<(), StoreError> {
    let Some((method, params)) = plan.current() else {
        return Ok(());
    };
    let plan_value: Value = plan.to_value();
    let id = outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: place.chat,
            thread_id: place.thread,
            method,
            params,
            purpose,
            source_update_id: meta.source_update_id,
            resend_if_unknown: meta.resend,
            identity: Some(meta.identity),
            turn_id: meta.turn_id,
            plan: Some(&plan_value),
        },
        now,
    )?;
    if let (Some(id), true) = (id, place.waiting) {
        outbox::hold(
            tx,
            id,
            topics::WAITING_FOR_THREAD,
            "waiting for a new thread: the topic was deleted",
        )?;
    }
    Ok(())
}
