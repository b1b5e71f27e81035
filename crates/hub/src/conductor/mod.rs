//! The conductor: the one task that knows the live instances. It registers them, reconciles
//! turns after reconnects, dispatches queued turns to idle instances, stores answers, and tells
//! the owner when instances come and go.
//!
//! Exactly-once into pi: a turn is marked `dispatched` (and committed) before its prompt is
//! written; an instance that reconnects reports the turn ids its process received, so a turn is
//! re-sent only if pi never got it, and a turn that finished while the hub was away is reported
//! with its result.

use crate::db::Durability;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use store::instances::InstanceState;

use serde_json::{Value, json};
use store::lease::Epoch;
use store::threads as tables;
use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError, instances, kv};
use threads::events;
use tokio::sync::{mpsc, oneshot, watch};
use wire::{PiEvent, TurnId, TurnResult};

mod controls;
mod tools;

pub use tools::ToolSettings;

use crate::activity::{self, ToolRecord};
use crate::assistant::{self, Rendering};
use crate::bot_commands;
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::instance::{
    Attach, Command, ConductorMsg, GoneReason, InstanceId, LinkEvent, Reach, Transport,
};
use crate::names::label_of;
use crate::outbound;
use crate::preview::PreviewMsg;
use crate::state::{self, HELD_NOTICE, HUB_RESTARTED, SELECTED, waits_notice_key};
use crate::texts;
use crate::wakes::Wakes;

#[derive(Debug)]
struct Live {
    identity: String,
    label: String,
    cwd: String,
    transport: Transport,
    reach: Reach,
    pid: Option<i64>,
    idle: bool,
    pending: bool,
    /// The turn it is working on.
    outstanding: Option<i64>,
    commands: mpsc::Sender<Command>,
    last_status: Option<String>,
    /// Tools that finished since the last assistant message (shown as one activity message).
    tools: Vec<ToolRecord>,
    /// Arguments of tools running now, by call id.
    tool_args: std::collections::HashMap<String, Value>,
    /// A headless child's token for its tools connection.
    tools_token: Option<String>,
}

impl Live {
    fn ready(&self) -> bool {
        self.idle && !self.pending && self.outstanding.is_none()
    }
}

/// Conductor wiring.
pub struct Conductor {
    db: Db,
    rx: mpsc::Receiver<ConductorMsg>,
    tx: mpsc::Sender<ConductorMsg>,
    wakes: Wakes,
    epoch: Epoch,
    live: BTreeMap<InstanceId, Live>,
    /// How answers are shown (re-read when telegram.json changes).
    assistant: Arc<assistant::Watched>,
    /// The preview task.
    previews: mpsc::Sender<PreviewMsg>,
    /// Answers claimed for the sender in the commit that queues them.
    handoff: crate::sender::Handoff,
    /// Controls carried out by tasks of their own.
    in_hand: controls::InHand,
    /// When the earliest control waiting for its pi gives up (ms).
    controls_deadline: Option<i64>,
    /// pi's Telegram tools: where copies go, how large.
    tools: Arc<ToolSettings>,
    /// `telegram.json` (`piBinary` for the headless instances it starts).
    config_path: std::path::PathBuf,
    /// Tokens of children being started, with the tools hellos that came before their pi
    /// attached (a child's extension may connect before pi answers the hub's first question).
    tools_waiting: std::collections::HashMap<String, Vec<oneshot::Sender<Option<InstanceId>>>>,
    /// Busy/idle changes not in the store yet (for `status` only). pi says "idle" right
    /// before its answer: the change goes into the answer's commit, or is written once nothing
    /// else waits, never as a store call of its own in front of the answer.
    unsaved_states: BTreeMap<String, InstanceState>,
}

/// Busy/idle of instances, for `status`.
fn save_states(
    tx: &Connection,
    states: &BTreeMap<String, InstanceState>,
) -> Result<(), StoreError> {
    for (id, state) in states {
        instances::set_state(tx, id, *state)?;
    }
    Ok(())
}

/// What an answer row needs.
struct AnswerCtx<'a> {
    label: Option<&'a str>,
    identity: &'a str,
    rendering: Rendering,
    /// `voice.replyMode` and `voice.sendTranscript`.
    voice: (assistant::VoiceReply, bool),
    /// The hub's clock (button tokens).
    clock: &'a Clock,
}

/// What the conductor is told at start, with no defaults: a guessed path would read another
/// profile's (or the working directory's) `telegram.json`.
#[derive(Debug, Clone)]
pub struct ConductorSettings {
    /// `telegram.json` (`piBinary` for the headless instances it starts).
    pub config_path: std::path::PathBuf,
    /// pi's Telegram tools: where copies go, how large.
    pub tools: ToolSettings,
}

