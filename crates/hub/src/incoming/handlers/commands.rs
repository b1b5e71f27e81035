//! Commands: the menu and its shortcuts, the controls (`/abort`, `/stop`, `/next`,
//! `/continue`, `/compact`), pi's own commands (prompt templates and extension commands,
//! published under Telegram-safe names), and a clear answer for anything else. A command is
//! never sent to pi as text unless it is one of pi's.

use serde_json::{Value, json};
use store::journal::Outcome;
use store::outbox::Purpose;
use store::turns::{self, Lane};
use store::{StoreError, controls, kv};
use telegram::view::MessageView;

use super::{Say, menu_outcome, menu_purpose, messages, target_identity};
use crate::buttons::{Button, Section};
use crate::names::label_of;
use crate::outgoing::menu;
use crate::outgoing::texts;

/// Handles `msg` if it is a command; `None` when it is not one (a prompt).
pub(super) fn handle(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
) -> Result<Option<Outcome>, StoreError> {
    let Some((cmd, args)) = msg.command() else {
        return Ok(None);
    };
    let cmd = cmd.to_ascii_lowercase();
    if let Some(section) = Section::of_command(&cmd) {
        return open_menu(say, msg, section).map(Some);
    }
    let outcome = match cmd.as_str() {
        "abort" => abort(say, msg, Halt::Abort)?,
        "stop" => abort(say, msg, Halt::Stop)?,
        "next" => abort(say, msg, Halt::Next)?,
        "continue" => continue_(say, msg)?,
        "steer" => steer(say, msg, args)?,
        "retry" => retry(say, msg)?,
        "compact" => compact(say, msg)?,
        "new" => new(say, msg, args)?,
        "sessions" => instance_control(say, msg, InstanceCommand::Sessions)?,
        "close" => instance_control(say, msg, InstanceCommand::Close)?,
        "people" => super::people::list(say, msg)?,
        _ => return pi_command(say, msg, &cmd, args).map(Some),
    };
    Ok(Some(outcome))
}

/// `/steer <words>`: the words reach pi inside the work it is doing now (pi's steering: after
/// its current tool calls, before its next model call). With nothing running they are an
/// ordinary message. Either way they are a turn first (first in the queue), so a steer that
/// comes too late loses nothing: the conductor steers it in, or it runs next.
fn steer(say: &mut Say<'_>, msg: &MessageView<'_>, args: &str) -> Result<Outcome, StoreError> {
    let words = args.trim();
    if words.is_empty() {
        say.reply(msg, &texts::steer_usage(), None, &Purpose::ReplyControl)?;
        return Ok(Outcome::CommandSteer);
    }
    let chat = msg.chat_id().unwrap_or_default();
    let Some(identity) = target_identity(say.tx, chat, msg.thread_id())? else {
        say.reply(msg, &texts::which_pi("steer"), None, &Purpose::ReplyControl)?;
        return Ok(Outcome::CommandSteer);
    };
    let running = turns::outstanding(say.tx)?
        .into_iter()
        .any(|t| t.identity.as_deref() == Some(identity.as_str()));
    let outcome = messages::to_turn_as(say, msg, Some(words), Lane::Priority)?;
    if running {
        say.control(controls::NewControl {
            source_update_id: None,
            kind: "steer",
            identity: Some(&identity),
            turn_id: None,
            chat_id: chat,
            thread_id: msg.thread_id(),
            message_id: msg.id(),
            params: &json!({ "update": say.entry.update_id }),
        })?;
        return Ok(Outcome::CommandSteer);
    }
    Ok(outcome)
}

