//! Carrying out the person's controls (`store::controls`): abort, compact, the menu sections
//! that show what pi reports, model and thinking switches. A handler records a control in the
//! transaction that handles the update; here it is carried out and marked done in the
//! transaction that records what the bot says about it.
//!
//! Crash points: `control.before_effect` (the control is journaled, pi has not been asked:
//! after a restart it is carried out, once). A compaction is marked `sent` before pi is asked;
//! one found `sent` after a restart is not repeated blindly: the person is told its outcome is
//! unknown. Aborts are bound to the turn they were asked for, so a repeated abort cannot stop
//! a later turn; menus and switches are idempotent.
//!
//! A control whose pi is not connected waits [`CONTROL_WAIT_MS`] for it (an extension instance
//! reconnects within seconds of a hub restart), then is answered "not connected".

use crate::db::Durability;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use store::controls::{self, Control, ControlState};
use store::outbox::Purpose;
use store::{Connection, StoreError, kv, turns};
use tokio::sync::{Notify, mpsc, oneshot};

use super::Conductor;
use crate::buttons::{Button, Section};
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::names::label_of;
use crate::outgoing::menu::{self, Reported, View};
use crate::outgoing::outbound;
use crate::outgoing::texts;
use crate::pi::instance::{Command, ConductorMsg, InstanceId, Request, Transport};

/// The `error` of a turn that went into its pi's running work (`/steer`).
pub(crate) const STEERED: &str = "steered into the work pi was doing";

/// How long a control waits for its pi to connect.
pub(super) const CONTROL_WAIT_MS: i64 = 30_000;
/// How long pi gets to answer a question (models, stats, a switch).
const ASK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a compaction may take (it is a model call over the whole session).
const COMPACT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Controls being carried out by a task of their own.
#[derive(Debug, Default)]
pub(super) struct InHand(HashSet<i64>);

impl Conductor {
    /// Carries out the open controls that are not in hand. Returns the time (ms) at which the
    /// earliest control still waiting for its pi gives up, if any.
    pub(super) async fn controls(&mut self) -> Result<Option<i64>, HubError> {
        let open = self.db.read(controls::open).await?;
        let now = self.db.now_ms();
        let mut deadline: Option<i64> = None;
        for c in open {
            if self.in_hand.0.contains(&c.id) {
                continue;
            }
            if c.kind == "steer" {
                self.steer(c).await?;
                continue;
            }
            if c.kind == "dialog" {
                // An answer goes only to the pi process that asked, or nowhere.
                self.deliver_answer(c).await?;
                continue;
            }
            if c.kind == "spawn" {
                // Starting pi needs no pi.
                self.in_hand.0.insert(c.id);
                let job = Job {
                    db: self.db.clone(),
                    sender: self.wakes.sender.clone(),
                    conductor: self.tx.clone(),
                    commands: None,
                    instance: None,
                    transport: None,
                    busy: false,
                    spawner: Some(self.spawner()),
                };
                tokio::spawn(job.run(c));
                continue;
            }
            let live = c.identity.as_deref().and_then(|identity| {
                self.live
                    .iter()
                    .find(|(_, l)| l.identity == identity)
                    .map(|(id, l)| {
                        let busy = !l.idle || l.outstanding.is_some();
                        (
                            l.commands.clone(),
                            l.outstanding,
                            id.clone(),
                            l.transport,
                            busy,
                        )
                    })
            });
            if c.state == ControlState::Sent {
                // Handed to pi by a hub that is gone: its outcome is not known.
                self.settle(c, Outcome::Unknown).await?;
                continue;
            }
            let Some((commands, outstanding, instance, transport, busy)) = live else {
                let gives_up = c.created_ms + CONTROL_WAIT_MS;
                if now < gives_up {
                    deadline = Some(deadline.map_or(gives_up, |d| d.min(gives_up)));
                } else {
                    self.settle(c, Outcome::NotConnected).await?;
                }
                continue;
            };
            if c.kind == "abort" {
                crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
                // Only the turn it was asked for: that one may have finished meanwhile.
                if c.turn_id.is_some() && outstanding == c.turn_id {
                    let _ = commands.try_send(Command::Abort);
                    tracing::info!(control = c.id, turn = ?c.turn_id, "abort sent");
                }
                self.settle(c, Outcome::Quiet).await?;
                continue;
            }
            self.in_hand.0.insert(c.id);
            let job = Job {
                db: self.db.clone(),
                sender: self.wakes.sender.clone(),
                conductor: self.tx.clone(),
                commands: Some(commands),
                instance: Some(instance),
                transport: Some(transport),
                busy,
                spawner: None,
            };
            tokio::spawn(job.run(c));
        }
        Ok(deadline)
    }

