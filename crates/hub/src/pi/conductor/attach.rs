//! Instances attaching, and the hub's own restart: a connecting instance's report of the turns
//! it had is reconciled with the store, and turns the previous hub's links left are settled.

use std::collections::BTreeMap;
use std::path::Path;

use store::instances::{self, InstanceState};
use store::outbox::Purpose;
use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError, kv};
use tokio::sync::oneshot;
use wire::{TurnId, TurnResult};

use super::answers::{AnswerCtx, finish};
use super::{Conductor, Live, controls, tools};
use crate::assistant::{Rendering, VoiceReply};
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Durability;
use crate::error::HubError;
use crate::names::label_of;
use crate::outgoing::outbound;
use crate::outgoing::preview::PreviewMsg;
use crate::outgoing::reactions::Fate;
use crate::outgoing::texts;
use crate::pi::instance::{Attach, Command, InstanceId, Transport};
use crate::pi::resume::{self, Resume};
use crate::state::{self, HELD_NOTICE, HUB_RESTARTED, SELECTED, waits_notice_key};

impl Conductor {
    /// After a hub restart: the previous hub's links are gone. Extension instances reconnect
    /// and report. Headless children died with the hub; each turn one had is judged from its
    /// session file ([`resume`]): answered from there, queued again when pi had not started a
    /// tool, else interrupted (one line per place, for each kind).
    pub(super) async fn recover(&mut self) -> Result<(), HubError> {
        let judged = self.judge_cut_off().await?;
        let now = self.db.now_ms();
        let current = self.assistant.current();
        let (rendering, voice) = (
            current.rendering,
            (current.voice_reply, current.voice_transcript),
        );
        let clock = self.db.clock().clone();
        let answered = self
            .db
            .write(Durability::OnDisk, move |tx| {
                let mut answered = Vec::new();
                // Hubs that start through `serve` did this with their lease; kept for a
                // conductor run on its own (tests), where it is idempotent.
                instances::mark_all_gone(tx, HUB_RESTARTED, now)?;
                // The pi processes that asked are gone with their connections.
                super::dialogs::void_stranded(tx, now)?;
                let mut by_place: BTreeMap<(i64, Option<i64>), Cut> = BTreeMap::new();
                for t in turns::outstanding(tx)? {
                    if t.transport == Some(Transport::Shim) {
                        continue;
                    }
                    let place = by_place.entry((t.chat_id, t.thread_id)).or_default();
                    // Not a headless pi's (the demo's echo agent): interrupted, as always.
                    let verdict = judged.get(&t.id).cloned();
                    match verdict {
                        Some(v @ (Resume::NotStarted | Resume::Again)) => {
                            let again = v == Resume::Again;
                            let queued = turns::run_again(tx, t.id)?;
                            // `outstanding` read it dispatched or acked in this transaction.
                            if crate::never!(!queued, "outstanding turn {} could not be queued again", t.id) {
                                continue;
                            }
                            if again {
                                turns::append_context(tx, t.id, texts::SENT_AGAIN)?;
                            }
                            tracing::info!(turn = t.id, recorded = again, "a turn the hub's restart cut off runs again: pi had not started a tool");
                            place.again.push((t.id, t.text.clone()));
                        }
                        Some(Resume::Answered { text, error }) => {
                            let identity = t.identity.clone().unwrap_or_default();
                            let ctx = AnswerCtx {
                                label: None,
                                identity: &identity,
                                rendering,
                                voice,
                                clock: &clock,
                            };
                            let result = TurnResult {
                                turn_id: TurnId::from_number(t.id),
                                text,
                                aborted: false,
                                error,
                                handled: false,
                            };
                            tracing::info!(turn = t.id, "a turn the hub's restart cut off had been answered: the answer is taken from pi's session file");
                            if finish(tx, &t, &result, &ctx, now)? {
                                answered.push((t.id, t.chat_id, t.message_id));
                            }
                        }
                        v @ (Some(Resume::ToolsStarted(_) | Resume::Unknown(_)) | None) => {
                            let why = match &v {
                                Some(Resume::ToolsStarted(tools)) => format!(
                                    "{}; pi had started {}, so it is not run again",
                                    HUB_RESTARTED.detail(),
                                    tools.join(", ")
                                ),
                                Some(Resume::Unknown(why)) => {
                                    format!("{}; {why}", HUB_RESTARTED.detail())
                                }
                                _ => HUB_RESTARTED.detail(),
                            };
                            let interrupted = turns::mark_interrupted(tx, t.id, &why, now)?;
                            if crate::never!(
                                !interrupted,
                                "outstanding turn {} could not be interrupted at the hub's start",
                                t.id
                            ) {
                                continue;
                            }
                            place.interrupted.push(t);
                        }
                    }
                }
                for ((chat, thread), cut) in &by_place {
                    if let Some(first) = cut.again.first().map(|(n, _)| *n) {
                        let prompts: Vec<String> =
                            cut.again.iter().map(|(_, p)| p.clone()).collect();
                        outbound::notice(
                            tx,
                            *chat,
                            *thread,
                            &texts::restart_again(&prompts),
                            &Purpose::NoticeAgain { turn: first },
                            now,
                        )?;
                    }
                    let Some(first) = cut.interrupted.first().map(|t| t.id) else {
                        continue;
                    };
                    let prompts: Vec<String> =
                        cut.interrupted.iter().map(|t| t.text.clone()).collect();
                    outbound::prompt_notice(
                        tx,
                        *chat,
                        *thread,
                        &texts::restart_interrupted(&prompts),
                        &Purpose::NoticeInterrupted { turn: first },
                        now,
                    )?;
                    for t in &cut.interrupted {
                        if let Some(identity) = t.identity.as_deref() {
                            tools::send_waiting(tx, t, identity, now)?;
                        }
                    }
                }
                crashpoint::hit(crashpoint::CrashPoint::RecoverBeforeCommit);
                Ok(answered)
            })
            .await?;
        self.wakes.sender.notify_one();
        if current.reactions {
            for (n, chat, message) in answered {
                self.fates.show(n, chat, message, Fate::Answered);
            }
        }
        Ok(())
    }

