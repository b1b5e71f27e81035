//! `pi-telegram serve`: take the profile lock, open the store, check the bot, then run the
//! hub's tasks until a signal or a fatal error, and stop cleanly. Three steps: start-up
//! (`Profile::read`, `start_up`), spawning (`spawn`, through [`Hub`], the very code the
//! whole-hub simulation spawns its hub with), and running until the stop (`run_until_stopped`).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use store::{Store, flood, incidents, kv, lease, outbox};
use telegram::{ApiErrorKind, CallError, Client, ClientOptions, FloodScope, Pacer, Token};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::assistant::Watched;
use crate::bot_api::Api;
use crate::config::{self, ConfigFile, ProfileSettings};
use crate::db::{Db, Durability};
use crate::error::HubError;
use crate::incoming::poller::{self, PollSettings};
use crate::incoming::webhook;
use crate::incoming::worker::{self, WorkerSettings};
use crate::lifecycle::StartedBy;
use crate::lock::ProfileLock;
use crate::outgoing::preview::PreviewMsg;
use crate::outgoing::sender;
use crate::outgoing::topics::{self, TopicSettings};
use crate::outgoing::voice::VoiceSettings;
use crate::paths::{AgentDir, ProfileName, ProfilePaths};
use crate::pi::conductor::{Conductor, ConductorSettings, ToolSettings};
use crate::pi::inbound::InboundSettings;
use crate::pi::instance::ConductorMsg;
use crate::pi::links;
use crate::retention::RetentionSettings;
use crate::wakes::Wakes;

/// Timing knobs. Defaults suit Telegram; tests shorten them through the environment.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// Long-poll timeout (`PI_TELEGRAM_POLL_TIMEOUT_SECS`, default 50: an idle hub asks
    /// Telegram a little more than once a minute; an update ends a poll at once whatever the
    /// timeout).
    pub poll_timeout: Duration,
    /// How long 409 conflicts may last (`PI_TELEGRAM_CONFLICT_GRACE_MS`, default 60 s).
    pub conflict_grace: Duration,
    /// How long shutdown waits for an in-flight send (default 10 s).
    pub shutdown_grace: Duration,
    /// How long a write to an instance may block before it counts as not reading
    /// (`PI_TELEGRAM_WRITE_TIMEOUT_MS`, default 10 s).
    pub write_timeout: Duration,
    /// How often Threaded Mode is probed with `getMe` when nothing else prompts it
    /// (`PI_TELEGRAM_PROBE_SECS`, default 600).
    pub probe_every: Duration,
    /// How often old state is pruned (`PI_TELEGRAM_RETENTION_EVERY_SECS`, default 600).
    pub retention_every: Duration,
    /// The age after which finished rows are pruned, instead of the profile's
    /// `historyRetentionDays` (`PI_TELEGRAM_HISTORY_RETENTION_SECS`; benches and tests).
    pub retention_age: Option<Duration>,
    /// How often the hub checks that its profile folder and lock file are still there
    /// (`PI_TELEGRAM_PROFILE_CHECK_SECS`, default 60): a hub whose folder was deleted stops.
    pub profile_check_every: Duration,
}

impl Tuning {
    /// Defaults, overridden by the environment variables named on each field.
    pub fn from_env() -> Self {
        let num = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<u64>().ok());
        Self {
            poll_timeout: Duration::from_secs(num("PI_TELEGRAM_POLL_TIMEOUT_SECS").unwrap_or(50)),
            conflict_grace: Duration::from_millis(
                num("PI_TELEGRAM_CONFLICT_GRACE_MS").unwrap_or(60_000),
            ),
            shutdown_grace: Duration::from_secs(10),
            write_timeout: Duration::from_millis(
                num("PI_TELEGRAM_WRITE_TIMEOUT_MS").unwrap_or(10_000),
            ),
            probe_every: Duration::from_secs(num("PI_TELEGRAM_PROBE_SECS").unwrap_or(600).max(1)),
            retention_every: Duration::from_secs(
                num("PI_TELEGRAM_RETENTION_EVERY_SECS")
                    .unwrap_or(600)
                    .max(1),
            ),
            retention_age: num("PI_TELEGRAM_HISTORY_RETENTION_SECS").map(Duration::from_secs),
            profile_check_every: Duration::from_secs(
                num("PI_TELEGRAM_PROFILE_CHECK_SECS").unwrap_or(60).max(1),
            ),
        }
    }
}