    /// Control `steer`: the turn the person's `/steer` made goes into the work its pi does
    /// now, if it still works on a turn; else it stays a turn and runs next. The turn leaves
    /// the queue in the commit that says so, before the words go to the link: a crash between
    /// the two loses the words (said in ARCHITECTURE.md), never sends them twice.
    async fn steer(&mut self, c: Control) -> Result<(), HubError> {
        let update = c.params.get("update").and_then(Value::as_i64);
        let live = c.identity.as_deref().and_then(|identity| {
            self.live
                .values()
                .find(|l| l.identity == identity && l.outstanding.is_some())
                .map(|l| (l.commands.clone(), l.label.clone()))
        });
        let now = self.db.now_ms();
        let steering = live.is_some();
        let label = live.as_ref().map(|(_, l)| l.clone()).unwrap_or_default();
        let words = self
            .db
            .write(Durability::OnDisk, move |tx| {
                let mut words = None;
                if steering
                    && let Some(t) = update
                        .map(|u| turns::by_source_update(tx, u))
                        .transpose()?
                        .flatten()
                    && turns::cancel(tx, t.id, STEERED, now)?
                {
                    outbound::text(
                        tx,
                        &outbound::Text {
                            chat: c.chat_id,
                            thread: c.thread_id,
                            text: &texts::steered(&label),
                            reply_to: c.message_id,
                            markup: None,
                            purpose: &Purpose::Control { id: c.id },
                            source_update_id: None,
                            resend: false,
                        },
                        now,
                    )?;
                    words = Some(t.prompt());
                }
                controls::mark_done(tx, c.id, now)?;
                Ok(words)
            })
            .await?;
        if let (Some(words), Some((commands, _))) = (words, live) {
            let _ = commands.try_send(Command::Steer(words));
            self.wakes.sender.notify_one();
        }
        Ok(())
    }

    /// A control's task is over.
    pub(super) fn control_settled(&mut self, id: i64) {
        self.in_hand.0.remove(&id);
    }

    async fn settle(&self, c: Control, outcome: Outcome) -> Result<(), HubError> {
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let wrote = self
            .db
            .write(Durability::OnDisk, move |tx| {
                write_outcome(tx, &c, outcome, now, &clock)
            })
            .await?;
        if wrote {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }
}

/// How a control ended, as far as the person is told.
#[derive(Debug)]
enum Outcome {
    /// Nothing to say (an abort: its turn's answer says it).
    Quiet,
    /// Its pi did not connect in time.
    NotConnected,
    /// A compaction handed to pi by a hub that stopped.
    Unknown,
    /// A message to show as it is (sessions, a new pi, a closed one).
    Shown(View),
    /// pi answered: the menu section to show (with a line on top; the model menu at `page`, or
    /// at the current model's), or a compaction's result.
    Answered {
        section: Option<Section>,
        headline: Option<String>,
        page: Option<usize>,
        answer: Result<Value, String>,
    },
}

/// What a control's task needs.
struct Job {
    db: Db,
    sender: Arc<Notify>,
    conductor: mpsc::Sender<ConductorMsg>,
    /// The instance's link (`None` for controls that need no pi: `spawn`).
    commands: Option<mpsc::Sender<Command>>,
    instance: Option<InstanceId>,
    /// How it is connected.
    transport: Option<Transport>,
    /// pi was running (a turn or work of its own) when the control was taken up: a switch
    /// then says what it does to that run.
    busy: bool,
    /// For `spawn`.
    spawner: Option<crate::pi::spawned::Spawner>,
}

impl Job {
    async fn run(self, c: Control) {
        let id = c.id;
        if let Err(e) = self.carry_out(c).await {
            tracing::warn!(control = id, error = %e, "a control could not be carried out");
        }
        let _ = self.conductor.send(ConductorMsg::ControlSettled(id)).await;
    }

