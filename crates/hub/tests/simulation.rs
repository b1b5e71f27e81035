//! The whole hub in a simulation: the real poller, worker, conductor, sender and topics tasks,
//! spawned by the code `serve` spawns them with (`hub::serve::Hub`), over a real SQLite store, on a
//! current-thread tokio runtime with paused (virtual) time, a simulated `hub::clock::Clock` and the
//! store called inline (`Db::simulated`), against
//!
//! - an in-memory Telegram behind `hub::bot_api::BotApi` (updates, messages, topics) that
//!   injects faults: 5xx, a request dropped before it arrives, a call applied and its answer
//!   lost (commit unknown), flood waits, and topics the person deletes (`thread not found`);
//! - fake pi processes (extension instances): attach, detach, reattach with what they received
//!   and completed, answer, crash;
//! - hub crashes at random steps, mid-work: every task aborted where it stands and every
//!   in-memory part dropped, then a new hub built from the SQLite file (as SIGKILL and a restart
//!   leave it).
//!
//! After every step the invariants of ARCHITECTURE.md's table are checked (see `check`); at the
//! end of a sequence a drain phase (no faults, every pi attached, the person answering the
//! hub's questions, 40 virtual minutes) checks that nothing waits forever: every update
//! handled, every answer delivered.
//!
//! `SIM_SEED=n` replays one seed, `SIM_SEEDS` (default 6) and `SIM_STEPS` (default 400) make
//! longer runs, `SIM_TRACE=1` prints what happens. A failure names the seed and the step.
//! Seeds run on as many threads as the machine has cores.
//!
//! Not covered: previews, inbound files, voice, retention, the socket/RPC links (pi is driven
//! through the conductor's channel, as the links do), webhooks and 409 conflicts; the person
//! writes, taps and deletes topics, but sends no commands, edits or reactions. Tasks the
//! conductor spawns itself (asking pi for its commands, controls) are not aborted by a
//! simulated crash; here they end at once (the fake pi answers every request with an error).
//! tokio's `select!` picks among ready branches from an unseeded generator (settable only with
//! `tokio_unstable`): a replay takes the same decisions, and in practice (traces compared) the
//! same interleaving.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use hub::db::Durability;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hub::bot_api::{Api, BotApi, Call};
use hub::clock::Clock;
use hub::config::PairingMode;
use hub::db::Db;
use hub::incoming::poller::PollSettings;
use hub::incoming::worker::WorkerSettings;
use hub::outgoing::topics::TopicSettings;
use hub::pi::instance::{
    Attach, Command, ConductorMsg, GoneReason, InstanceId, LinkEvent, Reach, Transport,
};
use hub::serve::{Hub, Parts, Tasks};
use serde_json::{Value, json};
use store::{Store, kv};
use telegram::{ApiError, ApiErrorKind, CallError, Pacer, PacingConfig, RawUpdate, Upload};
use tg_fake::faults::Rng;
use tokio::sync::{Notify, mpsc, oneshot};
use wire::{TurnId, TurnResult};

const OWNER: i64 = 1001;
const IDENTITIES: [&str; 3] = ["/p/alpha", "/p/beta", "/p/gamma"];
const START_MS: i64 = 1_767_000_000_000;

// ---------------------------------------------------------------- the fake Telegram

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    ServerError,
    DropBefore,
    CommitThenDrop,
    Flood,
}

struct Tg {
    rng: Rng,
    /// Probability that a call fails (0 in the drain phase).
    fault_rate: f64,
    threaded: bool,
    /// Every update the person caused, in order.
    updates: Vec<(i64, String)>,
    next_update: i64,
    /// Updates below this are confirmed (the last offset the hub sent).
    confirmed: i64,
    /// Topics of the owner's chat: thread -> alive.
    topics: BTreeMap<i64, bool>,
    /// Topics the person deleted (the hub learns it at its next send there).
    deleted_by_person: BTreeSet<i64>,
    next_thread: i64,
    next_message: i64,
    /// Messages the person can see (with their buttons): (message_id, thread, params).
    shown: Vec<(i64, Option<i64>, Value)>,
    /// Copies of each turn's answer that reached the chat.
    answers: BTreeMap<i64, usize>,
    /// Per turn: calls carrying its answer that were applied without the hub learning it (a
    /// lost answer, or a crash while the call was in flight). Each allows one extra copy.
    windows: BTreeMap<i64, usize>,
    /// Applied calls whose answer has not reached the hub yet: call -> answer turns in it, the
    /// topic it created.
    inflight: BTreeMap<u64, (Vec<i64>, Option<i64>)>,
    /// Topics created by a call whose answer the hub never got: it cannot account for them
    /// (an ambiguous intent stands for each until the person settles it).
    unknown_topics: BTreeSet<i64>,
    next_call: u64,
    faults: BTreeMap<&'static str, usize>,
}

struct FakeTg {
    state: Mutex<Tg>,
    arrived: Notify,
}