/// `/retry`: the last prompt this place's pi ran, sent again as pi got it (files it came with
/// are named by their saved paths, not downloaded again).
fn retry(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<Outcome, StoreError> {
    let chat = msg.chat_id().unwrap_or_default();
    let Some(identity) = target_identity(say.tx, chat, msg.thread_id())? else {
        say.reply(msg, &texts::which_pi("retry"), None, &Purpose::ReplyControl)?;
        return Ok(Outcome::CommandRetry);
    };
    match turns::last_run_of(say.tx, &identity)? {
        Some(t) if !t.prompt().trim().is_empty() => {
            messages::to_turn_as(say, msg, Some(&t.prompt()), Lane::Normal)
        }
        _ => {
            say.reply(
                msg,
                &texts::nothing_to_retry(&label_of(&identity)),
                None,
                &Purpose::ReplyControl,
            )?;
            Ok(Outcome::CommandRetry)
        }
    }
}

/// The profile's `workspaces` roots (none when telegram.json cannot be read: `/new` then says
/// how to configure them).
pub(super) fn workspace_roots(ctx: &super::HandlerCtx) -> Vec<std::path::PathBuf> {
    crate::config::ConfigFile::load(&ctx.config_path)
        .map(|f| f.profile(&ctx.profile).workspaces)
        .unwrap_or_default()
}

/// `/new <folder>`: start pi there (under a workspace root); `/new`: a picker with a new
/// session for the pi of this place and the folders pi may be started in.
fn new(say: &mut Say<'_>, msg: &MessageView<'_>, args: &str) -> Result<Outcome, StoreError> {
    let chat = msg.chat_id().unwrap_or_default();
    let roots = workspace_roots(say.ctx);
    let args = args.trim();
    if !args.is_empty() {
        return match crate::pi::workspaces::resolve(args, &roots) {
            Ok(folder) => {
                say.control(controls::NewControl {
                    source_update_id: Some(say.entry.update_id),
                    kind: "spawn",
                    identity: None,
                    turn_id: None,
                    chat_id: chat,
                    thread_id: msg.thread_id(),
                    message_id: None,
                    params: &json!({ "cwd": folder.display().to_string(), "reply_to": msg.id() }),
                })?;
                Ok(Outcome::CommandNewSpawn)
            }
            Err(e) => {
                say.reply(
                    msg,
                    &texts::folder_refused(&e.to_string()),
                    None,
                    &Purpose::ReplyNew,
                )?;
                Ok(Outcome::CommandNewRefused)
            }
        };
    }
    let view = new_picker(say, chat, msg.thread_id(), 0)?;
    let owner = msg.from_id().unwrap_or(chat);
    let markup = menu::buttons_markup(say.tx, &say.ctx.clock, owner, &view, say.ctx.now_ms)?;
    say.reply(msg, &view.text, markup, &Purpose::ReplyNew)?;
    Ok(Outcome::CommandNewPicker)
}

/// How many folders `/new` offers at most (paged).
const FOLDERS_OFFERED: usize = 1000;

/// `/new`'s picker for a place (`chat`, `thread`), at `page`: the folders are looked up again
/// for each page.
pub(super) fn new_picker(
    say: &Say<'_>,
    chat: i64,
    thread: Option<i64>,
    page: usize,
) -> Result<menu::View, StoreError> {
    let roots = workspace_roots(say.ctx);
    let identity = target_identity(say.tx, chat, thread)?;
    let live = store::instances::live(say.tx)?;
    let here = identity
        .as_deref()
        .filter(|i| live.iter().any(|l| l.identity == *i))
        .map(|i| (i.to_owned(), label_of(i)));
    let recent: Vec<String> = store::instances::recent(say.tx, 50)?
        .into_iter()
        .map(|r| r.cwd)
        .collect();
    let folders: Vec<String> = crate::pi::workspaces::offered(&roots, &recent, FOLDERS_OFFERED)
        .into_iter()
        .map(|p| p.display().to_string())
        .collect();
    let resolved = crate::pi::workspaces::resolved_roots(&roots);
    Ok(menu::new_picker(
        here.as_ref().map(|(i, l)| (i.as_str(), l.as_str())),
        &folders,
        &crate::pi::workspaces::roots_text(&resolved),
        page,
    ))
}

/// A command that is a control for the pi of this place.
#[derive(Clone, Copy)]
enum InstanceCommand {
    Sessions,
    Close,
}

impl InstanceCommand {
    /// The control's kind (and the command's name).
    fn kind(self) -> &'static str {
        match self {
            Self::Sessions => "sessions",
            Self::Close => "close",
        }
    }

    /// The purpose of the reply that no pi is here.
    fn purpose(self) -> Purpose {
        match self {
            Self::Sessions => Purpose::ReplySessions,
            Self::Close => Purpose::ReplyClose,
        }
    }

    fn outcome(self, pi_here: bool) -> Outcome {
        match (self, pi_here) {
            (Self::Sessions, true) => Outcome::CommandSessions,
            (Self::Sessions, false) => Outcome::CommandSessionsNoPi,
            (Self::Close, true) => Outcome::CommandClose,
            (Self::Close, false) => Outcome::CommandCloseNoPi,
        }
    }
}

