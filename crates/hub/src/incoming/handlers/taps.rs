//! What a button does. Telegram carries an opaque token; the action is the stored
//! [`Button`], bound to the owner and valid for a while: a forged, replayed, stale or
//! stranger's token does nothing. Every tap is answered (no spinning button), and the message
//! with the buttons is edited to show what the tap did.

use serde_json::{Value, json};
use store::journal::Outcome;
use store::outbox::Purpose;
use store::turns::{self, Lane};
use store::{Connection, StoreError, callbacks, controls, instances, kv};
use telegram::view::{MessageView, UpdateView};
use threads::events;

use super::commands::render_local;
use super::{Say, menu_outcome};
use crate::buttons::{Button, DialogChoice, Paged, QueueOp, Section};
use crate::config::ConfigFile;
use crate::names::label_of;
use crate::outgoing::menu::{self, Page};
use crate::outgoing::outbound;
use crate::outgoing::texts;
use crate::state::{self, SELECTED};

/// What a tap does: the short answer Telegram shows, the outcome recorded in the journal, and
/// the new form of the message that carried the button.
struct Tap {
    answer: String,
    outcome: Outcome,
    edit: Option<Edit>,
    /// New buttons only (the text stays as sent).
    restyle: Option<Value>,
    /// What a later tap on this question's buttons is told, when this tap settles it.
    replay: Option<String>,
}

/// A new text (and keyboard; `None` removes it) for a message with buttons.
struct Edit {
    text: String,
    /// Its formatting (`MessageEntity` objects; a menu's).
    entities: Vec<Value>,
    markup: Option<Value>,
}

impl Edit {
    /// Plain words.
    fn plain(text: String, markup: Option<Value>) -> Self {
        Self {
            text,
            entities: Vec::new(),
            markup,
        }
    }

    /// A menu section.
    fn menu((view, markup): (crate::outgoing::menu::View, Option<Value>)) -> Self {
        Self {
            text: view.text,
            entities: view.entities,
            markup,
        }
    }
}

impl Tap {
    fn answer(answer: impl Into<String>, outcome: Outcome) -> Self {
        Self {
            answer: answer.into(),
            outcome,
            edit: None,
            restyle: None,
            replay: None,
        }
    }

    fn replayed_as(mut self, answer: String) -> Self {
        self.replay = Some(answer);
        self
    }

    fn with_edit(mut self, edit: Option<Edit>) -> Self {
        self.edit = edit;
        self
    }
}

/// A `callback_query` from the owner.
pub(super) fn tap(say: &mut Say<'_>, update: &UpdateView<'_>) -> Result<Outcome, StoreError> {
    let Some(cb) = update.callback() else {
        return Ok(Outcome::IgnoredMalformed);
    };
    let Some(id) = cb.id() else {
        return Ok(Outcome::IgnoredMalformed);
    };
    let chat = update.chat_id().unwrap_or_default();
    let action = match (cb.data(), update.sender_id()) {
        (Some(token), Some(owner)) => callbacks::lookup(say.tx, token, owner, say.ctx.now_ms)?,
        _ => None,
    };
    let tapped = cb.message();
    let owner = update.sender_id().unwrap_or(chat);
    let tap = match action.as_deref().and_then(Button::decode) {
        Some(b) => {
            let at = Tapped {
                chat,
                message: tapped.as_ref(),
                owner,
                token: cb.data().unwrap_or_default(),
            };
            button(say, &b, &at)?
        }
        None => Tap::answer(texts::unknown_button(), Outcome::ButtonUnknown),
    };
    say.answer_tap(id, &tap.answer)?;
    // A settled question loses its buttons, here and in the store: data sent again later (a
    // double tap, a replay) only hears how it was settled.
    if let Some(edit) = tap.edit.as_ref().filter(|e| e.markup.is_none()) {
        let answer = tap.replay.clone().unwrap_or_else(|| {
            let line = edit.text.lines().last().unwrap_or_default();
            texts::settled_already(line.trim_start_matches('→').trim())
        });
        let settled = Button::Settled { answer }.encode();
        let keyboard = tapped
            .as_ref()
            .and_then(|m| m.0.pointer("/reply_markup/inline_keyboard"))
            .and_then(Value::as_array);
        let tokens = keyboard
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|b| b.get("callback_data").and_then(Value::as_str));
        for token in tokens.chain(cb.data()) {
            callbacks::replace(say.tx, token, &settled)?;
        }
        // A question pinned while it waited (`attention::waits_for_person`) is unpinned.
        if let Some((chat, message)) = tapped.as_ref().and_then(|m| m.chat_id().zip(m.id()))
            && outbound::was_pinned(say.tx, chat, message)?
        {
            outbound::unpin_question(say.tx, chat, message, say.ctx.now_ms)?;
            say.after.outbox = true;
        }
    }
    if let Some(markup) = tap.restyle
        && let Some((chat, message)) = tapped.as_ref().and_then(|m| m.chat_id().zip(m.id()))
    {
        outbound::edit_markup(
            say.tx,
            chat,
            message,
            markup,
            Some(say.entry.update_id),
            say.ctx.now_ms,
        )?;
        say.after.outbox = true;
    }
    if let Some(edit) = tap.edit
        && let Some((chat, message)) = tapped.and_then(|m| m.chat_id().zip(m.id()))
    {
        say.edit(chat, message, (&edit.text, &edit.entities), edit.markup)?;
    }
    Ok(tap.outcome)
}

