//! `pi-telegram serve`: take the profile lock, open the store, check the bot, then run the
//! hub's tasks until a signal or a fatal error, and stop cleanly. Three steps: start-up
//! (`Profile::read`, `start_up`), spawning (`spawn`, through [`Hub`], the very code the
//! whole-hub simulation spawns its hub with), and running until the stop (`run_until_stopped`).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use store::{incidents, kv};
use telegram::{Client, Token};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::assistant::Watched;
use crate::config::{self, ConfigFile, ProfileSettings};
use crate::db::{Db, Durability};
use crate::error::HubError;
use crate::incoming::poller::PollSettings;
use crate::incoming::worker::WorkerSettings;
use crate::lifecycle::StartedBy;
use crate::lock::ProfileLock;
use crate::outgoing::topics::TopicSettings;
use crate::outgoing::voice::VoiceSettings;
use crate::paths::{AgentDir, ProfileName, ProfilePaths};
use crate::pi::conductor::{ConductorSettings, ToolSettings};
use crate::pi::inbound::InboundSettings;
use crate::pi::instance::ConductorMsg;
use crate::pi::links;
use crate::retention::RetentionSettings;

mod starting;
mod tasks;

pub use starting::take_over;
use starting::{Started, start_up};
pub use tasks::{Extras, Hub, Parts, Tasks};

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
    /// How long an ordinary Bot API call may take before the hub gives up on it
    /// (`PI_TELEGRAM_CLIENT_TIMEOUT_SECS`, default 30): a call whose connection hangs counts
    /// as failed then (of unknown outcome once the request left); a download may take four
    /// times as long, a long poll its own deadline.
    pub client_timeout: Duration,
    /// How often repeated failures of strangers' connections to the remote listener (one
    /// source, one kind) are summed up in one log line (`PI_TELEGRAM_REMOTE_LOG_EVERY_SECS`,
    /// default 60; the first of them is logged in full).
    pub remote_log_every: Duration,
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
            client_timeout: Duration::from_secs(
                num("PI_TELEGRAM_CLIENT_TIMEOUT_SECS").unwrap_or(30).max(1),
            ),
            remote_log_every: Duration::from_secs(
                num("PI_TELEGRAM_REMOTE_LOG_EVERY_SECS")
                    .unwrap_or(60)
                    .max(1),
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
    let out_dir_for_links = out_dir.clone();
    let hub = Hub::new(parts(opts, p, &started, out_dir.clone()));
    let extras = extras(opts, p, &started.client, files_dir, out_dir, voice_dir);
    let Started {
        db,
        store_id,
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
    let uploads = links::socket::UploadSettings {
        dir: out_dir_for_links,
        max_bytes: p.settings.outbound_max_bytes,
    };
    let links = spawn_links(opts, &tasks, (secret, store_id, uploads), listener, remote);
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
    (secret, store_id, uploads): (Arc<String>, Arc<str>, links::socket::UploadSettings),
    listener: UnixListener,
    remote: Option<(TcpListener, TlsAcceptor)>,
) -> Vec<JoinHandle<()>> {
    let shared = links::socket::Shared {
        secret,
        write_timeout: opts.tuning.write_timeout,
        conductor: tasks.conductor().clone(),
        version: Arc::from(opts.version),
        store_id,
        uploads: Arc::new(uploads),
    };
    let mut links = vec![tokio::spawn(links::socket::serve(
        listener,
        shared.clone(),
        tasks.stop_signal(),
    ))];
    if let Some((tcp, acceptor)) = remote {
        let limits = links::strangers::Limits {
            summary_every: opts.tuning.remote_log_every,
            ..links::strangers::Limits::default()
        };
        links.push(tokio::spawn(links::tcp::serve(
            tcp,
            acceptor,
            shared,
            limits,
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
        r = running.tasks.first_to_end() => match (r, lock.lost()) {
            // A task that failed because the folder went between two checks (a write's log
            // sync finds no log): the same stop as when the check sees it first.
            (Err(e), Some(why)) => {
                tracing::debug!(error = %e, "a task failed as the profile went");
                stopping_because(Gone::Profile(why), &running.client, &db, p).await;
                None
            }
            (r, _) => Some(r),
        },
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
