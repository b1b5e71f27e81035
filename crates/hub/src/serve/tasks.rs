//! The hub's tasks, spawned the one way both `serve` and the whole-hub simulation spawn them:
//! [`Hub::new`] over injected [`Parts`], [`Hub::spawn`] -> [`Tasks`], which stop in
//! `STOP_ORDER`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use store::lease;
use telegram::{Client, Pacer};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;

use crate::assistant::Watched;
use crate::bot_api::Api;
use crate::db::Db;
use crate::error::HubError;
use crate::incoming::poller::{self, PollSettings};
use crate::incoming::worker::{self, WorkerSettings};
use crate::outgoing::preview::PreviewMsg;
use crate::outgoing::sender;
use crate::outgoing::topics::{self, TopicSettings};
use crate::outgoing::voice::VoiceSettings;
use crate::pi::conductor::{Conductor, ConductorSettings};
use crate::pi::inbound::InboundSettings;
use crate::pi::instance::ConductorMsg;
use crate::retention::RetentionSettings;
use crate::wakes::Wakes;

/// What the hub's tasks run on, injected: `serve` gives a profile's store, Telegram and
/// settings; the whole-hub simulation (tests/simulation.rs) its simulated clock (in `db`) and
/// fake Telegram, so that both run the very same tasks, spawned by [`Hub::spawn`].
pub struct Parts {
    /// The store.
    pub db: Db,
    /// Telegram, for the durable path's calls (poller, sender, topics).
    pub api: Api,
    /// Shared by everything that sends.
    pub pacer: Arc<Mutex<Pacer>>,
    /// This hub's lease.
    pub epoch: lease::Epoch,
    /// The assistant settings of `telegram.json`, re-read when it changes.
    pub assistant: Arc<Watched>,
    pub conductor: ConductorSettings,
    /// The worker's (and the poller's, which handles what it cannot journal).
    pub worker: WorkerSettings,
    /// The poller's.
    pub poll: PollSettings,
    /// The Threaded Mode task's.
    pub topics: TopicSettings,
}

/// The tasks beside the durable path, which need the real Telegram client and the profile's
/// folders: previews, downloads, voice, retention. `serve` runs them; the simulation does
/// without (its header says what it leaves out).
pub struct Extras {
    /// The client previews and downloads call directly.
    pub client: Client,
    /// Downloads.
    pub inbound: InboundSettings,
    /// Pruning.
    pub retention: RetentionSettings,
    /// Voice messages.
    pub voice: VoiceSettings,
}

/// A hub built and not yet running: its channels exist, so what needs the conductor (the
/// links, the spawner) can be made, and read what it must, before any task starts.
pub struct Hub {
    parts: Parts,
    wakes: Wakes,
    stop: (watch::Sender<bool>, watch::Receiver<bool>),
    conductor: (mpsc::Sender<ConductorMsg>, mpsc::Receiver<ConductorMsg>),
    previews: (mpsc::Sender<PreviewMsg>, mpsc::Receiver<PreviewMsg>),
}

impl Hub {
    /// A hub on `parts`.
    pub fn new(parts: Parts) -> Self {
        Self {
            parts,
            wakes: Wakes::default(),
            stop: watch::channel(false),
            conductor: mpsc::channel(1024),
            // Bounded: previews are best effort, and a stuck preview call must not hold pi's
            // events.
            previews: mpsc::channel(4096),
        }
    }

    /// The conductor's channel, as links and the spawner use it.
    pub fn conductor(&self) -> mpsc::Sender<ConductorMsg> {
        self.conductor.0.clone()
    }

    /// The tasks' wakes.
    pub fn wakes(&self) -> &Wakes {
        &self.wakes
    }

    /// Spawns the durable path's tasks (conductor, worker, sender, topics, poller), then
    /// `extras`', and wakes them for the work left from before the restart.
    pub fn spawn(self, extras: Option<Extras>) -> Tasks {
        let Self {
            parts,
            wakes,
            stop: (stop, stop_rx),
            conductor: (conductor_tx, conductor_rx),
            previews: (preview_tx, preview_rx),
        } = self;
        let db = parts.db.clone();
        let (handoff, claims) = sender::handoff(parts.pacer.clone());
        // Reactions are best effort beside the durable path: only with the extras' client.
        let (reactions, reactions_rx) = crate::outgoing::reactions::Reactions::channel();
        let reactions = if extras.is_some() {
            reactions
        } else {
            crate::outgoing::reactions::Reactions::default()
        };
        let conductor = Conductor::new(
            db.clone(),
            conductor_rx,
            conductor_tx.clone(),
            wakes.clone(),
            parts.epoch,
            parts.assistant.clone(),
            preview_tx,
            handoff,
            parts.conductor,
        )
        .with_reactions(reactions);
        let mut running = vec![("conductor", tokio::spawn(conductor.run(stop_rx.clone())))];
        running.push((
            "worker",
            tokio::spawn(worker::run(
                db.clone(),
                parts.worker.clone(),
                wakes.clone(),
                stop_rx.clone(),
            )),
        ));
        running.push((
            "sender",
            tokio::spawn(sender::run(
                db.clone(),
                parts.api.clone(),
                parts.pacer.clone(),
                wakes.clone(),
                claims,
                parts.assistant.clone(),
                stop_rx.clone(),
            )),
        ));
        running.push((
            "topics",
            tokio::spawn(topics::run(
                db.clone(),
                parts.api.clone(),
                parts.pacer,
                parts.epoch,
                parts.topics,
                wakes.clone(),
                stop_rx.clone(),
            )),
        ));
        let poll = {
            let (db, api, handling, wakes, stop) = (
                db.clone(),
                parts.api,
                parts.worker,
                wakes.clone(),
                stop_rx.clone(),
            );
            let settings = parts.poll;
            tokio::spawn(
                async move { poller::run(db, api, settings, &handling, &wakes, stop).await },
            )
        };
        running.push(("poller", poll));
        match extras {
            Some(extras) => running.extend(spawn_extras(
                extras,
                (preview_rx, reactions_rx),
                &db,
                parts.assistant,
                &wakes,
                &stop_rx,
            )),
            // Nobody reads previews: the conductor's are dropped, as best effort allows.
            None => drop(preview_rx),
        }
        // Work left from before the restart.
        wakes.worker.notify_one();
        wakes.sender.notify_one();
        wakes.inbound.notify_one();
        wakes.voice.notify_one();
        Tasks {
            db,
            conductor: conductor_tx,
            stop,
            stop_rx,
            running,
        }
    }
}