/// Where a button was tapped: the chat, the message that carried it, the person, its token.
struct Tapped<'a, 'm> {
    chat: i64,
    message: Option<&'a MessageView<'m>>,
    owner: i64,
    token: &'a str,
}

impl Tapped<'_, '_> {
    /// A settled question keeps its text, gains a line saying how it was settled, and loses
    /// its buttons.
    fn settled(&self, line: String) -> Option<Edit> {
        let original = self.message.and_then(|m| m.text()).unwrap_or_default();
        Some(Edit::plain(format!("{original}\n\n{line}"), None))
    }

    fn thread_id(&self) -> Option<i64> {
        self.message.and_then(MessageView::thread_id)
    }

    fn message_id(&self) -> Option<i64> {
        self.message.and_then(MessageView::id)
    }
}

/// What a button does: one function per kind.
fn button(say: &mut Say<'_>, action: &Button, at: &Tapped<'_, '_>) -> Result<Tap, StoreError> {
    if let Some(person) = &say.person
        && !super::people::may_tap(say.tx, person, action)?
    {
        return Ok(Tap::answer(
            texts::people::owner_only("that button"),
            Outcome::OwnerOnly,
        ));
    }
    match action {
        Button::LinkGroup { chat, title, link } => {
            let (answer, outcome) = super::group::confirm(say, *chat, title, *link)?;
            let line = format!("→ {answer}");
            Ok(Tap::answer(answer, outcome).with_edit(at.settled(line)))
        }
        Button::Invite { role } => people_tap(say, at, 0, |say| {
            super::people::invite(say, at.owner, *role)
        }),
        Button::RemovePerson { user, page } => {
            people_tap(say, at, *page, |say| super::people::remove(say, *user))
        }
        Button::RevokeInvite { invite, page } => {
            people_tap(say, at, *page, |say| super::people::revoke(say, *invite))
        }
        Button::Select { identity } => select(say, at, identity),
        Button::Send {
            turn,
            to,
            instead_of,
        } => send(say, at, *turn, to, instead_of.as_deref()),
        Button::Move {
            turn,
            identity,
            thread,
        } => move_here(say, at, *turn, identity, *thread),
        Button::Intent { id, create } => intent(say, at, *id, *create),
        Button::Stale { question, run } => stale_answer(say, at, *question, *run),
        Button::Dialog { dialog, choice } => dialog_answer(say, at, *dialog, *choice),
        Button::Stop { turn } => stop_turn(say, at, *turn),
        Button::Retention { topics, delete } => retention(say, at, topics, *delete),
        Button::Menu { identity, section } => {
            menu_section(say, at, identity.as_deref(), *section, None, None)
        }
        Button::Model {
            identity,
            provider,
            id,
        } => model(say, at, identity, provider, id),
        Button::ModelPage { identity, page } => model_page(say, at, identity, *page),
        Button::Page { of, page } => list_page(say, at, of, *page),
        Button::Thinking { identity, level } => thinking(say, at, identity, level),
        Button::Queue { turn, op } => queue(say, at, *turn, *op),
        Button::Setting { key, value } => setting(say, at, key, value),
        Button::Compact { identity } => compact(say, at, identity),
        Button::Dismiss => Ok(dismiss(at)),
        Button::NewPi { cwd } => new_pi(say, at, cwd),
        Button::NewSession { identity } => new_session(say, at, identity),
        Button::Resume { identity, path } => resume(say, at, identity, path),
        Button::Prompt {
            identity,
            prompt,
            style,
        } => prompt_button(say, at, identity, prompt, style.as_deref()),
        Button::Settled { answer } => Ok(settled(answer)),
    }
}

