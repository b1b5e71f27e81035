//! Property: a message never goes to a pi the person did not choose. Random sequences of owner
//! messages, chooser and redirect taps, attaches, detaches, answers and hub restarts run the
//! real handlers and the real conductor over a real SQLite store; after every step:
//!
//! - a turn that waited for the person's choice has an identity only if the person tapped it
//!   there (and every prompt for it went there);
//! - a turn addressed to a pi (the selection, a reply) went to that pi, or to the one the
//!   person redirected it to with a tap;
//! - only a message that arrived while no pi was live goes to whichever connects first.
//!
//! `CHOICE_SEEDS=n` runs more sequences.
#![allow(clippy::unwrap_used)]

use hub::db::Durability;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use hub::config::PairingMode;
use hub::db::Db;
use hub::incoming::handlers::{self, AfterCommit, HandlerCtx};
use hub::pi::conductor::Conductor;
use hub::pi::instance::{
    Attach, Command, ConductorMsg, GoneReason, InstanceId, LinkEvent, Reach, Transport,
};
use hub::wakes::Wakes;
use serde_json::{Value, json};
use store::outbox::Purpose;
use store::turns::{self, Waits};
use store::{Store, journal, kv, lease, outbox};
use tg_fake::faults::Rng;
use tokio::sync::{mpsc, oneshot, watch};
use wire::{TurnId, TurnResult};

const OWNER: i64 = 1001;
const IDENTITIES: [&str; 3] = ["/p/alpha", "/p/beta", "/p/gamma"];

fn label(identity: &str) -> &str {
    identity.rsplit('/').next().unwrap()
}

/// How a turn was created.
#[derive(Debug, Clone, PartialEq)]
enum Origin {
    To(String),
    Any,
    Choice,
}

struct Live {
    id: InstanceId,
    identity: String,
    pid: i64,
    commands: mpsc::Receiver<Command>,
    /// Prompts received and not answered.
    open: Vec<i64>,
}

struct Sim {
    db: Db,
    rng: Rng,
    conductor: mpsc::Sender<ConductorMsg>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), hub::HubError>>,
    wakes: Wakes,
    epoch: store::lease::Epoch,
    live: Vec<Live>,
    next_update: i64,
    next_message: i64,
    origins: BTreeMap<i64, Origin>,
    /// (turn, to, instead_of) taps the person made.
    taps: BTreeSet<(i64, String, Option<String>)>,
    /// Where each turn's prompts went.
    prompted: BTreeMap<i64, BTreeSet<String>>,
    /// Acked turns per pid (what a reconnecting extension reports as received).
    received: BTreeMap<i64, Vec<i64>>,
    steps: usize,
}

async fn start_conductor(
    db: &Db,
    wakes: &Wakes,
) -> (
    mpsc::Sender<ConductorMsg>,
    watch::Sender<bool>,
    tokio::task::JoinHandle<Result<(), hub::HubError>>,
    store::lease::Epoch,
) {
    let now = db.now_ms();
    let epoch = db
        .write(Durability::OnDisk, move |tx| lease::acquire(tx, 1, now))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(1024);
    let (stop_tx, stop_rx) = watch::channel(false);
    // No telegram.json: the default settings.
    let settings = Arc::new(hub::assistant::Watched::new(
        std::env::temp_dir().join("pi-telegram-no-such-config.json"),
        hub::paths::ProfileName::default_profile(),
    ));
    // No preview task: previews are best effort and never block the conductor.
    let (previews, _) = mpsc::channel(1);
    // No sender either: its side of the hand-over dropped, so nothing is ever claimed for it.
    let pacer = Arc::new(tokio::sync::Mutex::new(telegram::Pacer::new(
        telegram::PacingConfig::default(),
    )));
    let (handoff, _) = hub::outgoing::sender::handoff(pacer);
    let c = Conductor::new(
        db.clone(),
        rx,
        tx.clone(),
        wakes.clone(),
        epoch,
        settings,
        previews,
        handoff,
        hub::pi::conductor::ConductorSettings {
            // No telegram.json, and no tool call sends a file here.
            config_path: std::env::temp_dir().join("pi-telegram-no-such-config.json"),
            tools: hub::pi::conductor::ToolSettings {
                out_dir: std::env::temp_dir().join("pi-telegram-test-out"),
                max_bytes: 50 * 1024 * 1024,
            },
        },
    );
    let task = tokio::spawn(c.run(stop_rx));
    (tx, stop_tx, task, epoch)
}

