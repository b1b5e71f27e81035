//! What the profile's hub knows, read without disturbing it: `pi-telegram status` prints it, and
//! its JSON form is a stable interface (see README).

use serde::Serialize;
use store::outbox::State;
use store::{Store, flood, incidents, instances, journal, kv, lease, pairing, threads, turns};

use crate::clock::system_now_ms as now_ms;
use crate::config::{self, ConfigFile};
use crate::error::HubError;
use crate::lock::ProfileLock;
use crate::paths::{AgentDir, ProfileName, ProfilePaths};

/// The bot, from the last `getMe`.
#[derive(Debug, Clone, Serialize)]
pub struct BotStatus {
    /// User id.
    pub id: Option<i64>,
    /// Username.
    pub username: Option<String>,
    /// Threaded Mode.
    pub has_topics_enabled: Option<bool>,
}

/// The hub process.
#[derive(Debug, Clone, Serialize)]
pub struct HubStatus {
    /// Whether a hub holds the profile lock.
    pub running: bool,
    /// Its pid.
    pub pid: Option<u32>,
    /// The current lease epoch.
    pub epoch: Option<i64>,
    /// Who started the running (else the last) hub: `service`, `extension` or `shell`.
    pub started_by: Option<String>,
    /// Since when (Unix ms).
    pub started_ms: Option<i64>,
    /// Its release (`0.2.0`).
    pub version: Option<String>,
    /// Its executable (the npm package's, a `cargo install`'s...).
    pub binary: Option<String>,
    /// How it reaches Telegram: the proxy (without credentials) or direct, and the address
    /// family, as its client decided at start.
    pub network: Option<crate::network::NetworkStatus>,
    /// Where its log is.
    pub log: Option<String>,
    /// Stopped on purpose (`pi-telegram stop` or Ctrl-C): a pi's extension does not start it
    /// again until `/telegram-connect`. `stop` or `interrupt`.
    pub stopped_on_purpose: Option<String>,
}

/// Journal counts.
#[derive(Debug, Clone, Serialize)]
pub struct JournalStatus {
    /// Journaled, not handled yet.
    pub pending: i64,
    /// Handled (ignored ones included).
    pub handled: i64,
}

/// A pi instance.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceStatus {
    /// Instance id (new per connection).
    pub id: String,
    /// `shim` (pi with the extension), `rpc` (headless, started by the hub) or `echo`.
    pub transport: String,
    /// Working directory.
    pub cwd: String,
    /// Name shown in Telegram.
    pub label: String,
    /// Identity (what a returning pi reclaims).
    pub identity: String,
    /// Process id.
    pub pid: Option<i64>,
    /// `idle`, `busy` or `gone`.
    pub state: String,
    /// Turns queued for its identity.
    pub queued: i64,
    /// Whether new messages go to it.
    pub selected: bool,
    /// Why it left, with the technical detail.
    pub gone_reason: Option<String>,
}

/// The poll loop: whether the hub hears Telegram.
#[derive(Debug, Clone, Serialize)]
pub struct PollStatus {
    /// `polling`, `backing_off` (polls fail at once: waiting to try again), `hung` (a poll went
    /// unanswered past its deadline), or `stopped` (no hub runs: what the last one recorded).
    pub state: String,
    /// How long ago a `getUpdates` last completed (ms), with or without updates. A healthy
    /// hub's stays under `timeout_ms` (an idle long poll lasts that long).
    pub last_ok_age_ms: Option<i64>,
    /// When it completed (Unix ms).
    pub last_ok_ms: Option<i64>,
    /// Since when polls fail (Unix ms), while they do.
    pub failing_since_ms: Option<i64>,
    /// Why: `timeout`, `network`, `conflict`, `flood` or `refused`.
    pub error_class: Option<String>,
    /// The failure as first recorded in this run (no token, no URL).
    pub last_error: Option<String>,
    /// The hub's long-poll timeout (ms).
    pub timeout_ms: u64,
}