/// An instance the hub starts itself.
#[derive(Debug, Clone)]
pub enum StartInstance {
    /// The built-in echo agent "working" in a folder (the demo without pi).
    Echo(String),
    /// `pi --mode rpc` in a folder, with extra environment.
    Rpc(String, Vec<(String, String)>),
}

/// What `serve` runs for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// pi's agent dir.
    pub agent_dir: AgentDir,
    pub profile: ProfileName,
    /// Timing.
    pub tuning: Tuning,
    /// Instances to start once the hub runs.
    pub instances_at_start: Vec<StartInstance>,
    /// The extension's entry file headless children load (`-e`) for pi's Telegram tools.
    pub child_extension: Option<PathBuf>,
    /// This hub's release (the binary's version), told to every client and kept for `status`.
    pub version: &'static str,
}

/// Runs the hub until `shutdown` resolves (a signal) or a fatal error.
pub async fn serve(opts: ServeOptions, shutdown: impl Future<Output = ()>) -> Result<(), HubError> {
    let Some(profile) = Profile::read(&opts)? else {
        return Ok(());
    };
    let lock = ProfileLock::acquire(&profile.paths.lock_file())?;
    // Starting a hub is as deliberate as stopping one: the extension may start it again.
    if let Err(e) = crate::lifecycle::clear_stopped(&profile.paths) {
        tracing::warn!(error = %e, "could not remove the stop marker");
    }
    // Every wait from here on ends on a stop: start-up retries an unreachable Telegram for as
    // long as it takes, and a person stopping the hub meanwhile must not need SIGKILL.
    let mut shutdown = std::pin::pin!(shutdown);
    tracing::info!(profile = %opts.profile, started_by = profile.started_by.as_str(), bot = %profile.token, token_from = %profile.token_source, api_base = %profile.api_base, "starting the hub");
    let started = tokio::select! {
        r = start_up(&opts, &profile) => r?,
        () = &mut shutdown => {
            tracing::info!("stopped during start-up");
            return Ok(());
        }
    };
    let running = spawn(&opts, &profile, started).await;
    run_until_stopped(&opts, &profile, &lock, running, shutdown).await
}

// ---------------------------------------------------------------- start-up

/// The profile a hub serves, as read before its lock is taken.
struct Profile {
    paths: ProfilePaths,
    config_path: PathBuf,
    settings: ProfileSettings,
    token: Token,
    /// Where the token came from (the file or the environment), for the log.
    token_source: String,
    api_base: String,
    started_by: StartedBy,
}

impl Profile {
    /// Makes the profile's folder and reads its settings and bot token. `None` when the
    /// profile's service was started instead of this hub.
    fn read(opts: &ServeOptions) -> Result<Option<Self>, HubError> {
        let paths = opts.agent_dir.profile(&opts.profile);
        if let Some(entry) = &opts.child_extension {
            links::rpc::set_child_extension(entry.clone(), opts.profile.as_str());
        }
        paths
            .ensure()
            .map_err(HubError::io(format!("creating {}", paths.dir.display())))?;
        let config_path = opts.agent_dir.config_file();
        let settings = load_settings(&config_path, &opts.profile)?;
        let Some((token, token_source)) = config::resolve_token(&settings) else {
            let flag = if opts.profile == ProfileName::default_profile() {
                String::new()
            } else {
                format!(" --profile {}", opts.profile)
            };
            return Err(HubError::NoToken {
                profile: opts.profile.to_string(),
                flag,
            });
        };
        let started_by = StartedBy::from_env();
        if started_by == StartedBy::Extension && started_service(&paths) {
            return Ok(None);
        }
        let api_base = config::resolve_api_base(&settings);
        Ok(Some(Self {
            paths,
            config_path,
            settings,
            token,
            token_source,
            api_base,
            started_by,
        }))
    }
}

/// The profile's settings, once an older top-level layout is moved into `profiles.default`.
fn load_settings(config_path: &Path, profile: &ProfileName) -> Result<ProfileSettings, HubError> {
    let file = ConfigFile::load(config_path)?;
    if file.migrated() {
        file.save()?;
        tracing::info!(
            "moved the bot identity of the older top-level layout into profiles.default"
        );
    }
    Ok(file.profile(profile))
}