    /// Carries out one control and writes what the person is told about it.
    async fn carry_out(&self, c: Control) -> Result<(), HubError> {
        let outcome = match c.kind.as_str() {
            "menu" => self.menu(&c).await,
            "set_model" => self.set_model(&c).await,
            "set_thinking" => self.set_thinking(&c).await,
            "compact" => match self.compact(&c).await? {
                Some(outcome) => outcome,
                // Settled already.
                None => return Ok(()),
            },
            "spawn" => self.spawn(&c).await,
            "new_session" | "switch_session" => self.session(&c).await?,
            "sessions" => self.sessions(&c).await,
            "close" => self.close(&c).await?,
            other => {
                tracing::warn!(
                    control = c.id,
                    kind = other,
                    "a control of an unknown kind; dropped"
                );
                Outcome::Quiet
            }
        };
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let wrote = self
            .db
            .write(Durability::OnDisk, move |tx| {
                write_outcome(tx, &c, outcome, now, &clock)
            })
            .await?;
        if wrote {
            self.sender.notify_one();
        }
        Ok(())
    }

    /// `menu`: the section asked for, with what pi reports for it.
    async fn menu(&self, c: &Control) -> Outcome {
        let section = c
            .params
            .get("section")
            .and_then(|s| serde_json::from_value::<Section>(s.clone()).ok());
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let section = section.unwrap_or(Section::Main);
        let page = page_param(c);
        Outcome::Answered {
            section: Some(section),
            headline: None,
            page,
            answer: self.section_answer(section).await,
        }
    }

    /// `set_model`: pi switches, and the model section shows the result.
    async fn set_model(&self, c: &Control) -> Outcome {
        let provider = str_param(c, "provider");
        let model = str_param(c, "id");
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let switched = self
            .ask(
                Request::SetModel {
                    provider: provider.clone(),
                    id: model.clone(),
                },
                ASK_TIMEOUT,
            )
            .await;
        Outcome::Answered {
            section: Some(Section::Model),
            headline: Some(match &switched {
                Ok(_) => texts::model_switched(&format!("{provider}/{model}"), self.busy),
                Err(e) => texts::switch_failed(e),
            }),
            page: None,
            answer: self.section_answer(Section::Model).await,
        }
    }

    /// `set_thinking`: pi's thinking level, and the thinking section shows the result.
    async fn set_thinking(&self, c: &Control) -> Outcome {
        let level = str_param(c, "level");
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let set = self
            .ask(Request::SetThinking(level.clone()), ASK_TIMEOUT)
            .await;
        Outcome::Answered {
            section: Some(Section::Thinking),
            headline: Some(match &set {
                Ok(v) => texts::thinking_set(
                    v.get("level").and_then(Value::as_str).unwrap_or(&level),
                    self.busy,
                ),
                Err(e) => texts::switch_failed(e),
            }),
            page: None,
            answer: self.section_answer(Section::Thinking).await,
        }
    }

    /// `compact`: marked sent before pi is asked. `None` when it was settled meanwhile.
    async fn compact(&self, c: &Control) -> Result<Option<Outcome>, HubError> {
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let id = c.id;
        // From here on a restart cannot know whether pi compacted.
        if !self
            .db
            .write(Durability::OnDisk, move |tx| controls::mark_sent(tx, id))
            .await?
        {
            return Ok(None);
        }
        Ok(Some(Outcome::Answered {
            section: None,
            headline: None,
            page: None,
            answer: self.ask(Request::Compact, COMPACT_TIMEOUT).await,
        }))
    }

