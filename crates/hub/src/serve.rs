//! `pi-telegram serve`: take the profile lock, open the store, check the bot, then run the
//! poller, the worker and the sender until a signal or a fatal error, and stop cleanly.

use crate::db::Durability;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use store::{Store, flood, incidents, kv, lease, outbox};
use telegram::{ApiErrorKind, CallError, Client, ClientOptions, FloodScope, Pacer};
use tokio::sync::{Mutex, mpsc, watch};

use crate::conductor::Conductor;
use crate::config::{self, ConfigFile};
use crate::db::Db;
use crate::error::HubError;
use crate::links;
use crate::lock::ProfileLock;
use crate::paths::{AgentDir, ProfileName};
use crate::poller::{self, PollSettings};
use crate::sender;
use crate::topics::{self, TopicSettings};
use crate::wakes::Wakes;
use crate::webhook;
use crate::worker::{self, WorkerSettings};

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
    /// The profile.
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
pub async fn serve(
    opts: ServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), HubError> {
    let paths = opts.agent_dir.profile(&opts.profile);
    if let Some(entry) = &opts.child_extension {
        links::rpc::set_child_extension(entry.clone(), opts.profile.as_str());
    }
    paths
        .ensure()
        .map_err(HubError::io(format!("creating {}", paths.dir.display())))?;
    let config_path = opts.agent_dir.config_file();
    let file = ConfigFile::load(&config_path)?;
    if file.migrated() {
        file.save()?;
        tracing::info!(
            "moved the bot identity of the older top-level layout into profiles.default"
        );
    }
    let settings = file.profile(&opts.profile);
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
    let started_by = crate::lifecycle::StartedBy::from_env();
    if started_by == crate::lifecycle::StartedBy::Extension
        && let Some(found) = crate::lifecycle::installed(&paths)
    {
        // The service runs this profile's hub: start it rather than a second hub beside it.
        match crate::lifecycle::start(&found) {
            Ok(()) => {
                tracing::info!(service = %found.name, "started the service instead");
                return Ok(());
            }
            Err(e) => tracing::warn!(error = %e, "could not start the service; serving here"),
        }
    }
    let lock = ProfileLock::acquire(&paths.lock_file())?;
    // Starting a hub is as deliberate as stopping one: the extension may start it again.
    if let Err(e) = crate::lifecycle::clear_stopped(&paths) {
        tracing::warn!(error = %e, "could not remove the stop marker");
    }
    // Every wait from here on ends on a stop: start-up retries an unreachable Telegram for as
    // long as it takes, and a person stopping the hub meanwhile must not need SIGKILL.
    let mut shutdown = std::pin::pin!(shutdown);
    let api_base = config::resolve_api_base(&settings);
    tracing::info!(profile = %opts.profile, started_by = started_by.as_str(), bot = %token, token_from = %token_source, api_base = %api_base, "starting the hub");

    let started = async {
        // Opening runs migrations and fsyncs: on a blocking thread, like every store call.
        let state_db = paths.state_db();
        let store = tokio::task::spawn_blocking(move || Store::open(&state_db))
            .await
            .map_err(|e| store::StoreError::Corrupt(format!("store task failed: {e}")))??;
        let store = Arc::new(store);
        let db = Db::new(store);
        let pid = i64::from(std::process::id());
        let now = db.now_ms();
        let version = opts.version;
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

        let client =
            Client::new(&api_base, token.clone(), ClientOptions::default()).map_err(|source| {
                HubError::Telegram {
                    context: "starting the Telegram client".into(),
                    source,
                }
            })?;
        let me = get_me(&client, &db).await?;
        let bot_id = me
            .get("id")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or_else(|| token.bot_id());
        let username = me
            .get("username")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("bot")
            .to_owned();
        let topics = me
            .get("has_topics_enabled")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let state_dir = paths.dir.display().to_string();
        let config_owner = settings.allowed_user_id;
        let (owner, mirror) = {
            let username = username.clone();
            db.write(Durability::OnDisk, move |tx| {
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
                kv::set(tx, kv::BOT_USERNAME, &username)?;
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
            })
            .await??
        };
        if mirror && let Some(o) = owner {
            let mut file = ConfigFile::load(&config_path)?;
            file.set_allowed_user_id(&opts.profile, o);
            if let Err(e) = file.save() {
                tracing::warn!(error = %e, "could not mirror the owner into the config file");
            }
        }
        tracing::info!(bot_id, username = %username, threaded_mode = topics, owner = ?owner, "bot ready");
        // A webhook makes every poll fail: remove it (the poller checks again on a 409).
        if let Err(e) = webhook::clear(&client, &db).await {
            tracing::warn!(error = %e, "could not check the bot's webhook");
        }

        let mut pacer = Pacer::new(settings.pacing.clone());
        let now = db.now_ms();
        for w in db.read(move |c| flood::active(c, now)).await? {
            if let Some(scope) = FloodScope::from_key(&w.scope) {
                tracing::info!(scope = %w.scope, seconds_left = (w.until_ms - now) / 1000, "honouring a flood wait from before the restart");
                pacer.impose(scope, w.until_ms as u64);
            }
        }
        let pacer = Arc::new(Mutex::new(pacer));

        let secret = Arc::new(crate::secret::ensure(&paths.secret()).map_err(HubError::io(
            format!("creating {}", paths.secret().display()),
        ))?);
        // pi on other machines, when the person asked for it: a listener that cannot bind is
        // an error they must see, not a silent absence. Bound before hub.sock, so a hub whose
        // socket is there listens everywhere it should.
        let remote = match settings.remote_listen {
            None => None,
            Some(addr) => {
                let acceptor = crate::remote::ensure_identity(&paths)?.acceptor()?;
                let tcp = links::tcp::bind(addr).await.map_err(HubError::io(format!(
                    "listening on {addr} (remote.listen of profile {} in {})",
                    opts.profile,
                    config_path.display()
                )))?;
                tracing::info!(listen = %addr, "listening for pi on other machines (TLS)");
                Some((tcp, acceptor))
            }
        };

        let listener = links::socket::bind(&paths.socket()).map_err(HubError::io(format!(
            "listening on {}",
            paths.socket().display()
        )))?;

        Ok::<_, HubError>((db, epoch, client, username, pacer, secret, listener, remote))
    };
    let (db, epoch, client, username, pacer, secret, listener, remote) = tokio::select! {
        r = started => r?,
        () = &mut shutdown => {
            tracing::info!("stopped during start-up");
            return Ok(());
        }
    };
    let assistant = Arc::new(crate::assistant::Watched::new(
        config_path.clone(),
        opts.profile.clone(),
    ));
    // The durable path's calls (poller, sender, topics) go through the Bot API trait.
    let api: crate::bot_api::Api = Arc::new(client.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    // Bounded: previews are best effort, and a stuck preview call must not hold pi's events.
    let (preview_tx, preview_rx) = mpsc::channel(4096);
    let wakes = Wakes::default();
    // Downloads, and the hub's own copies of what it sends (removed once sent, and by
    // retention when a crash left one behind).
    let files_dir = opts
        .agent_dir
        .path()
        .join("tmp")
        .join("telegram")
        .join(opts.profile.as_str());
    let (out_dir, voice_dir) = (files_dir.join("out"), files_dir.join("voice"));
    let (handoff, claims) = sender::handoff(pacer.clone());
    let (conductor_tx, conductor_rx) = mpsc::channel(1024);
    let conduct = {
        let conductor = Conductor::new(
            db.clone(),
            conductor_rx,
            conductor_tx.clone(),
            wakes.clone(),
            epoch,
            assistant.clone(),
            preview_tx,
            handoff,
            crate::conductor::ConductorSettings {
                config_path: config_path.clone(),
                tools: crate::conductor::ToolSettings {
                    out_dir: out_dir.clone(),
                    max_bytes: settings.outbound_max_bytes,
                },
            },
        );
        tokio::spawn(conductor.run(stop_rx.clone()))
    };
    let preview_task = tokio::spawn(
        crate::preview::Previews::new(client.clone(), assistant.clone())
            .run(preview_rx, stop_rx.clone()),
    );
    let topic_task = {
        let topic_settings = TopicSettings {
            title_template: settings.thread_title.clone(),
            offline_retention: Duration::from_secs(settings.thread_retention_days * 24 * 3600),
            probe_every: opts.tuning.probe_every,
        };
        tokio::spawn(topics::run(
            db.clone(),
            api.clone(),
            pacer.clone(),
            epoch,
            topic_settings,
            wakes.clone(),
            stop_rx.clone(),
        ))
    };
    let inbound_task = {
        let inbound = crate::inbound::InboundSettings {
            dir: files_dir.clone(),
            max_bytes: settings.inbound_max_bytes,
            retention: Duration::from_secs(settings.file_retention_days * 24 * 3600),
            config_path: config_path.clone(),
        };
        tokio::spawn(crate::inbound::run(
            db.clone(),
            client.clone(),
            Arc::new(inbound),
            wakes.clone(),
            stop_rx.clone(),
        ))
    };
    let retention_task = tokio::spawn(crate::retention::run(
        db.clone(),
        crate::retention::RetentionSettings {
            age: opts.tuning.retention_age.unwrap_or(Duration::from_secs(
                settings.history_retention_days.saturating_mul(24 * 3600),
            )),
            every: opts.tuning.retention_every,
            file_age: Duration::from_secs(settings.file_retention_days.saturating_mul(24 * 3600)),
            copy_dirs: vec![out_dir.clone(), voice_dir.clone()],
        },
        stop_rx.clone(),
    ));
    let voice_task = tokio::spawn(crate::voice::run(
        db.clone(),
        Arc::new(crate::voice::VoiceSettings {
            out_dir: voice_dir,
            config_path: config_path.clone(),
        }),
        wakes.clone(),
        stop_rx.clone(),
    ));
    let shared = links::socket::Shared {
        secret,
        write_timeout: opts.tuning.write_timeout,
        conductor: conductor_tx.clone(),
        version: Arc::from(opts.version),
    };
    let sock = tokio::spawn(links::socket::serve(
        listener,
        shared.clone(),
        stop_rx.clone(),
    ));
    let remote_task = remote.map(|(tcp, acceptor)| {
        tokio::spawn(links::tcp::serve(tcp, acceptor, shared, stop_rx.clone()))
    });
    let spawner = crate::spawned::Spawner {
        db: db.clone(),
        conductor: conductor_tx.clone(),
        config_path: config_path.clone(),
        wakes: wakes.clone(),
    };
    // The headless instances the last hub ran come back on their sessions.
    {
        let rows = spawner.to_restore().await;
        let spawner = spawner.clone();
        tokio::spawn(async move { spawner.restore(rows).await });
    }
    for start in &opts.instances_at_start {
        match start.clone() {
            StartInstance::Echo(cwd) => {
                let tx = conductor_tx.clone();
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
    let handling = WorkerSettings {
        bot_username: username.clone(),
        pairing: settings.pairing,
        config_path: config_path.clone(),
        profile: opts.profile.clone(),
        epoch,
        title_template: settings.thread_title.clone(),
    };
    let poll = {
        let (db, client, handling, wakes, stop) = (
            db.clone(),
            api.clone(),
            handling.clone(),
            wakes.clone(),
            stop_rx.clone(),
        );
        let settings = PollSettings {
            timeout: opts.tuning.poll_timeout,
            conflict_grace: opts.tuning.conflict_grace,
        };
        tokio::spawn(
            async move { poller::run(db, client, settings, &handling, &wakes, stop).await },
        )
    };
    let work = tokio::spawn(worker::run(
        db.clone(),
        handling,
        wakes.clone(),
        stop_rx.clone(),
    ));
    let send = tokio::spawn(sender::run(
        db.clone(),
        api.clone(),
        pacer,
        wakes.clone(),
        claims,
        stop_rx.clone(),
    ));
    // Broken invariants in a release build: incidents, beside the log.
    let _invariants = tokio::spawn(crate::never::record_incidents(db.clone()));
    // Work left from before the restart.
    wakes.worker.notify_one();
    wakes.sender.notify_one();
    wakes.inbound.notify_one();
    wakes.voice.notify_one();

    let mut poll = poll;
    let mut work = work;
    let mut send = send;
    let mut conduct = conduct;
    let mut topic_task = topic_task;
    let mut preview_task = preview_task;
    let mut inbound_task = inbound_task;
    let mut voice_task = voice_task;
    let mut retention_task = retention_task;
    let exe = std::env::current_exe().ok().filter(|p| p.is_file());
    let lost = gone(&lock, exe.as_deref(), opts.tuning.profile_check_every);
    let fatal: Option<Result<(), HubError>> = tokio::select! {
        () = &mut shutdown => None,
        why = lost => {
            match why {
                // A hub nobody can reach (its socket and secret went with the folder), which
                // would otherwise poll for ever: a test's temporary folder, a profile deleted
                // by hand.
                Gone::Profile(why) => {
                    tracing::warn!(reason = %why, "stopping: this hub's profile is gone");
                }
                // `pi remove npm:pi-telegram` (or `cargo uninstall`): the person is done with
                // it. What they set up stays; they are told where, once.
                Gone::Binary(path) => {
                    tracing::warn!(binary = %path.display(), "stopping: this hub's binary was removed");
                    say_removed(&client, &db, &path, &config_path, &paths.dir).await;
                }
            }
            None
        }
        r = &mut poll => Some(joined(r)),
        r = &mut work => Some(joined(r)),
        r = &mut send => Some(joined(r)),
        r = &mut conduct => Some(joined(r)),
        r = &mut topic_task => Some(joined(r)),
        r = &mut preview_task => Some(joined(r)),
        r = &mut inbound_task => Some(joined(r)),
        r = &mut voice_task => Some(joined(r)),
        r = &mut retention_task => Some(joined(r)),
    };
    let _ = stop_tx.send(true);
    let grace = opts.tuning.shutdown_grace;
    let _ = tokio::time::timeout(grace, sock).await;
    if let Some(task) = remote_task {
        let _ = tokio::time::timeout(grace, task).await;
    }
    for (name, task) in [
        ("poller", poll),
        ("worker", work),
        ("sender", send),
        ("conductor", conduct),
        ("topics", topic_task),
        ("previews", preview_task),
        ("inbound", inbound_task),
        ("voice", voice_task),
        ("retention", retention_task),
    ] {
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
    let _ = std::fs::remove_file(paths.socket());
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
    crate::bot_commands::forget_published(tx)?;
    crate::bot_commands::refresh(tx, now)?;
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
    let text = crate::texts::binary_removed(binary, config, state);
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