/// Whether the service that runs this profile's hub is installed and was started: it is
/// started rather than a second hub beside it.
fn started_service(paths: &ProfilePaths) -> bool {
    let Some(found) = crate::lifecycle::installed(paths) else {
        return false;
    };
    match crate::lifecycle::start(&found) {
        Ok(()) => {
            tracing::info!(service = %found.name, "started the service instead");
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not start the service; serving here");
            false
        }
    }
}

/// What start-up made: the store under this hub's lease, the bot met, the listeners bound.
struct Started {
    db: Db,
    epoch: lease::Epoch,
    client: Client,
    username: String,
    pacer: Arc<Mutex<Pacer>>,
    secret: Arc<String>,
    listener: UnixListener,
    remote: Option<(TcpListener, TlsAcceptor)>,
}

/// Opens the store, takes the lease, meets the bot and binds the listeners.
async fn start_up(opts: &ServeOptions, p: &Profile) -> Result<Started, HubError> {
    let (db, epoch) = open_store(p, opts.version).await?;
    let client =
        Client::new(&p.api_base, p.token.clone(), ClientOptions::default()).map_err(|source| {
            HubError::Telegram {
                context: "starting the Telegram client".into(),
                source,
            }
        })?;
    let username = meet_the_bot(&client, &db, opts, p).await?;
    // A webhook makes every poll fail: remove it (the poller checks again on a 409).
    if let Err(e) = webhook::clear(&client, &db).await {
        tracing::warn!(error = %e, "could not check the bot's webhook");
    }
    let pacer = pacer(&db, &p.settings).await?;
    let secret = Arc::new(
        crate::secret::ensure(&p.paths.secret()).map_err(HubError::io(format!(
            "creating {}",
            p.paths.secret().display()
        )))?,
    );
    // Bound before hub.sock, so a hub whose socket is there listens everywhere it should.
    let remote = listen_remote(opts, p).await?;
    let listener = links::socket::bind(&p.paths.socket()).map_err(HubError::io(format!(
        "listening on {}",
        p.paths.socket().display()
    )))?;
    Ok(Started {
        db,
        epoch,
        client,
        username,
        pacer,
        secret,
        listener,
        remote,
    })
}

/// Opens the store and takes the profile's lease, recovering what the last hub left.
async fn open_store(p: &Profile, version: &'static str) -> Result<(Db, lease::Epoch), HubError> {
    // Opening runs migrations and fsyncs: on a blocking thread, like every store call.
    let state_db = p.paths.state_db();
    let store = tokio::task::spawn_blocking(move || Store::open(&state_db))
        .await
        .map_err(|e| store::StoreError::Corrupt(format!("store task failed: {e}")))??;
    let db = Db::new(Arc::new(store));
    let pid = i64::from(std::process::id());
    let now = db.now_ms();
    let started_by = p.started_by;
    // Which binary this is, for `status` (a person with the hub from npm and from cargo
    // wants to know which one runs).
    let binary = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let (epoch, (resent, ambiguous)) = db
        .write(Durability::OnDisk, move |tx| {
            let taken = take_over(tx, pid, started_by.as_str(), now)?;
            kv::set(tx, kv::HUB_VERSION, version)?;
            kv::set(tx, kv::HUB_BINARY, &binary)?;
            Ok(taken)
        })
        .await?;
    if resent + ambiguous > 0 {
        tracing::warn!(resent, ambiguous, "sends interrupted by the last stop");
    }
    tracing::info!(epoch = epoch.0, "took the profile lease");
    Ok((db, epoch))
}

/// `getMe`, and what it tells recorded: the bot, Threaded Mode, the owner. Returns the bot's
/// username.
async fn meet_the_bot(
    client: &Client,
    db: &Db,
    opts: &ServeOptions,
    p: &Profile,
) -> Result<String, HubError> {
    let me = get_me(client, db).await?;
    let bot_id = me
        .get("id")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or_else(|| p.token.bot_id());
    let username = me
        .get("username")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("bot")
        .to_owned();
    let topics = me
        .get("has_topics_enabled")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let state_dir = p.paths.dir.display().to_string();
    let config_owner = p.settings.allowed_user_id;
    let (owner, mirror) = {
        let username = username.clone();
        db.write(Durability::OnDisk, move |tx| {
            record_bot(tx, bot_id, &username, topics, state_dir, config_owner)
        })
        .await??
    };
    if mirror && let Some(o) = owner {
        let mut file = ConfigFile::load(&p.config_path)?;
        file.set_allowed_user_id(&opts.profile, o);
        if let Err(e) = file.save() {
            tracing::warn!(error = %e, "could not mirror the owner into the config file");
        }
    }
    tracing::info!(bot_id, username = %username, threaded_mode = topics, owner = ?owner, "bot ready");
    Ok(username)
}