impl Conductor {
    /// A conductor reading `rx`; `tx` is handed to links it starts; `wake` is notified by the
    /// worker when turns or the selection change; `sender` wakes the outbox sender; answers
    /// go to the sender through `handoff` when it waits idle.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        db: Db,
        rx: mpsc::Receiver<ConductorMsg>,
        tx: mpsc::Sender<ConductorMsg>,
        wakes: Wakes,
        epoch: Epoch,
        assistant: Arc<assistant::Watched>,
        previews: mpsc::Sender<PreviewMsg>,
        handoff: crate::sender::Handoff,
        settings: ConductorSettings,
    ) -> Self {
        Self {
            db,
            rx,
            tx,
            wakes,
            epoch,
            live: BTreeMap::new(),
            assistant,
            previews,
            handoff,
            in_hand: controls::InHand::default(),
            controls_deadline: None,
            tools: Arc::new(settings.tools),
            config_path: settings.config_path,
            tools_waiting: std::collections::HashMap::new(),
            unsaved_states: BTreeMap::new(),
        }
    }

    fn spawner(&self) -> crate::spawned::Spawner {
        crate::spawned::Spawner {
            db: self.db.clone(),
            conductor: self.tx.clone(),
            config_path: self.config_path.clone(),
            wakes: self.wakes.clone(),
        }
    }

    /// Runs until `stop`.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), HubError> {
        self.recover().await?;
        // Controls left by the hub before, and the queue: looked at on the first pass.
        let mut look_at_controls = true;
        let mut queue_changed = true;
        loop {
            // Before waiting (pi's streamed events come back here without the rest of a pass).
            if !self.unsaved_states.is_empty() && self.rx.is_empty() {
                self.save_states().await?;
            }
            let now = self.db.now_ms();
            tokio::select! {
                _ = stop.changed() => {
                    for live in self.live.values() {
                        let _ = live.commands.try_send(Command::Close("the hub is stopping".into()));
                    }
                    return Ok(());
                }
                msg = self.rx.recv() => match msg {
                    // pi's streamed events change nothing dispatch looks at (one per token).
                    Some(ConductorMsg::Link(id, LinkEvent::Pi { turn, event })) => {
                        self.pi_event(&id, turn, event).await?;
                        continue;
                    }
                    Some(m) => {
                        // pi's acks, busy/idle and answers change neither which controls can
                        // act nor how many turns wait; anything else (an instance came or
                        // went, a prompt was refused) may. A control that waits for pi to be
                        // idle would need busy/idle here again.
                        let quiet = matches!(
                            m,
                            ConductorMsg::Link(
                                _,
                                LinkEvent::Acked { .. } | LinkEvent::State { .. } | LinkEvent::TurnDone(_)
                            )
                        );
                        look_at_controls |= !quiet;
                        queue_changed |= !quiet;
                        self.handle(m).await?;
                    }
                    None => return Ok(()),
                },
                () = self.wakes.conductor.notified() => queue_changed = true,
                () = crate::wakes::sleep_for(self.controls_deadline.map(|d| {
                    std::time::Duration::from_millis(u64::try_from(d - now).unwrap_or(0))
                })) => {}
            }
            let waited_out = self
                .controls_deadline
                .is_some_and(|d| d <= self.db.now_ms());
            let recorded = self.wakes.controls.swap(false, Ordering::SeqCst);
            // Controls first: an abort must not wait behind a dispatch.
            if look_at_controls || recorded || waited_out {
                look_at_controls = false;
                self.controls_deadline = self.controls().await?;
            }
            queue_changed |= self.dispatch().await?;
            if std::mem::take(&mut queue_changed) {
                self.update_statuses().await?;
            }
        }
    }

    /// Busy/idle changes into the store, once nothing else waits for the conductor. For
    /// `status` only (a restarted hub hears busy/idle from pi again): synced lazily. An
    /// instance gone meanwhile keeps `gone` (`instances::set_state` leaves it).
    async fn save_states(&mut self) -> Result<(), HubError> {
        let states = std::mem::take(&mut self.unsaved_states);
        self.db
            .write(Durability::Lazy, move |tx| save_states(tx, &states))
            .await?;
        Ok(())
    }

    /// After a hub restart: the previous hub's links are gone. Headless children died with it,
    /// so their turns are interrupted (one line per place they were asked in); extension
    /// instances reconnect and report.
    async fn recover(&mut self) -> Result<(), HubError> {
        let now = self.db.now_ms();
        self.db
            .write(Durability::OnDisk, move |tx| {
                // Hubs that start through `serve` did this with their lease; kept for a
                // conductor run on its own (tests), where it is idempotent.
                instances::mark_all_gone(tx, HUB_RESTARTED, now)?;
                let mut by_place: BTreeMap<(i64, Option<i64>), Vec<Turn>> = BTreeMap::new();
                for t in turns::outstanding(tx)? {
                    if t.transport == Some(Transport::Shim) {
                        continue;
                    }
                    if turns::mark_interrupted(tx, t.id, &HUB_RESTARTED.detail(), now)? {
                        by_place
                            .entry((t.chat_id, t.thread_id))
                            .or_default()
                            .push(t);
                    }
                }
                for ((chat, thread), list) in &by_place {
                    let prompts: Vec<String> = list.iter().map(|t| t.text.clone()).collect();
                    let first = list.first().map_or(0, |t| t.id);
                    outbound::prompt_notice(
                        tx,
                        *chat,
                        *thread,
                        &texts::restart_interrupted(&prompts),
                        &format!("notice:interrupted:{first}"),
                        now,
                    )?;
                    for t in list {
                        if let Some(identity) = t.identity.as_deref() {
                            tools::send_waiting(tx, t, identity, now)?;
                        }
                    }
                }
                Ok(())
            })
            .await?;
        self.wakes.sender.notify_one();
        Ok(())
    }

    async fn handle(&mut self, msg: ConductorMsg) -> Result<(), HubError> {
        match msg {
            ConductorMsg::Attach(a, reply) => self.attach(a, reply).await,
            ConductorMsg::Link(id, event) => self.link(id, event).await,
            ConductorMsg::Spawn(cwd, env, reply) => {
                let spawner = self.spawner();
                // Spawning registers through this very loop: never wait for it here.
                tokio::spawn(async move {
                    let r = spawner.start_new(cwd, env).await.map(|s| s.id);
                    let _ = reply.send(r);
                });
                Ok(())
            }
            ConductorMsg::ResolveIntent(intent, create, reply) => {
                let result = self
                    .db
                    .write(Durability::OnDisk, move |tx| {
                        crate::topics::resolve_intent(tx, intent, create)
                    })
                    .await?;
                self.wakes.topics.notify_one();
                let _ = reply.send(match result {
                    Some(i) => {
                        Ok(json!({ "intent_id": i.id, "identity": i.identity, "slot": i.slot }))
                    }
                    None => Err(format!("there is no intent #{intent} (settled already?)")),
                });
                Ok(())
            }
            ConductorMsg::Tool(id, call) => {
                self.tool(&id, call);
                Ok(())
            }
            ConductorMsg::ToolsHello(token, reply) => {
                match (self.tools_owner(&token), self.tools_waiting.get_mut(&token)) {
                    (Some(id), _) => {
                        let _ = reply.send(Some(id));
                    }
                    // Its pi is starting: the answer comes when it attaches.
                    (None, Some(waiting)) => waiting.push(reply),
                    (None, None) => {
                        let _ = reply.send(None);
                    }
                }
                Ok(())
            }
            ConductorMsg::ExpectTools(token) => {
                self.tools_waiting.entry(token).or_default();
                Ok(())
            }
            ConductorMsg::ForgetTools(token) => {
                for w in self.tools_waiting.remove(&token).unwrap_or_default() {
                    let _ = w.send(None);
                }
                Ok(())
            }
            ConductorMsg::ControlSettled(id) => {
                self.control_settled(id);
                Ok(())
            }
            ConductorMsg::List(reply) => {
                let list: Vec<Value> = self
                    .live
                    .iter()
                    .map(|(id, l)| {
                        json!({ "id": id.0, "identity": l.identity, "label": l.label, "cwd": l.cwd,
                                "transport": l.transport.as_str(), "pid": l.pid, "idle": l.idle,
                                "turn": l.outstanding })
                    })
                    .collect();
                let _ = reply.send(Value::Array(list));
                Ok(())
            }
        }
    }

    async fn attach(
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
            idle,
            pending,
            received,
            completed,
            commands,
            tools_token,
        } = a;
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let cwd2 = cwd.clone();
        let live_count = self.live.len() + 1;
        let current = self.assistant.current();
        let rendering = current.rendering;
        let voice = (current.voice_reply, current.voice_transcript);
        let (id, identity, label, done_acks, outstanding, resumed) = self
            .db
            .write(Durability::OnDisk, move |tx| {
                let n = instances::next_number(tx)?;
                let id = format!("i{n}");
                let identity = choose_identity(tx, &cwd2, pid, transport, &live_identities)?;
                let label = label_of(&identity);
                // Was it live when the last hub stopped? Then this is a reconnect the person
                // did not ask for, and it is quiet.
                let returning = state::returning(tx, &identity)?;
                instances::insert(
                    tx,
                    &instances::InstanceRow {
                        id: id.clone(),
                        identity: identity.clone(),
                        transport,
                        pid,
                        cwd: cwd2.clone(),
                        label: label.clone(),
                        session_id,
                        state: InstanceState::working(!idle),
                        connected_ms: now,
                        gone_ms: None,
                        gone_reason: None,
                    },
                )?;
                let answer_label = (live_count > 1).then_some(label.as_str());
                let ctx = AnswerCtx {
                    label: answer_label,
                    identity: &identity,
                    rendering,
                    voice,
                    clock: &clock,
                };
                let reported = Reported {
                    transport,
                    pid,
                    identity: &identity,
                    instance_id: &id,
                    received: &received,
                    completed: &completed,
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
                // The person's selection stays theirs across restarts and reconnects; only a
                // hub without one selects the first pi that connects.
                let selected = match kv::get(tx, SELECTED)? {
                    Some(s) => s,
                    None => {
                        kv::set(tx, SELECTED, &identity)?;
                        identity.clone()
                    }
                };
                // Messages that arrived while no pi was live go to the first that connects;
                // messages that wait for the person's choice are never handed out here.
                let handed = turns::assign_unassigned(tx, &identity)? as i64;
                kv::delete(tx, HELD_NOTICE)?;
                kv::delete(tx, &waits_notice_key(&identity))?;
                if let Some(owner) = kv::get_i64(tx, kv::OWNER)? {
                    // In Threaded Mode the instance's own topic greets it (the topics task).
                    let text = if state::threaded(tx)? {
                        (handed > 0).then(|| texts::took_waiting(&label, handed, true))
                    } else if returning {
                        (handed > 0).then(|| texts::took_waiting(&label, handed, false))
                    } else {
                        Some(texts::instance_connected(
                            &label,
                            &cwd2,
                            selected == identity,
                            handed,
                        ))
                    };
                    if let Some(text) = text {
                        outbound::notice(
                            tx,
                            owner,
                            None,
                            &text,
                            &format!("notice:connected:{id}"),
                            now,
                        )?;
                    }
                }
                crashpoint::hit(crashpoint::CrashPoint::AttachBeforeCommit);
                Ok::<_, StoreError>((id, identity, label, done_acks, outstanding, resumed))
            })
            .await?;
        if let Some((turn, place)) = resumed {
            let _ = self.previews.try_send(PreviewMsg::Begin {
                turn,
                chat: place.chat,
                thread: place.thread,
            });
        }
        let id = InstanceId(id);
        tracing::info!(instance = %id, transport = transport.as_str(), identity = %identity, "instance connected");
        let _ = reply.send(id.clone());
        for turn in done_acks {
            let _ = commands.try_send(Command::DoneAck(turn));
        }
        // In Threaded Mode the new instance needs its topic.
        self.wakes.topics.notify_one();
        tokio::spawn(controls::learn_commands(
            self.db.clone(),
            self.wakes.sender.clone(),
            commands.clone(),
            identity.clone(),
        ));
        self.live.insert(
            id.clone(),
            Live {
                identity,
                label,
                cwd,
                transport,
                reach,
                pid,
                idle,
                pending,
                outstanding,
                commands,
                last_status: None,
                tools: Vec::new(),
                tool_args: std::collections::HashMap::new(),
                tools_token: tools_token.clone(),
            },
        );
        // The child's tools may have said hello before pi answered the hub's first question.
        if let Some(waiting) = tools_token.and_then(|t| self.tools_waiting.remove(&t)) {
            for w in waiting {
                let _ = w.send(Some(id.clone()));
            }
        }
        self.wakes.sender.notify_one();
        // Results the instance reported on attaching may have queued spoken answers.
        self.wakes.voice.notify_one();
        Ok(())
    }

    /// The turn `turn` if it was dispatched to instance `id` and is still open; otherwise logs
    /// that a link reported a turn that is not its own.
    async fn own_turn(&self, id: &InstanceId, turn: &TurnId) -> Result<Option<i64>, HubError> {
        let Some(n) = turn.number() else {
            tracing::warn!(instance = %id, turn = %turn, "a link reported a turn id the hub never made; ignored");
            return Ok(None);
        };
        let t = self.db.read(move |c| turns::get(c, n)).await?;
        if !t.as_ref().is_some_and(|t| is_own(t, id)) {
            tracing::warn!(instance = %id, turn = n, "a link reported a turn that is not its own open turn; ignored");
            return Ok(None);
        }
        Ok(Some(n))
    }

    async fn link(&mut self, id: InstanceId, event: LinkEvent) -> Result<(), HubError> {
        let now = self.db.now_ms();
        match event {
            LinkEvent::Acked { turn } => {
                // pi has the prompt; the hub has not recorded it yet.
                crashpoint::hit(crashpoint::CrashPoint::AckBeforeCommit);
                // Not waiting for the disk: "acked" only tells a later hub that pi had the
                // prompt; lost with the machine, the turn reads as dispatched, which a
                // reattaching pi settles the same way. The check that the turn is the
                // instance's own is in the same transaction (one store round trip).
                let Some(n) = turn.number() else {
                    tracing::warn!(instance = %id, turn = %turn, "a link reported a turn id the hub never made; ignored");
                    return Ok(());
                };
                let instance = id.clone();
                let own = self
                    .db
                    .write(Durability::Lazy, move |tx| {
                        match turns::get(tx, n)?.filter(|t| is_own(t, &instance)) {
                            Some(_) => turns::mark_acked(tx, n, now).map(|_| true),
                            None => Ok(false),
                        }
                    })
                    .await?;
                if !own {
                    tracing::warn!(instance = %id, turn = n, "a link reported a turn that is not its own open turn; ignored");
                }
            }
            LinkEvent::PromptRefused { turn, error } => {
                let Some(n) = self.own_turn(&id, &turn).await? else {
                    return Ok(());
                };
                tracing::warn!(instance = %id, turn = %turn, error = %error, "pi did not take a prompt; it goes back to the queue");
                self.db
                    .write(Durability::OnDisk, move |tx| turns::requeue(tx, n))
                    .await?;
                if let Some(l) = self.live.get_mut(&id) {
                    l.outstanding = None;
                    l.idle = false;
                }
            }
            LinkEvent::TurnDone(result) => self.turn_done(&id, result).await?,
            LinkEvent::State { idle, pending } => {
                let Some(l) = self.live.get_mut(&id) else {
                    return Ok(());
                };
                let was = l.idle;
                if let Some(i) = idle {
                    l.idle = i;
                }
                if let Some(p) = pending {
                    l.pending = p;
                }
                if was != l.idle {
                    self.unsaved_states
                        .insert(id.0.clone(), InstanceState::working(!l.idle));
                }
            }
            LinkEvent::Pi { .. } => {}
            LinkEvent::Gone(reason) => self.gone(&id, reason).await?,
        }
        Ok(())
    }

    async fn turn_done(&mut self, id: &InstanceId, result: TurnResult) -> Result<(), HubError> {
        // The turn this hub handed the instance is its own without asking the store (the
        // transaction below checks again); one from before a restart is looked up.
        let outstanding = self.live.get(id).and_then(|l| l.outstanding);
        let known = result.turn_id.number().filter(|n| outstanding == Some(*n));
        let n = match known {
            Some(n) => Some(n),
            None => self.own_turn(id, &result.turn_id).await?,
        };
        let Some(n) = n else {
            // Not ours to finish; acknowledged all the same, so pi stops reporting it.
            if let Some(l) = self.live.get(id) {
                let _ = l.commands.try_send(Command::DoneAck(result.turn_id));
            }
            return Ok(());
        };
        let (identity, label, reach) = match self.live.get(id) {
            Some(l) => (l.identity.clone(), l.label.clone(), l.reach),
            None => return Ok(()),
        };
        let several = self.live.len() > 1;
        // Nothing preview-like for this turn once its answer is queued.
        self.fence(n).await;
        let tools = self
            .live
            .get_mut(id)
            .map(|l| std::mem::take(&mut l.tools))
            .unwrap_or_default();
        let settings = self.assistant.current();
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let r = result.clone();
        let rendering = settings.rendering;
        let voice = (settings.voice_reply, settings.voice_transcript);
        let show_tools = settings.activity.tools();
        let instance = id.clone();
        let states = std::mem::take(&mut self.unsaved_states);
        let opening = self.handoff.open();
        let ((claimed, spoken), commit) = self
            .db
            .write_numbered(
                Durability::BeforeTelling(reach),
                move |tx| {
                    save_states(tx, &states)?;
                    let (mut claimed, mut spoken) = (None, false);
                    if let Some(t) = turns::get(tx, n)?.filter(|t| is_own(t, &instance)) {
                        if show_tools && !tools.is_empty() && t.state != TurnState::Done {
                            let place = outbound::place_of_turn(tx, &t, &identity)?;
                            let (h, p) = activity::tools_message(&tools);
                            outbound::enqueue_html(
                                tx,
                                place,
                                (&h, &p),
                                outbound::Meta {
                                    purpose: &format!("tools:{n}:last"),
                                    source_update_id: t.source_update_id,
                                    identity: &identity,
                                    turn_id: Some(n),
                                    resend: false,
                                },
                                now,
                            )?;
                        }
                        let label = several.then_some(label.as_str());
                        spoken = finish(
                            tx,
                            &t,
                            &r,
                            &AnswerCtx {
                                label,
                                identity: &identity,
                                rendering,
                                voice,
                                clock: &clock,
                            },
                            now,
                        )?;
                        if let Some(opening) = opening {
                            claimed = crate::sender::Handoff::claim(tx, opening, n, now)?;
                        }
                    }
                    crashpoint::hit(crashpoint::CrashPoint::TurnDoneBeforeCommit);
                    Ok((claimed, spoken))
                },
                // A claimed row is called next: its commit goes to disk in this store call,
                // before the sender wakes, so no second call off the runtime and no wake-up
                // of the sender by the flush's end stand between the commit and the call.
                |(claimed, _)| claimed.is_some(),
            )
            .await?;
        crashpoint::hit(crashpoint::CrashPoint::TurnDoneAfterCommit);
        crate::latency::mark(crate::latency::Step::Queued, n);
        // The sender first: after a store call this thread has usually handed its scheduler
        // to another thread, so every wake-up below is a system call and another thread's
        // wake-up, and the answer's should start first.
        match claimed {
            Some(row) => self.handoff.give(row, commit),
            None => self.wakes.sender.notify_one(),
        }
        if spoken {
            self.wakes.voice.notify_one();
        }
        if let Some(l) = self.live.get_mut(id) {
            if l.outstanding == Some(n) {
                l.outstanding = None;
            }
            let _ = l.commands.try_send(Command::DoneAck(result.turn_id));
        }
        // The sender starts on the answer before the conductor's next store call (pi's "idle"
        // comes right behind its answer) holds the thread.
        tokio::task::yield_now().await;
        Ok(())
    }

    async fn gone(&mut self, id: &InstanceId, reason: GoneReason) -> Result<(), HubError> {
        let Some(l) = self.live.remove(id) else {
            return Ok(());
        };
        if let Some(turn) = l.outstanding {
            self.fence(turn).await;
        }
        tracing::info!(instance = %id, reason = ?reason, "instance gone");
        let others: Vec<(String, String)> = self
            .live
            .values()
            .map(|o| (o.identity.clone(), o.label.clone()))
            .collect();
        let now = self.db.now_ms();
        let key = id.0.clone();
        let final_turns = reason.process_gone() || l.transport != Transport::Shim;
        let disconnected = reason == GoneReason::Disconnected;
        // A hub-started pi that exited by itself is not started again at the next start.
        let exited = matches!(reason, GoneReason::Exited(_)) && l.transport == Transport::Rpc;
        let epoch = self.epoch;
        // The person reads what happened in plain words; status keeps the detail.
        let why = reason.describe();
        let detail = reason.detail();
        let gone = reason.clone();
        let cwd = l.cwd.clone();
        self.db
            .write(Durability::OnDisk, move |tx| {
                instances::mark_gone(tx, &key, &gone, now)?;
                if exited {
                    crate::spawned::exited(tx, &key, &detail, now)?;
                }
                // Its commands leave the bot's list (unless another live pi has them too).
                bot_commands::refresh(tx, now)?;
                if final_turns {
                    for t in turns::outstanding(tx)?
                        .into_iter()
                        .filter(|t| t.instance_id.as_deref() == Some(key.as_str()))
                    {
                        if turns::mark_interrupted(tx, t.id, &detail, now)? {
                            outbound::prompt_notice(
                                tx,
                                t.chat_id,
                                t.thread_id,
                                &texts::turn_interrupted(&l.label, &t.text),
                                &format!("notice:interrupted:{}", t.id),
                                now,
                            )?;
                            tools::send_waiting(tx, &t, &l.identity, now)?;
                        }
                    }
                }
                let selected = kv::get(tx, SELECTED)?;
                let mut now_selected = None;
                if selected.as_deref() == Some(l.identity.as_str()) {
                    match others.first() {
                        Some((identity, label)) => {
                            kv::set(tx, SELECTED, identity)?;
                            now_selected = Some(label.clone());
                        }
                        None => kv::delete(tx, SELECTED)?,
                    }
                } else if let Some(s) = selected {
                    now_selected = others
                        .iter()
                        .find(|(i, _)| *i == s)
                        .map(|(_, label)| label.clone());
                }
                let queued = turns::queued_counts(tx)?
                    .into_iter()
                    .find(|(i, _)| i.as_deref() == Some(l.identity.as_str()))
                    .map_or(0, |(_, n)| n);
                // The binding: kept (offline) for a lost connection, released with proof for a
                // disconnect. Each notice says what happens in the place it is posted.
                let threaded = state::threaded(tx)?;
                let topic = if disconnected {
                    events::disconnected(tx, &l.identity, epoch, now)?;
                    None
                } else {
                    events::went_offline(tx, &l.identity, now)?;
                    if threaded {
                        tables::binding(tx, &l.identity)?.map(|b| (b.chat_id, b.thread_id))
                    } else {
                        None
                    }
                };
                let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
                    return Ok(());
                };
                let purpose = format!("notice:gone:{key}");
                match (threaded, topic) {
                    // In its own topic, where messages wait for it.
                    (true, Some((chat, thread))) => outbound::notice(
                        tx,
                        chat,
                        Some(thread),
                        &texts::topic_went_offline(&l.label, &why, &cwd, queued),
                        &purpose,
                        now,
                    )?,
                    // In the main chat, where every message is asked about.
                    (true, None) => outbound::notice(
                        tx,
                        owner,
                        None,
                        &texts::threaded_gone(&l.label, &why, queued, disconnected),
                        &purpose,
                        now,
                    )?,
                    // Classic mode: the one chat, where the selection decides.
                    (false, _) => outbound::notice(
                        tx,
                        owner,
                        None,
                        &texts::instance_gone(&l.label, &why, queued, now_selected.as_deref()),
                        &purpose,
                        now,
                    )?,
                }
                Ok(())
            })
            .await?;
        self.wakes.sender.notify_one();
        self.wakes.topics.notify_one();
        Ok(())
    }

    /// Ends a turn's previews, waiting (a little) until no preview call for it is in flight.
    async fn fence(&self, turn: i64) {
        let (fenced, done) = oneshot::channel();
        let end = PreviewMsg::End { turn, fenced };
        if tokio::time::timeout(FENCE_WAIT, self.previews.send(end))
            .await
            .is_ok_and(|r| r.is_ok())
        {
            let _ = tokio::time::timeout(FENCE_WAIT, done).await;
        }
    }

    /// One of pi's streamed events: to the preview task, and what lasts into the outbox:
    /// activity (tools, thinking), commentary before the final answer, and work pi did that
    /// did not come from Telegram.
    async fn pi_event(
        &mut self,
        id: &InstanceId,
        turn: Option<TurnId>,
        event: PiEvent,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        let turn = turn.as_ref().and_then(TurnId::number);
        let kind = event
            .0
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // pi names a tool's arguments when it starts, not when it ends.
        let call = || {
            event
                .0
                .get("toolCallId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        if kind == "tool_execution_start" && turn.is_some() {
            let args = event.0.get("args").cloned().unwrap_or(Value::Null);
            l.tool_args.insert(call(), args);
        }
        if kind == "tool_execution_end"
            && turn.is_some()
            && let Some(mut r) = ToolRecord::from_event(&event.0)
        {
            if let Some(args) = l.tool_args.remove(&call()) {
                r.args = args;
            }
            l.tools.push(r);
        }
        let message_end = kind == "message_end";
        if let Some(n) = turn {
            // Best effort: a full queue drops a delta; the next block end corrects the text.
            let _ = self.previews.try_send(PreviewMsg::Event {
                turn: n,
                event: event.clone(),
            });
        }
        if !message_end {
            return Ok(());
        }
        let Some((text, stop, _)) = event.assistant_message() else {
            return Ok(());
        };
        let thinking = event
            .message()
            .map(activity::thinking_of)
            .unwrap_or_default();
        let at = event
            .message()
            .and_then(|m| m.get("timestamp"))
            .and_then(Value::as_i64)
            .unwrap_or_else(|| self.db.now_ms());
        let settings = self.assistant.current();
        let tools = std::mem::take(&mut l.tools);
        // What this message end shows: for a Telegram turn its tools, its thinking and the
        // text before a tool call; for work from elsewhere the text, pushed. Most show nothing
        // (a final answer comes with the turn's result): no store call for them, right before
        // the answer.
        let said = !text.trim().is_empty();
        let show_tools = settings.activity.tools() && !tools.is_empty();
        let show_thinking = settings.activity.thinking() && !thinking.trim().is_empty();
        let commentary = stop.as_deref() == Some("toolUse") && said;
        let push =
            settings.proactive_push && matches!(stop.as_deref(), Some("stop" | "toolUse")) && said;
        let shown = match turn {
            Some(_) => show_tools || show_thinking || commentary,
            None => push,
        };
        if !shown {
            return Ok(());
        }
        let identity = l.identity.clone();
        let label = l.label.clone();
        let several = self.live.len() > 1;
        let now = self.db.now_ms();
        // Outbox rows only: they reach Telegram after the sender's synced mark.
        let written = self
            .db
            .write(Durability::Lazy, move |tx| {
                let mut written = 0;
                match turn {
                    Some(n) => {
                        let Some(t) = turns::get(tx, n)? else {
                            return Ok(0);
                        };
                        if t.state == TurnState::Done {
                            return Ok(0);
                        }
                        let place = outbound::place_of_turn(tx, &t, &identity)?;
                        let meta = |purpose: &'static str| outbound::Meta {
                            purpose,
                            source_update_id: t.source_update_id,
                            identity: &identity,
                            turn_id: Some(n),
                            resend: false,
                        };
                        if show_tools {
                            let (h, p) = activity::tools_message(&tools);
                            let purpose = format!("tools:{n}:{at}");
                            outbound::enqueue_html(
                                tx,
                                place,
                                (&h, &p),
                                outbound::Meta {
                                    purpose: &purpose,
                                    ..meta("")
                                },
                                now,
                            )?;
                            written += 1;
                        }
                        if show_thinking {
                            let (h, p) = activity::thinking_message(&thinking);
                            let purpose = format!("thinking:{n}:{at}");
                            outbound::enqueue_html(
                                tx,
                                place,
                                (&h, &p),
                                outbound::Meta {
                                    purpose: &purpose,
                                    ..meta("")
                                },
                                now,
                            )?;
                            written += 1;
                        }
                        // Text pi wrote before calling tools: delivered once, before the
                        // final answer (which comes with the turn's result).
                        if commentary {
                            let purpose = format!("commentary:{n}:{at}");
                            written += outbound::enqueue_markdown(
                                tx,
                                place,
                                texts::trim_invisible(&text),
                                settings.rendering,
                                outbound::Meta {
                                    purpose: &purpose,
                                    resend: true,
                                    ..meta("")
                                },
                                now,
                            )?;
                        }
                    }
                    // Work that did not come from Telegram: pushed where this pi lives.
                    None => {
                        let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
                            return Ok(0);
                        };
                        let place = outbound::place_of_instance(tx, &identity, owner)?;
                        let label = (several && !place.own_topic).then_some(label.as_str());
                        let markdown =
                            texts::local_work_markdown(label, texts::trim_invisible(&text));
                        let purpose = format!("local:{identity}:{at}");
                        written += outbound::enqueue_markdown(
                            tx,
                            place,
                            &markdown,
                            settings.rendering,
                            outbound::Meta {
                                purpose: &purpose,
                                source_update_id: None,
                                identity: &identity,
                                turn_id: None,
                                resend: true,
                            },
                            now,
                        )?;
                    }
                }
                Ok(written)
            })
            .await?;
        if written > 0 {
            self.wakes.sender.notify_one();
        }
        Ok(())
    }

    /// Gives each ready instance its next queued turn. `true` when a turn left the queue.
    async fn dispatch(&mut self) -> Result<bool, HubError> {
        let mut changed = false;
        let ready: Vec<InstanceId> = self
            .live
            .iter()
            .filter(|(_, l)| l.ready())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ready {
            let Some(l) = self.live.get(&id) else {
                continue;
            };
            let (identity, pid, transport) = (l.identity.clone(), l.pid, l.transport);
            let key = id.0.clone();
            let now = self.db.now_ms();
            let (turn, skipped) = self
                .db
                .write(Durability::BeforeTelling(l.reach), move |tx| {
                    let mut skipped = 0;
                    let t = loop {
                        let Some(t) = turns::next_queued(tx, &identity)? else {
                            return Ok((None, skipped));
                        };
                        if !t.skip {
                            break t;
                        }
                        // Skipped: dropped without a model turn, and the person is told.
                        if turns::drop_skipped(tx, t.id, now)? {
                            outbound::text(
                                tx,
                                &outbound::Text {
                                    chat: t.chat_id,
                                    thread: t.thread_id,
                                    text: &texts::skipped(&t.text),
                                    reply_to: t.message_id,
                                    markup: None,
                                    purpose: &format!("skipped:{}", t.id),
                                    source_update_id: t.source_update_id,
                                    // The only trace of the message that was dropped.
                                    resend: true,
                                },
                                now,
                            )?;
                            skipped += 1;
                        }
                    };
                    turns::mark_dispatched(tx, t.id, &key, pid, transport, now)?;
                    let place = outbound::place_of_turn(tx, &t, &identity)?;
                    // Read here rather than after the commit: one store round trip less
                    // between the person's message and pi.
                    let files = store::files::of_turn(tx, t.id)?;
                    crashpoint::hit(crashpoint::CrashPoint::DispatchBeforeCommit);
                    Ok((Some((t, place, files)), skipped))
                })
                .await?;
            if skipped > 0 {
                changed = true;
                self.wakes.sender.notify_one();
            }
            let Some((turn, place, files)) = turn else {
                continue;
            };
            changed = true;
            crashpoint::hit(crashpoint::CrashPoint::DispatchAfterCommit);
            let Some(l) = self.live.get_mut(&id) else {
                continue;
            };
            // Nothing but this task changes `live`, and it did not since the readiness check.
            if crate::never!(
                !l.ready(),
                "turn {} dispatched to {id}, which is not ready (outstanding {:?})",
                turn.id,
                l.outstanding
            ) {
                let n = turn.id;
                self.db
                    .write(Durability::OnDisk, move |tx| {
                        turns::requeue(tx, n).map(drop)
                    })
                    .await?;
                continue;
            }
            let images = photos_of(files).await;
            let prompt = Command::Prompt {
                turn: TurnId::from_number(turn.id),
                text: turn.prompt(),
                images,
            };
            if l.commands.try_send(prompt).is_err() {
                // The link is closing or stuck: the prompt never left.
                let n = turn.id;
                self.db
                    .write(Durability::OnDisk, move |tx| {
                        turns::requeue(tx, n).map(drop)
                    })
                    .await?;
                continue;
            }
            // Busy-ness comes from pi's own events; `outstanding` alone keeps a second turn out.
            l.outstanding = Some(turn.id);
            let _ = self.previews.try_send(PreviewMsg::Begin {
                turn: turn.id,
                chat: place.chat,
                thread: place.thread,
            });
            tracing::debug!(instance = %id, turn = turn.id, "dispatched");
            crate::latency::mark(crate::latency::Step::Dispatched, turn.id);
            crashpoint::hit(crashpoint::CrashPoint::DispatchAfterSend);
            // The link's task, just woken on this thread, writes the prompt before the
            // conductor's next store call holds the thread.
            tokio::task::yield_now().await;
        }
        Ok(changed)
    }

    /// Footer status of extension instances: connected, and how many messages wait for them.
    async fn update_statuses(&mut self) -> Result<(), HubError> {
        if !self.live.values().any(|l| l.transport == Transport::Shim) {
            return Ok(());
        }
        let counts = self.db.read(turns::queued_counts).await?;
        for l in self
            .live
            .values_mut()
            .filter(|l| l.transport == Transport::Shim)
        {
            let queued = counts
                .iter()
                .find(|(i, _)| i.as_deref() == Some(l.identity.as_str()))
                .map_or(0, |(_, n)| *n);
            let status = if queued > 0 {
                format!("telegram: connected · {queued} queued")
            } else {
                "telegram: connected".to_owned()
            };
            if l.last_status.as_deref() != Some(status.as_str()) {
                let _ = l
                    .commands
                    .try_send(Command::SetStatus(Some(status.clone())));
                l.last_status = Some(status);
            }
        }
        Ok(())
    }
}