    /// The headless turns the last hub left outstanding, each judged from its pi's session
    /// file once the pi that had it is gone.
    async fn judge_cut_off(&self) -> Result<BTreeMap<i64, Resume>, HubError> {
        let cut = self
            .db
            .read(|tx| {
                let mut cut = Vec::new();
                for t in turns::outstanding(tx)? {
                    if t.transport != Some(Transport::Rpc) {
                        continue;
                    }
                    let file = match t.instance_id.as_deref() {
                        Some(i) => store::spawned::by_instance(tx, i)?.and_then(|s| s.session_file),
                        None => None,
                    };
                    let at = turns::dispatched_ms(tx, t.id)?;
                    cut.push((t.id, t.text, t.instance_pid, file, at));
                }
                Ok(cut)
            })
            .await?;
        if cut.is_empty() {
            return Ok(BTreeMap::new());
        }
        let judged = tokio::task::spawn_blocking(move || {
            // The old pi all got their input's end at once: one wait bounds them all.
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            cut.into_iter()
                .map(|(id, words, pid, file, at)| {
                    let verdict = match (file, at) {
                        (None, _) => Resume::Unknown("its session file is not known".into()),
                        (_, None) => Resume::Unknown("its dispatch time is not known".into()),
                        (Some(_), _) if pid.is_some_and(|p| !gone_by(p, until)) => {
                            Resume::Unknown("the pi that had it still runs".into())
                        }
                        (Some(f), Some(at)) => resume::judge_file(Path::new(&f), &words, at),
                    };
                    (id, verdict)
                })
                .collect()
        })
        .await
        .map_err(|e| HubError::Internal(format!("judging cut-off turns: {e}")))?;
        Ok(judged)
    }

    /// Registers a connecting instance, reconciles what it reports, and makes it live.
    pub(super) async fn attach(
        &mut self,
        a: Attach,
        reply: oneshot::Sender<InstanceId>,
    ) -> Result<(), HubError> {
        let live_identities: Vec<String> = self.live.values().map(|l| l.identity.clone()).collect();
        let Attach {
            transport,
            reach,
            pid,
            cwd,
            session_id,
            session_name: _,
            session_file,
            idle,
            pending,
            received,
            completed,
            store_id,
            commands,
            tools_token,
        } = a;
        let now = self.db.now_ms();
        let current = self.assistant.current();
        let style = AnswerStyle {
            // The newcomer makes two.
            several: !self.live.is_empty(),
            rendering: current.rendering,
            voice: (current.voice_reply, current.voice_transcript),
            clock: self.db.clock().clone(),
        };
        let newcomer = Newcomer {
            transport,
            pid,
            cwd: cwd.clone(),
            session_id,
            idle,
            received,
            completed,
            store_id,
        };
        let registered = self
            .db
            .write(Durability::OnDisk, move |tx| {
                register(tx, &newcomer, &live_identities, &style, now)
            })
            .await?;
        let live = Live {
            identity: registered.identity,
            label: registered.label,
            session_file,
            cwd,
            transport,
            reach,
            pid,
            idle,
            pending,
            outstanding: registered.outstanding,
            commands,
            last_status: None,
            tools: Vec::new(),
            tool_args: std::collections::HashMap::new(),
            tools_token,
            answered_before: None,
            compacting: None,
            compaction_ended: None,
            local: Default::default(),
        };
        let id = InstanceId(registered.id);
        self.go_live(id, live, registered.done_acks, registered.resumed, reply);
        Ok(())
    }