/// Records the bot `getMe` described, refusing a state kept for another bot. Returns the
/// owner and whether it must be mirrored into the config file.
fn record_bot(
    tx: &store::Connection,
    bot_id: i64,
    username: &str,
    topics: bool,
    state_dir: String,
    config_owner: Option<i64>,
) -> Result<Result<(Option<i64>, bool), HubError>, store::StoreError> {
    if let Some(stored) = kv::get_i64(tx, kv::BOT_ID)?
        && stored != bot_id
    {
        return Ok(Err(HubError::BotMismatch {
            state: state_dir,
            stored,
            token: bot_id,
        }));
    }
    kv::set_i64(tx, kv::BOT_ID, bot_id)?;
    kv::set(tx, kv::BOT_USERNAME, username)?;
    kv::set(tx, kv::BOT_TOPICS, if topics { "true" } else { "false" })?;
    kv::set(
        tx,
        store::threads::MODE,
        if topics { "threaded" } else { "classic" },
    )?;
    // A configured allowedUserId is authoritative; a paired owner is mirrored back.
    let stored_owner = kv::get_i64(tx, kv::OWNER)?;
    if let Some(o) = config_owner {
        kv::set_i64(tx, kv::OWNER, o)?;
    }
    let owner = config_owner.or(stored_owner);
    Ok(Ok((
        owner,
        config_owner.is_none() && stored_owner.is_some(),
    )))
}

/// The pacer, honouring the flood waits Telegram set before the restart.
async fn pacer(db: &Db, settings: &ProfileSettings) -> Result<Arc<Mutex<Pacer>>, HubError> {
    let mut pacer = Pacer::new(settings.pacing.clone());
    let now = db.now_ms();
    for w in db.read(move |c| flood::active(c, now)).await? {
        if let Some(scope) = FloodScope::from_key(&w.scope) {
            tracing::info!(scope = %w.scope, seconds_left = (w.until_ms - now) / 1000, "honouring a flood wait from before the restart");
            pacer.impose(scope, w.until_ms as u64);
        }
    }
    Ok(Arc::new(Mutex::new(pacer)))
}

/// pi on other machines, when the person asked for it: a listener that cannot bind is an
/// error they must see, not a silent absence.
async fn listen_remote(
    opts: &ServeOptions,
    p: &Profile,
) -> Result<Option<(TcpListener, TlsAcceptor)>, HubError> {
    let Some(addr) = p.settings.remote_listen else {
        return Ok(None);
    };
    let acceptor = crate::remote::ensure_identity(&p.paths)?.acceptor()?;
    let tcp = links::tcp::bind(addr).await.map_err(HubError::io(format!(
        "listening on {addr} (remote.listen of profile {} in {})",
        opts.profile,
        p.config_path.display()
    )))?;
    tracing::info!(listen = %addr, "listening for pi on other machines (TLS)");
    Ok(Some((tcp, acceptor)))
}

// ---------------------------------------------------------------- the tasks

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
        );
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
                preview_rx,
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
    previews: mpsc::Receiver<PreviewMsg>,
    db: &Db,
    assistant: Arc<Watched>,
    wakes: &Wakes,
    stop: &watch::Receiver<bool>,
) -> [Named; 4] {
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
    ]
}