    /// `spawn`: a new headless pi in the folder asked for.
    async fn spawn(&self, c: &Control) -> Outcome {
        let cwd = str_param(c, "cwd");
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let started = match &self.spawner {
            Some(spawner) => spawner.start_new(cwd.clone(), Vec::new()).await,
            None => Err("the hub cannot start pi here".into()),
        };
        Outcome::Shown(View::new(
            match started {
                Ok(_) => texts::pi_started(&cwd),
                Err(e) => texts::pi_not_started(&cwd, &e),
            },
            Vec::new(),
        ))
    }

    /// `new_session` or `switch_session`; a hub-started pi's new session file is recorded, so
    /// it resumes that one when started again.
    async fn session(&self, c: &Control) -> Result<Outcome, HubError> {
        let label = label_of(c.identity.as_deref().unwrap_or_default());
        let resume = c.kind == "switch_session";
        let request = if resume {
            Request::SwitchSession(str_param(c, "path"))
        } else {
            Request::NewSession
        };
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let answer = self.ask(request, ASK_TIMEOUT).await;
        if let (Ok(v), Some(instance)) = (&answer, &self.instance)
            && let Some(file) = v.get("session_file").and_then(Value::as_str)
        {
            let (instance, file) = (instance.0.clone(), file.to_owned());
            let now = self.db.now_ms();
            self.db
                .write(Durability::OnDisk, move |tx| {
                    store::spawned::set_session(tx, &instance, &file, now)
                })
                .await?;
        }
        let cancelled = answer
            .as_ref()
            .is_ok_and(|v| v.get("cancelled").and_then(Value::as_bool) == Some(true));
        Ok(Outcome::Shown(View::new(
            match (&answer, resume) {
                (Err(e), _) => texts::session_failed(&label, e),
                (Ok(_), _) if cancelled => texts::session_cancelled(&label),
                (Ok(_), false) => texts::new_session_started(&label),
                (Ok(_), true) => texts::session_resumed(&label),
            },
            Vec::new(),
        )))
    }

    /// `sessions`: the list pi keeps, to choose one from.
    async fn sessions(&self, c: &Control) -> Outcome {
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let identity = c.identity.clone().unwrap_or_default();
        let page = page_param(c);
        let answer = self.ask(Request::Sessions, ASK_TIMEOUT).await;
        Outcome::Shown(match answer {
            Ok(mut v) => {
                // A session pi started from Telegram begins with the hub's lines.
                for s in v
                    .get_mut("sessions")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(first) = s.get("first_message").and_then(Value::as_str) {
                        let words = crate::pi::preamble::without(first).to_owned();
                        s["first_message"] = Value::String(words);
                    }
                }
                menu::sessions(&identity, &v, page)
            }
            Err(e) => View::new(
                texts::pi_did_not_answer(&label_of(&identity), &e),
                Vec::new(),
            ),
        })
    }

    /// `close`: a hub-started pi is closed (and not started again); one in a terminal is not
    /// the hub's to close.
    async fn close(&self, c: &Control) -> Result<Outcome, HubError> {
        let label = label_of(c.identity.as_deref().unwrap_or_default());
        crashpoint::hit(crashpoint::CrashPoint::ControlBeforeEffect);
        let text = if self.transport == Some(Transport::Rpc) {
            let mut resume = None;
            if let Some(instance) = self.instance.clone() {
                let id = instance.0.clone();
                let now = self.db.now_ms();
                // Recorded first: a crash after it does not bring it back.
                resume = self
                    .db
                    .write(Durability::OnDisk, move |tx| {
                        let Some(row) = store::spawned::by_instance(tx, &id)? else {
                            return Ok(None);
                        };
                        store::spawned::end(
                            tx,
                            row.id,
                            store::spawned::SpawnState::Closed,
                            "closed from Telegram",
                            now,
                        )?;
                        Ok(row.session_file.map(|f| (row.cwd, f)))
                    })
                    .await?;
            }
            if let Some(commands) = &self.commands {
                let _ = commands
                    .send(Command::Close("closed from Telegram".into()))
                    .await;
            }
            match resume {
                Some((cwd, file)) => format!(
                    "{}\n{}",
                    texts::pi_closed(&label),
                    texts::go_on_in_terminal(&cwd, &file)
                ),
                None => texts::pi_closed(&label),
            }
        } else {
            texts::cannot_close_terminal_pi(&label)
        };
        Ok(Outcome::Shown(View::new(text, Vec::new())))
    }

