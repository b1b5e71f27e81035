//! Everything the bot says, as outbox rows: pi's output (answers, commentary, activity, work
//! started outside Telegram; rendered, one row per piece with its delivery plan), the hub's own
//! texts (replies, notices, questions with buttons), edits of its messages and answers to
//! button taps. Always in the caller's transaction, so an effect and what the bot says about
//! it commit together; the outbox gives order and crash safety.

use serde_json::{Value, json};
use store::outbox::Purpose;
use store::threads::{self as tables, BindingState};
use store::turns::Turn;
use store::{Connection, StoreError, outbox};

use crate::assistant::Rendering;
use crate::buttons::Button;
use crate::clock::Clock;
use crate::outgoing::delivery::{self, Alternative, Plan, Target};
use crate::outgoing::message::{
    Album, BotCommand, Commands, Edit, EditMarkup, File, Media, Outgoing, Pin, Spot, TapAnswer,
    Unpin, Upload,
};
use crate::pairing;
use crate::state;

/// Where a turn's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
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
    // The topic only when the turn came from the topic's chat: a prompt from a member's
    // private chat, or from the owner's while pi's topics are in a group, is answered where
    // it was asked (that chat has no such topic).
    let binding = if state::topics_on(tx)? {
        tables::binding(tx, identity)?.filter(|b| b.chat_id == t.chat_id)
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
    let binding = if state::topics_on(tx)? {
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
    /// Purpose; a message written in several rows gives each its [`Purpose::piece`].
    pub purpose: &'a Purpose,
    /// The update behind it (with the purpose, at most one row per cause).
    pub source_update_id: Option<i64>,
    /// The instance it speaks for (replies route there).
    pub identity: &'a str,
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
    enqueue_markdown_with(tx, place, markdown, rendering, None, None, meta, now)
}

/// [`enqueue_markdown`] with buttons (`reply_markup`) under the last piece, whichever way it is
/// delivered, and, with `spoken`, said as a voice message first (the text is the fallback; a
/// text of several pieces is written, not spoken).
#[allow(clippy::too_many_arguments)]
pub fn enqueue_markdown_with(
    tx: &Connection,
    place: Place,
    markdown: &str,
    rendering: Rendering,
    markup: Option<Value>,
    spoken: Option<&crate::outgoing::voice::Spoken>,
    meta: Meta<'_>,
    now: i64,
) -> Result<usize, StoreError> {
    let target = Target {
        chat_id: place.chat,
        thread_id: place.thread,
        reply_to: place.reply_to,
    };
    let mut plans = delivery::plans(markdown, rendering, &target);
    if let (Some(m), Some(last)) = (markup, plans.last_mut()) {
        for alt in &mut last.alternatives {
            if let Some(msg) = alt.messages.last_mut() {
                msg.set_markup(m.clone());
            }
        }
    }
    let n = plans.len();
    let spoken = spoken.filter(|_| n == 1 && !place.waiting);
    for (i, plan) in plans.into_iter().enumerate() {
        let plan = match spoken {
            Some(s) => crate::outgoing::voice::voice_first(&plan, s),
            None => plan,
        };
        let id = enqueue_plan(tx, place, &plan, &meta.purpose.piece(i), meta, now)?;
        if let (Some(id), Some(_)) = (id, spoken) {
            outbox::park_making(tx, id)?;
        }
    }
    Ok(n)
}

/// Queues a voice message saying `spoken` (its voice is made before it is sent; without one it
/// is dropped, the text having been sent anyway).
pub fn enqueue_voice(
    tx: &Connection,
    place: Place,
    spoken: &crate::outgoing::voice::Spoken,
    meta: Meta<'_>,
    now: i64,
) -> Result<(), StoreError> {
    if place.waiting {
        return Ok(());
    }
    let plan =
        crate::outgoing::voice::voice_only(Spot::new(place.chat, place.thread, None), spoken);
    if let Some(id) = enqueue_plan(tx, place, &plan, meta.purpose, meta, now)? {
        outbox::park_making(tx, id)?;
    }
    Ok(())
}

/// Queues one message already written as Telegram HTML (with its plain text as fallback).
pub fn enqueue_html(
    tx: &Connection,
    place: Place,
    (html, plain): (&str, &str),
    meta: Meta<'_>,
    now: i64,
) -> Result<(), StoreError> {
    let spot = Spot::new(place.chat, place.thread, None);
    let plain = tg_format::split::plain(plain, delivery::TEXT_PIECE)
        .into_iter()
        .next()
        .unwrap_or_default();
    let plan = Plan::of(vec![
        Alternative {
            name: "html".into(),
            messages: vec![delivery::text_message(spot.clone(), html.to_owned(), true)],
        },
        Alternative {
            name: "plain".into(),
            messages: vec![delivery::text_message(spot, plain, false)],
        },
    ]);
    enqueue_plan(tx, place, &plan, meta.purpose, meta, now).map(drop)
}

fn enqueue_plan(
    tx: &Connection,
    place: Place,
    plan: &Plan,
    purpose: &Purpose,
    meta: Meta<'_>,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    if plan.current().is_none() {
        return Ok(None);
    }
    let id = outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: place.chat,
            thread_id: place.thread,
            delivery: &plan.to_value(),
            purpose,
            source_update_id: meta.source_update_id,
            resend_if_unknown: meta.resend,
            identity: Some(meta.identity),
            turn_id: meta.turn_id,
        },
        now,
    )?;
    if let (Some(id), true) = (id, place.waiting) {
        outbox::hold(
            tx,
            id,
            state::WAITING_FOR_THREAD,
            "waiting for a new thread: the topic was deleted",
        )?;
    }
    Ok(id)
}

