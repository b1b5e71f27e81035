//! Checks that talk to Telegram: reachable, the token accepted (`getMe`), the state's bot,
//! Threaded Mode, a webhook (`getWebhookInfo`), another poller, and the clock.
//!
//! The probe for another poller is a `getUpdates` without `offset` (it confirms nothing, so
//! no update is lost), without `allowed_updates` (the hub's setting stays), with `limit` 1 and
//! a short long-poll: a program that polls this bot answers our poll's supersession with a
//! poll of its own within that time, and ours comes back `409`. It runs only while no hub of
//! ours holds the profile lock: with one running, our probe would interrupt its poll. A
//! program that pauses longer than the probe between polls can go unnoticed.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use telegram::{ApiErrorKind, CallError, Client, ClientOptions, FAMILY_ENV, Family, Route};

use hub::config;
use hub::network::NetworkStatus;

use super::{Check, Ctx, profile_flag};

/// Clocks further apart than this get a warning.
const CLOCK_TOLERANCE: Duration = Duration::from_secs(60);

const NETWORK: (&str, &str) = ("network", "Network route");
const REACH: (&str, &str) = ("telegram", "Telegram reachable");
const TOKEN: (&str, &str) = ("token", "Bot token");
const WEBHOOK: (&str, &str) = ("webhook", "Webhook");
const POLLER: (&str, &str) = ("poller", "Other pollers");
const CLOCK: (&str, &str) = ("clock", "Clock");
const THREADED: (&str, &str) = ("threaded_mode", "Threaded Mode");

/// Skips the checks that need an answer from Telegram.
fn skip_rest(checks: &mut Vec<Check>, why: &str) {
    for (id, title) in [WEBHOOK, POLLER, CLOCK, THREADED] {
        checks.push(Check::skip(id, title, why));
    }
}