/// One of `/people`'s buttons: `act`, then the list as it is now in the message tapped.
fn people_tap(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    page: usize,
    act: impl FnOnce(&mut Say<'_>) -> Result<(String, Outcome), StoreError>,
) -> Result<Tap, StoreError> {
    let (answer, outcome) = act(say)?;
    let (text, markup) = super::people::view(say, at.owner, page)?;
    Ok(Tap::answer(answer, outcome).with_edit(Some(Edit::plain(text, Some(markup)))))
}

/// `/start`'s instances: new messages go to this one.
/// A tap on a chooser whose message went to a pi already: says where, and settles the
/// chooser.
fn already_sent(tx: &Connection, turn: i64, at: &Tapped<'_, '_>) -> Result<Tap, StoreError> {
    let went = turns::get(tx, turn)?
        .and_then(|t| t.identity)
        .map(|i| label_of(&i));
    Ok(
        Tap::answer(texts::already_sent(went.as_deref()), Outcome::SendTaken)
            .with_edit(at.settled(texts::chosen_before(went.as_deref())))
            .replayed_as(texts::already_sent(went.as_deref())),
    )
}

fn select(say: &mut Say<'_>, at: &Tapped<'_, '_>, identity: &str) -> Result<Tap, StoreError> {
    let live = instances::live(say.tx)?;
    let tap = match live.iter().find(|i| i.identity == identity) {
        Some(i) => {
            kv::set(say.tx, SELECTED, identity)?;
            say.after.turns = true;
            Tap::answer(format!("New messages go to {}", i.label), Outcome::Selected)
        }
        None => Tap::answer(
            "That pi instance is not connected any more.",
            Outcome::ButtonGone,
        ),
    };
    // The menu shows the selection and the instances as they are now.
    let edit = render_local(say, at.owner, Some(identity), Section::Main, None)?.map(Edit::menu);
    Ok(tap.with_edit(edit))
}

/// A waiting message goes to `to`.
fn send(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    turn: i64,
    to: &str,
    instead_of: Option<&str>,
) -> Result<Tap, StoreError> {
    let tx = say.tx;
    if !turns::assign(tx, turn, to, instead_of)? {
        return already_sent(tx, turn, at);
    }
    say.after.turns = true;
    let label = label_of(to);
    let live = instances::live(tx)?.iter().any(|i| i.identity == to);
    // In classic mode the choice also holds for the messages that follow.
    if live && !state::threaded(tx)? {
        kv::set(tx, SELECTED, to)?;
    }
    let answer = if live {
        format!("Sent to {label}")
    } else {
        format!("{label} is offline: the message waits for it")
    };
    Ok(Tap::answer(answer, Outcome::Sent)
        .with_edit(at.settled(texts::chosen(&label)))
        .replayed_as(texts::already_sent(Some(&label))))
}

/// "Move X here": the identity lives in this topic from now on; the turn goes to it.
fn move_here(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    turn: i64,
    identity: &str,
    thread: i64,
) -> Result<Tap, StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    let live = instances::live(tx)?;
    let newcomer = live
        .iter()
        .find(|i| i.identity == identity)
        .map(|i| events::Newcomer {
            identity,
            instance_id: Some(&i.id),
            cwd: &i.cwd,
            project: &i.label,
            title_template: &ctx.title_template,
        });
    let bound = events::bind_topic(
        tx,
        identity,
        newcomer.as_ref(),
        at.chat,
        thread,
        ctx.epoch,
        ctx.now_ms,
    )?;
    let Some(b) = bound else {
        return Ok(Tap::answer(texts::move_refused(), Outcome::MoveRefused));
    };
    // The person chose this topic for it: a forgotten intent no longer matters.
    kv::delete(tx, &state::skip_key(identity))?;
    turns::assign(tx, turn, identity, None)?;
    say.after.turns = true;
    say.after.topics = true;
    let label = label_of(identity);
    outbound::notice(
        tx,
        b.chat_id,
        Some(b.thread_id),
        &texts::moved_here(&label, &b.cwd),
        &Purpose::NoticeMoved {
            identity: identity.to_owned(),
            thread,
        },
        ctx.now_ms,
    )?;
    say.after.outbox = true;
    Ok(
        Tap::answer(format!("{label} lives in this topic now"), Outcome::Moved)
            .with_edit(at.settled(format!("→ {label} lives in this topic now."))),
    )
}