    /// A registered instance joins the live ones: its link and its tools learn its id, pi
    /// forgets the turns whose results are stored, and the tasks that serve it are woken.
    fn go_live(
        &mut self,
        id: InstanceId,
        live: Live,
        done_acks: Vec<TurnId>,
        resumed: Option<(i64, outbound::Place)>,
        reply: oneshot::Sender<InstanceId>,
    ) {
        if let Some((turn, place)) = resumed {
            let _ = self.previews.try_send(PreviewMsg::Begin {
                turn,
                chat: place.chat,
                thread: place.thread,
            });
        }
        tracing::info!(instance = %id, transport = live.transport.as_str(), identity = %live.identity, "instance connected");
        let _ = reply.send(id.clone());
        for turn in done_acks {
            let _ = live.commands.try_send(Command::DoneAck(turn));
        }
        // In Threaded Mode the new instance needs its topic.
        self.wakes.topics.notify_one();
        tokio::spawn(controls::learn_commands(
            self.db.clone(),
            self.wakes.sender.clone(),
            live.commands.clone(),
            live.identity.clone(),
        ));
        let tools_token = live.tools_token.clone();
        self.live.insert(id.clone(), live);
        // The child's tools may have said hello before pi answered the hub's first question.
        if let Some(waiting) = tools_token.and_then(|t| self.tools_waiting.remove(&t)) {
            for w in waiting {
                let _ = w.send(Some(id.clone()));
            }
        }
        self.wakes.sender.notify_one();
        // Results the instance reported on attaching may have queued spoken answers.
        self.wakes.voice.notify_one();
    }
}

/// What the store learns of a connecting instance: the part of its [`Attach`] the
/// registering transaction takes.
struct Newcomer {
    transport: Transport,
    pid: Option<i64>,
    cwd: String,
    session_id: Option<String>,
    idle: bool,
    received: Vec<TurnId>,
    completed: Vec<TurnResult>,
    store_id: Option<String>,
}

/// How answers of turns a connecting instance finished while the hub was away are written.
struct AnswerStyle {
    /// Other instances are live: answers carry the instance's label.
    several: bool,
    rendering: Rendering,
    /// `voice.replyMode` and `voice.sendTranscript`.
    voice: (VoiceReply, bool),
    clock: Clock,
}

/// What registering an instance decided.
struct Registered {
    id: String,
    identity: String,
    label: String,
    /// Turns pi may forget: their results are stored.
    done_acks: Vec<TurnId>,
    /// The turn it still works on.
    outstanding: Option<i64>,
    /// That turn again, with where its preview goes.
    resumed: Option<(i64, outbound::Place)>,
}

/// A registered instance, as its welcome needs it.
struct Arrival<'a> {
    id: &'a str,
    identity: &'a str,
    label: &'a str,
    cwd: &'a str,
    /// It was live when the last hub stopped: a reconnect the person did not ask for.
    returning: bool,
}