/// Runs the Telegram checks (in the order: reachable, token, webhook, poller, clock, Threaded
/// Mode).
pub(crate) async fn checks(ctx: &Ctx, checks: &mut Vec<Check>) {
    let Some(settings) = &ctx.settings else {
        let why = "telegram.json must be fixed first";
        checks.push(Check::skip(NETWORK.0, NETWORK.1, why));
        checks.push(Check::skip(REACH.0, REACH.1, why));
        checks.push(Check::skip(TOKEN.0, TOKEN.1, why));
        skip_rest(checks, why);
        return;
    };
    let setup = format!("pi-telegram setup{}", profile_flag(&ctx.opts.profile));
    let Some((token, source)) = config::resolve_token(settings) else {
        checks.push(Check::skip(
            NETWORK.0,
            NETWORK.1,
            "no token to call Telegram with",
        ));
        checks.push(Check::skip(
            REACH.0,
            REACH.1,
            "no token to call Telegram with",
        ));
        checks.push(Check::fail(
            TOKEN.0,
            TOKEN.1,
            format!("no bot token for profile {}", ctx.opts.profile),
            format!(
                "run `{setup}` and paste the token from @BotFather (or set TELEGRAM_BOT_TOKEN)"
            ),
        ));
        skip_rest(checks, "no token to call Telegram with");
        return;
    };
    let api_base = config::resolve_api_base(settings);
    let (family, unknown_family) = Family::from_env();
    let client = match Client::new(
        &api_base,
        token.clone(),
        ClientOptions {
            timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(10),
            family,
            // The hub's own resolver (tests), so doctor reaches what the hub reaches.
            hosts_file: std::env::var_os(telegram::HOSTS_FILE_ENV).map(std::path::PathBuf::from),
            ..ClientOptions::default()
        },
    ) {
        Ok(c) => c,
        Err(e) => {
            checks.push(Check::skip(
                NETWORK.0,
                NETWORK.1,
                "no HTTP client could be made",
            ));
            checks.push(Check::fail(
                REACH.0,
                REACH.1,
                format!("cannot make an HTTP client: {e}"),
                "check the proxy variables (HTTPS_PROXY, ALL_PROXY)",
            ));
            checks.push(Check::skip(TOKEN.0, TOKEN.1, "Telegram was not reached"));
            skip_rest(checks, "Telegram was not reached");
            return;
        }
    };

    checks.push(network(ctx, &client, &api_base, unknown_family));

    // getMe: reachability, the token, and (from its Date header) the clock.
    let sent = SystemTime::now();
    let me = client.call_dated("getMe", &json!({})).await;
    let (me, date) = match me {
        Ok(answer) => answer,
        Err(CallError::Api(e)) => {
            checks.push(Check::pass(REACH.0, REACH.1, format!("{api_base} answers")));
            let fix = if e.kind == ApiErrorKind::Unauthorized || e.kind == ApiErrorKind::NotFound {
                format!(
                    "the token (from {source}) is wrong or was revoked: copy it again from @BotFather (/mybots → your bot → API Token) and run `{setup}`"
                )
            } else {
                format!("check the token (from {source}) and apiBase ({api_base})")
            };
            checks.push(Check::fail(
                TOKEN.0,
                TOKEN.1,
                format!("Telegram refused getMe: {e}"),
                fix,
            ));
            skip_rest(checks, "the token was refused");
            return;
        }
        Err(CallError::Flood { retry_after, .. }) => {
            checks.push(Check::warn(
                REACH.0,
                REACH.1,
                format!(
                    "{api_base} asks this bot to wait {} s (flood control)",
                    retry_after.as_secs()
                ),
                "run doctor again after the wait",
            ));
            checks.push(Check::skip(TOKEN.0, TOKEN.1, "Telegram asked to wait"));
            skip_rest(checks, "Telegram asked to wait");
            return;
        }
        Err(e) => {
            let mut fix = match client.route() {
                Route::Proxy(p) => format!(
                    "check that the proxy {} runs and lets this machine through to {api_base} (it comes from {}: fix or unset it, or name the host in NO_PROXY to go direct)",
                    p.shown, p.var
                ),
                Route::Direct | Route::Exempt { .. } => format!(
                    "check the network; with a local Bot API server, that it runs (apiBase / $TELEGRAM_API_BASE: {api_base})"
                ),
            };
            if client.family() != Family::Auto {
                fix.push_str(&format!(
                    "; {FAMILY_ENV}={} limits the addresses tried: auto tries every one",
                    client.family()
                ));
            }
            checks.push(Check::fail(
                REACH.0,
                REACH.1,
                format!("cannot reach {api_base}: {e}"),
                fix,
            ));
            checks.push(Check::skip(TOKEN.0, TOKEN.1, "Telegram was not reached"));
            skip_rest(checks, "Telegram was not reached");
            return;
        }
    };
    let elapsed = sent.elapsed().unwrap_or_default();
    checks.push(Check::pass(
        REACH.0,
        REACH.1,
        format!("{api_base} answered in {} ms", elapsed.as_millis()),
    ));

    let bot_id = me
        .get("id")
        .and_then(Value::as_i64)
        .unwrap_or_else(|| token.bot_id());
    let username = me
        .get("username")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    let stored_bot = ctx.store.as_ref().and_then(|s| {
        s.read(|c| store::kv::get_i64(c, store::kv::BOT_ID))
            .ok()
            .flatten()
    });
    match stored_bot {
        Some(stored) if stored != bot_id => checks.push(Check::fail(
            TOKEN.0,
            TOKEN.1,
            format!(
                "the token is for @{username} (id {bot_id}), but the state in {} belongs to bot {stored}",
                ctx.paths.dir.display()
            ),
            "use another profile (--profile) for the new bot, or move that folder away to start over",
        )),
        _ => checks.push(Check::pass(
            TOKEN.0,
            TOKEN.1,
            format!("accepted: @{username} (id {bot_id}), token from {source}"),
        )),
    }

    let webhook_set = webhook(ctx, &client, checks).await;
    poller(ctx, &client, webhook_set, checks).await;
    clock(date, sent, checks);

    if me.get("has_topics_enabled").and_then(Value::as_bool) == Some(true) {
        checks.push(Check::pass(
            THREADED.0,
            THREADED.1,
            "on: each pi gets its own thread",
        ));
    } else {
        checks.push(Check::pass(
            THREADED.0,
            THREADED.1,
            "off: every pi shares the one chat (classic mode). For a thread per pi: @BotFather → Open (its Mini App) → your bot → Bot Settings → Threaded Mode",
        ));
    }
}

/// `network`: the way this doctor's client reaches the API base (the proxy without its
/// credentials, or direct, and whether NO_PROXY exempts the base; the address family), what it
/// had to ignore, and the running hub's way when that differs (a hub started by the service or
/// a pi has another environment than this shell).
fn network(
    ctx: &Ctx,
    client: &Client,
    api_base: &str,
    unknown_family: Option<telegram::network::UnknownFamily>,
) -> Check {
    let ours = NetworkStatus::of(client);
    let mut detail = format!("{api_base}: {}", ours.summary);
    let hub = ctx.hub_pid.and_then(|pid| {
        let recorded = ctx
            .store
            .as_ref()?
            .read(|c| store::kv::get(c, hub::network::KV));
        let theirs = NetworkStatus::parse(&recorded.ok().flatten()?)?;
        Some((pid, theirs))
    });
    if let Some((pid, theirs)) = hub
        && theirs != ours
    {
        let who = if pid == 0 {
            "the running hub".to_owned()
        } else {
            format!("the running hub (pid {pid})")
        };
        detail.push_str(&format!(
            "; {who} has another environment: {}",
            theirs.summary
        ));
    }
    let mut problems: Vec<String> = client
        .ignored_proxies()
        .iter()
        .map(ToString::to_string)
        .collect();
    if let Some(e) = unknown_family {
        problems.push(e.to_string());
    }
    if problems.is_empty() {
        return Check::pass(NETWORK.0, NETWORK.1, detail);
    }
    Check::warn(
        NETWORK.0,
        NETWORK.1,
        format!("{detail}; {}", problems.join("; ")),
        format!(
            "fix the variable: a proxy URL such as http://host:3128 or socks5://host:1080; {FAMILY_ENV} one of auto, ipv4, ipv6, ipv4-fallback"
        ),
    )
}