/// The largest photo handed to pi as an image (larger ones stay files on disk).
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// At most this much image data in one prompt (the extension reads hub lines up to 64 MiB;
/// base64 makes 32 MB about 43).
const MAX_PROMPT_IMAGE_BYTES: u64 = 32 * 1024 * 1024;

/// The photos of a turn, as images for pi's prompt. A photo that cannot be read (removed,
/// too large) is left out: the prompt still names its file.
async fn photos_of(saved: Vec<store::files::File>) -> Vec<wire::ImagePart> {
    use base64::Engine as _;
    let mut images = Vec::new();
    let mut total = 0u64;
    for f in saved
        .into_iter()
        .filter(|f| f.kind == "photo" && f.state == store::files::FileState::Saved)
    {
        let Some(path) = f.path else { continue };
        let size = tokio::fs::metadata(&path)
            .await
            .map_or(u64::MAX, |m| m.len());
        let fits = size <= MAX_IMAGE_BYTES && total + size <= MAX_PROMPT_IMAGE_BYTES;
        if fits {
            total += size;
        }
        match tokio::fs::read(&path).await {
            Ok(bytes) if fits => images.push(wire::ImagePart {
                kind: "image".into(),
                // What the bytes are, whatever was declared (Telegram photos are JPEG).
                mime_type: sniff_image(&bytes)
                    .map(str::to_owned)
                    .or(f.mime)
                    .unwrap_or_else(|| "image/jpeg".into()),
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
            Ok(_) => tracing::info!(file = f.id, "a photo too large to hand to pi as an image"),
            Err(e) => tracing::warn!(file = f.id, error = %e, "a photo could not be read for pi"),
        }
    }
    images
}

/// The image type of `bytes` by their signature.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => Some("image/webp"),
        _ => None,
    }
}