/// `/sessions`, `/close`: a control for the pi of this place.
fn instance_control(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    command: InstanceCommand,
) -> Result<Outcome, StoreError> {
    let kind = command.kind();
    let chat = msg.chat_id().unwrap_or_default();
    let identity = target_identity(say.tx, chat, msg.thread_id())?;
    let live = store::instances::live(say.tx)?;
    let Some(identity) = identity.filter(|i| live.iter().any(|l| l.identity == *i)) else {
        say.reply(msg, &texts::no_pi_here(kind), None, &command.purpose())?;
        return Ok(command.outcome(false));
    };
    say.control(controls::NewControl {
        source_update_id: Some(say.entry.update_id),
        kind,
        identity: Some(&identity),
        turn_id: None,
        chat_id: chat,
        thread_id: msg.thread_id(),
        message_id: None,
        params: &json!({ "reply_to": msg.id() }),
    })?;
    Ok(command.outcome(true))
}

/// Opens the menu at `section` in a new message.
fn open_menu(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    section: Section,
) -> Result<Outcome, StoreError> {
    let chat = msg.chat_id().unwrap_or_default();
    let identity = target_identity(say.tx, chat, msg.thread_id())?;
    let owner = msg.from_id().unwrap_or(chat);
    match render_local(say, owner, identity.as_deref(), section, None)? {
        Some((view, markup)) => {
            say.reply_formatted(
                msg,
                (&view.text, &view.entities),
                markup,
                &menu_purpose(section),
                false,
            )?;
        }
        // What pi reports is needed: the conductor asks it and sends the menu.
        None => {
            say.control(controls::NewControl {
                source_update_id: None,
                kind: "menu",
                identity: identity.as_deref(),
                turn_id: None,
                chat_id: chat,
                thread_id: msg.thread_id(),
                message_id: None,
                params: &json!({ "section": section, "reply_to": msg.id() }),
            })?;
        }
    }
    Ok(menu_outcome(section))
}

/// A menu section that needs nothing from pi, rendered now: `(view, its buttons)`, a long
/// list at `page` (`None`: where it opens). `None` for the sections pi reports (status,
/// model, thinking).
pub(super) fn render_local(
    say: &Say<'_>,
    owner: i64,
    identity: Option<&str>,
    section: Section,
    page: Option<usize>,
) -> Result<Option<(menu::View, Option<Value>)>, StoreError> {
    let tx = say.tx;
    let list = menu::instances_of(tx)?;
    let current = identity
        .and_then(|id| list.iter().find(|i| i.identity == id))
        .cloned();
    let waiting = match identity {
        Some(id) => turns::queue_of(tx, id)?,
        None => Vec::new(),
    };
    let view = match (section, &current) {
        (Section::Main, _) => menu::main(
            &say.ctx.bot_username,
            &list,
            current.as_ref(),
            menu::Waiting::of(&waiting),
            crate::state::threaded(tx)?,
            page,
        ),
        (Section::Queue, Some(c)) => menu::queue(
            c,
            &waiting,
            crate::state::fold_of(tx, &c.identity)?.is_some(),
            page,
        ),
        (Section::Settings, _) => {
            let settings = crate::assistant::Watched::new(
                say.ctx.config_path.clone(),
                say.ctx.profile.clone(),
            )
            .current();
            menu::settings(identity, &settings)
        }
        (Section::Instances, _) => menu::instances(&list, page),
        (Section::Help, _) => menu::help(&say.ctx.bot_username, identity),
        (Section::Status | Section::Model | Section::Thinking, Some(c)) if c.live => {
            return Ok(None);
        }
        // About a pi that is not there: say so, with the way back.
        (_, c) => menu::View::new(
            match c {
                Some(c) => texts::not_connected(&c.label),
                None => texts::no_instance_here(),
            },
            vec![vec![(
                "« Menu".into(),
                Button::Menu {
                    identity: identity.map(str::to_owned),
                    section: Section::Main,
                },
            )]],
        ),
    };
    let markup = menu::buttons_markup(tx, &say.ctx.clock, owner, &view, say.ctx.now_ms)?;
    Ok(Some((view, markup)))
}