/// `webhook`: none set. Returns whether one is.
async fn webhook(ctx: &Ctx, client: &Client, checks: &mut Vec<Check>) -> bool {
    let info = match client.call("getWebhookInfo", &json!({})).await {
        Ok(i) => i,
        Err(e) => {
            checks.push(Check::skip(
                WEBHOOK.0,
                WEBHOOK.1,
                format!("getWebhookInfo failed: {e}"),
            ));
            return false;
        }
    };
    let url = info.get("url").and_then(Value::as_str).unwrap_or_default();
    if url.is_empty() {
        checks.push(Check::pass(WEBHOOK.0, WEBHOOK.1, "none set"));
        return false;
    }
    let pending = info
        .get("pending_update_count")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    // Only the host: a webhook's path often holds a secret.
    let host = hub::incoming::webhook::host_of(url);
    let fix = if ctx.hub_pid.is_some() {
        "the running hub removes it at its next poll; if it keeps coming back, another program sets it: stop that program".to_owned()
    } else {
        format!(
            "`pi-telegram serve{}` removes it at start and keeps the waiting updates; if another program set it, stop that program first",
            profile_flag(&ctx.opts.profile)
        )
    };
    checks.push(Check::warn(
        WEBHOOK.0,
        WEBHOOK.1,
        format!(
            "a webhook to {host} is set ({pending} update(s) waiting): polling fails while it is"
        ),
        fix,
    ));
    true
}

/// `poller`: no other program receives this bot's updates.
async fn poller(ctx: &Ctx, client: &Client, webhook_set: bool, checks: &mut Vec<Check>) {
    if let Some(pid) = ctx.hub_pid {
        checks.push(Check::pass(
            POLLER.0,
            POLLER.1,
            format!(
                "our hub (pid {pid}) polls; not probed, since a probe would interrupt its poll (a hub that meets another poller for long stops with exit code 4)"
            ),
        ));
        return;
    }
    if webhook_set {
        checks.push(Check::skip(
            POLLER.0,
            POLLER.1,
            "the webhook blocks every poll (see Webhook)",
        ));
        return;
    }
    let secs = ctx.opts.poll_probe.as_secs();
    // No offset: nothing is confirmed. No allowed_updates: the hub's setting stays.
    let probe = client
        .call("getUpdates", &json!({ "limit": 1, "timeout": secs }))
        .await;
    match probe {
        Ok(updates) => {
            let waiting = updates.as_array().is_some_and(|a| !a.is_empty());
            let detail = if waiting {
                "none seen; updates are waiting for the hub (the probe confirmed none)".to_owned()
            } else {
                format!("none polled during a {secs} s probe")
            };
            checks.push(Check::pass(POLLER.0, POLLER.1, detail));
        }
        Err(CallError::Api(e)) if e.kind == ApiErrorKind::Conflict => {
            checks.push(Check::fail(
                POLLER.0,
                POLLER.1,
                format!("another program is receiving this bot's updates ({})", e.description),
                "only one program may poll a bot: stop the other one (another pi-telegram with another agent dir, the reference extension, a bot framework), or give this hub a bot of its own",
            ));
        }
        Err(e) => checks.push(Check::skip(
            POLLER.0,
            POLLER.1,
            format!("the probe failed: {e}"),
        )),
    }
}

/// `clock`: this machine's clock against the `Date` of Telegram's answer.
fn clock(date: Option<SystemTime>, sent: SystemTime, checks: &mut Vec<Check>) {
    let Some(theirs) = date else {
        checks.push(Check::skip(
            CLOCK.0,
            CLOCK.1,
            "Telegram's answer had no readable Date header",
        ));
        return;
    };
    let ours = sent;
    let (ahead, by) = match ours.duration_since(theirs) {
        Ok(d) => (true, d),
        Err(e) => (false, e.duration()),
    };
    // The header has whole seconds, and the answer took a moment: a second or two is noise.
    if by <= CLOCK_TOLERANCE {
        checks.push(Check::pass(
            CLOCK.0,
            CLOCK.1,
            format!("within {} s of Telegram's", by.as_secs().max(1)),
        ));
    } else {
        checks.push(Check::warn(
            CLOCK.0,
            CLOCK.1,
            format!(
                "this machine's clock is {} s {} Telegram's: pairing codes, button expiry and flood waits go by it",
                by.as_secs(),
                if ahead { "ahead of" } else { "behind" }
            ),
            "turn on time synchronisation (timedatectl set-ntp true, or your system's NTP settings)",
        ));
    }
}