/// A message of the hub's own, sent as plain text (no parse mode: nothing in it can fail
/// entity parsing).
#[derive(Debug, Clone)]
pub struct Text<'a> {
    pub chat: i64,
    /// Topic.
    pub thread: Option<i64>,
    /// The words.
    pub text: &'a str,
    /// The message it replies to.
    pub reply_to: Option<i64>,
    /// Buttons.
    pub markup: Option<Value>,
    /// Why it is sent; with `source_update_id`, at most one row per cause.
    pub purpose: &'a Purpose,
    /// The update behind it.
    pub source_update_id: Option<i64>,
    /// Sent again, marked as a possible repeat, when the outcome of a send is unknown: for a
    /// text that is the only trace of what became of a person's message (see
    /// [`prompt_notice`]). The hub's other texts are not: a second menu is worse than none.
    pub resend: bool,
}

/// Queues one of the hub's own messages. Returns its outbox id (`None`: queued already).
pub fn text(tx: &Connection, t: &Text<'_>, now: i64) -> Result<Option<i64>, StoreError> {
    formatted(tx, t, &[], now)
}

/// [`text`] with its formatting: Telegram `MessageEntity` objects over the plain text (a
/// menu's struck-through skipped prompts).
pub fn formatted(
    tx: &Connection,
    t: &Text<'_>,
    entities: &[Value],
    now: i64,
) -> Result<Option<i64>, StoreError> {
    let message = Outgoing::Text(crate::outgoing::message::Text {
        spot: Spot::new(t.chat, t.thread, t.reply_to),
        text: t.text.to_owned(),
        parse_mode: None,
        entities: entities.to_vec(),
        link_preview_options: None,
        reply_markup: t.markup.clone(),
    });
    outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: t.chat,
            thread_id: t.thread,
            delivery: &Plan::single(message).to_value(),
            purpose: t.purpose,
            source_update_id: t.source_update_id,
            resend_if_unknown: t.resend,
            identity: None,
            turn_id: None,
        },
        now,
    )
}

/// Gives a row no send was tried on the text `t` instead of its own: a message rewritten
/// before it left. `false` when a send was tried (or it is gone): it is not changed.
pub fn rewrite_text(tx: &Connection, id: i64, t: &Text<'_>) -> Result<bool, StoreError> {
    let message = Outgoing::Text(crate::outgoing::message::Text {
        spot: Spot::new(t.chat, t.thread, t.reply_to),
        text: t.text.to_owned(),
        parse_mode: None,
        entities: Vec::new(),
        link_preview_options: None,
        reply_markup: t.markup.clone(),
    });
    outbox::rewrite_pending(tx, id, &Plan::single(message).to_value())
}

/// A notice (no reply, no update behind it).
pub fn notice(
    tx: &Connection,
    chat: i64,
    thread: Option<i64>,
    words: &str,
    purpose: &Purpose,
    now: i64,
) -> Result<(), StoreError> {
    notice_with(tx, chat, thread, words, purpose, false, now)
}