/// How long past its long-poll timeout a running hub may go without a completed poll before
/// `doctor` calls it deaf: the poll's own deadline margin (3 s), plus slack for a loaded
/// machine and the once-a-second record.
pub const DEAF_MARGIN_MS: i64 = 10_000;

impl PollStatus {
    /// The line `status` prints after `telegram `.
    pub fn summary(&self) -> String {
        let ago = self.last_ok_age_ms.map_or_else(
            || "no poll completed yet".to_owned(),
            |a| format!("last poll completed {} ago", crate::when::duration(a)),
        );
        let since = self
            .failing_since_ms
            .and_then(crate::when::Local::at)
            .map_or_else(String::new, |at| format!(" since {}", at.clock()));
        let why = self
            .last_error
            .as_deref()
            .map_or_else(String::new, |e| format!(": {e}"));
        match self.state.as_str() {
            "polling" => format!("polling ({ago})"),
            "hung" => format!("cannot reach Telegram{since}, a poll hung{why} ({ago})"),
            "backing_off" => format!(
                "polls fail{since} ({}{why}), trying again ({ago})",
                self.error_class.as_deref().unwrap_or("error")
            ),
            _ => format!("no hub polls ({ago})"),
        }
    }

    /// For `doctor`: how long a running hub has heard nothing from Telegram beyond what its
    /// long poll explains, from its last completed poll or its start (`started_ms`), whichever
    /// is later; `None` while it hears Telegram.
    pub fn deaf_ms(&self, started_ms: Option<i64>, now: i64) -> Option<i64> {
        if self.state == "stopped" {
            return None;
        }
        let since_start = started_ms.map(|s| (now - s).max(0));
        let heard = match (self.last_ok_age_ms, since_start) {
            (Some(a), Some(s)) => a.min(s),
            (a, s) => a.or(s)?,
        };
        let allowed = i64::try_from(self.timeout_ms).unwrap_or(i64::MAX) + DEAF_MARGIN_MS;
        (heard > allowed).then_some(heard)
    }

    /// A duration as `status` and `doctor` write it (`2 min`).
    pub fn duration(ms: i64) -> String {
        crate::when::duration(ms)
    }
}

/// A running flood wait.
#[derive(Debug, Clone, Serialize)]
pub struct FloodStatus {
    /// `global` or `chat:<id>`.
    pub scope: String,
    /// The chat, for chat waits.
    pub chat_id: Option<i64>,
    /// Ends at (Unix ms).
    pub until_ms: i64,
    /// Seconds left.
    pub remaining_s: i64,
    /// What Telegram asked for.
    pub retry_after_s: i64,
}

/// A recent error.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorStatus {
    /// When (Unix ms).
    pub at_ms: i64,
    /// Where.
    pub context: String,
    /// What.
    pub message: String,
}

/// The pairing code's state.
#[derive(Debug, Clone, Serialize)]
pub struct PairingStatus {
    /// `open`, `used`, `dead` or `expired`.
    pub state: String,
    /// Valid until (Unix ms).
    pub expires_ms: i64,
    /// Wrong codes each sender may send with this code: every sender has attempts of their
    /// own, so this is what the owner has while they have not tried yet.
    pub attempts_left: i64,
    /// Wrong codes sent so far, by anyone.
    pub wrong_attempts: i64,
    /// Senders who used up their attempts: refused, and no longer answered.
    pub refused_senders: i64,
}

/// A topic binding (Threaded Mode).
#[derive(Debug, Clone, Serialize)]
pub struct ThreadStatus {
    /// Identity it belongs to.
    pub identity: String,
    /// Slot letter.
    pub slot: String,
    /// Topic title.
    pub title: String,
    /// Telegram's `message_thread_id`.
    pub thread_id: i64,
    /// `active`, `offline` or `lost` (Telegram said the topic is gone; a new one follows).
    pub state: String,
    /// The live instance using it.
    pub instance: Option<String>,
}