/// What `/abort`, `/stop` and `/next` do besides aborting the running turn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Halt {
    /// Only abort; the queue stays.
    Abort,
    /// Abort and drop everything waiting.
    Stop,
    /// Abort; the next waiting turn goes next.
    Next,
}

impl Halt {
    /// The outcome of the command: `running` is `None` when there was no pi to name.
    fn outcome(self, running: Option<bool>) -> Outcome {
        match (self, running) {
            (Self::Abort, None) => Outcome::AbortWhich,
            (Self::Abort, Some(true)) => Outcome::AbortRunning,
            (Self::Abort, Some(false)) => Outcome::AbortIdle,
            (Self::Stop, None) => Outcome::StopWhich,
            (Self::Stop, Some(true)) => Outcome::StopRunning,
            (Self::Stop, Some(false)) => Outcome::StopIdle,
            (Self::Next, None) => Outcome::NextWhich,
            (Self::Next, Some(true)) => Outcome::NextRunning,
            (Self::Next, Some(false)) => Outcome::NextIdle,
        }
    }
}

fn abort(say: &mut Say<'_>, msg: &MessageView<'_>, what: Halt) -> Result<Outcome, StoreError> {
    let tx = say.tx;
    let chat = msg.chat_id().unwrap_or_default();
    let name = match what {
        Halt::Abort => "abort",
        Halt::Stop => "stop",
        Halt::Next => "next",
    };
    let Some(identity) = target_identity(tx, chat, msg.thread_id())? else {
        say.reply(msg, &texts::which_pi(name), None, &Purpose::ReplyControl)?;
        return Ok(what.outcome(None));
    };
    let label = label_of(&identity);
    let outstanding = turns::outstanding(tx)?
        .into_iter()
        .find(|t| t.identity.as_deref() == Some(identity.as_str()));
    // A turn a hub crash cut off, queued to run again, is the running one for the person: it
    // is stopped here, before pi gets it again.
    let cut_off = match outstanding {
        Some(_) => None,
        None => turns::cut_off(tx, &identity)?,
    };
    if let Some(t) = &cut_off {
        turns::cancel(tx, t.id, "aborted before it ran again", say.ctx.now_ms)?;
    }
    if let Some(t) = &outstanding {
        say.control(controls::NewControl {
            source_update_id: None,
            kind: "abort",
            identity: Some(&identity),
            turn_id: Some(t.id),
            chat_id: chat,
            thread_id: msg.thread_id(),
            message_id: msg.id(),
            params: &json!({}),
        })?;
    }
    let running = outstanding.or(cut_off);
    let mut dropped = 0;
    if what == Halt::Stop {
        for t in turns::queue_of(tx, &identity)? {
            if turns::cancel(tx, t.id, "stopped", say.ctx.now_ms)? {
                dropped += 1;
            }
        }
    }
    // After an abort of a Telegram turn, what waited behind it goes to pi with the person's
    // next message (the reference's folding, `state::Fold`); /next and /stop run or drop it.
    match (&running, what) {
        (Some(t), Halt::Abort) => crate::state::set_fold(
            tx,
            &identity,
            crate::state::Fold {
                aborted: t.id,
                upto: turns::last_id(tx)?,
            },
        )?,
        // An /abort with nothing running leaves a queue that waits as it is.
        (None, Halt::Abort) => {}
        (_, Halt::Stop | Halt::Next) => crate::state::clear_fold(tx, &identity)?,
    }
    let waiting = menu::Waiting::of(&turns::queue_of(tx, &identity)?).will_run;
    let held = crate::state::fold_of(tx, &identity)?.is_some();
    let text = texts::stopped(
        &label,
        what == Halt::Stop,
        running.is_some(),
        dropped,
        waiting,
        what == Halt::Next,
        held,
    );
    say.reply(msg, &text, None, &Purpose::ReplyControl)?;
    say.after.turns = true;
    Ok(what.outcome(Some(running.is_some())))
}