/// Settles a topic creation of unknown outcome: a new thread, or forgotten.
fn intent(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    id: i64,
    create: bool,
) -> Result<Tap, StoreError> {
    if crate::outgoing::topics::resolve_intent(say.tx, id, create)?.is_none() {
        return Ok(Tap::answer(texts::intent_settled(), Outcome::IntentSettled)
            .with_edit(at.settled("→ Settled already.".into())));
    }
    say.after.topics = true;
    Ok(if create {
        Tap::answer("Creating a new thread", Outcome::IntentCreate)
            .with_edit(at.settled("→ Creating a new thread.".into()))
    } else {
        Tap::answer("Forgotten", Outcome::IntentForget).with_edit(at.settled("→ Forgotten.".into()))
    })
}

/// The answer to the offer to delete long-offline topics. A second tap (a replayed token) finds
/// them queued already: deleting is idempotent, and the reconciler keeps a topic in use again.
fn retention(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    topics: &[(i64, i64)],
    delete: bool,
) -> Result<Tap, StoreError> {
    if !delete {
        return Ok(
            Tap::answer("Kept", Outcome::RetentionKeep).with_edit(at.settled("→ Kept.".into()))
        );
    }
    let n = crate::outgoing::topics::delete_offered(say.tx, topics, say.ctx.now_ms)?;
    say.after.topics = true;
    Ok(
        Tap::answer(format!("Deleting {n}"), Outcome::RetentionDelete)
            .with_edit(at.settled(format!("→ Deleting {n}."))),
    )
}

/// The answer to a stale question: its held prompts run now, in their order, or are dropped
/// (cancelled without a model turn). One commit; a second tap only hears how it was settled.
fn stale_answer(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    question: i64,
    run: bool,
) -> Result<Tap, StoreError> {
    let now = say.ctx.now_ms;
    let open = store::stale::get(say.tx, question)?
        .is_some_and(|q| q.answer == store::stale::Answer::Open);
    if !open {
        return Ok(
            Tap::answer(texts::settled_already(""), Outcome::StaleSettled)
                .with_edit(at.settled("→ Settled already.".into())),
        );
    }
    let n = if run {
        turns::clear_held(say.tx, question)?
    } else {
        let held = turns::held_by(say.tx, question)?;
        for t in &held {
            turns::cancel(say.tx, t.id, STALE_SKIPPED, now)?;
        }
        held.len()
    };
    let answer = if run {
        store::stale::Answer::Run
    } else {
        store::stale::Answer::Skipped
    };
    store::stale::settle(say.tx, question, answer, now)?;
    say.after.turns = true;
    let line = texts::stale_settled(run, n);
    let outcome = if run {
        Outcome::StaleRun
    } else {
        Outcome::StaleSkip
    };
    Ok(Tap::answer(line.trim_start_matches("→ "), outcome).with_edit(at.settled(line)))
}

