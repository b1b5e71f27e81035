//! Start-up: the store under this hub's lease (`take_over`, also the simulation's), the bot met
//! (`getMe`, recorded), the pacer with the flood waits Telegram set, the listeners bound.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use store::{Store, flood, incidents, kv, lease, outbox};
use telegram::{ApiErrorKind, CallError, Client, ClientOptions, FloodScope, Pacer};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Mutex;
use tokio_rustls::TlsAcceptor;

use crate::config::{ConfigFile, ProfileSettings};
use crate::db::{Db, Durability};
use crate::error::HubError;
use crate::incoming::webhook;
use crate::network;
use crate::pi::links;

use super::{Profile, ServeOptions};

/// What start-up made: the store under this hub's lease, the bot met, the listeners bound.
pub(super) struct Started {
    pub(super) db: Db,
    pub(super) epoch: lease::Epoch,
    /// The state database's own id, in every welcome.
    pub(super) store_id: Arc<str>,
    pub(super) client: Client,
    pub(super) username: String,
    pub(super) pacer: Arc<Mutex<Pacer>>,
    pub(super) secret: Arc<String>,
    pub(super) listener: UnixListener,
    pub(super) remote: Option<(TcpListener, TlsAcceptor)>,
}

/// Opens the store, takes the lease, meets the bot and binds the listeners.
pub(super) async fn start_up(opts: &ServeOptions, p: &Profile) -> Result<Started, HubError> {
    let (db, epoch, store_id) = open_store(p, opts.version).await?;
    let options = ClientOptions {
        timeout: opts.tuning.client_timeout,
        family: network::family_from_env(),
        hosts_file: std::env::var_os(telegram::HOSTS_FILE_ENV).map(std::path::PathBuf::from),
        ..ClientOptions::default()
    };
    let client = Client::new(&p.api_base, p.token.clone(), options).map_err(|source| {
        HubError::Telegram {
            context: "starting the Telegram client".into(),
            source,
        }
    })?;
    network::log_route(&client);
    record_network(&client, &db).await?;
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
        store_id,
        client,
        username,
        pacer,
        secret,
        listener,
        remote,
    })
}

/// Opens the store and takes the profile's lease, recovering what the last hub left.
async fn open_store(
    p: &Profile,
    version: &'static str,
) -> Result<(Db, lease::Epoch, Arc<str>), HubError> {
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
    let fresh_id = new_store_id()?;
    let ((epoch, (resent, ambiguous)), store_id) = db
        .write(Durability::OnDisk, move |tx| {
            let taken = take_over(tx, pid, started_by.as_str(), now)?;
            kv::set(tx, kv::HUB_VERSION, version)?;
            kv::set(tx, kv::HUB_BINARY, &binary)?;
            let store_id = match kv::get(tx, kv::STORE_ID)? {
                Some(id) => id,
                None => {
                    kv::set(tx, kv::STORE_ID, &fresh_id)?;
                    fresh_id
                }
            };
            Ok((taken, store_id))
        })
        .await?;
    if resent + ambiguous > 0 {
        tracing::warn!(resent, ambiguous, "sends interrupted by the last stop");
    }
    tracing::info!(epoch = epoch.0, "took the profile lease");
    Ok((db, epoch, Arc::from(store_id)))
}

/// A state database's id, for one that has none yet: 16 random bytes as hex.
fn new_store_id() -> Result<String, HubError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| HubError::Internal(format!("no randomness for the store's id: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The client's route and family in kv, for `status` (what this hub does, whatever the
/// environment of the shell that asks).
async fn record_network(client: &Client, db: &Db) -> Result<(), HubError> {
    let json = serde_json::to_string(&network::NetworkStatus::of(client))
        .map_err(|e| HubError::Internal(format!("the network status: {e}")))?;
    db.write(Durability::Lazy, move |tx| kv::set(tx, network::KV, &json))
        .await?;
    Ok(())
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