/// The answer marker a fake pi writes: `ANS<turn>Z`.
fn answer_turns(text: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("ANS") {
        rest = &rest[i + 3..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && rest[digits.len()..].starts_with('Z') {
            out.push(digits.parse().unwrap());
        }
    }
    out
}

fn api_error(code: u16, description: &str) -> CallError {
    CallError::Api(ApiError {
        code,
        description: description.into(),
        kind: ApiErrorKind::classify(code, description),
    })
}

impl FakeTg {
    fn new(seed: u64, threaded: bool) -> Self {
        Self {
            state: Mutex::new(Tg {
                rng: Rng::new(seed ^ 0x7e1e_9a3f),
                fault_rate: 0.0,
                threaded,
                updates: Vec::new(),
                next_update: 1,
                confirmed: 1,
                topics: BTreeMap::new(),
                deleted_by_person: BTreeSet::new(),
                next_thread: 100,
                next_message: 1,
                shown: Vec::new(),
                answers: BTreeMap::new(),
                windows: BTreeMap::new(),
                inflight: BTreeMap::new(),
                unknown_topics: BTreeSet::new(),
                next_call: 0,
                faults: BTreeMap::new(),
            }),
            arrived: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tg> {
        self.state.lock().unwrap()
    }

    /// The person does something: one update.
    fn push(&self, body: impl FnOnce(i64) -> Value) {
        {
            let mut s = self.lock();
            let id = s.next_update;
            s.next_update += 1;
            let json = body(id).to_string();
            s.updates.push((id, json));
        }
        self.arrived.notify_waiters();
    }

    fn draw_fault(s: &mut Tg) -> Option<Fault> {
        if s.rng.next_f64() >= s.fault_rate {
            return None;
        }
        let f = match s.rng.next_u64() % 4 {
            0 => Fault::ServerError,
            1 => Fault::DropBefore,
            2 => Fault::CommitThenDrop,
            _ => Fault::Flood,
        };
        *s.faults
            .entry(match f {
                Fault::ServerError => "5xx",
                Fault::DropBefore => "drop before",
                Fault::CommitThenDrop => "commit then drop",
                Fault::Flood => "flood",
            })
            .or_default() += 1;
        Some(f)
    }

    /// Applies a call to the chat (the world lock held, nothing awaited).
    fn apply(s: &mut Tg, method: &str, params: &Value) -> Result<Value, CallError> {
        let thread = params.get("message_thread_id").and_then(Value::as_i64);
        match method {
            "getMe" => Ok(json!({ "id": 1, "is_bot": true, "username": "bot",
                                   "has_topics_enabled": s.threaded })),
            "getWebhookInfo" => Ok(json!({ "url": "" })),
            "createForumTopic" => {
                let t = s.next_thread;
                s.next_thread += 1;
                s.topics.insert(t, true);
                trace(|| format!("telegram: topic {t} created ({})", params["name"]));
                Ok(json!({ "message_thread_id": t, "name": params["name"] }))
            }
            "deleteForumTopic" => match thread.and_then(|t| s.topics.get_mut(&t)) {
                Some(alive) if *alive => {
                    *alive = false;
                    trace(|| format!("telegram: topic {thread:?} deleted by the bot"));
                    Ok(json!(true))
                }
                _ => Err(api_error(400, "Bad Request: message thread not found")),
            },
            m if m.starts_with("send") => {
                if let Some(t) = thread
                    && s.topics.get(&t) != Some(&true)
                {
                    return Err(api_error(400, "Bad Request: message thread not found"));
                }
                let id = s.next_message;
                s.next_message += 1;
                for turn in answer_turns(&params.to_string()) {
                    *s.answers.entry(turn).or_default() += 1;
                }
                s.shown.push((id, thread, params.clone()));
                Ok(json!({ "message_id": id, "date": 0, "chat": { "id": OWNER } }))
            }
            _ => Ok(json!(true)),
        }
    }

    async fn call_inner(&self, method: &str, params: &Value) -> Result<Value, CallError> {
        // The request travels (a few virtual milliseconds): a crash now leaves nothing applied.
        let latency = Duration::from_millis(1 + self.lock().rng.next_u64() % 20);
        tokio::time::sleep(latency).await;
        let (fault, result, call) = {
            let mut s = self.lock();
            let fault = Self::draw_fault(&mut s);
            if let Some(f) = fault {
                trace(|| format!("telegram: {method} gets {f:?}"));
            }
            match fault {
                Some(Fault::ServerError) => {
                    return Err(CallError::Retryable(format!("{method}: 502 Bad Gateway")));
                }
                Some(Fault::DropBefore) => {
                    return Err(CallError::Retryable(format!(
                        "{method}: connection reset before the request was sent"
                    )));
                }
                Some(Fault::Flood) => {
                    return Err(CallError::Flood {
                        retry_after: Duration::from_secs(1 + s.rng.next_u64() % 5),
                        chat_id: params.get("chat_id").and_then(Value::as_i64),
                    });
                }
                _ => {}
            }
            let result = Self::apply(&mut s, method, params);
            let turns = if result.is_ok() {
                answer_turns(&params.to_string())
            } else {
                Vec::new()
            };
            let created = match (&result, method) {
                (Ok(v), "createForumTopic") => v["message_thread_id"].as_i64(),
                _ => None,
            };
            let call = s.next_call;
            s.next_call += 1;
            s.inflight.insert(call, (turns, created));
            (fault, result, call)
        };
        // The answer travels back: a crash now is a commit of unknown outcome.
        tokio::time::sleep(latency).await;
        let mut s = self.lock();
        let (turns, created) = s.inflight.remove(&call).unwrap_or_default();
        if fault == Some(Fault::CommitThenDrop) && result.is_ok() {
            s.unknown_topics.extend(created);
            for t in turns {
                *s.windows.entry(t).or_default() += 1;
            }
            return Err(match telegram::safety(method) {
                telegram::Safety::Repeatable => {
                    CallError::Retryable(format!("{method}: connection lost"))
                }
                telegram::Safety::NonRepeatable => {
                    CallError::CommitUnknown(format!("{method}: connection lost after sending"))
                }
            });
        }
        result
    }

    /// A hub crash: calls in flight had their effect, and the hub never learns it.
    fn crash_in_flight(&self) {
        let mut s = self.lock();
        let inflight = std::mem::take(&mut s.inflight);
        if !inflight.is_empty() {
            *s.faults
                .entry("hub crash with a call applied, unanswered")
                .or_default() += 1;
        }
        for (turns, created) in inflight.into_values() {
            s.unknown_topics.extend(created);
            for t in turns {
                *s.windows.entry(t).or_default() += 1;
            }
        }
    }

    async fn updates(
        &self,
        offset: Option<i64>,
        limit: u32,
        timeout: Duration,
    ) -> Result<Vec<RawUpdate>, CallError> {
        tokio::task::yield_now().await;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.arrived.notified();
            {
                let mut s = self.lock();
                // Whatever the fault, getUpdates is a read: nothing is confirmed by it.
                if Self::draw_fault(&mut s).is_some() {
                    return Err(CallError::Retryable("getUpdates: 502 Bad Gateway".into()));
                }
                if let Some(o) = offset {
                    s.confirmed = s.confirmed.max(o);
                }
                let from = s.confirmed;
                let batch: Vec<RawUpdate> = s
                    .updates
                    .iter()
                    .filter(|(id, _)| *id >= from)
                    .take(limit as usize)
                    .map(|(id, json)| RawUpdate {
                        update_id: *id,
                        json: json.clone(),
                    })
                    .collect();
                if !batch.is_empty() {
                    return Ok(batch);
                }
            }
            tokio::select! {
                () = arrived => {}
                () = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
            }
        }
    }
}

impl BotApi for FakeTg {
    fn call<'a>(&'a self, method: &'a str, params: &'a Value) -> Call<'a, Value> {
        Box::pin(self.call_inner(method, params))
    }

    fn call_multipart<'a>(
        &'a self,
        method: &'a str,
        params: &'a Value,
        _files: Vec<Upload>,
    ) -> Call<'a, Value> {
        Box::pin(self.call_inner(method, params))
    }

    fn get_updates<'a>(
        &'a self,
        offset: Option<i64>,
        limit: u32,
        timeout: Duration,
        _allowed_updates: &'a [&'a str],
    ) -> Call<'a, Vec<RawUpdate>> {
        Box::pin(self.updates(offset, limit, timeout))
    }
}