/// A notice that is the only trace of a person's message (the hub restarted while pi worked
/// on it, pi stopped before answering it): it must arrive, like an answer, so after an unknown
/// outcome it is sent again, marked as a possible repeat. Without it the person would never
/// learn that the message came to nothing.
pub fn prompt_notice(
    tx: &Connection,
    chat: i64,
    thread: Option<i64>,
    words: &str,
    purpose: &Purpose,
    now: i64,
) -> Result<(), StoreError> {
    notice_with(tx, chat, thread, words, purpose, true, now)
}

fn notice_with(
    tx: &Connection,
    chat: i64,
    thread: Option<i64>,
    words: &str,
    purpose: &Purpose,
    resend: bool,
    now: i64,
) -> Result<(), StoreError> {
    text(
        tx,
        &Text {
            chat,
            thread,
            text: words,
            reply_to: None,
            markup: None,
            purpose,
            source_update_id: None,
            resend,
        },
        now,
    )
    .map(drop)
}

/// Replaces the text and buttons (`None` removes them) of one of the bot's messages.
#[allow(clippy::too_many_arguments)]
pub fn edit(
    tx: &Connection,
    chat: i64,
    message_id: i64,
    words: &str,
    markup: Option<Value>,
    purpose: &Purpose,
    source_update_id: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    edit_formatted(
        tx,
        chat,
        message_id,
        (words, &[]),
        markup,
        purpose,
        source_update_id,
        now,
    )
}

/// [`edit`] with the new words' formatting (`(words, entities)`, as [`formatted`]).
#[allow(clippy::too_many_arguments)]
pub fn edit_formatted(
    tx: &Connection,
    chat: i64,
    message_id: i64,
    (words, entities): (&str, &[Value]),
    markup: Option<Value>,
    purpose: &Purpose,
    source_update_id: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    let message = Outgoing::Edit(Edit {
        chat_id: chat,
        message_id,
        text: words.to_owned(),
        entities: entities.to_vec(),
        reply_markup: markup.unwrap_or_else(|| json!({ "inline_keyboard": [] })),
    });
    own(tx, chat, message, purpose, source_update_id, now)
}

/// Replaces only the buttons of one of the bot's messages (its text stays as it was sent,
/// rich or not).
pub fn edit_markup(
    tx: &Connection,
    chat: i64,
    message_id: i64,
    markup: Value,
    source_update_id: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    let message = Outgoing::EditMarkup(EditMarkup {
        chat_id: chat,
        message_id,
        reply_markup: markup,
    });
    own(
        tx,
        chat,
        message,
        &Purpose::EditMarkup,
        source_update_id,
        now,
    )
}

/// Answers a button tap (every tap is answered, so no button keeps spinning). Not a message of
/// any chat: it has its own queue (chat 0), so a tap is answered at once even while the chat's
/// messages wait for their pace.
pub fn answer_tap(
    tx: &Connection,
    query_id: &str,
    words: &str,
    source_update_id: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    let message = Outgoing::TapAnswer(TapAnswer {
        callback_query_id: query_id.to_owned(),
        text: words.to_owned(),
    });
    own(
        tx,
        0,
        message,
        &Purpose::AnswerCallback,
        source_update_id,
        now,
    )
}

/// Answers a stranger's tap (see [`crate::state::answer_stranger`] for how often). Under the
/// stranger's own chat, not the owner's queue of tap answers (chat 0), and marked so that the
/// sender takes it only when nothing of the owner's can go.
pub fn answer_stranger_tap(
    tx: &Connection,
    query_id: &str,
    stranger: i64,
    words: &str,
    source_update_id: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    let message = Outgoing::TapAnswer(TapAnswer {
        callback_query_id: query_id.to_owned(),
        text: words.to_owned(),
    });
    own(
        tx,
        stranger,
        message,
        &Purpose::AnswerStranger,
        source_update_id,
        now,
    )
}

/// Queues the bot's command list (`setMyCommands`). Bot-wide, not a message of any chat: the
/// queue of such calls (chat 0). Sent again after an unknown outcome: a second list is the
/// same list.
pub fn commands(
    tx: &Connection,
    commands: Vec<BotCommand>,
    purpose: &Purpose,
    now: i64,
) -> Result<(), StoreError> {
    let message = Outgoing::Commands(Commands { commands });
    outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: 0,
            thread_id: None,
            delivery: &Plan::single(message).to_value(),
            purpose,
            source_update_id: None,
            resend_if_unknown: true,
            identity: None,
            turn_id: None,
        },
        now,
    )
    .map(drop)
}