/// The order a stopping hub waits for its tasks in.
const STOP_ORDER: [&str; 9] = [
    "poller",
    "worker",
    "sender",
    "conductor",
    "topics",
    "previews",
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

// ---------------------------------------------------------------- serving

/// The hub running: its tasks, the links' listeners, the client for a last word to the owner.
struct Running {
    tasks: Tasks,
    links: Vec<JoinHandle<()>>,
    client: Client,
}

/// Builds the hub on what start-up made and spawns its tasks, its links and the instances it
/// starts itself.
async fn spawn(opts: &ServeOptions, p: &Profile, started: Started) -> Running {
    // Downloads, and the hub's own copies of what it sends (removed once sent, and by
    // retention when a crash left one behind).
    let files_dir = opts
        .agent_dir
        .path()
        .join("tmp")
        .join("telegram")
        .join(opts.profile.as_str());
    let (out_dir, voice_dir) = (files_dir.join("out"), files_dir.join("voice"));
    let hub = Hub::new(parts(opts, p, &started, out_dir.clone()));
    let extras = extras(opts, p, &started.client, files_dir, out_dir, voice_dir);
    let Started {
        db,
        client,
        secret,
        listener,
        remote,
        ..
    } = started;
    let spawner = crate::pi::spawned::Spawner {
        db: db.clone(),
        conductor: hub.conductor(),
        config_path: p.config_path.clone(),
        wakes: hub.wakes().clone(),
    };
    let rows = spawner.to_restore().await;
    let tasks = hub.spawn(Some(extras));
    let links = spawn_links(opts, &tasks, secret, listener, remote);
    start_instances(&spawner, rows, &opts.instances_at_start, tasks.conductor());
    // Broken invariants in a release build: incidents, beside the log.
    let _invariants = tokio::spawn(crate::never::record_incidents(db));
    Running {
        tasks,
        links,
        client,
    }
}

/// The parts of a profile's hub.
fn parts(opts: &ServeOptions, p: &Profile, started: &Started, out_dir: PathBuf) -> Parts {
    let settings = &p.settings;
    Parts {
        db: started.db.clone(),
        // The durable path's calls (poller, sender, topics) go through the Bot API trait.
        api: Arc::new(started.client.clone()),
        pacer: started.pacer.clone(),
        epoch: started.epoch,
        assistant: Arc::new(Watched::new(p.config_path.clone(), opts.profile.clone())),
        conductor: ConductorSettings {
            config_path: p.config_path.clone(),
            tools: ToolSettings {
                out_dir,
                max_bytes: settings.outbound_max_bytes,
            },
        },
        worker: WorkerSettings {
            bot_username: started.username.clone(),
            pairing: settings.pairing,
            config_path: p.config_path.clone(),
            profile: opts.profile.clone(),
            epoch: started.epoch,
            title_template: settings.thread_title.clone(),
        },
        poll: PollSettings {
            timeout: opts.tuning.poll_timeout,
            conflict_grace: opts.tuning.conflict_grace,
        },
        topics: TopicSettings {
            title_template: settings.thread_title.clone(),
            offline_retention: Duration::from_secs(settings.thread_retention_days * 24 * 3600),
            probe_every: opts.tuning.probe_every,
        },
    }
}

/// The extras of a profile's hub: downloads go to `files_dir`, copies of what it sends to
/// `out_dir` and `voice_dir`.
fn extras(
    opts: &ServeOptions,
    p: &Profile,
    client: &Client,
    files_dir: PathBuf,
    out_dir: PathBuf,
    voice_dir: PathBuf,
) -> Extras {
    let settings = &p.settings;
    Extras {
        client: client.clone(),
        inbound: InboundSettings {
            dir: files_dir,
            max_bytes: settings.inbound_max_bytes,
            retention: Duration::from_secs(settings.file_retention_days * 24 * 3600),
            config_path: p.config_path.clone(),
        },
        retention: RetentionSettings {
            age: opts.tuning.retention_age.unwrap_or(Duration::from_secs(
                settings.history_retention_days.saturating_mul(24 * 3600),
            )),
            every: opts.tuning.retention_every,
            file_age: Duration::from_secs(settings.file_retention_days.saturating_mul(24 * 3600)),
            copy_dirs: vec![out_dir, voice_dir.clone()],
        },
        voice: VoiceSettings {
            out_dir: voice_dir,
            config_path: p.config_path.clone(),
        },
    }
}

/// The links pi comes in by: `hub.sock`, and the TLS listener of `remote.listen`.
fn spawn_links(
    opts: &ServeOptions,
    tasks: &Tasks,
    secret: Arc<String>,
    listener: UnixListener,
    remote: Option<(TcpListener, TlsAcceptor)>,
) -> Vec<JoinHandle<()>> {
    let shared = links::socket::Shared {
        secret,
        write_timeout: opts.tuning.write_timeout,
        conductor: tasks.conductor().clone(),
        version: Arc::from(opts.version),
    };
    let mut links = vec![tokio::spawn(links::socket::serve(
        listener,
        shared.clone(),
        tasks.stop_signal(),
    ))];
    if let Some((tcp, acceptor)) = remote {
        links.push(tokio::spawn(links::tcp::serve(
            tcp,
            acceptor,
            shared,
            tasks.stop_signal(),
        )));
    }
    links
}

/// The headless instances the last hub ran (`rows`) come back on their sessions, and the
/// instances asked for at start begin.
fn start_instances(
    spawner: &crate::pi::spawned::Spawner,
    rows: Vec<store::spawned::Spawned>,
    starts: &[StartInstance],
    conductor: &mpsc::Sender<ConductorMsg>,
) {
    {
        let spawner = spawner.clone();
        tokio::spawn(async move { spawner.restore(rows).await });
    }
    for start in starts {
        match start.clone() {
            StartInstance::Echo(cwd) => {
                let tx = conductor.clone();
                tokio::spawn(async move { links::echo::start(tx, cwd).await });
            }
            StartInstance::Rpc(cwd, env) => {
                let spawner = spawner.clone();
                tokio::spawn(async move {
                    if let Err(e) = spawner.start_new(cwd, env).await {
                        tracing::warn!(error = %e, "could not start a headless pi");
                    }
                });
            }
        }
    }
}

/// Runs until `shutdown`, a task's end, or the profile or binary gone; then stops everything.
async fn run_until_stopped(
    opts: &ServeOptions,
    p: &Profile,
    lock: &ProfileLock,
    mut running: Running,
    shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<(), HubError> {
    let db = running.tasks.db().clone();
    let exe = std::env::current_exe().ok().filter(|p| p.is_file());
    let lost = gone(lock, exe.as_deref(), opts.tuning.profile_check_every);
    let fatal: Option<Result<(), HubError>> = tokio::select! {
        () = shutdown => None,
        why = lost => {
            stopping_because(why, &running.client, &db, p).await;
            None
        }
        r = running.tasks.first_to_end() => Some(r),
    };
    running.tasks.signal_stop();
    let grace = opts.tuning.shutdown_grace;
    for link in running.links {
        let _ = tokio::time::timeout(grace, link).await;
    }
    running.tasks.wait_stopped(grace).await;
    let _ = std::fs::remove_file(p.paths.socket());
    ended(fatal, &db).await
}

/// Says why a hub with nothing left to serve stops.
async fn stopping_because(why: Gone, client: &Client, db: &Db, p: &Profile) {
    match why {
        // A hub nobody can reach (its socket and secret went with the folder), which would
        // otherwise poll for ever: a test's temporary folder, a profile deleted by hand.
        Gone::Profile(why) => {
            tracing::warn!(reason = %why, "stopping: this hub's profile is gone");
        }
        // `pi remove npm:pi-telegram` (or `cargo uninstall`): the person is done with it.
        // What they set up stays; they are told where, once.
        Gone::Binary(path) => {
            tracing::warn!(binary = %path.display(), "stopping: this hub's binary was removed");
            say_removed(client, db, &path, &p.config_path, &p.paths.dir).await;
        }
    }
}

/// What `serve` returns once stopped: `fatal` is `None` for a stop, else the end of a task
/// (recorded as an incident when an error).
async fn ended(fatal: Option<Result<(), HubError>>, db: &Db) -> Result<(), HubError> {
    match fatal {
        None => {
            tracing::info!("stopped");
            Ok(())
        }
        Some(r) => {
            if let Err(e) = &r {
                let message = e.to_string();
                let now = db.now_ms();
                let _ = db
                    .write(Durability::OnDisk, move |tx| {
                        incidents::record(tx, now, "hub", &message)
                    })
                    .await;
            }
            r.and(Err(HubError::Internal(
                "a hub task ended unexpectedly".into(),
            )))
        }
    }
}

/// The start-up transaction: a new lease epoch, the last hub's links marked gone, the bot's
/// commands republished, sends the last hub left `sending` recovered. Returns the epoch and
/// (resent, ambiguous) rows. Public for simulations that restart the hub in-process.
pub fn take_over(
    tx: &store::Connection,
    pid: i64,
    started_by: &str,
    now: i64,
) -> Result<(lease::Epoch, (usize, usize)), store::StoreError> {
    let epoch = lease::acquire(tx, pid, now)?;
    // The last hub's links are gone, and the bot's command list may have been changed while it
    // was down: republished with the lease, so the row is there as soon as this hub's epoch is.
    store::instances::mark_all_gone(tx, crate::state::HUB_RESTARTED, now)?;
    crate::outgoing::bot_commands::forget_published(tx)?;
    crate::outgoing::bot_commands::refresh(tx, now)?;
    kv::set(tx, kv::HUB_STARTED_BY, started_by)?;
    kv::set_i64(tx, kv::HUB_STARTED_MS, now)?;
    let (resent, ambiguous) = outbox::recover_interrupted(tx, now)?;
    if resent > 0 {
        incidents::record(
            tx,
            now,
            "send",
            &format!(
                "{resent} message(s) that must arrive (answers, notices of interrupted prompts) were interrupted by the last stop and are sent again, each marked as a possible repeat"
            ),
        )?;
    }
    Ok((epoch, (resent, ambiguous)))
}

/// Resolves, with the reason, once `lock` no longer guards the profile: checked every `every`
/// (a stat; nothing on the message path waits for it).
/// Why a running hub has nothing left to serve.
enum Gone {
    /// Its profile folder or lock file: [`ProfileLock::lost`]'s reason.
    Profile(String),
    /// Its own executable, at this path.
    Binary(PathBuf),
}

/// Resolves when the profile's lock or the hub's executable `exe` is gone, checked every
/// `every`. An executable counts as gone only when missing at two checks in a row: an update
/// (`pi update`, `cargo install`) replaces the file, and may leave its path empty for a moment.
async fn gone(lock: &ProfileLock, exe: Option<&Path>, every: Duration) -> Gone {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut missing = false;
    loop {
        tick.tick().await;
        if let Some(why) = lock.lost() {
            return Gone::Profile(why);
        }
        if let Some(exe) = exe {
            let now_missing = tokio::fs::metadata(exe)
                .await
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
            if missing && now_missing {
                return Gone::Binary(exe.to_owned());
            }
            missing = now_missing;
        }
    }
}

/// Tells the owner, best effort, that the hub stops because its binary was removed, and where
/// their setup and history stay. Direct rather than through the outbox: no hub will be left
/// to send it later.
async fn say_removed(client: &Client, db: &Db, binary: &Path, config: &Path, state: &Path) {
    let Ok(Some(owner)) = db.read(|c| kv::get_i64(c, kv::OWNER)).await else {
        return;
    };
    let text = crate::outgoing::texts::binary_removed(binary, config, state);
    let params = json!({ "chat_id": owner, "text": text });
    let send = client.call("sendMessage", &params);
    match tokio::time::timeout(Duration::from_secs(10), send).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "could not tell the owner the hub stops"),
        Err(_) => tracing::warn!("telling the owner the hub stops took too long"),
    }
}

