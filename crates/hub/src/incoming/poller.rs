//! Inbound: `getUpdates` -> one commit of the batch with its new offset, and with its handling
//! when nothing older waits ([`worker::journal_batch`]; otherwise the worker is woken) -> the
//! commit is synced to disk -> the next poll. The offset Telegram sees only ever confirms
//! updates already on disk; handling does not wait for the disk (its effects reach another
//! machine only after a later sync).

use std::time::Duration;

use store::journal;
use telegram::view::{UpdateKind, UpdateView};
use telegram::{ApiErrorKind, CallError, RawUpdate};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::bot_api::Api;
use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::incoming::reach::{self, Polled, Reach};
use crate::incoming::webhook;
use crate::incoming::worker::{self, WorkerSettings};
use crate::wakes::Wakes;

/// Update kinds the hub asks for (topic service messages arrive as `message`).
pub const ALLOWED_UPDATES: [&str; 5] = [
    "message",
    "edited_message",
    "callback_query",
    "message_reaction",
    "my_chat_member",
];

/// Updates asked for per poll (Telegram's maximum).
const POLL_LIMIT: u32 = 100;

/// Poller settings.
#[derive(Debug, Clone)]
pub struct PollSettings {
    /// Long-poll timeout.
    pub timeout: Duration,
    /// How long 409 conflicts may last before the hub gives up.
    pub conflict_grace: Duration,
}

/// The journal's `kind` of an update (`unreadable` when it is not JSON).
pub fn kind_name(raw: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v) => match UpdateView(&v).kind() {
            UpdateKind::Message => "message".into(),
            UpdateKind::EditedMessage => "edited_message".into(),
            UpdateKind::CallbackQuery => "callback_query".into(),
            UpdateKind::MessageReaction => "message_reaction".into(),
            UpdateKind::MyChatMember => "my_chat_member".into(),
            UpdateKind::Other(k) => k,
        },
        Err(_) => "unreadable".into(),
    }
}

/// Polls until `stop` or a fatal error (sustained conflict, revoked token, broken store).
///
/// After a failed poll the next one is a short probe (`timeout` 0): Telegram answers it at
/// once, so the hub knows within a round trip that it is back (and says so), rather than a
/// long poll later. Every poll has a deadline of its timeout plus [`reach::HUNG_MARGIN`]: a
/// connection that hangs silently is given up then, and polled again at once.
pub async fn run(
    db: Db,
    client: Api,
    settings: PollSettings,
    handling: &WorkerSettings,
    wakes: &Wakes,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let mut offset = db.read(journal::offset).await?;
    let mut failures = Failures::default();
    let mut reach = Reach::new(settings.timeout);
    reach.started(&db).await?;
    loop {
        let timeout = if reach.probe() {
            Duration::ZERO
        } else {
            settings.timeout
        };
        let sent_ms = db.now_ms();
        let poll = client.get_updates(offset, POLL_LIMIT, timeout, &ALLOWED_UPDATES);
        let polled = tokio::select! {
            // Dropping an in-flight poll is safe: nothing it returned was confirmed.
            _ = stop.changed() => return Ok(()),
            r = tokio::time::timeout(timeout + reach::HUNG_MARGIN, poll) => r,
        };
        let error = match polled {
            Ok(Ok(batch)) => {
                failures.cleared();
                let full = batch.len() >= POLL_LIMIT as usize;
                let mut messages = 0;
                if let Some(next) =
                    journal_polled(&db, handling, wakes, batch, &mut messages).await?
                {
                    offset = Some(next);
                }
                reach.ok(&db, wakes, Polled { messages, full }).await?;
                continue;
            }
            Ok(Err(e)) => e,
            Err(_) => {
                // The hang was the wait: poll again at once, with a short probe.
                reach.failed(&db, wakes, sent_ms, None).await?;
                continue;
            }
        };
        if failures.judge(&error, &client, &db, &settings).await? {
            continue;
        }
        reach.failed(&db, wakes, sent_ms, Some(&error)).await?;
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            () = tokio::time::sleep(failures.backoff) => {}
        }
        // A conflict is retried quickly so a blip clears fast. Other failures back off too, but
        // never beyond what lets polling resume within 5 s of the network's return.
        let cap = if error.api_kind() == Some(ApiErrorKind::Conflict) {
            5
        } else {
            VISIBLE_FAILURE_CAP_SECS
        };
        failures.backoff = (failures.backoff * 2).min(Duration::from_secs(cap));
    }
}

/// The longest wait between polls that fail at once (refused, reset, unresolvable, 5xx): a
/// poll every 3 s while Telegram is out of reach is one small request, and the hub hears it
/// again within 3 s and a round trip of its return.
const VISIBLE_FAILURE_CAP_SECS: u64 = 3;