// ---------------------------------------------------------------- fake pi processes

struct Conn {
    id: InstanceId,
    commands: mpsc::Receiver<Command>,
}

struct Pi {
    pid: i64,
    identity: String,
    conn: Option<Conn>,
    /// Prompts it has (acked), not finished.
    working: Vec<i64>,
    /// Finished, not yet confirmed durable by the hub (`DoneAck`).
    completed: Vec<TurnResult>,
}

// ---------------------------------------------------------------- the hub

/// A hub on the SQLite file at `path`, spawned as `serve` spawns one (`hub::serve::Hub`), on
/// the simulation's clock and Telegram.
async fn start_hub(path: &std::path::Path, clock: &Clock, api: &Api, hubs: i64) -> Tasks {
    let store = Arc::new(Store::open(path).unwrap());
    let db = Db::simulated(store, clock.clone());
    let now = db.now_ms();
    let (epoch, _) = db
        .write(Durability::OnDisk, move |tx| {
            hub::serve::take_over(tx, 50_000 + hubs, "shell", now)
        })
        .await
        .unwrap();
    // No telegram.json, and no tool call sends a file here.
    let no_config = std::env::temp_dir().join("pi-telegram-sim-no-such-config.json");
    let parts = Parts {
        db,
        api: api.clone(),
        pacer: Arc::new(tokio::sync::Mutex::new(Pacer::new(PacingConfig::default()))),
        epoch,
        assistant: Arc::new(hub::assistant::Watched::new(
            no_config.clone(),
            hub::paths::ProfileName::default_profile(),
        )),
        conductor: hub::pi::conductor::ConductorSettings {
            config_path: no_config.clone(),
            tools: hub::pi::conductor::ToolSettings {
                out_dir: std::env::temp_dir().join("pi-telegram-test-out"),
                max_bytes: 50 * 1024 * 1024,
            },
        },
        worker: WorkerSettings {
            bot_username: "bot".into(),
            pairing: PairingMode::Code,
            config_path: no_config,
            profile: hub::paths::ProfileName::default_profile(),
            epoch,
            title_template: threads::DEFAULT_TITLE.into(),
        },
        poll: PollSettings {
            timeout: Duration::from_secs(25),
            conflict_grace: Duration::from_secs(60),
        },
        topics: TopicSettings {
            title_template: threads::DEFAULT_TITLE.into(),
            offline_retention: Duration::from_secs(7 * 24 * 3600),
            probe_every: Duration::from_secs(600),
        },
    };
    // No extras (previews, downloads, voice, retention): outside this simulation.
    Hub::new(parts).spawn(None)
}