/// A durable intent to create a topic.
#[derive(Debug, Clone, Serialize)]
pub struct IntentStatus {
    /// Id (for `pi-telegram threads resolve`).
    pub id: i64,
    /// Identity.
    pub identity: String,
    /// Slot held.
    pub slot: String,
    /// `in-flight` or `ambiguous`.
    pub state: String,
    /// Thread id, once known.
    pub thread_id: Option<i64>,
    /// Why it is ambiguous.
    pub detail: Option<String>,
}

/// Everything `status` reports. Never contains the token.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Profile.
    pub profile: String,
    /// Config file.
    pub config_file: String,
    /// State folder.
    pub state_dir: String,
    /// Whether a token is configured (never the token).
    pub token_configured: bool,
    /// API base in use.
    pub api_base: String,
    /// Bot.
    pub bot: BotStatus,
    /// Owner.
    pub owner_user_id: Option<i64>,
    /// People besides the owner: those `telegram.json` lists (`people`) and those an invite
    /// let in, by user id.
    pub people: Vec<PersonStatus>,
    /// The forum group linked as the workspace (its chat id).
    pub workspace_group: Option<i64>,
    /// Pairing code.
    pub pairing: Option<PairingStatus>,
    /// Hub process.
    pub hub: HubStatus,
    /// Next `getUpdates` offset.
    pub offset: Option<i64>,
    /// The poll loop (`None` before a hub of this release polled).
    pub poll: Option<PollStatus>,
    /// Journal.
    pub journal: JournalStatus,
    /// Turns (owner messages on their way into pi) not dispatched yet.
    pub held: i64,
    /// Of those, the ones waiting for the person to choose a pi (a tap on their chooser).
    pub awaiting_choice: i64,
    /// Of those, the ones that waited while the hub or their pi was away, held until the
    /// person answers whether they still run.
    pub awaiting_stale_answer: i64,
    /// pi's dialogs (and terminal prompts) that wait for the person.
    pub dialogs_open: i64,
    /// Turns by state.
    pub turns: std::collections::BTreeMap<String, i64>,
    /// Live pi instances and the last ones that left.
    pub instances: Vec<InstanceStatus>,
    /// Outbox rows by state.
    pub outbox: std::collections::BTreeMap<String, i64>,
    /// Running flood waits.
    pub flood_waits: Vec<FloodStatus>,
    /// Recent errors, newest first.
    pub last_errors: Vec<ErrorStatus>,
    /// The last action comments pi wrote that were refused (removed, acting on nothing),
    /// newest first: where and why, never pi's words.
    pub refused_comments: Vec<crate::outgoing::rejections::RejectedComment>,
    /// `threaded` or `classic` (from the last capability probe); `None` before the first.
    pub mode: Option<String>,
    /// Topic bindings.
    pub threads: Vec<ThreadStatus>,
    /// Topic creations whose outcome is pending or unknown.
    pub intents: Vec<IntentStatus>,
    /// The last webhook the hub removed so that polling works.
    pub webhook_removed: Option<crate::incoming::webhook::Removed>,
    /// Things to fix that are not errors (a config file others can read, ...).
    pub warnings: Vec<String>,
}

/// Reads the status of a profile.
/// Someone besides the owner who may use the bot.
#[derive(Debug, Clone, Serialize)]
pub struct PersonStatus {
    pub user_id: i64,
    /// `member` or `viewer`.
    pub role: &'static str,
    /// `config` (telegram.json) or `invite`.
    pub source: &'static str,
}

pub fn status(agent_dir: &AgentDir, profile: &ProfileName) -> Result<Status, HubError> {
    let paths = agent_dir.profile(profile);
    let mut st = from_files(agent_dir, profile, &paths)?;
    let now = now_ms();
    let Some(store) = Store::open_for_reading(&paths.state_db())? else {
        return Ok(st);
    };
    store.read(|c| from_store(c, &mut st, &paths, now))?;
    Ok(st)
}