/// The working card's ⏹: the turn it shows is aborted, if pi still works on it (the same
/// control as `/abort`, bound to that turn, so a late tap stops nothing else).
fn stop_turn(say: &mut Say<'_>, at: &Tapped<'_, '_>, turn: i64) -> Result<Tap, StoreError> {
    let running = turns::outstanding(say.tx)?
        .into_iter()
        .find(|t| t.id == turn);
    let Some(t) = running else {
        return Ok(Tap::answer(texts::work_over(), Outcome::ButtonSettled)
            .with_edit(at.settled(texts::work_over())));
    };
    say.control(controls::NewControl {
        source_update_id: None,
        kind: "abort",
        identity: t.identity.as_deref(),
        turn_id: Some(t.id),
        chat_id: at.chat,
        thread_id: at.thread_id(),
        message_id: at.message_id(),
        params: &json!({}),
    })?;
    Ok(Tap::answer(texts::stopping(), Outcome::AbortRunning)
        .with_edit(Some(Edit::plain(texts::stopping(), None))))
}

/// A button of one of pi's dialogs: its answer, if the dialog still waits for one.
fn dialog_answer(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    dialog: i64,
    choice: DialogChoice,
) -> Result<Tap, StoreError> {
    let Some(d) = store::dialogs::get(say.tx, dialog)? else {
        return Ok(Tap::answer(texts::dialog_unknown(), Outcome::DialogOver));
    };
    let answer = super::dialogs::of_choice(&d, choice);
    Ok(
        match super::dialogs::answer(say, &d, answer, at.thread_id(), at.message_id())? {
            super::dialogs::Answered::Taken(text) => {
                Tap::answer("Sent to pi", Outcome::DialogAnswered)
                    .with_edit(Some(Edit::plain(text, None)))
            }
            super::dialogs::Answered::Over(told, now) => Tap::answer(told, Outcome::DialogOver)
                .with_edit(now.map(|text| Edit::plain(text, None))),
        },
    )
}

/// The `error` of a prompt the person chose not to run after it waited while pi was away.
pub const STALE_SKIPPED: &str = "skipped after waiting while pi was away";

/// Switches an instance's model.
fn model(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: &str,
    provider: &str,
    id: &str,
) -> Result<Tap, StoreError> {
    let params = json!({ "provider": provider, "id": id });
    pi_control(
        say,
        at,
        identity,
        PiControl::SetModel,
        &params,
        "Switching the model…",
    )
}

/// Another page of the model menu: pi is asked for its models again (a `menu` control with
/// the page), and the tapped menu shows that page.
fn model_page(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: &str,
    page: usize,
) -> Result<Tap, StoreError> {
    pi_control(
        say,
        at,
        identity,
        PiControl::ModelPage,
        &json!({ "section": Section::Model, "page": page }),
        &texts::page_number(page),
    )
}

/// Another page of a long list, shown in the tapped message as the list is now.
fn list_page(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    list: &Paged,
    page: usize,
) -> Result<Tap, StoreError> {
    let (identity, section) = match list {
        Paged::Main { identity } => (identity.as_deref(), Section::Main),
        Paged::Instances => (None, Section::Instances),
        Paged::Queue { identity } => (Some(identity.as_str()), Section::Queue),
        Paged::Sessions { identity } => {
            return pi_control(
                say,
                at,
                identity,
                PiControl::Sessions,
                &json!({ "page": page }),
                &texts::page_number(page),
            );
        }
        Paged::Chooser { turn, instead_of } => {
            return chooser_page(say, at, *turn, instead_of.as_deref(), page);
        }
        Paged::People => {
            let (text, markup) = super::people::view(say, at.owner, page)?;
            return Ok(Tap::answer(texts::page_number(page), Outcome::PeopleList)
                .with_edit(Some(Edit::plain(text, Some(markup)))));
        }
        Paged::Folders => {
            let view = super::commands::new_picker(say, at.chat, at.thread_id(), page)?;
            let markup =
                menu::buttons_markup(say.tx, &say.ctx.clock, at.owner, &view, say.ctx.now_ms)?;
            return Ok(
                Tap::answer(texts::page_number(page), Outcome::CommandNewPicker)
                    .with_edit(Some(Edit::menu((view, markup)))),
            );
        }
    };
    let answer = Some(texts::page_number(page));
    menu_section(say, at, identity, section, answer, Some(page))
}