/// The registering transaction: the instance's row, its reported turns reconciled, the
/// selection, the turns that waited for any pi, and the owner's notice.
fn register(
    tx: &Connection,
    who: &Newcomer,
    live_identities: &[String],
    style: &AnswerStyle,
    now: i64,
) -> Result<Registered, StoreError> {
    let n = instances::next_number(tx)?;
    let id = format!("i{n}");
    let identity = choose_identity(tx, &who.cwd, who.pid, who.transport, live_identities)?;
    let label = label_of(&identity);
    // Was it live when the last hub stopped? Then this is a reconnect the person did not ask
    // for, and it is quiet.
    let returning = state::returning(tx, &identity)?;
    instances::insert(
        tx,
        &instances::InstanceRow {
            id: id.clone(),
            identity: identity.clone(),
            transport: who.transport,
            pid: who.pid,
            cwd: who.cwd.clone(),
            label: label.clone(),
            session_id: who.session_id.clone(),
            state: InstanceState::working(!who.idle),
            connected_ms: now,
            gone_ms: None,
            gone_reason: None,
        },
    )?;
    let ctx = AnswerCtx {
        label: style.several.then_some(label.as_str()),
        identity: &identity,
        rendering: style.rendering,
        voice: style.voice,
        clock: &style.clock,
    };
    let reported = Reported {
        transport: who.transport,
        pid: who.pid,
        identity: &identity,
        instance_id: &id,
        received: &who.received,
        completed: &who.completed,
        same_store: who.store_id.is_some()
            && who.store_id.as_deref() == kv::get(tx, kv::STORE_ID)?.as_deref(),
    };
    let (done_acks, outstanding) = reconcile_reported(tx, &reported, &ctx, now)?;
    // A turn it carries on with gets its preview back.
    let resumed = match outstanding
        .map(|n| turns::get(tx, n))
        .transpose()?
        .flatten()
    {
        Some(t) => Some((t.id, outbound::place_of_turn(tx, &t, &identity)?)),
        None => None,
    };
    let arrival = Arrival {
        id: &id,
        identity: &identity,
        label: &label,
        cwd: &who.cwd,
        returning,
    };
    welcome(tx, &arrival, now)?;
    crashpoint::hit(crashpoint::CrashPoint::AttachBeforeCommit);
    Ok(Registered {
        id,
        identity,
        label,
        done_acks,
        outstanding,
        resumed,
    })
}

/// Selects the instance if nothing is selected, hands it the turns that waited for any pi,
/// and tells the owner (unless it is a quiet reconnect with nothing handed over).
fn welcome(tx: &Connection, a: &Arrival<'_>, now: i64) -> Result<(), StoreError> {
    // The person's selection stays theirs across restarts and reconnects; only a hub without
    // one selects the first pi that connects.
    let selected = match kv::get(tx, SELECTED)? {
        Some(s) => s,
        None => {
            kv::set(tx, SELECTED, a.identity)?;
            a.identity.to_owned()
        }
    };
    // Messages that arrived while no pi was live go to the first that connects; messages that
    // wait for the person's choice are never handed out here.
    let handed = turns::assign_unassigned(tx, a.identity)? as i64;
    kv::delete(tx, HELD_NOTICE)?;
    kv::delete(tx, &waits_notice_key(a.identity))?;
    let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
        return Ok(());
    };
    // In Threaded Mode the instance's own topic greets it (the topics task).
    let text = if state::topics_on(tx)? {
        (handed > 0).then(|| texts::took_waiting(a.label, handed, true))
    } else if a.returning {
        (handed > 0).then(|| texts::took_waiting(a.label, handed, false))
    } else {
        Some(texts::instance_connected(
            a.label,
            a.cwd,
            selected == a.identity,
            handed,
        ))
    };
    if let Some(text) = text {
        outbound::notice(
            tx,
            owner,
            None,
            &text,
            &Purpose::NoticeConnected {
                instance: a.id.to_owned(),
            },
            now,
        )?;
    }
    Ok(())
}

/// What a connecting instance reports about turns it had.
struct Reported<'a> {
    transport: Transport,
    pid: Option<i64>,
    identity: &'a str,
    instance_id: &'a str,
    received: &'a [TurnId],
    completed: &'a [TurnResult],
    /// Its turns are this database's (it says so): turn ids of a state started over are not.
    same_store: bool,
}