/// What the config file and the profile's directory say, with nothing read from the store yet
/// (all a profile that never ran has).
fn from_files(
    agent_dir: &AgentDir,
    profile: &ProfileName,
    paths: &ProfilePaths,
) -> Result<Status, HubError> {
    let file = ConfigFile::load(&agent_dir.config_file())?;
    let settings = file.profile(profile);
    let pid = ProfileLock::holder(&paths.lock_file())?;
    Ok(Status {
        profile: profile.to_string(),
        config_file: agent_dir.config_file().display().to_string(),
        state_dir: paths.dir.display().to_string(),
        token_configured: config::resolve_token(&settings).is_some(),
        api_base: config::resolve_api_base(&settings),
        bot: BotStatus {
            id: None,
            username: None,
            has_topics_enabled: None,
        },
        owner_user_id: settings.allowed_user_id,
        people: settings
            .people
            .iter()
            .map(|(id, role)| PersonStatus {
                user_id: *id,
                role: role.as_str(),
                source: "config",
            })
            .collect(),
        workspace_group: None,
        pairing: None,
        hub: HubStatus {
            running: pid.is_some(),
            pid: pid.filter(|p| *p != 0),
            epoch: None,
            started_by: None,
            started_ms: None,
            version: None,
            binary: None,
            network: None,
            log: None,
            stopped_on_purpose: crate::lifecycle::stopped(paths).map(|m| m.how),
        },
        offset: None,
        poll: None,
        journal: JournalStatus {
            pending: 0,
            handled: 0,
        },
        held: 0,
        awaiting_choice: 0,
        awaiting_stale_answer: 0,
        dialogs_open: 0,
        turns: turns::TurnState::ALL
            .iter()
            .map(|s| (s.as_str().to_owned(), 0))
            .collect(),
        instances: Vec::new(),
        outbox: State::ALL
            .iter()
            .map(|s| (s.as_str().to_owned(), 0))
            .collect(),
        flood_waits: Vec::new(),
        last_errors: Vec::new(),
        refused_comments: Vec::new(),
        mode: None,
        threads: Vec::new(),
        intents: Vec::new(),
        webhook_removed: None,
        warnings: config::permission_warnings(&agent_dir.config_file())
            .into_iter()
            .chain(crate::assistant::Settings::from_file(&file, profile).1)
            .collect(),
    })
}

/// Fills in what the store says.
fn from_store(
    c: &store::Connection,
    st: &mut Status,
    paths: &ProfilePaths,
    now: i64,
) -> Result<(), store::StoreError> {
    st.bot = BotStatus {
        id: kv::get_i64(c, kv::BOT_ID)?,
        username: kv::get(c, kv::BOT_USERNAME)?,
        has_topics_enabled: kv::get(c, kv::BOT_TOPICS)?.map(|v| v == "true"),
    };
    st.owner_user_id = st.owner_user_id.or(kv::get_i64(c, kv::OWNER)?);
    for p in store::people::list(c)? {
        if !st.people.iter().any(|q| q.user_id == p.user_id) {
            st.people.push(PersonStatus {
                user_id: p.user_id,
                role: p.role.as_str(),
                source: "invite",
            });
        }
    }
    st.workspace_group = crate::state::linked_group(c)?;
    st.pairing = pairing_status(c, now)?;
    hub_from_store(c, &mut st.hub, paths)?;
    st.offset = journal::offset(c)?;
    st.poll = poll_status(c, st.hub.running, now)?;
    let (pending, handled) = journal::counts(c)?;
    st.journal = JournalStatus { pending, handled };
    let queued = turns::queued_counts(c)?;
    st.held = queued.iter().map(|(_, n)| n).sum();
    st.awaiting_choice = turns::awaiting_choice(c)?;
    st.awaiting_stale_answer = turns::held_count(c)?;
    st.dialogs_open = store::dialogs::open_count(c)?;
    st.turns = turns::counts(c)?
        .into_iter()
        .map(|(s, n)| (s.as_str().to_owned(), n))
        .collect();
    st.instances = instance_list(c, &queued)?;
    st.outbox = store::outbox::counts(c)?
        .into_iter()
        .map(|(s, n)| (s.as_str().to_owned(), n))
        .collect();
    // Copies sent again after an unknown outcome: each may be a duplicate the person saw.
    st.outbox
        .insert("resent".into(), store::outbox::resent_total(c)?);
    st.webhook_removed =
        kv::get(c, crate::incoming::webhook::REMOVED)?.and_then(|v| serde_json::from_str(&v).ok());
    st.flood_waits = flood_list(c, now)?;
    st.mode = kv::get(c, threads::MODE)?;
    st.threads = thread_list(c)?;
    st.intents = intent_list(c)?;
    st.last_errors = incidents::recent(c, 10)?
        .into_iter()
        .map(|i| ErrorStatus {
            at_ms: i.at_ms,
            context: i.context,
            message: i.message,
        })
        .collect();
    st.refused_comments = crate::outgoing::rejections::recent(c)?;
    Ok(())
}