/// Another page of a chooser: new buttons, the same question; a chooser whose turn went
/// somewhere already says so.
fn chooser_page(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    turn: i64,
    instead_of: Option<&str>,
    page: usize,
) -> Result<Tap, StoreError> {
    let tx = say.tx;
    let waiting = turns::get(tx, turn)?
        .filter(|t| t.state == turns::TurnState::Queued && t.identity.as_deref() == instead_of);
    if waiting.is_none() {
        return already_sent(tx, turn, at);
    }
    let live = super::messages::choices(&instances::live(tx)?);
    let rows = menu::chooser(turn, &live, at.thread_id(), instead_of, page);
    let markup = menu::keyboard(
        tx,
        &say.ctx.clock,
        at.owner,
        &rows,
        say.ctx.now_ms,
        outbound::QUESTION_TTL_MS,
    )?;
    let mut tap = Tap::answer(texts::page_number(page), Outcome::Chooser);
    tap.restyle = markup;
    Ok(tap)
}

/// Sets an instance's thinking level.
fn thinking(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: &str,
    level: &str,
) -> Result<Tap, StoreError> {
    let params = json!({ "level": level });
    pi_control(
        say,
        at,
        identity,
        PiControl::SetThinking,
        &params,
        "Setting the thinking level…",
    )
}

/// Moves, skips, keeps or removes a waiting turn, and shows the queue again.
fn queue(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    turn: i64,
    op: QueueOp,
) -> Result<Tap, StoreError> {
    let tx = say.tx;
    let Some(t) = turns::get(tx, turn)? else {
        return Ok(Tap::answer(texts::unknown_button(), Outcome::QueueUnknown));
    };
    let done = match op {
        QueueOp::Priority => turns::set_lane(tx, t.id, Lane::Priority)?,
        QueueOp::Normal => turns::set_lane(tx, t.id, Lane::Normal)?,
        QueueOp::Skip => turns::set_skip(tx, t.id, true)?,
        QueueOp::Keep => turns::set_skip(tx, t.id, false)?,
        QueueOp::Remove => turns::cancel(tx, t.id, "removed", say.ctx.now_ms)?,
    };
    say.after.turns = true;
    let answer = if done {
        texts::queue_changed(op)
    } else {
        texts::queue_too_late()
    };
    // The queue view again, as it is now, at the page that shows the turn (if still there).
    let page = match t.identity.as_deref() {
        Some(identity) => turns::queue_of(tx, identity)?
            .iter()
            .position(|w| w.id == t.id)
            .map(|n| Page::containing(n, menu::PER_PAGE)),
        None => None,
    };
    menu_section(
        say,
        at,
        t.identity.as_deref(),
        Section::Queue,
        Some(answer),
        page,
    )
}

/// Writes a setting of the Settings menu to telegram.json, and shows the settings again.
fn setting(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    key: &str,
    value: &str,
) -> Result<Tap, StoreError> {
    let ctx = say.ctx;
    let value: Value = serde_json::from_str(value).unwrap_or(Value::Null);
    // Buttons shown by hubs before settings outside `assistant` name the bare key.
    let key = if key.contains('.') || matches!(key, "staleAfterMinutes" | "notifications") {
        key.to_owned()
    } else {
        format!("assistant.{key}")
    };
    let key = key.as_str();
    let known = matches!(
        key,
        "assistant.rendering"
            | "assistant.draftPreviews"
            | "assistant.activity"
            | "assistant.proactivePush"
            | "assistant.timeInjection"
            | "time.interval"
            | "voice.replyMode"
            | "staleAfterMinutes"
            | "notifications"
            | "assistant.reactions"
            | "threads.automaticCleanup"
    );
    if !known || value.is_null() {
        return Ok(Tap::answer(
            texts::unknown_button(),
            Outcome::SettingUnknown,
        ));
    }
    let written = ConfigFile::load(&ctx.config_path).and_then(|mut file| {
        file.set_shared(&ctx.profile, key, value.clone());
        file.save()
    });
    let answer = match written {
        Ok(()) => format!("{key} is {value} now"),
        Err(e) => {
            tracing::warn!(error = %e, "could not write a setting");
            "Could not write telegram.json (see the hub's log)".to_owned()
        }
    };
    let identity = state::selected(say.tx)?;
    menu_section(
        say,
        at,
        identity.as_deref(),
        Section::Settings,
        Some(answer),
        None,
    )
}