/// Queues a message of the hub's own outside any topic, not sent again after an unknown
/// outcome.
fn own(
    tx: &Connection,
    chat: i64,
    message: Outgoing,
    purpose: &Purpose,
    source_update_id: Option<i64>,
    now: i64,
) -> Result<(), StoreError> {
    outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: chat,
            thread_id: None,
            delivery: &Plan::single(message).to_value(),
            purpose,
            source_update_id,
            resend_if_unknown: false,
            identity: None,
            turn_id: None,
        },
        now,
    )
    .map(drop)
}

/// A file to send.
#[derive(Debug, Clone)]
pub struct OutFile {
    /// The hub's copy to upload (its row's alone: removed once the row is settled).
    pub path: String,
    /// The name the person sees.
    pub name: String,
    /// MIME type.
    pub mime: Option<String>,
    /// Size in bytes.
    pub size: i64,
}

impl OutFile {
    /// Sent as a photo (shown inline) rather than a document: an image Telegram takes as one.
    fn photo(&self) -> bool {
        matches!(
            self.mime.as_deref(),
            Some("image/jpeg" | "image/png" | "image/webp")
        ) && self.size <= 10 * 1024 * 1024
    }
}

/// Queues files: photos as photos, the rest as documents; several of a kind as albums of up to
/// ten. The caption goes with the first. Never resent after an unknown outcome (a second copy
/// of a file is worse than the report that one may be missing).
pub fn enqueue_files(
    tx: &Connection,
    place: Place,
    files: &[OutFile],
    caption: Option<&str>,
    meta: Meta<'_>,
    now: i64,
) -> Result<usize, StoreError> {
    let (photos, documents): (Vec<&OutFile>, Vec<&OutFile>) = files.iter().partition(|f| f.photo());
    let mut caption = caption.filter(|c| !c.trim().is_empty());
    let mut rows = 0;
    for (kind, group) in [("photo", photos), ("document", documents)] {
        for chunk in group.chunks(10) {
            let message = files_message(place, kind, chunk, &mut caption);
            outbox::enqueue(
                tx,
                &outbox::NewRow {
                    chat_id: place.chat,
                    thread_id: place.thread,
                    delivery: &Plan::single(message).to_value(),
                    purpose: &meta.purpose.piece(rows),
                    source_update_id: meta.source_update_id,
                    resend_if_unknown: false,
                    identity: Some(meta.identity),
                    turn_id: meta.turn_id,
                },
                now,
            )?;
            rows += 1;
        }
    }
    Ok(rows)
}

/// One message of [`enqueue_files`]: a photo or document alone, or an album of up to ten of a
/// `kind`; the caption, if still there, goes with it (on the album's first item).
fn files_message(
    place: Place,
    kind: &str,
    chunk: &[&OutFile],
    caption: &mut Option<&str>,
) -> Outgoing {
    let spot = Spot::new(place.chat, place.thread, place.reply_to);
    // Only the copies `telegram_attach` makes come here.
    let upload = |field: String, f: &OutFile| Upload {
        field,
        path: f.path.clone(),
        name: Some(f.name.clone()),
        mime: f.mime.clone(),
        copy: true,
    };
    if let [one] = chunk {
        let file = File {
            spot,
            caption: caption.take().map(str::to_owned),
            files: vec![upload(kind.to_owned(), one)],
        };
        return if kind == "photo" {
            Outgoing::Photo(file)
        } else {
            Outgoing::Document(file)
        };
    }
    let mut media = Vec::with_capacity(chunk.len());
    let mut files = Vec::with_capacity(chunk.len());
    for (i, f) in chunk.iter().enumerate() {
        let field = format!("file{i}");
        media.push(Media {
            kind: kind.to_owned(),
            media: format!("attach://{field}"),
            caption: caption.take().map(str::to_owned),
        });
        files.push(upload(field, f));
    }
    Outgoing::Album(Album { spot, media, files })
}