/// Journals a polled batch (handled at once when small) and syncs it to disk. Returns the
/// offset that confirms it, `None` for an empty batch; counts its messages into `messages`.
async fn journal_polled(
    db: &Db,
    handling: &WorkerSettings,
    wakes: &Wakes,
    batch: Vec<RawUpdate>,
    messages: &mut usize,
) -> Result<Option<i64>, HubError> {
    let Some(last) = batch.iter().map(|u| u.update_id).max() else {
        return Ok(None);
    };
    crate::latency::mark(crate::latency::Step::Polled, last);
    let next = last + 1;
    let rows: Vec<(i64, String, String)> = batch
        .into_iter()
        .map(|u| (u.update_id, kind_name(&u.json), u.json))
        .collect();
    *messages = rows.iter().filter(|r| r.1 == "message").count();
    let count = rows.len();
    // A full batch says more are waiting: it is only journaled, and the worker handles it
    // while the next batch comes (a backlog's pace); a smaller one is what a person just sent,
    // handled at once (its latency).
    let handle = count < POLL_LIMIT as usize;
    worker::journal_batch(db, handling, wakes, rows, next, handle).await?;
    tracing::debug!(count, offset = next, "journaled updates");
    // The next poll confirms these updates to Telegram: they must survive a crash of this
    // machine first. The sync runs while the tasks woken above go on.
    if !unsynced_confirms_for_tests() {
        db.sync().await?;
    }
    crashpoint::hit(crashpoint::CrashPoint::JournalAfterSync);
    Ok(Some(next))
}

/// The variable of [`unsynced_confirms_for_tests`].
#[cfg(debug_assertions)]
pub const NO_POLL_SYNC_VAR: &str = "PI_TELEGRAM_TEST_NO_POLL_SYNC";

/// Test only, and only in debug builds: with `PI_TELEGRAM_TEST_NO_POLL_SYNC=1` the poller skips
/// the sync above, so the next poll confirms updates that a power cut can still lose. The
/// power-loss harness (`crates/pi-telegram/tests/power_loss.rs`) turns it on to show that it
/// detects that loss. A release build has no such switch: this is `false` there.
#[cfg(debug_assertions)]
fn unsynced_confirms_for_tests() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let on = std::env::var(NO_POLL_SYNC_VAR).is_ok_and(|v| v == "1");
        if on {
            tracing::warn!(
                "{NO_POLL_SYNC_VAR}=1: polled updates are confirmed before they are on disk"
            );
        }
        on
    })
}

/// Release builds: the sync is never skipped.
#[cfg(not(debug_assertions))]
fn unsynced_confirms_for_tests() -> bool {
    false
}

/// What the poller keeps about failing polls.
struct Failures {
    /// When the current run of 409 conflicts began.
    conflict_since: Option<Instant>,
    /// When the poller last removed a webhook.
    last_removal: Option<Instant>,
    /// The wait before the next poll.
    backoff: Duration,
}

impl Default for Failures {
    fn default() -> Self {
        Self {
            conflict_since: None,
            last_removal: None,
            backoff: Duration::from_secs(1),
        }
    }
}

impl Failures {
    /// A poll succeeded: conflicts and back-off start over (a webhook removed stays
    /// remembered).
    fn cleared(&mut self) {
        self.conflict_since = None;
        self.backoff = Duration::from_secs(1);
    }

    /// Takes in a failed poll: `Ok(true)` to poll again at once, `Ok(false)` to poll again
    /// after the backoff, an error when the hub must stop.
    async fn judge(
        &mut self,
        error: &CallError,
        client: &Api,
        db: &Db,
        settings: &PollSettings,
    ) -> Result<bool, HubError> {
        match error {
            CallError::Api(api) if api.kind == ApiErrorKind::Unauthorized => {
                return Err(HubError::Unauthorized);
            }
            CallError::Api(api)
                if api.kind == ApiErrorKind::Conflict
                    && api.description.to_ascii_lowercase().contains("webhook") =>
            {
                // Not another program polling: a webhook set since the start. Remove it
                // and poll again at once; one that comes back within the grace period is set
                // by another program, and counts as a conflict.
                let fresh = self
                    .last_removal
                    .is_none_or(|t: Instant| t.elapsed() >= settings.conflict_grace);
                if fresh {
                    match webhook::clear(&**client, db).await {
                        Ok(Some(_)) => {
                            self.last_removal = Some(Instant::now());
                            self.conflict_since = None;
                            return Ok(true);
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(error = %e, "could not remove the bot's webhook"),
                    }
                }
                let since = *self.conflict_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= settings.conflict_grace {
                    return Err(HubError::Conflict {
                        description: api.description.clone(),
                        seconds: since.elapsed().as_secs(),
                    });
                }
            }
            CallError::Api(api) if api.kind == ApiErrorKind::Conflict => {
                let since = *self.conflict_since.get_or_insert_with(Instant::now);
                let lasted = since.elapsed();
                if lasted >= settings.conflict_grace {
                    return Err(HubError::Conflict {
                        description: api.description.clone(),
                        seconds: lasted.as_secs(),
                    });
                }
                tracing::warn!(
                    lasted_ms = lasted.as_millis() as u64,
                    "getUpdates conflict (409); retrying"
                );
            }
            CallError::Flood { retry_after, .. } => {
                self.backoff = *retry_after;
            }
            // Logged by `Reach::failed`, once per run of failures.
            _ => {}
        }
        Ok(false)
    }
}