/// Confirms a compaction.
fn compact(say: &mut Say<'_>, at: &Tapped<'_, '_>, identity: &str) -> Result<Tap, StoreError> {
    let tap = pi_control(
        say,
        at,
        identity,
        PiControl::Compact,
        &json!({}),
        "Compacting…",
    )?;
    Ok(tap.with_edit(at.settled("→ Compacting…".into())))
}

/// Closes a question without doing anything.
fn dismiss(at: &Tapped<'_, '_>) -> Tap {
    Tap::answer("Cancelled", Outcome::Dismissed).with_edit(at.settled("→ Cancelled.".into()))
}

/// `/new`'s folders: starts a headless pi in this one.
fn new_pi(say: &mut Say<'_>, at: &Tapped<'_, '_>, cwd: &str) -> Result<Tap, StoreError> {
    // The workspaces may have changed since the buttons were made.
    let roots = super::commands::workspace_roots(say.ctx);
    match crate::pi::workspaces::resolve(cwd, &roots) {
        Ok(folder) => {
            let folder = folder.display().to_string();
            say.control(controls::NewControl {
                source_update_id: None,
                kind: "spawn",
                identity: None,
                turn_id: None,
                chat_id: at.chat,
                thread_id: at.thread_id(),
                message_id: at.message_id(),
                params: &json!({ "cwd": folder }),
            })?;
            Ok(Tap::answer("Starting pi…", Outcome::ControlSpawn)
                .with_edit(at.settled(format!("→ Starting pi in {folder}…"))))
        }
        Err(e) => Ok(Tap::answer(
            texts::folder_refused(&e.to_string()),
            Outcome::SpawnRefused,
        )),
    }
}

/// `/new`: a fresh session for this instance.
fn new_session(say: &mut Say<'_>, at: &Tapped<'_, '_>, identity: &str) -> Result<Tap, StoreError> {
    pi_control(
        say,
        at,
        identity,
        PiControl::NewSession,
        &json!({}),
        "Starting a new session…",
    )
}

/// `/sessions`: resumes this session file.
fn resume(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: &str,
    path: &str,
) -> Result<Tap, StoreError> {
    pi_control(
        say,
        at,
        identity,
        PiControl::SwitchSession,
        &json!({ "path": path }),
        "Resuming…",
    )
}

/// A button pi put under a message: its prompt becomes a turn for the instance, and the
/// button takes `style` to show it was chosen.
fn prompt_button(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: &str,
    prompt: &str,
    style: Option<&str>,
) -> Result<Tap, StoreError> {
    let (tx, ctx) = (say.tx, say.ctx);
    let Some(message) = at.message else {
        return Ok(Tap::answer(
            texts::unknown_button(),
            Outcome::PromptNoMessage,
        ));
    };
    if crate::outgoing::markup::buttons::is_app_action(prompt) {
        return Ok(Tap::answer(
            texts::app_action_refused(),
            Outcome::PromptAppAction,
        ));
    }
    let created = turns::create(
        tx,
        &turns::NewTurn {
            source_update_id: Some(say.entry.update_id),
            chat_id: at.chat,
            thread_id: message.thread_id(),
            message_id: message.id(),
            target: turns::Target::Identity(identity),
            text: prompt,
            lane: Lane::Normal,
            prepare: None,
            sent_ms: None,
            from_user: say.person.as_ref().map(|p| p.user_id),
            from_name: say.person.as_ref().map(|p| p.name.as_str()),
        },
        ctx.now_ms,
    )?;
    say.after.turns = true;
    let label = label_of(identity);
    let live = instances::live(tx)?.iter().any(|i| i.identity == identity);
    let answer = if live {
        format!("Sent to {label}")
    } else {
        format!("{label} is offline: it gets this when it is back")
    };
    // The chosen button shows it was chosen; the others stay as they were.
    let restyle = message.0.get("reply_markup").cloned().map(|mut m| {
        if let Some(rows) = m.get_mut("inline_keyboard").and_then(Value::as_array_mut) {
            for b in rows.iter_mut().filter_map(Value::as_array_mut).flatten() {
                if b.get("callback_data").and_then(Value::as_str) == Some(at.token) {
                    b["style"] = json!(style.unwrap_or("primary"));
                }
            }
        }
        m
    });
    let mut tap = Tap::answer(
        answer,
        if created.is_some() {
            Outcome::Prompt
        } else {
            Outcome::PromptAgain
        },
    );
    tap.restyle = restyle;
    Ok(tap)
}

