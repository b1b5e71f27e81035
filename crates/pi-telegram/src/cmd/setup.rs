//! `pi-telegram setup`: check a token with `getMe`, save it, and open a pairing code unless an
//! owner is known.

use serde::Serialize;
use serde_json::json;
use store::{Store, kv, pairing as codes};
use telegram::{ApiErrorKind, CallError, Client, ClientOptions, Token};

use hub::HubError;
use hub::clock::system_now_ms as now_ms;
use hub::config::{self, ConfigFile, TOKEN_ENV};
use hub::pairing;
use hub::paths::{AgentDir, ProfileName};

/// Where `setup` gets its inputs.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// pi's agent dir.
    pub agent_dir: AgentDir,
    pub profile: ProfileName,
    /// `--token`.
    pub token: Option<String>,
    /// `--api-base` (saved into the profile).
    pub api_base: Option<String>,
}

/// What `setup` found and did (`--json` prints the first three fields).
#[derive(Debug, Clone, Serialize)]
pub struct SetupReport {
    /// `@username` without the `@`.
    pub bot_username: String,
    /// Threaded Mode.
    pub has_topics_enabled: bool,
    /// The code to send as `/start CODE`, unless an owner is known.
    pub pairing_code: Option<String>,
    /// An earlier code was still valid: this one replaces it (the earlier one no longer works).
    pub replaces_previous_code: bool,
    #[serde(skip)]
    pub bot_id: i64,
    /// The owner, when known.
    #[serde(skip)]
    pub owner: Option<i64>,
    /// Where the token came from.
    #[serde(skip)]
    pub token_source: String,
    /// The config file written.
    #[serde(skip)]
    pub config_file: String,
    /// `remote.listen` and the certificate's fingerprint, when pi on other machines may join.
    #[serde(skip)]
    pub remote: Option<(std::net::SocketAddr, String)>,
}