/// How long the conductor waits for the preview task to fence a turn.
const FENCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a connecting instance reports about turns it had.
struct Reported<'a> {
    transport: Transport,
    pid: Option<i64>,
    identity: &'a str,
    instance_id: &'a str,
    received: &'a [TurnId],
    completed: &'a [TurnResult],
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
    for t in turns::outstanding(tx)? {
        let turn_id = TurnId::from_number(t.id);
        if same_process(&t) {
            if let Some(result) = r.completed.iter().find(|c| c.turn_id == turn_id) {
                finish(tx, &t, result, ctx, now)?;
                done_acks.push(turn_id);
            } else if r.received.contains(&turn_id) {
                // This link carries it on: its result comes back through this link.
                turns::adopt(tx, t.id, r.instance_id)?;
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
            if turns::mark_interrupted(tx, t.id, "pi exited", now)? {
                outbound::prompt_notice(
                    tx,
                    t.chat_id,
                    t.thread_id,
                    &texts::turn_interrupted(&label_of(r.identity), &t.text),
                    &format!("notice:interrupted:{}", t.id),
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

fn process_alive(pid: i64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Stores a turn's result and queues its answer (once: a result reported twice is ignored).
fn finish(
    tx: &Connection,
    t: &Turn,
    r: &TurnResult,
    ctx: &AnswerCtx<'_>,
    now: i64,
) -> Result<bool, StoreError> {
    if !turns::mark_done(tx, t.id, &r.text, r.aborted, r.error.as_deref(), now)? {
        return Ok(false);
    }
    let place = outbound::place_of_turn(tx, t, ctx.identity)?;
    // In its own topic the instance is known; elsewhere a label says which pi answers when
    // several talk.
    let label = if place.own_topic { None } else { ctx.label };
    // Hidden actions pi wrote (buttons) leave the visible text.
    let extracted = crate::markup::extract(&r.text);
    for rejected in &extracted.rejected {
        // The reason may quote the comment (pi's words): only at debug.
        tracing::info!(turn = t.id, line = rejected.line, kind = %rejected.kind, "an action comment in an answer was not understood");
        tracing::debug!(turn = t.id, problem = %rejected, "the action comment's problem");
    }
    let handled = r.handled.then_some(t.text.as_str());
    let markdown = texts::answer_markdown(
        label,
        &extracted.text,
        r.aborted,
        r.error.as_deref(),
        handled,
    );
    let owner = kv::get_i64(tx, kv::OWNER)?.unwrap_or(t.chat_id);
    let markup =
        crate::menu::prompt_buttons(tx, ctx.clock, owner, ctx.identity, &extracted.buttons, now)?;
    // Files pi attached during the turn go right after the answer.
    let (files, caption) = tools::take_waiting(tx, t.id)?;
    // Spoken when the person's voice reply mode says so (a voice note in `mirror`, every
    // answer in `always`), unless pi chose what to say itself.
    let (mode, transcript) = ctx.voice;
    let from_voice = store::files::of_turn(tx, t.id)?
        .iter()
        .any(|f| matches!(f.kind.as_str(), "voice" | "audio"));
    let automatic = match mode {
        assistant::VoiceReply::Always => true,
        assistant::VoiceReply::Mirror => from_voice,
        assistant::VoiceReply::Hidden => false,
    } && extracted.voices.is_empty()
        && !r.aborted
        && r.error.is_none()
        && !extracted.text.trim().is_empty();
    let spoken = automatic.then(|| crate::voice::Spoken {
        text: extracted.text.trim().to_owned(),
        lang: None,
        rate: None,
        transcript,
    });
    outbound::enqueue_markdown_with(
        tx,
        place,
        &markdown,
        ctx.rendering,
        markup,
        spoken.as_ref(),
        outbound::Meta {
            purpose: &format!("answer:{}", t.id),
            source_update_id: t.source_update_id,
            identity: ctx.identity,
            turn_id: Some(t.id),
            // A final answer must arrive: after a crash mid-send it is sent again.
            resend: true,
        },
        now,
    )?;
    for (i, v) in extracted.voices.iter().enumerate() {
        let spoken = crate::voice::Spoken {
            text: v.text.clone(),
            lang: v.lang.clone(),
            rate: v.rate.clone(),
            transcript,
        };
        outbound::enqueue_voice(
            tx,
            outbound::Place {
                reply_to: None,
                ..place
            },
            &spoken,
            outbound::Meta {
                purpose: &format!("voice:{}:{i}", t.id),
                source_update_id: t.source_update_id,
                identity: ctx.identity,
                turn_id: Some(t.id),
                resend: false,
            },
            now,
        )?;
    }
    if !files.is_empty() {
        outbound::enqueue_files(
            tx,
            outbound::Place {
                reply_to: None,
                ..place
            },
            &files,
            caption.as_deref(),
            outbound::Meta {
                purpose: &format!("attach:{}", t.id),
                source_update_id: t.source_update_id,
                identity: ctx.identity,
                turn_id: Some(t.id),
                resend: false,
            },
            now,
        )?;
    }
    Ok(spoken.is_some() || !extracted.voices.is_empty())
}

/// Whether `t` was dispatched to instance `id` and is still open.
fn is_own(t: &Turn, id: &InstanceId) -> bool {
    t.instance_id.as_deref() == Some(id.0.as_str())
        && matches!(t.state, TurnState::Dispatched | TurnState::Acked)
}