/// What the poll loop recorded; a record left by a hub that no longer runs reads `stopped`.
pub fn poll_status(
    c: &store::Connection,
    running: bool,
    now: i64,
) -> Result<Option<PollStatus>, store::StoreError> {
    let Some((r, last_ok)) = crate::incoming::reach::read(c)? else {
        return Ok(None);
    };
    let state = if running { r.state.as_str() } else { "stopped" };
    Ok(Some(PollStatus {
        state: state.to_owned(),
        last_ok_age_ms: last_ok.map(|t| (now - t).max(0)),
        last_ok_ms: last_ok,
        failing_since_ms: r.failing_since_ms.filter(|_| running),
        error_class: r
            .error_class
            .filter(|_| running)
            .map(|e| e.as_str().to_owned()),
        last_error: r.last_error.filter(|_| running),
        timeout_ms: r.timeout_ms,
    }))
}

/// The pairing code out, if any; an open one past its time is `expired`.
fn pairing_status(
    c: &store::Connection,
    now: i64,
) -> Result<Option<PairingStatus>, store::StoreError> {
    let tried = pairing::attempts(c)?;
    Ok(pairing::current(c)?.map(|p| PairingStatus {
        state: match p.state {
            pairing::PairingState::Open if p.expires_ms <= now => "expired".into(),
            pairing::PairingState::Open => "open".into(),
            pairing::PairingState::Used => "used".into(),
            pairing::PairingState::Dead => "dead".into(),
        },
        expires_ms: p.expires_ms,
        attempts_left: p.attempts_per_sender,
        wrong_attempts: tried.wrong,
        refused_senders: tried.refused,
    }))
}

/// What the last hub to run recorded of itself.
fn hub_from_store(
    c: &store::Connection,
    hub: &mut HubStatus,
    paths: &ProfilePaths,
) -> Result<(), store::StoreError> {
    hub.epoch = lease::current(c)?.map(|l| l.epoch.0);
    hub.started_by = kv::get(c, kv::HUB_STARTED_BY)?;
    hub.started_ms = kv::get_i64(c, kv::HUB_STARTED_MS)?;
    hub.version = kv::get(c, kv::HUB_VERSION)?;
    hub.binary = kv::get(c, kv::HUB_BINARY)?;
    hub.network = kv::get(c, crate::network::KV)?
        .as_deref()
        .and_then(crate::network::NetworkStatus::parse);
    hub.log = hub
        .started_by
        .as_deref()
        .and_then(crate::lifecycle::StartedBy::parse)
        .map(|by| crate::lifecycle::log_location(by, paths));
    Ok(())
}