/// How long a menu or `/start` button works.
pub const BUTTON_TTL_MS: i64 = 24 * 3_600_000;
/// How long the buttons of a question that waits for the person work.
pub const QUESTION_TTL_MS: i64 = 7 * 24 * 3_600_000;

/// An inline button for `action`: Telegram only sees an opaque token, bound to the owner and
/// valid for `ttl_ms`; the action stays in the store.
pub fn button(
    tx: &Connection,
    clock: &Clock,
    owner: i64,
    label: &str,
    action: &Button,
    now: i64,
    ttl_ms: i64,
) -> Result<Value, StoreError> {
    let token = pairing::new_code(clock).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    store::callbacks::create(tx, &token, owner, &action.encode(), now, ttl_ms)?;
    Ok(json!({ "text": label, "callback_data": token }))
}

/// A question that waits for the person (`attention::waits_for_person`) arrived as message
/// `message_id` of `chat`: pinned there until it is settled. Called by the sender in the
/// commit that records the delivery; a question settled before that commit (its unpin queued
/// already) is not pinned. Pins and unpins have their own queue (chat 0, as tap answers do):
/// they never wait behind the chat's messages, nor hold one up.
pub fn pin_question(
    tx: &Connection,
    chat: i64,
    message_id: i64,
    now: i64,
) -> Result<(), StoreError> {
    let settled = &Purpose::Unpin {
        chat,
        message: message_id,
    };
    if !outbox::of_purpose(tx, settled)?.is_empty() {
        return Ok(());
    }
    let pin = Outgoing::Pin(Pin {
        chat_id: chat,
        message_id,
        disable_notification: true,
    });
    let purpose = Purpose::Pin {
        chat,
        message: message_id,
    };
    best_effort(tx, pin, &purpose, now)
}

/// The question shown as message `message_id` of `chat` is settled: unpinned. A pin still
/// waiting to be sent is dropped instead; a question never pinned (an older release's, or
/// settled before its delivery was recorded) gets an unpin all the same, which is harmless.
/// Every place that settles a question calls this in the settling transaction.
pub fn unpin_question(
    tx: &Connection,
    chat: i64,
    message_id: i64,
    now: i64,
) -> Result<(), StoreError> {
    let key = |pin| {
        if pin {
            Purpose::Pin {
                chat,
                message: message_id,
            }
        } else {
            Purpose::Unpin {
                chat,
                message: message_id,
            }
        }
    };
    if !outbox::of_purpose(tx, &key(false))?.is_empty() {
        return Ok(());
    }
    for pin in outbox::of_purpose(tx, &key(true))? {
        if pin.state == outbox::State::Pending {
            return outbox::drop_pending(
                tx,
                pin.id,
                "dropped: the question was settled before it was pinned",
                now,
            );
        }
    }
    let unpin = Outgoing::Unpin(Unpin {
        chat_id: chat,
        message_id,
    });
    best_effort(tx, unpin, &key(false), now)
}

/// Whether message `message_id` of `chat` was pinned as a question (its pin queued or sent).
pub fn was_pinned(tx: &Connection, chat: i64, message_id: i64) -> Result<bool, StoreError> {
    let pin = Purpose::Pin {
        chat,
        message: message_id,
    };
    Ok(!outbox::of_purpose(tx, &pin)?.is_empty())
}

/// The question queued as `purpose` (its rows sent without a cause) is settled: each message
/// of it that arrived is unpinned ([`unpin_question`]). For questions settled away from their
/// message (`threads resolve`).
pub fn unpin_questions_of(tx: &Connection, purpose: &Purpose, now: i64) -> Result<(), StoreError> {
    for row in outbox::of_purpose(tx, purpose)? {
        if let Some(message) = row.sent_message_id {
            unpin_question(tx, row.chat_id, message, now)?;
        }
    }
    Ok(())
}

/// Queues a best-effort call of the chat-0 queue (tried once: `sender::judge`).
fn best_effort(
    tx: &Connection,
    message: Outgoing,
    purpose: &Purpose,
    now: i64,
) -> Result<(), StoreError> {
    outbox::enqueue(
        tx,
        &outbox::NewRow {
            chat_id: 0,
            thread_id: None,
            delivery: &Plan::single(message).to_value(),
            purpose,
            source_update_id: None,
            resend_if_unknown: false,
            identity: None,
            turn_id: None,
        },
        now,
    )
    .map(drop)
}