/// Reconciles what a connecting instance reports with the store. Only the process a turn was
/// dispatched to (same identity, same pid, the extension) can say it received or finished it;
/// anything else it names is logged and ignored. Returns the turns to acknowledge (so pi
/// forgets them) and the one the instance is still working on.
fn reconcile_reported(
    tx: &Connection,
    r: &Reported<'_>,
    ctx: &AnswerCtx<'_>,
    now: i64,
) -> Result<(Vec<TurnId>, Option<i64>), StoreError> {
    let same_process = |t: &Turn| {
        r.transport == Transport::Shim
            && t.transport == Some(Transport::Shim)
            && r.pid.is_some()
            && t.instance_pid == r.pid
            && t.identity.as_deref() == Some(r.identity)
    };
    let mut done_acks = Vec::new();
    let mut outstanding = None;
    if r.same_store && r.transport == Transport::Shim {
        // A queued turn this process finished: the hub had dispatched it and then lost that
        // (a crash of its machine takes what was not yet on disk, and a pi of another machine
        // lives on). Its answer is here: delivered, never asked for again. A queued turn it
        // only received goes again; pi says whether its answer is still to come (`ack`).
        for c in r.completed {
            let Some(t) = c.turn_id.number().map(|n| turns::get(tx, n)).transpose()? else {
                continue;
            };
            if let Some(t) = t.filter(|t| t.state == TurnState::Queued) {
                tracing::warn!(
                    turn = t.id,
                    identity = %r.identity,
                    "pi reported the answer of a turn the hub had not recorded as sent (the hub's state lost it)"
                );
                finish(tx, &t, c, ctx, now)?;
                done_acks.push(c.turn_id.clone());
            }
        }
    }
    for t in turns::outstanding(tx)? {
        let turn_id = TurnId::from_number(t.id);
        if same_process(&t) {
            if let Some(result) = r.completed.iter().find(|c| c.turn_id == turn_id) {
                finish(tx, &t, result, ctx, now)?;
                done_acks.push(turn_id);
            } else if r.received.contains(&turn_id) {
                // This link carries it on: its result comes back through this link.
                let adopted = turns::adopt(tx, t.id, r.instance_id)?;
                // `outstanding` read it dispatched or acked in this transaction.
                crate::never!(
                    !adopted,
                    "outstanding turn {} could not be adopted by {}",
                    t.id,
                    r.instance_id
                );
                turns::mark_acked(tx, t.id, now)?;
                outstanding = Some(t.id);
            } else {
                // pi never got it: safe to send again.
                turns::requeue(tx, t.id)?;
            }
        } else if t.identity.as_deref() == Some(r.identity)
            && t.instance_pid.is_some_and(|p| !process_alive(p))
        {
            // The process that had it is gone for good.
            let interrupted = turns::mark_interrupted(tx, t.id, "pi exited", now)?;
            // `outstanding` read it dispatched or acked in this transaction.
            if !crate::never!(
                !interrupted,
                "outstanding turn {} of an exited process could not be interrupted",
                t.id
            ) {
                outbound::prompt_notice(
                    tx,
                    t.chat_id,
                    t.thread_id,
                    &texts::turn_interrupted(&label_of(r.identity), &t.text),
                    &Purpose::NoticeInterrupted { turn: t.id },
                    now,
                )?;
                tools::send_waiting(tx, &t, r.identity, now)?;
            }
        }
    }
    // Results for turns that are not outstanding any more: stored already (a repeat), or a
    // late result of this same process for a turn the hub gave up on. Anything else is not
    // this instance's to finish.
    for c in r.completed {
        if done_acks.contains(&c.turn_id) {
            continue;
        }
        let turn = match c.turn_id.number() {
            Some(n) => turns::get(tx, n)?,
            None => None,
        };
        match turn {
            Some(t) if t.state == TurnState::Interrupted && same_process(&t) => {
                finish(tx, &t, c, ctx, now)?;
            }
            Some(t) if t.state == TurnState::Done && same_process(&t) => {}
            _ => tracing::warn!(
                turn = %c.turn_id,
                identity = %r.identity,
                "a connecting instance reported a result for a turn that is not its own; ignored"
            ),
        }
        done_acks.push(c.turn_id.clone());
    }
    Ok((done_acks, outstanding))
}

/// By default a pi's identity is its cwd. A process that comes back gets its old identity; a
/// second live pi in the same cwd gets `cwd#2`, `cwd#3`, ...
fn choose_identity(
    tx: &Connection,
    cwd: &str,
    pid: Option<i64>,
    transport: Transport,
    live: &[String],
) -> Result<String, StoreError> {
    if let (Some(pid), Transport::Shim) = (pid, transport) {
        let previous = instances::recent(tx, 50)?
            .into_iter()
            .find(|r| r.pid == Some(pid) && r.cwd == cwd && r.transport == Transport::Shim)
            .map(|r| r.identity);
        if let Some(p) = previous.filter(|p| !live.contains(p)) {
            return Ok(p);
        }
    }
    if !live.iter().any(|l| l == cwd) {
        return Ok(cwd.to_owned());
    }
    let n = (2..)
        .find(|n| !live.contains(&format!("{cwd}#{n}")))
        .unwrap_or(2);
    Ok(format!("{cwd}#{n}"))
}

/// The pi of a dead hub shuts down when its input closes; its last writes to the session file
/// come first. At the hub's start only, and bounded (one deadline for all of them): one that
/// still runs after it is judged unknown.
fn gone_by(pid: i64, until: std::time::Instant) -> bool {
    while process_alive(pid) {
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// The turns one place had cut off by the hub's restart.
#[derive(Default)]
struct Cut {
    /// Queued again: their numbers and prompts.
    again: Vec<(i64, String)>,
    /// Interrupted.
    interrupted: Vec<Turn>,
}

fn process_alive(pid: i64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}