/// The recent instances, with the turns waiting for each (`queued`, by identity).
fn instance_list(
    c: &store::Connection,
    queued: &[(Option<String>, i64)],
) -> Result<Vec<InstanceStatus>, store::StoreError> {
    let selected = kv::get(c, crate::state::SELECTED)?;
    Ok(instances::recent(c, 20)?
        .into_iter()
        .map(|i| InstanceStatus {
            queued: queued
                .iter()
                .find(|(id, _)| id.as_deref() == Some(i.identity.as_str()))
                .map_or(0, |(_, n)| *n),
            selected: i.state != store::instances::InstanceState::Gone
                && selected.as_deref() == Some(i.identity.as_str()),
            id: i.id,
            transport: i.transport.as_str().to_owned(),
            cwd: i.cwd,
            label: i.label,
            identity: i.identity,
            pid: i.pid,
            state: i.state.as_str().to_owned(),
            gone_reason: i.gone_reason.map(|r| r.detail()),
        })
        .collect())
}

/// The flood waits still running at `now`.
fn flood_list(c: &store::Connection, now: i64) -> Result<Vec<FloodStatus>, store::StoreError> {
    Ok(flood::active(c, now)?
        .into_iter()
        .map(|w| FloodStatus {
            chat_id: match telegram::FloodScope::from_key(&w.scope) {
                Some(telegram::FloodScope::Chat(c)) => Some(c),
                _ => None,
            },
            remaining_s: (w.until_ms - now + 999) / 1000,
            scope: w.scope,
            until_ms: w.until_ms,
            retry_after_s: w.retry_after_s,
        })
        .collect())
}

/// The topics bound to pis.
fn thread_list(c: &store::Connection) -> Result<Vec<ThreadStatus>, store::StoreError> {
    Ok(threads::bindings(c)?
        .into_iter()
        .map(|b| ThreadStatus {
            identity: b.identity,
            slot: b.slot,
            title: b.title,
            thread_id: b.thread_id,
            state: b.state.as_str().to_owned(),
            instance: b.instance_id,
        })
        .collect())
}

/// The topic creations asked about.
fn intent_list(c: &store::Connection) -> Result<Vec<IntentStatus>, store::StoreError> {
    Ok(threads::intents(c)?
        .into_iter()
        .map(|i| IntentStatus {
            id: i.id,
            identity: i.identity,
            slot: i.slot,
            state: i.state.as_str().to_owned(),
            thread_id: i.thread_id,
            detail: i.detail,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polled(state: &str, age: Option<i64>) -> PollStatus {
        PollStatus {
            state: state.into(),
            last_ok_age_ms: age,
            last_ok_ms: None,
            failing_since_ms: None,
            error_class: None,
            last_error: None,
            timeout_ms: 50_000,
        }
    }

    #[test]
    fn a_hub_is_deaf_only_past_its_long_poll_and_the_margin() {
        let now = 1_000_000_000;
        let long_ago = Some(now - 3_600_000);
        assert_eq!(polled("polling", Some(59_000)).deaf_ms(long_ago, now), None);
        assert_eq!(
            polled("hung", Some(61_000)).deaf_ms(long_ago, now),
            Some(61_000)
        );
        // A hub that just started has not had the time: it counts from its start.
        assert_eq!(
            polled("polling", Some(600_000)).deaf_ms(Some(now - 5_000), now),
            None
        );
        assert_eq!(
            polled("hung", None).deaf_ms(Some(now - 70_000), now),
            Some(70_000)
        );
        // No hub runs: nothing to hear with.
        assert_eq!(
            polled("stopped", Some(600_000)).deaf_ms(long_ago, now),
            None
        );
    }

    #[test]
    fn the_status_line_says_what_the_loop_does() {
        assert_eq!(
            polled("polling", Some(3_000)).summary(),
            "polling (last poll completed 3 s ago)"
        );
        let mut p = polled("backing_off", Some(125_000));
        p.error_class = Some("network".into());
        p.last_error = Some("temporary failure: getUpdates: transport failure".into());
        assert_eq!(
            p.summary(),
            "polls fail (network: temporary failure: getUpdates: transport failure), trying again (last poll completed 2 min ago)"
        );
        assert!(
            polled("hung", None)
                .summary()
                .starts_with("cannot reach Telegram, a poll hung")
        );
    }
}