/// A task of the hub, by name; each runs until the stop, and ending before it is fatal.
type Named = (&'static str, JoinHandle<Result<(), HubError>>);

/// Spawns the tasks of [`Extras`].
fn spawn_extras(
    extras: Extras,
    (previews, reactions): (
        mpsc::Receiver<PreviewMsg>,
        mpsc::Receiver<crate::outgoing::reactions::React>,
    ),
    db: &Db,
    assistant: Arc<Watched>,
    wakes: &Wakes,
    stop: &watch::Receiver<bool>,
) -> [Named; 5] {
    let reactions_task = tokio::spawn(crate::outgoing::reactions::run(
        extras.client.clone(),
        assistant.clone(),
        reactions,
        stop.clone(),
    ));
    let preview_task = tokio::spawn(
        crate::outgoing::preview::Previews::new(extras.client.clone(), assistant)
            .run(previews, stop.clone()),
    );
    let inbound_task = tokio::spawn(crate::pi::inbound::run(
        db.clone(),
        extras.client,
        Arc::new(extras.inbound),
        wakes.clone(),
        stop.clone(),
    ));
    let retention_task = tokio::spawn(crate::retention::run(
        db.clone(),
        extras.retention,
        stop.clone(),
    ));
    let voice_task = tokio::spawn(crate::outgoing::voice::run(
        db.clone(),
        Arc::new(extras.voice),
        wakes.clone(),
        stop.clone(),
    ));
    [
        ("previews", preview_task),
        ("inbound", inbound_task),
        ("retention", retention_task),
        ("voice", voice_task),
        ("reactions", reactions_task),
    ]
}

/// The order a stopping hub waits for its tasks in.
const STOP_ORDER: [&str; 10] = [
    "poller",
    "worker",
    "sender",
    "conductor",
    "topics",
    "previews",
    "reactions",
    "inbound",
    "voice",
    "retention",
];

/// The hub's tasks, running.
pub struct Tasks {
    db: Db,
    conductor: mpsc::Sender<ConductorMsg>,
    stop: watch::Sender<bool>,
    /// Held so that the stop reaches whoever subscribes later, all tasks ended or not.
    stop_rx: watch::Receiver<bool>,
    running: Vec<Named>,
}

impl Tasks {
    /// The store the tasks run on.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The conductor's channel.
    pub fn conductor(&self) -> &mpsc::Sender<ConductorMsg> {
        &self.conductor
    }

    /// The stop, for what runs beside the tasks (the links).
    pub fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop_rx.clone()
    }

    /// Whether a task has ended (they end only at the stop, or on a fatal error).
    pub fn any_ended(&self) -> bool {
        self.running.iter().any(|(_, task)| task.is_finished())
    }

    /// Resolves when the first task ends, with what it ended with (an `Ok` too is the end of
    /// something that should have run until the stop).
    pub async fn first_to_end(&mut self) -> Result<(), HubError> {
        let running = &mut self.running;
        std::future::poll_fn(|cx| {
            for i in 0..running.len() {
                if let std::task::Poll::Ready(r) = std::pin::Pin::new(&mut running[i].1).poll(cx) {
                    // A task is not polled again once it has answered.
                    running.swap_remove(i);
                    return std::task::Poll::Ready(joined(r));
                }
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// Tells every task to stop.
    pub fn signal_stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits for every task to stop, each for at most `grace`; one that does not is left, its
    /// work resuming at the next start.
    pub async fn wait_stopped(mut self, grace: Duration) {
        self.running
            .sort_by_key(|(name, _)| STOP_ORDER.iter().position(|n| n == name));
        for (name, task) in self.running {
            if task.is_finished() {
                continue;
            }
            match tokio::time::timeout(grace, task).await {
                Ok(r) => {
                    if let Err(e) = joined(r) {
                        tracing::warn!(task = name, error = %e, "stopped with an error");
                    }
                }
                Err(_) => tracing::warn!(
                    task = name,
                    "did not stop in time; its work resumes at the next start"
                ),
            }
        }
    }

    /// Aborts every task where it stands, as SIGKILL would (for simulations of a crash).
    pub async fn kill(&mut self) {
        for (_, task) in &self.running {
            task.abort();
        }
        for (_, task) in std::mem::take(&mut self.running) {
            let _ = task.await;
        }
    }
}

pub(super) fn joined(
    r: Result<Result<(), HubError>, tokio::task::JoinError>,
) -> Result<(), HubError> {
    r.map_err(|e| HubError::Io {
        context: "hub task".into(),
        source: std::io::Error::other(e.to_string()),
    })?
}