/// Runs setup. `prompt` is asked for the token when neither `--token` nor the environment has
/// one.
pub async fn setup(
    opts: SetupOptions,
    prompt: impl FnOnce() -> std::io::Result<Option<String>>,
) -> Result<SetupReport, HubError> {
    let config_path = opts.agent_dir.config_file();
    // Load first: a malformed file stops setup before anything is written.
    let mut file = ConfigFile::load(&config_path)?;
    let (raw, source) = match (
        &opts.token,
        TOKEN_ENV
            .iter()
            .find_map(|v| std::env::var(v).ok().map(|t| (t, *v))),
    ) {
        (Some(t), _) => (t.clone(), "--token".to_owned()),
        (None, Some((t, var))) => (t, format!("${var}")),
        // Running setup again (a new pairing code, a new API base) keeps the saved token.
        (None, None) if file.profile(&opts.profile).bot_token.is_some() => {
            let saved = file
                .profile(&opts.profile)
                .bot_token
                .map(|t| t.expose().to_owned())
                .unwrap_or_default();
            (saved, "telegram.json (saved earlier)".to_owned())
        }
        (None, None) => match prompt().map_err(HubError::io("reading the token"))? {
            Some(t) => (t, "prompt".to_owned()),
            None => {
                return Err(HubError::Usage(
                    "no bot token: pass --token, set TELEGRAM_BOT_TOKEN, or run setup in a terminal to be asked".into(),
                ));
            }
        },
    };
    let token = Token::new(&raw).map_err(|e| HubError::Usage(e.to_string()))?;
    if let Some(base) = &opts.api_base
        && !(base.starts_with("http://") || base.starts_with("https://"))
    {
        return Err(HubError::Usage(format!(
            "--api-base must be an http(s) URL, not {base:?}"
        )));
    }
    let mut settings = file.profile(&opts.profile);
    if opts.api_base.is_some() {
        settings.api_base = opts.api_base.clone();
    }
    let api_base = config::resolve_api_base(&settings);
    let options = ClientOptions {
        family: hub::network::family_from_env(),
        ..ClientOptions::default()
    };
    let client =
        Client::new(&api_base, token.clone(), options).map_err(|source| HubError::Telegram {
            context: "starting the Telegram client".into(),
            source,
        })?;
    for ignored in client.ignored_proxies() {
        tracing::warn!("{ignored}");
    }
    let me = match client.call("getMe", &json!({})).await {
        Ok(me) => me,
        Err(e) if e.api_kind() == Some(ApiErrorKind::Unauthorized) => {
            return Err(HubError::Unauthorized);
        }
        Err(CallError::Api(e)) => {
            return Err(HubError::Telegram {
                context: format!("checking the token at {api_base}"),
                source: CallError::Api(e),
            });
        }
        Err(e) => {
            return Err(HubError::Telegram {
                context: format!("could not reach Telegram at {api_base}"),
                source: e,
            });
        }
    };
    let bot_id = me
        .get("id")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or_else(|| token.bot_id());
    let bot_username = me
        .get("username")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let has_topics_enabled = me
        .get("has_topics_enabled")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);

    let paths = opts.agent_dir.profile(&opts.profile);
    paths
        .ensure()
        .map_err(HubError::io(format!("creating {}", paths.dir.display())))?;
    // The certificate other machines pin is made here, so its fingerprint is settled before
    // the hub first starts.
    let remote = match settings.remote_listen {
        Some(addr) => Some((
            addr,
            hub::remote::ensure_identity(&paths)?
                .fingerprint()
                .to_owned(),
        )),
        None => None,
    };
    let store = Store::open(&paths.state_db())?;
    let state_dir = paths.dir.display().to_string();
    let stored_bot = store.read(|c| kv::get_i64(c, kv::BOT_ID))?;
    if let Some(stored) = stored_bot.filter(|s| *s != bot_id) {
        return Err(HubError::BotMismatch {
            state: state_dir,
            stored,
            token: bot_id,
        });
    }
    let owner = match settings.allowed_user_id {
        Some(o) => Some(o),
        None => store.read(|c| kv::get_i64(c, kv::OWNER))?,
    };
    let now = now_ms();
    let replaces_previous_code = owner.is_none()
        && store
            .read(codes::current)?
            .is_some_and(|p| p.state == codes::PairingState::Open && p.expires_ms > now);
    let pairing_code = if owner.is_some() {
        None
    } else {
        let code = pairing::new_code(&hub::clock::Clock::real()).map_err(|e| HubError::Io {
            context: "making a pairing code".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let hash = pairing::hash(&code);
        store.write(|tx| {
            kv::set_i64(tx, kv::BOT_ID, bot_id)?;
            codes::open(
                tx,
                &hash,
                now_ms(),
                pairing::CODE_TTL_MS,
                pairing::CODE_ATTEMPTS,
            )
        })?;
        Some(code)
    };
    file.set_bot_token(&opts.profile, &token);
    if let Some(base) = &opts.api_base {
        file.set_api_base(&opts.profile, base);
    }
    file.save()?;
    Ok(SetupReport {
        bot_username,
        has_topics_enabled,
        pairing_code,
        replaces_previous_code,
        bot_id,
        owner,
        token_source: source,
        config_file: config_path.display().to_string(),
        remote,
    })
}

/// The human-readable summary `setup` prints.
pub fn render(report: &SetupReport, profile: &ProfileName) -> String {
    let mut out = format!(
        "Bot: @{} (id {}), token from {}, saved in {} (profile {profile}).\n",
        report.bot_username, report.bot_id, report.token_source, report.config_file
    );
    if report.has_topics_enabled {
        out.push_str("Threaded Mode: on. Each pi instance will get its own thread.\n");
    } else {
        out.push_str(
            "Threaded Mode: off. To give each pi instance its own thread, open @BotFather, tap Open \
             (its Mini App), choose your bot, and turn on Threaded Mode in the bot's settings.\n",
        );
    }
    match (&report.pairing_code, report.owner) {
        (Some(code), _) => {
            if report.replaces_previous_code {
                out.push_str("\nThis pairing code replaces the one setup printed before: that one no longer works.\n");
            }
            out.push_str(&format!(
                "\nTo become the bot's owner:\n  1. Start the hub: `pi-telegram serve{flag}` (or /telegram-connect in pi).\n  \
                 2. Within 10 minutes, send this to @{}:\n\n    /start {code}\n",
                report.bot_username,
                flag = if *profile == ProfileName::default_profile() {
                    String::new()
                } else {
                    format!(" --profile {profile}")
                },
            ));
        }
        (None, Some(owner)) => out.push_str(&format!("Owner: user {owner} (already paired).\n")),
        (None, None) => {}
    }
    if let Some((addr, fingerprint)) = &report.remote {
        let flag = if *profile == ProfileName::default_profile() {
            String::new()
        } else {
            format!(" --profile {profile}")
        };
        out.push_str(&format!(
            "pi on other machines: the hub listens on {addr} (TLS, certificate {fingerprint}); `pi-telegram remote-config{flag}` prints what they need.\n"
        ));
    }
    out
}