// ---------------------------------------------------------------- the simulation

struct Sim {
    seed: u64,
    step: usize,
    rng: Rng,
    clock: Clock,
    path: std::path::PathBuf,
    tg: Arc<FakeTg>,
    api: Api,
    hub: Tasks,
    hubs: i64,
    pis: Vec<Pi>,
    next_pid: i64,
    /// Every process each turn's prompt reached (read by pi).
    prompted: BTreeMap<i64, BTreeSet<i64>>,
    /// Turns a pi finished and the hub confirmed durable.
    confirmed_done: BTreeSet<i64>,
    /// The first violation seen by the fake pi side (checked with the others).
    violation: Option<String>,
    crashes: usize,
    /// Buttons tapped (the drain phase taps each question's answer once).
    tapped: BTreeSet<String>,
    /// Steps in the run (the drain phase comes after).
    steps: usize,
    /// Every update below this was found journaled.
    journal_ok_upto: i64,
    /// Turns prompted or finished since the last check.
    fresh: BTreeSet<i64>,
}

impl Sim {
    async fn new(seed: u64, dir: &std::path::Path) -> Self {
        let threaded = seed % 2 == 1;
        let path = dir.join("state.db");
        {
            let store = Store::open(&path).unwrap();
            store
                .write(|tx| {
                    kv::set_i64(tx, kv::OWNER, OWNER)?;
                    kv::set(
                        tx,
                        store::threads::MODE,
                        if threaded { "threaded" } else { "classic" },
                    )
                })
                .unwrap();
        }
        let clock = Clock::simulated(START_MS, seed);
        let tg = Arc::new(FakeTg::new(seed, threaded));
        let api: Api = tg.clone();
        let hub = start_hub(&path, &clock, &api, 0).await;
        Self {
            seed,
            step: 0,
            rng: Rng::new(seed),
            clock,
            path,
            tg,
            api,
            hub,
            hubs: 0,
            pis: Vec::new(),
            next_pid: 7_000_000,
            prompted: BTreeMap::new(),
            confirmed_done: BTreeSet::new(),
            violation: None,
            crashes: 0,
            tapped: BTreeSet::new(),
            steps: usize::MAX,
            journal_ok_upto: 1,
            fresh: BTreeSet::new(),
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "SIM_SEED={} failed at step {}: {what}",
            self.seed, self.step
        );
    }