    /// What pi reports for a section (`Null` for the sections it has no part in).
    async fn section_answer(&self, section: Section) -> Result<Value, String> {
        let request = match section {
            Section::Status => Request::Stats,
            Section::Model => Request::Models,
            Section::Thinking => Request::ThinkingLevels,
            _ => return Ok(Value::Null),
        };
        self.ask(request, ASK_TIMEOUT).await
    }

    async fn ask(&self, request: Request, timeout: Duration) -> Result<Value, String> {
        let Some(commands) = &self.commands else {
            return Err("pi is not connected".into());
        };
        let (answer, answered) = oneshot::channel();
        if commands
            .send(Command::Request(request, answer))
            .await
            .is_err()
        {
            return Err("pi's connection closed".into());
        }
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("pi's connection closed".into()),
            Err(_) => Err(format!("pi did not answer within {} s", timeout.as_secs())),
        }
    }
}

fn str_param(c: &Control, key: &str) -> String {
    c.params
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Writes what the person is told about a control, and marks it done. Returns whether
/// anything was queued.
fn write_outcome(
    tx: &Connection,
    c: &Control,
    outcome: Outcome,
    now: i64,
    clock: &Clock,
) -> Result<bool, StoreError> {
    if !controls::mark_done(tx, c.id, now)? {
        return Ok(false);
    }
    let label = c.identity.as_deref().map(label_of).unwrap_or_default();
    let reply = |text: &str| -> Result<bool, StoreError> {
        Ok(outbound::text(
            tx,
            &outbound::Text {
                chat: c.chat_id,
                thread: c.thread_id,
                text,
                reply_to: c.message_id,
                markup: None,
                purpose: &Purpose::Control { id: c.id },
                source_update_id: c.source_update_id,
                resend: false,
            },
            now,
        )?
        .is_some())
    };
    match (c.kind.as_str(), outcome) {
        (_, Outcome::Quiet) => Ok(false),
        ("compact", Outcome::Unknown) => reply(&texts::compact_unknown(&label)),
        ("compact", Outcome::Answered { answer, .. }) => reply(&match answer {
            Ok(v) => texts::compacted(&label, v.get("tokensBefore").and_then(Value::as_u64)),
            Err(e) => texts::compact_failed(&label, &e),
        }),
        ("abort", _) => Ok(false),
        (_, Outcome::Shown(view)) => show(tx, c, view, now, clock),
        (_, Outcome::NotConnected) | (_, Outcome::Unknown) => {
            let view = back_to_menu(c, texts::not_connected(&label));
            show(tx, c, view, now, clock)
        }
        (
            _,
            Outcome::Answered {
                section,
                headline,
                page,
                answer,
            },
        ) => {
            let section = section.unwrap_or(Section::Main);
            let mut view = render(tx, c, section, page, answer)?;
            if let Some(h) = headline {
                view.text = format!("{h}\n\n{}", view.text);
            }
            show(tx, c, view, now, clock)
        }
    }
}

/// A menu section from what pi answered (the model menu at `page`).
fn render(
    tx: &Connection,
    c: &Control,
    section: Section,
    page: Option<usize>,
    answer: Result<Value, String>,
) -> Result<View, StoreError> {
    let identity = c.identity.as_deref().unwrap_or_default();
    let Some(instance) = menu::instances_of(tx)?
        .into_iter()
        .find(|i| i.identity == identity)
    else {
        return Ok(back_to_menu(c, texts::not_connected(&label_of(identity))));
    };
    let v = match answer {
        Ok(v) => v,
        Err(e) => {
            return Ok(back_to_menu(
                c,
                texts::pi_did_not_answer(&instance.label, &e),
            ));
        }
    };
    let waiting = menu::Waiting::of(&turns::queue_of(tx, identity)?);
    Ok(match section {
        Section::Status => menu::status(&instance, &Reported::from_stats(&v), waiting),
        Section::Model => menu::models(&instance, &menu::ModelList::from_answer(&v), page),
        Section::Thinking => {
            let levels: Vec<String> = v
                .get("levels")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let current = v.get("current").and_then(Value::as_str);
            menu::thinking(&instance, &levels, current)
        }
        // Sections the store knows are rendered by the handlers; one landing here (a menu
        // control from an older hub) shows the main menu.
        _ => {
            let list = menu::instances_of(tx)?;
            let bot = kv::get(tx, kv::BOT_USERNAME)?.unwrap_or_default();
            menu::main(
                &bot,
                &list,
                Some(&instance),
                waiting,
                crate::state::threaded(tx)?,
                None,
            )
        }
    })
}

/// The page of a long list a control asks for (`None`: where the list opens).
fn page_param(c: &Control) -> Option<usize> {
    c.params
        .get("page")
        .and_then(Value::as_u64)
        .and_then(|p| usize::try_from(p).ok())
}

fn back_to_menu(c: &Control, text: String) -> View {
    View::new(
        text,
        vec![vec![(
            "« Menu".into(),
            Button::Menu {
                identity: c.identity.clone(),
                section: Section::Main,
            },
        )]],
    )
}

/// Shows `view` in the menu message the control came from, or as a reply to the command that
/// opened it.
fn show(
    tx: &Connection,
    c: &Control,
    view: View,
    now: i64,
    clock: &Clock,
) -> Result<bool, StoreError> {
    let owner = kv::get_i64(tx, kv::OWNER)?.unwrap_or(c.chat_id);
    let markup = menu::buttons_markup(tx, clock, owner, &view, now)?;
    let purpose = Purpose::Control { id: c.id };
    match c.message_id {
        Some(message) => {
            outbound::edit_formatted(
                tx,
                c.chat_id,
                message,
                (&view.text, &view.entities),
                markup,
                &purpose,
                c.source_update_id,
                now,
            )?;
            Ok(true)
        }
        None => Ok(outbound::formatted(
            tx,
            &outbound::Text {
                chat: c.chat_id,
                thread: c.thread_id,
                text: &view.text,
                reply_to: c.params.get("reply_to").and_then(Value::as_i64),
                markup,
                purpose: &purpose,
                source_update_id: c.source_update_id,
                resend: false,
            },
            &view.entities,
            now,
        )?
        .is_some()),
    }
}

/// Asks a newly connected pi for its commands and publishes them (with everyone else's).
pub(super) async fn learn_commands(
    db: Db,
    sender: Arc<Notify>,
    commands: mpsc::Sender<Command>,
    identity: String,
) {
    let job_commands = commands.clone();
    let (answer, answered) = oneshot::channel();
    if job_commands
        .send(Command::Request(Request::Commands, answer))
        .await
        .is_err()
    {
        return;
    }
    let list = match tokio::time::timeout(ASK_TIMEOUT, answered).await {
        Ok(Ok(Ok(v))) => crate::outgoing::bot_commands::parse(&v),
        Ok(Ok(Err(e))) => {
            tracing::info!(identity = %identity, error = %e, "pi did not list its commands");
            return;
        }
        _ => return,
    };
    let now = db.now_ms();
    let queued = db
        .write(Durability::OnDisk, move |tx| {
            crate::outgoing::bot_commands::store_list(tx, &identity, &list)?;
            crate::outgoing::bot_commands::refresh(tx, now)
        })
        .await;
    match queued {
        Ok(true) => sender.notify_one(),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "could not store pi's commands"),
    }
}