/// A button of a settled question: it only says how it was settled.
fn settled(answer: &str) -> Tap {
    Tap::answer(answer, Outcome::ButtonSettled)
}

/// Shows a section in the tapped message: now when the store knows it, else through the
/// conductor, which asks pi.
fn menu_section(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: Option<&str>,
    section: Section,
    answer: Option<String>,
    page: Option<usize>,
) -> Result<Tap, StoreError> {
    let answer = answer.unwrap_or_default();
    let outcome = menu_outcome(section);
    if let Some(shown) = render_local(say, at.owner, identity, section, page)? {
        return Ok(Tap::answer(answer, outcome).with_edit(Some(Edit::menu(shown))));
    }
    say.control(controls::NewControl {
        source_update_id: None,
        kind: "menu",
        identity,
        turn_id: None,
        chat_id: at.chat,
        thread_id: at.thread_id(),
        message_id: at.message_id(),
        params: &json!({ "section": section }),
    })?;
    Ok(Tap::answer(answer, outcome))
}

/// A control a button asks of the tapped message's pi.
#[derive(Clone, Copy)]
enum PiControl {
    /// Another page of the model menu (a `menu` control).
    ModelPage,
    SetModel,
    SetThinking,
    Compact,
    NewSession,
    SwitchSession,
    /// Another page of `/sessions` (pi is asked for them again).
    Sessions,
}

impl PiControl {
    /// The control's kind, as the conductor reads it.
    fn kind(self) -> &'static str {
        match self {
            Self::ModelPage => "menu",
            Self::SetModel => "set_model",
            Self::SetThinking => "set_thinking",
            Self::Compact => "compact",
            Self::NewSession => "new_session",
            Self::SwitchSession => "switch_session",
            Self::Sessions => "sessions",
        }
    }

    fn outcome(self) -> Outcome {
        match self {
            Self::ModelPage => menu_outcome(Section::Model),
            Self::SetModel => Outcome::ControlSetModel,
            Self::SetThinking => Outcome::ControlSetThinking,
            Self::Compact => Outcome::ControlCompact,
            Self::NewSession => Outcome::ControlNewSession,
            Self::SwitchSession => Outcome::ControlSwitchSession,
            Self::Sessions => Outcome::CommandSessions,
        }
    }
}

/// A control for the conductor about the tapped message's pi.
fn pi_control(
    say: &mut Say<'_>,
    at: &Tapped<'_, '_>,
    identity: &str,
    control: PiControl,
    params: &Value,
    answer: &str,
) -> Result<Tap, StoreError> {
    if !instances::live(say.tx)?
        .iter()
        .any(|i| i.identity == identity)
    {
        return Ok(Tap::answer(
            texts::not_connected(&label_of(identity)),
            Outcome::ControlGone,
        ));
    }
    say.control(controls::NewControl {
        source_update_id: None,
        kind: control.kind(),
        identity: Some(identity),
        turn_id: None,
        chat_id: at.chat,
        thread_id: at.thread_id(),
        message_id: at.message_id(),
        params,
    })?;
    Ok(Tap::answer(answer, control.outcome()))
}