    /// Lets the hub run for `ms` of virtual time, the pis answering what reaches them.
    async fn run_for(&mut self, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        for _ in 0..20 {
            if !self.drain_pis().await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A hub task that ended on its own is a failure (they end only on stop).
        if self.hub.any_ended() {
            self.fail("a hub task ended");
        }
    }

    /// Each connected pi reads its commands (as the extension does: a prompt is acked at
    /// once). Returns whether anything was read.
    async fn drain_pis(&mut self) -> bool {
        let mut any = false;
        let mut events = Vec::new();
        for p in &mut self.pis {
            let Some(conn) = &mut p.conn else { continue };
            while let Ok(cmd) = conn.commands.try_recv() {
                any = true;
                match cmd {
                    Command::Prompt { turn, .. } => {
                        let n = turn.number().unwrap();
                        trace(|| format!("pi {} got the prompt of turn {n}", p.pid));
                        let to = self.prompted.entry(n).or_default();
                        if !to.insert(p.pid) || to.len() > 1 {
                            self.violation.get_or_insert(format!(
                                "turn {n} prompted twice (processes {to:?})"
                            ));
                        }
                        p.working.push(n);
                        self.fresh.insert(n);
                        events.push((conn.id.clone(), LinkEvent::Acked { turn }));
                    }
                    Command::DoneAck(turn) => {
                        let n = turn.number().unwrap();
                        trace(|| format!("pi {} got the done ack of turn {n}", p.pid));
                        p.completed.retain(|c| c.turn_id != turn);
                        self.confirmed_done.insert(n);
                        self.fresh.insert(n);
                    }
                    Command::Request(_, answer) => {
                        let _ = answer.send(Err("not in this simulation".into()));
                    }
                    Command::Close(_) => {}
                    _ => {}
                }
            }
        }
        for (id, e) in events {
            let _ = self.hub.conductor().send(ConductorMsg::Link(id, e)).await;
        }
        any
    }

    async fn attach(&mut self, i: usize) {
        let p = &self.pis[i];
        if p.conn.is_some() {
            return;
        }
        let (commands, rx) = mpsc::channel(256);
        let (reply, id_rx) = oneshot::channel();
        let attach = Attach {
            transport: Transport::Shim,
            // Both kinds of commit before telling pi: every other simulated pi is remote.
            reach: if i.is_multiple_of(2) {
                Reach::ThisMachine
            } else {
                Reach::OtherMachine
            },
            pid: Some(p.pid),
            cwd: p.identity.clone(),
            session_id: None,
            session_name: None,
            session_file: None,
            idle: true,
            pending: false,
            received: p.working.iter().map(|n| TurnId::from_number(*n)).collect(),
            completed: p.completed.clone(),
            store_id: None,
            commands,
            tools_token: None,
        };
        if self
            .hub
            .conductor()
            .send(ConductorMsg::Attach(attach, reply))
            .await
            .is_err()
        {
            return;
        }
        if let Ok(id) = id_rx.await {
            self.pis[i].conn = Some(Conn { id, commands: rx });
        }
    }

    /// A new pi process for an identity that has none.
    async fn spawn_pi(&mut self) {
        let free: Vec<&str> = IDENTITIES
            .iter()
            .copied()
            .filter(|id| !self.pis.iter().any(|p| p.identity == *id))
            .collect();
        if free.is_empty() {
            return;
        }
        let identity = free[self.pick(free.len())].to_owned();
        self.next_pid += 1;
        self.pis.push(Pi {
            pid: self.next_pid,
            identity,
            conn: None,
            working: Vec::new(),
            completed: Vec::new(),
        });
        self.attach(self.pis.len() - 1).await;
    }

    async fn detach(&mut self) {
        let connected: Vec<usize> = (0..self.pis.len())
            .filter(|i| self.pis[*i].conn.is_some())
            .collect();
        if connected.is_empty() {
            return;
        }
        let i = connected[self.pick(connected.len())];
        // Unread commands die with the connection: pi never got them.
        let conn = self.pis[i].conn.take().unwrap();
        self.gone(conn.id, "simulated").await;
    }

    /// The link of instance `id` reports its pi gone.
    async fn gone(&self, id: InstanceId, why: &str) {
        let reason = GoneReason::ConnectionLost(why.into());
        let _ = self
            .hub
            .conductor()
            .send(ConductorMsg::Link(id, LinkEvent::Gone(reason)))
            .await;
    }

    async fn crash_pi(&mut self) {
        if self.pis.is_empty() {
            return;
        }
        let i = self.pick(self.pis.len());
        let p = self.pis.remove(i);
        if let Some(conn) = p.conn {
            self.gone(conn.id, "pi crashed").await;
        }
    }

    async fn answer(&mut self) {
        let busy: Vec<usize> = (0..self.pis.len())
            .filter(|i| self.pis[*i].conn.is_some() && !self.pis[*i].working.is_empty())
            .collect();
        if busy.is_empty() {
            return;
        }
        let i = busy[self.pick(busy.len())];
        let turn = self.pis[i].working.remove(0);
        trace(|| format!("pi {} answers turn {turn}", self.pis[i].pid));
        let result = TurnResult {
            turn_id: TurnId::from_number(turn),
            text: format!("Done: ANS{turn}Z"),
            aborted: false,
            error: None,
            handled: false,
        };
        self.pis[i].completed.push(result.clone());
        let id = self.pis[i].conn.as_ref().unwrap().id.clone();
        let _ = self
            .hub
            .conductor()
            .send(ConductorMsg::Link(id, LinkEvent::TurnDone(result)))
            .await;
    }

    fn message(&mut self) {
        let thread = {
            let s = self.tg.lock();
            let alive: Vec<i64> = s
                .topics
                .iter()
                .filter(|(_, a)| **a)
                .map(|(t, _)| *t)
                .collect();
            drop(s);
            if alive.is_empty() || self.rng.next_f64() < 0.3 {
                None
            } else {
                Some(alive[self.pick(alive.len())])
            }
        };
        let text = format!("message {}", self.step);
        self.tg.push(|id| {
            let mut m = json!({ "message_id": 10_000 + id, "date": 0, "text": text,
                "from": { "id": OWNER, "is_bot": false, "first_name": "O" },
                "chat": { "id": OWNER, "type": "private" } });
            if let Some(t) = thread {
                m["message_thread_id"] = json!(t);
                m["is_topic_message"] = json!(true);
            }
            json!({ "update_id": id, "message": m })
        });
    }

    /// Taps a button of a message the bot showed (one labelled `only`, if given, not tapped
    /// before).
    fn tap(&mut self, only: Option<&str>) {
        let buttons: Vec<(i64, Option<i64>, String)> = {
            let s = self.tg.lock();
            let mut out = Vec::new();
            // A deleted topic takes its messages along: their buttons cannot be tapped.
            for (id, thread, p) in &s.shown {
                if thread.is_some_and(|t| s.topics.get(&t) != Some(&true)) {
                    continue;
                }
                let Some(rows) = p["reply_markup"]["inline_keyboard"].as_array() else {
                    continue;
                };
                for b in rows.iter().filter_map(Value::as_array).flatten() {
                    if only.is_some_and(|l| b["text"].as_str() != Some(l)) {
                        continue;
                    }
                    if let Some(data) = b["callback_data"].as_str() {
                        out.push((*id, *thread, data.to_owned()));
                    }
                }
            }
            out
        };
        let buttons: Vec<_> = buttons
            .into_iter()
            .filter(|b| only.is_none() || !self.tapped.contains(&b.2))
            .collect();
        if buttons.is_empty() {
            return;
        }
        let (message, thread, data) = buttons[self.pick(buttons.len())].clone();
        self.tapped.insert(data.clone());
        self.tg.push(|id| {
            let mut m = json!({ "message_id": message, "date": 0, "text": "shown",
                "chat": { "id": OWNER, "type": "private" } });
            if let Some(t) = thread {
                m["message_thread_id"] = json!(t);
            }
            json!({ "update_id": id, "callback_query": {
                "id": format!("q{id}"), "data": data, "chat_instance": "c",
                "from": { "id": OWNER, "is_bot": false, "first_name": "O" },
                "message": m } })
        });
    }

    /// The person deletes a topic.
    fn delete_topic(&mut self) {
        let mut s = self.tg.lock();
        let alive: Vec<i64> = s
            .topics
            .iter()
            .filter(|(_, a)| **a)
            .map(|(t, _)| *t)
            .collect();
        if alive.is_empty() {
            return;
        }
        let t = alive[(s.rng.next_u64() % alive.len() as u64) as usize];
        s.topics.insert(t, false);
        s.deleted_by_person.insert(t);
        trace(|| format!("telegram: topic {t} deleted by the person"));
    }

    /// SIGKILL and a restart: every task stops where it stands, nothing in memory survives.
    async fn crash_hub(&mut self) {
        trace(|| "hub crash".into());
        self.crashes += 1;
        self.hub.kill().await;
        self.tg.crash_in_flight();
        for p in &mut self.pis {
            p.conn = None;
        }
        self.hubs += 1;
        self.hub.signal_stop();
        self.hub = start_hub(&self.path, &self.clock, &self.api, self.hubs).await;
        // The extensions reconnect to the new hub.
        for i in 0..self.pis.len() {
            self.attach(i).await;
        }
    }

    /// The invariants, after every step.
    async fn check(&mut self) {
        if let Some(v) = self.violation.take() {
            self.fail(&v);
        }
        let (confirmed, answers, windows, topics, by_person, unknown) = {
            let s = self.tg.lock();
            (
                s.confirmed,
                s.answers.clone(),
                s.windows.clone(),
                s.topics.clone(),
                s.deleted_by_person.clone(),
                s.unknown_topics.clone(),
            )
        };
        let prompted = self.prompted.clone();
        let identities: BTreeMap<i64, String> = self
            .pis
            .iter()
            .map(|p| (p.pid, p.identity.clone()))
            .collect();
        // Every step looks at what is new (updates confirmed since the last check, recent
        // updates' turns, turns prompted or finished since); every 16th step (and the drain)
        // at everything: a check that grows with the run would make long runs quadratic.
        let full = self.step.is_multiple_of(16) || self.step >= self.steps;
        let from = if full { 1 } else { self.journal_ok_upto };
        let recent = if full { 0 } else { confirmed - 200 };
        let fresh: Vec<i64> = std::mem::take(&mut self.fresh).into_iter().collect();
        let (journal, turns_of_update, turn_rows) = self
            .hub
            .db()
            .read(move |c| {
                let ids: Vec<i64> = c
                    .prepare_cached("SELECT update_id FROM journal WHERE update_id >= ?1")
                    .and_then(|mut s| {
                        s.query_map([from], |r| r.get(0))?
                            .collect::<Result<Vec<i64>, _>>()
                    })
                    .map_err(store::StoreError::from)?;
                let dup: Vec<(i64, i64)> = c
                    .prepare_cached(
                        "SELECT source_update_id, COUNT(*) FROM turns
                         WHERE source_update_id >= ?1
                         GROUP BY source_update_id HAVING COUNT(*) > 1",
                    )
                    .and_then(|mut s| {
                        s.query_map([recent], |r| Ok((r.get(0)?, r.get(1)?)))?
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .map_err(store::StoreError::from)?;
                let sql = if full {
                    "SELECT id, identity, state FROM turns".to_owned()
                } else {
                    let list: Vec<String> = fresh.iter().map(i64::to_string).collect();
                    format!(
                        "SELECT id, identity, state FROM turns WHERE id IN ({})",
                        list.join(",")
                    )
                };
                let rows: Vec<(i64, Option<String>, String)> = c
                    .prepare(&sql)
                    .and_then(|mut s| {
                        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .map_err(store::StoreError::from)?;
                Ok((ids, dup, rows))
            })
            .await
            .unwrap();
        // No update lost: everything below the offset Telegram saw is journaled.
        let journaled: BTreeSet<i64> = journal.into_iter().collect();
        if let Some(lost) = (from..confirmed).find(|id| !journaled.contains(id)) {
            self.fail(&format!(
                "update {lost} was confirmed to Telegram (offset {confirmed}) but is not in the journal"
            ));
        }
        self.journal_ok_upto = confirmed;
        // No update handled twice: at most one turn per update.
        if let Some((u, n)) = turns_of_update.first() {
            self.fail(&format!("update {u} became {n} turns"));
        }
        let by_id: BTreeMap<i64, (Option<&String>, &str)> = turn_rows
            .iter()
            .map(|(id, identity, state)| (*id, (identity.as_ref(), state.as_str())))
            .collect();
        // Every prompt went to the turn's identity, at most once (checked as pi read it).
        for (turn, pids) in &prompted {
            let Some(t) = by_id.get(turn) else {
                if !full {
                    continue;
                }
                self.fail(&format!(
                    "pi was prompted with turn {turn}, unknown to the store"
                ));
            };
            for pid in pids {
                if let (Some(want), Some(got)) = (t.0, identities.get(pid))
                    && want != got
                {
                    self.fail(&format!(
                        "turn {turn} of {want} was prompted to a pi of {got}"
                    ));
                }
            }
        }
        // A turn pi finished and the hub confirmed is stored as done.
        for turn in &self.confirmed_done {
            if !full && !by_id.contains_key(turn) {
                continue;
            }
            if by_id.get(turn).map(|t| t.1) != Some("done") {
                self.fail(&format!(
                    "turn {turn}: the hub confirmed its result but the store has {:?}",
                    by_id.get(turn).map(|t| t.1)
                ));
            }
        }
        // Answers: never more copies than 1 + the commit-unknown windows.
        for (turn, n) in &answers {
            let allowed = 1 + windows.get(turn).copied().unwrap_or(0);
            if *n > allowed {
                self.fail(&format!(
                    "turn {turn}'s answer arrived {n} times with {} commit-unknown window(s)",
                    allowed - 1
                ));
            }
        }
        // Threaded Mode: the store against the topics Telegram shows. A topic the person deleted
        // counts as there until the hub could know (it learns at its next send there).
        let seen: Vec<threads::invariants::SeenTopic> = topics
            .iter()
            .map(|(t, alive)| threads::invariants::SeenTopic {
                chat_id: OWNER,
                thread_id: *t,
                alive: *alive || by_person.contains(t),
                by_bot: !by_person.contains(t) && !unknown.contains(t),
            })
            .collect();
        let problems = threads::invariants::check(self.hub.db().store(), Some(&seen)).unwrap();
        if !problems.is_empty() {
            self.fail(&format!("threads invariants: {problems:?}"));
        }
    }

    /// Liveness: with faults off, every pi attached and time passing, everything is handled and
    /// every answer arrives.
    async fn drain(&mut self) {
        self.tg.lock().fault_rate = 0.0;
        for _ in 0..IDENTITIES.len() {
            self.spawn_pi().await;
        }
        for i in 0..self.pis.len() {
            self.attach(i).await;
        }
        for _ in 0..40 {
            // The person settles what the hub asks about (threads of unknown outcome).
            self.tap(Some("Create a new thread"));
            self.run_for(60_000).await;
            while self.pis.iter().any(|p| !p.working.is_empty()) {
                self.answer().await;
                self.run_for(10).await;
            }
            self.check().await;
        }
        let (pending, outbox) = self
            .hub
            .db()
            .read(|c| {
                let pending = store::journal::pending(c, 10)?.len();
                let outbox: Vec<String> = c
                    .prepare(
                        "SELECT purpose || ' ' || state || ' thread ' || ifnull(thread_id, '-')
                                || ' due ' || not_before_ms || ' attempts ' || attempts
                                || ' ' || ifnull(last_error, '') FROM outbox
                         WHERE state IN ('pending', 'sending')",
                    )
                    .and_then(|mut s| {
                        s.query_map([], |r| r.get(0))?
                            .collect::<Result<Vec<String>, _>>()
                    })
                    .map_err(store::StoreError::from)?;
                Ok((pending, outbox))
            })
            .await
            .unwrap();
        if pending > 0 {
            self.fail(&format!("{pending} journaled update(s) never handled"));
        }
        let threads_state = self
            .hub
            .db()
            .read(|c| {
                Ok(format!(
                    "bindings {:?} intents {:?} skips {:?}",
                    store::threads::bindings(c)?
                        .iter()
                        .map(|b| (b.identity.clone(), b.thread_id, b.state))
                        .collect::<Vec<_>>(),
                    store::threads::intents(c)?
                        .iter()
                        .map(|i| (i.identity.clone(), i.thread_id, i.state))
                        .collect::<Vec<_>>(),
                    c.prepare("SELECT key, value FROM kv WHERE key LIKE '%skip%'")
                        .and_then(|mut s| {
                            s.query_map([], |r| {
                                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                            })?
                            .collect::<Result<Vec<_>, _>>()
                        })
                        .map_err(store::StoreError::from)?
                ))
            })
            .await
            .unwrap();
        let answers = self.tg.lock().answers.clone();
        let done: Vec<i64> = self
            .hub
            .db()
            .read(|c| {
                c.prepare("SELECT id FROM turns WHERE state = 'done'")
                    .and_then(|mut s| {
                        s.query_map([], |r| r.get(0))?
                            .collect::<Result<Vec<i64>, _>>()
                    })
                    .map_err(store::StoreError::from)
            })
            .await
            .unwrap();
        for turn in done {
            if !answers.contains_key(&turn) {
                self.fail(&format!(
                    "turn {turn} is done but its answer never reached the chat (unsent: {outbox:?}; {threads_state}; live pis {:?})",
                    self.pis.iter().map(|p| (&p.identity, p.conn.is_some())).collect::<Vec<_>>()
                ));
            }
        }
    }
}

async fn run(seed: u64, steps: usize) -> (usize, usize, BTreeMap<&'static str, usize>) {
    let base = std::path::Path::new("/dev/shm");
    let dir = if base.is_dir() {
        tempfile::tempdir_in(base).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let mut sim = Sim::new(seed, dir.path()).await;
    sim.steps = steps;
    for step in 0..steps {
        sim.step = step;
        // Faults come and go: some stretches are clean, some stormy.
        if step % 50 == 0 {
            let rate = [0.0, 0.05, 0.2, 0.4][sim.pick(4)];
            sim.tg.lock().fault_rate = rate;
        }
        let roll = sim.rng.next_f64();
        trace(|| format!("step {step}: roll {roll:.3}"));
        if roll < 0.25 {
            sim.message();
        } else if roll < 0.33 {
            sim.tap(None);
        } else if roll < 0.43 {
            sim.spawn_pi().await;
        } else if roll < 0.50 {
            let offline: Vec<usize> = (0..sim.pis.len())
                .filter(|i| sim.pis[*i].conn.is_none())
                .collect();
            if !offline.is_empty() {
                let i = offline[sim.pick(offline.len())];
                sim.attach(i).await;
            }
        } else if roll < 0.56 {
            sim.detach().await;
        } else if roll < 0.59 {
            sim.crash_pi().await;
        } else if roll < 0.80 {
            sim.answer().await;
        } else if roll < 0.83 {
            sim.delete_topic();
        } else if roll < 0.87 {
            // The crash lands in the middle of work: something to do, a few virtual milliseconds
            // (a request in flight, an answer on its way back, a commit made and not acted on),
            // then SIGKILL.
            if sim.rng.next_f64() < 0.5 {
                sim.message();
            } else {
                sim.answer().await;
            }
            let ms = sim.pick(120) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            sim.crash_hub().await;
        }
        // Time passes: from a blink to a few seconds (retries, flood waits, back-offs).
        let ms = [1, 20, 300, 2_000, 8_000][sim.pick(5)];
        sim.run_for(ms).await;
        sim.check().await;
    }
    sim.step = steps;
    sim.drain().await;
    let faults = sim.tg.lock().faults.clone();
    sim.hub.signal_stop();
    (steps, sim.crashes, faults)
}

/// `SIM_TRACE=1`: what happens, step by step (for a failing seed).
fn trace(line: impl FnOnce() -> String) {
    if std::env::var_os("SIM_TRACE").is_some() {
        eprintln!("{}", line());
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn the_whole_hub_keeps_its_invariants_through_faults_and_crashes() {
    // The hub's own checks (`never!`) panic here in release builds too.
    hub::never::panic_when_broken(true);
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let steps = env("SIM_STEPS").unwrap_or(400) as usize;
    let seeds: Vec<u64> = match env("SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env("SIM_SEEDS").unwrap_or(6))
            .map(|i| i * 7_919 + 1)
            .collect(),
    };
    let started = std::time::Instant::now();
    // Seeds run side by side, one thread and one single-threaded runtime each: a seed's run
    // depends on nothing but its seed, so this changes no run, only the wall time.
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(seeds.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(seed) = seeds.get(i) else { break };
                    let outcome = runtime().block_on(run(*seed, steps));
                    results.lock().unwrap().push(outcome);
                }
            });
        }
    });
    let (mut total, mut crashes) = (0, 0);
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    for (n, c, f) in results.into_inner().unwrap() {
        total += n;
        crashes += c;
        for (k, v) in f {
            *faults.entry(k).or_default() += v;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{} seeds, {total} steps, {crashes} hub crashes, faults {faults:?}: every invariant held ({:.0} steps/s on {threads} threads)",
        seeds.len(),
        total as f64 / secs
    );
}