impl Sim {
    async fn new(seed: u64, dir: &std::path::Path, threaded: bool) -> Self {
        let store = Store::open(&dir.join("state.db")).unwrap();
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
        let db = Db::new(Arc::new(store));
        let wakes = Wakes::default();
        let (conductor, stop, task, epoch) = start_conductor(&db, &wakes).await;
        Self {
            db,
            rng: Rng::new(seed),
            conductor,
            stop,
            task,
            wakes,
            epoch,
            live: Vec::new(),
            next_update: 1,
            next_message: 1,
            origins: BTreeMap::new(),
            taps: BTreeSet::new(),
            prompted: BTreeMap::new(),
            received: BTreeMap::new(),
            steps: 0,
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    /// Waits until the conductor handled everything sent so far and ran a dispatch pass after
    /// it (it dispatches after each message it handles, after answering this one).
    async fn settle(&mut self) {
        for _ in 0..2 {
            let (reply, rx) = oneshot::channel();
            self.conductor
                .send(ConductorMsg::List(reply))
                .await
                .unwrap();
            rx.await.unwrap();
        }
        self.drain_prompts();
    }

    fn drain_prompts(&mut self) {
        for l in &mut self.live {
            while let Ok(cmd) = l.commands.try_recv() {
                if let Command::Prompt { turn, .. } = cmd {
                    let n = turn.number().unwrap();
                    self.prompted
                        .entry(n)
                        .or_default()
                        .insert(l.identity.clone());
                    l.open.push(n);
                }
            }
        }
    }

    /// Runs one update through the real handler, as the worker does.
    async fn handle(&mut self, update: Value) {
        let id = self.next_update;
        self.next_update += 1;
        let raw = update.to_string();
        let epoch = self.epoch;
        let (now, clock) = (self.db.now_ms(), self.db.clock().clone());
        let after = self
            .db
            .write(Durability::OnDisk, move |tx| {
                journal::append_batch(
                    tx,
                    &[journal::Incoming {
                        update_id: id,
                        kind: "x",
                        raw: &raw,
                    }],
                    id + 1,
                    0,
                )?;
                let entry = journal::pending(tx, 1)?.pop().unwrap();
                let ctx = HandlerCtx {
                    bot_username: "bot".into(),
                    pairing: PairingMode::Code,
                    now_ms: now,
                    clock: clock.clone(),
                    epoch,
                    title_template: "{slot} · {project}".into(),
                    config_path: std::env::temp_dir().join("pi-telegram-no-such-config.json"),
                    profile: hub::paths::ProfileName::default_profile(),
                };
                let mut after = AfterCommit::default();
                handlers::handle(tx, &ctx, &entry, &mut after)?;
                Ok(after)
            })
            .await
            .unwrap();
        if after.turns {
            self.wakes.conductor.notify_one();
        }
        // Record how a message's turn was created.
        let created = self
            .db
            .read(move |c| {
                let turn: Option<i64> = c
                    .query_row(
                        "SELECT id FROM turns WHERE source_update_id = ?1",
                        [id],
                        |r| r.get(0),
                    )
                    .ok();
                match turn {
                    Some(n) => turns::get(c, n),
                    None => Ok(None),
                }
            })
            .await
            .unwrap();
        if let Some(t) = created {
            self.origins
                .entry(t.id)
                .or_insert(match (t.waits, &t.identity) {
                    (Some(Waits::Choice), _) => Origin::Choice,
                    (Some(Waits::Any), _) => Origin::Any,
                    (None, Some(i)) => Origin::To(i.clone()),
                    (None, None) => panic!("a turn with neither identity nor wait"),
                });
        }
    }

    async fn message(&mut self) {
        let m = self.next_message;
        self.next_message += 1;
        let update = json!({ "update_id": self.next_update, "message": {
            "message_id": m, "date": 0, "text": format!("message {m}"),
            "from": { "id": OWNER, "is_bot": false, "first_name": "O" },
            "chat": { "id": OWNER, "type": "private" } } });
        self.handle(update).await;
    }

    /// Taps a random button of a chooser or redirect message that is still in the outbox.
    async fn tap(&mut self) {
        let rows = self.db.read(outbox::all).await.unwrap();
        let buttons: Vec<(i64, String, String)> = rows
            .iter()
            .filter(|r| matches!(r.purpose, Purpose::ReplyChooser | Purpose::ReplyWaits))
            .flat_map(|r| {
                let text = r.params()["text"].as_str().unwrap_or_default().to_owned();
                r.params()["reply_markup"]["inline_keyboard"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|row| row.as_array().cloned().unwrap_or_default())
                    .filter_map(move |b| {
                        let label = b["text"].as_str()?.to_owned();
                        let data = b["callback_data"].as_str()?.to_owned();
                        Some((r.id, data, format!("{text}|{label}")))
                    })
            })
            .collect();
        if buttons.is_empty() {
            return;
        }
        let (row_id, data, _) = buttons[self.pick(buttons.len())].clone();
        // What the button means, from the store (the hub's own record of it).
        let action = self
            .db
            .read({
                let data = data.clone();
                move |c| {
                    let mut stmt = c
                        .prepare("SELECT action FROM callbacks WHERE token = ?1")
                        .map_err(store::StoreError::from)?;
                    let mut rows = stmt
                        .query_map([&data], |r| r.get::<_, String>(0))
                        .map_err(store::StoreError::from)?;
                    rows.next().transpose().map_err(store::StoreError::from)
                }
            })
            .await
            .unwrap();
        match action.as_deref().and_then(hub::buttons::Button::decode) {
            Some(hub::buttons::Button::Send {
                turn,
                to,
                instead_of,
            }) => {
                // A tap is a choice only if it lands: recorded before the handler runs, since
                // the conductor may dispatch at once.
                self.taps.insert((turn, to.clone(), instead_of.clone()));
            }
            // A button of a settled chooser: the tap is a replay, sent all the same, and is no
            // choice (the property fails if it acts).
            Some(hub::buttons::Button::Settled { .. }) => {}
            _ => return,
        }
        let update = json!({ "update_id": self.next_update, "callback_query": {
            "id": format!("q{row_id}"), "data": data, "chat_instance": "c",
            "from": { "id": OWNER, "is_bot": false, "first_name": "O" },
            "message": { "message_id": 100_000 + row_id, "date": 0, "text": "chooser",
                         "chat": { "id": OWNER, "type": "private" } } } });
        self.handle(update).await;
    }

    async fn attach(&mut self) {
        let identity = IDENTITIES[self.pick(IDENTITIES.len())];
        if self.live.iter().any(|l| l.identity == identity) {
            return;
        }
        // The same process coming back, or a new one.
        let pid = if self.rng.next_f64() < 0.5 {
            4_000_000
                + self.pick(3) as i64 * 10
                + IDENTITIES.iter().position(|i| *i == identity).unwrap() as i64
        } else {
            4_100_000 + self.steps as i64
        };
        let received: Vec<TurnId> = self
            .received
            .get(&pid)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(TurnId::from_number)
            .collect();
        let (commands, rx) = mpsc::channel(64);
        let (reply, id_rx) = oneshot::channel();
        let attach = Attach {
            transport: Transport::Shim,
            reach: Reach::ThisMachine,
            pid: Some(pid),
            cwd: identity.to_owned(),
            session_id: None,
            session_name: None,
            session_file: None,
            idle: true,
            pending: false,
            received: received.clone(),
            completed: Vec::new(),
            store_id: None,
            commands,
            tools_token: None,
        };
        self.conductor
            .send(ConductorMsg::Attach(attach, reply))
            .await
            .unwrap();
        let id = id_rx.await.unwrap();
        // The conductor may have chosen `#2` for a second pi in the same folder: read it back.
        let identity = self
            .db
            .read({
                let id = id.0.clone();
                move |c| {
                    Ok::<_, store::StoreError>(
                        store::instances::live(c)?
                            .into_iter()
                            .find(|i| i.id == id)
                            .map(|i| i.identity),
                    )
                }
            })
            .await
            .unwrap()
            .unwrap();
        let open = received
            .iter()
            .filter_map(TurnId::number)
            .collect::<Vec<_>>();
        self.live.push(Live {
            id,
            identity,
            pid,
            commands: rx,
            open,
        });
    }

    async fn detach(&mut self) {
        if self.live.is_empty() {
            return;
        }
        let i = self.pick(self.live.len());
        let l = self.live.remove(i);
        let reason = if self.rng.next_f64() < 0.5 {
            GoneReason::ConnectionLost("test".into())
        } else {
            GoneReason::Shutdown
        };
        self.conductor
            .send(ConductorMsg::Link(l.id, LinkEvent::Gone(reason)))
            .await
            .unwrap();
    }

    async fn answer(&mut self) {
        let candidates: Vec<usize> = (0..self.live.len())
            .filter(|i| !self.live[*i].open.is_empty())
            .collect();
        if candidates.is_empty() {
            return;
        }
        let i = candidates[self.pick(candidates.len())];
        let turn = self.live[i].open.remove(0);
        let id = self.live[i].id.clone();
        let pid = self.live[i].pid;
        self.conductor
            .send(ConductorMsg::Link(
                id.clone(),
                LinkEvent::Acked {
                    turn: TurnId::from_number(turn),
                },
            ))
            .await
            .unwrap();
        self.received.entry(pid).or_default().push(turn);
        if self.rng.next_f64() < 0.7 {
            let result = TurnResult {
                turn_id: TurnId::from_number(turn),
                text: format!("answer {turn}"),
                aborted: false,
                error: None,
                handled: false,
            };
            self.conductor
                .send(ConductorMsg::Link(id.clone(), LinkEvent::TurnDone(result)))
                .await
                .unwrap();
            self.received.entry(pid).or_default().retain(|t| *t != turn);
        } else {
            // Still working on it: it stays open in pi.
            self.live[i].open.insert(0, turn);
        }
    }

    async fn restart(&mut self) {
        let _ = self.stop.send(true);
        let task = std::mem::replace(&mut self.task, tokio::spawn(async { Ok(()) }));
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        self.live.clear();
        let (conductor, stop, task, epoch) = start_conductor(&self.db, &self.wakes).await;
        self.conductor = conductor;
        self.stop = stop;
        self.task = task;
        self.epoch = epoch;
    }

    /// The properties, from the prompts seen and from the store.
    async fn check(&self, seed: u64) {
        for (turn, to_set) in &self.prompted {
            let origin = self
                .origins
                .get(turn)
                .unwrap_or_else(|| panic!("seed {seed}: prompt for unknown turn {turn}"));
            for to in to_set {
                let chosen = |instead: Option<&String>| {
                    self.taps.contains(&(*turn, to.clone(), instead.cloned()))
                };
                let ok = match origin {
                    Origin::Any => true,
                    Origin::Choice => chosen(None),
                    Origin::To(s) => s == to || chosen(Some(s)),
                };
                assert!(
                    ok,
                    "seed {seed}, step {}: turn {turn} ({origin:?}) went to {to} without the person choosing it; taps: {:?}",
                    self.steps, self.taps
                );
            }
        }
        let all = self
            .db
            .read(|c| {
                let mut stmt = c
                    .prepare("SELECT id FROM turns")
                    .map_err(store::StoreError::from)?;
                let ids: Vec<i64> = stmt
                    .query_map([], |r| r.get(0))
                    .map_err(store::StoreError::from)?
                    .collect::<Result<_, _>>()
                    .map_err(store::StoreError::from)?;
                ids.into_iter()
                    .map(|id| turns::get(c, id).map(Option::unwrap))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .unwrap();
        for t in all {
            if let (Some(Waits::Choice), Some(i)) = (t.waits, &t.identity) {
                assert!(
                    self.taps.contains(&(t.id, i.clone(), None)),
                    "seed {seed}, step {}: turn {} waits for a choice but is assigned to {i} without a tap",
                    self.steps,
                    t.id
                );
            }
        }
    }
}

async fn run(seed: u64, steps: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(seed, dir.path(), seed.is_multiple_of(2)).await;
    for step in 0..steps {
        sim.steps = step;
        let roll = sim.rng.next_f64();
        if roll < 0.30 {
            sim.message().await;
        } else if roll < 0.50 {
            sim.tap().await;
        } else if roll < 0.65 {
            sim.attach().await;
        } else if roll < 0.77 {
            sim.detach().await;
        } else if roll < 0.95 {
            sim.answer().await;
        } else {
            sim.restart().await;
        }
        sim.settle().await;
        sim.check(seed).await;
    }
    let _ = sim.stop.send(true);
    // Labels are what people see; keep the helper honest.
    assert_eq!(label("/p/alpha"), "alpha");
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_never_goes_to_a_pi_the_person_did_not_choose() {
    let seeds: u64 = std::env::var("CHOICE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut total = 0;
    for seed in 0..seeds {
        total += run(seed * 104_729 + 3, 150).await;
    }
    eprintln!("{seeds} sequences, {total} steps: every property held");
}