fn continue_(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<Outcome, StoreError> {
    let chat = msg.chat_id().unwrap_or_default();
    if target_identity(say.tx, chat, msg.thread_id())?.is_none() {
        say.reply(
            msg,
            &texts::which_pi("continue"),
            None,
            &Purpose::ReplyControl,
        )?;
        return Ok(Outcome::ContinueWhich);
    }
    // A prompt like any other, at the head of the priority lane; what waited behind an
    // aborted turn runs after it, each on its own (as after /next).
    if let Some(identity) = target_identity(say.tx, chat, msg.thread_id())? {
        crate::state::clear_fold(say.tx, &identity)?;
    }
    messages::to_turn_as(say, msg, Some("continue"), Lane::Priority)?;
    Ok(Outcome::Continue)
}

fn compact(say: &mut Say<'_>, msg: &MessageView<'_>) -> Result<Outcome, StoreError> {
    let chat = msg.chat_id().unwrap_or_default();
    let Some(identity) = target_identity(say.tx, chat, msg.thread_id())? else {
        say.reply(
            msg,
            &texts::which_pi("compact"),
            None,
            &Purpose::ReplyControl,
        )?;
        return Ok(Outcome::CompactWhich);
    };
    let owner = msg.from_id().unwrap_or(chat);
    let view = menu::View::new(
        texts::compact_question(&label_of(&identity)),
        vec![vec![
            (
                "Compact".into(),
                Button::Compact {
                    identity: identity.clone(),
                },
            ),
            ("Cancel".into(), Button::Dismiss),
        ]],
    );
    let markup = menu::buttons_markup(say.tx, &say.ctx.clock, owner, &view, say.ctx.now_ms)?;
    say.reply(msg, &view.text, markup, &Purpose::ReplyCompact)?;
    Ok(Outcome::CompactAsked)
}

/// One of pi's commands under its Telegram name: a prompt with pi's name for it. Anything else
/// is not a command anyone knows.
pub(super) fn pi_command(
    say: &mut Say<'_>,
    msg: &MessageView<'_>,
    cmd: &str,
    args: &str,
) -> Result<Outcome, StoreError> {
    let Some(text) = pi_text(say.tx, cmd, args)? else {
        say.reply_to_prompt(
            msg,
            &texts::unknown_command(cmd),
            None,
            &Purpose::ReplyUnknownCommand,
        )?;
        return Ok(Outcome::CommandUnknown);
    };
    messages::to_turn_as(say, msg, Some(&text), Lane::Normal)?;
    Ok(Outcome::CommandPi)
}

/// What pi gets for the Telegram command `cmd` (lower case) with `args`: `None` when no live pi
/// lists it.
pub(super) fn pi_text(
    tx: &store::Connection,
    cmd: &str,
    args: &str,
) -> Result<Option<String>, StoreError> {
    let map: Value = kv::get(tx, crate::outgoing::bot_commands::PI_COMMANDS)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or(Value::Null);
    Ok(map.get(cmd).and_then(Value::as_str).map(|name| {
        if args.is_empty() {
            format!("/{name}")
        } else {
            format!("/{name} {args}")
        }
    }))
}