fn joined(r: Result<Result<(), HubError>, tokio::task::JoinError>) -> Result<(), HubError> {
    r.map_err(|e| HubError::Io {
        context: "hub task".into(),
        source: std::io::Error::other(e.to_string()),
    })?
}

/// `getMe`, retried while Telegram is unreachable; a rejected token is fatal.
async fn get_me(client: &Client, db: &Db) -> Result<serde_json::Value, HubError> {
    let mut backoff = Duration::from_secs(1);
    loop {
        match client.call("getMe", &json!({})).await {
            Ok(me) => return Ok(me),
            Err(e) if e.api_kind() == Some(ApiErrorKind::Unauthorized) => {
                return Err(HubError::Unauthorized);
            }
            Err(CallError::Api(e)) => {
                return Err(HubError::Telegram {
                    context: "getMe".into(),
                    source: CallError::Api(e),
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "Telegram is not reachable; retrying");
                let message = e.to_string();
                let now = db.now_ms();
                db.write(Durability::OnDisk, move |tx| {
                    incidents::record(tx, now, "getMe", &message)
                })
                .await?;
                // A flood wait is Telegram's to set: asking again sooner is refused again.
                let wait = match &e {
                    CallError::Flood { retry_after, .. } => backoff.max(*retry_after),
                    _ => backoff,
                };
                tokio::time::sleep(wait).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}
