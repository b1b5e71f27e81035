//! Whether the hub reaches Telegram, as its poll loop sees it: kept in kv for `status` and
//! `doctor` ([`Recorded`]), told to the conductor for pi's footer
//! ([`Wakes::telegram_down_since`]), and, after an outage of [`BACK_AFTER_MS`] or more, said to
//! the person in one line once the updates that waited are caught up.
//!
//! Cheap on the hot path: nothing here is synced to disk (every write is `Durability::Lazy`:
//! what it records is for a person reading `status`, and a machine crash that loses it loses a
//! stale reading), and the time of the last completed poll is written at most once per
//! [`OK_WRITE_EVERY_MS`] unless the loop's state changed.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use store::outbox::Purpose;
use store::{incidents, kv};
use telegram::{ApiErrorKind, CallError};

use crate::db::{Db, Durability};
use crate::error::HubError;
use crate::outgoing::{outbound, texts};
use crate::wakes::Wakes;

/// kv: when the last `getUpdates` completed (Unix ms).
pub const LAST_OK_MS: &str = "poll.last_ok_ms";
/// kv: the poll loop's state ([`Recorded`] as JSON).
pub const STATE: &str = "poll.state";

/// An outage at least this long is told to the person when it ends (a minute: shorter ones
/// are blips nobody waited on; the footer shows them while they last).
pub const BACK_AFTER_MS: i64 = 60_000;

/// How long after its long-poll timeout a poll may go unanswered before it counts as hung:
/// Telegram answers a long poll at its timeout, so this only covers the way back. Small,
/// because it bounds how late polling resumes after a silent outage (poll timeout + 5 s).
pub const HUNG_MARGIN: std::time::Duration = std::time::Duration::from_secs(3);

/// How often a healthy loop rewrites [`LAST_OK_MS`] at most (a backlog drains many batches a
/// second; `status` needs no finer reading).
const OK_WRITE_EVERY_MS: i64 = 1_000;

/// What the poll loop is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopState {
    /// The last poll completed; the next is under way.
    Polling,
    /// Polls fail at once (refused, reset, unresolvable, 5xx, 409, 429): waiting to try again.
    BackingOff,
    /// A poll went unanswered past its deadline: the connection hung. Polling again at once.
    Hung,
}

/// Why polls fail, in the classes a person acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// No answer within the poll's deadline.
    Timeout,
    /// The connection failed or Telegram's side answered 5xx: Telegram is out of reach.
    Network,
    /// 409: another program polls, or a webhook is set.
    Conflict,
    /// 429: Telegram asked to wait.
    Flood,
    /// Telegram refused the poll otherwise.
    Refused,
}

impl LoopState {
    /// Its name in `status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Polling => "polling",
            Self::BackingOff => "backing_off",
            Self::Hung => "hung",
        }
    }
}

impl ErrorClass {
    /// Its name in `status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Network => "network",
            Self::Conflict => "conflict",
            Self::Flood => "flood",
            Self::Refused => "refused",
        }
    }

    /// The class of a failed poll.
    pub fn of(e: &CallError) -> Self {
        match e {
            CallError::Retryable(_) | CallError::CommitUnknown(_) => Self::Network,
            CallError::Flood { .. } => Self::Flood,
            CallError::Api(a) if a.kind == ApiErrorKind::Conflict => Self::Conflict,
            CallError::Api(_) => Self::Refused,
        }
    }

    /// Whether it means the hub cannot reach Telegram (what pi's footer shows).
    pub fn unreachable(self) -> bool {
        matches!(self, Self::Timeout | Self::Network)
    }
}

/// The loop's state as kv keeps it, for `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// What the loop is doing.
    pub state: LoopState,
    /// When the first failing poll of the current run was sent (Unix ms).
    pub failing_since_ms: Option<i64>,
    /// The last failure's class.
    pub error_class: Option<ErrorClass>,
    /// The last failure, as the client describes it (never the token or a URL).
    pub last_error: Option<String>,
    /// The long-poll timeout the hub uses (ms): a completed poll older than this and a margin
    /// means the hub hears nothing.
    pub timeout_ms: u64,
}

/// Reads what the poll loop recorded: its state and when a poll last completed.
pub fn read(c: &store::Connection) -> Result<Option<(Recorded, Option<i64>)>, store::StoreError> {
    let Some(text) = kv::get(c, STATE)? else {
        return Ok(None);
    };
    let Ok(recorded) = serde_json::from_str::<Recorded>(&text) else {
        // Written by another release: nothing to report rather than an error.
        return Ok(None);
    };
    Ok(Some((recorded, kv::get_i64(c, LAST_OK_MS)?)))
}

/// A run of failing polls.
#[derive(Debug, Clone)]
struct Failing {
    since_ms: i64,
    class: ErrorClass,
    polls: u32,
    /// The conductor was told Telegram is out of reach.
    told: bool,
    /// The error recorded last (what `status` shows).
    message: String,
    /// Errors of the same class told (log and incident) after the first, up to
    /// [`TOLD_CHANGES`].
    changes_told: u32,
}

/// Changes of error within one class of failure told at `warn` and as an incident in one
/// outage; later ones only change what `status` shows. Two failures that alternate (a dead
/// connection from the pool, then a name that does not resolve) would otherwise fill the log.
const TOLD_CHANGES: u32 = 3;

/// The updates caught up after an outage, until a batch that is not full says they are all in.
#[derive(Debug, Clone)]
struct CatchUp {
    away_ms: i64,
    messages: usize,
}

/// One poll's batch, as [`Reach::ok`] counts it.
#[derive(Debug, Clone, Copy)]
pub struct Polled {
    /// Messages in it (not taps, edits or reactions).
    pub messages: usize,
    /// It was full: more are waiting.
    pub full: bool,
}

/// The poll loop's reachability, in memory, and what it writes.
#[derive(Debug)]
pub struct Reach {
    timeout_ms: u64,
    failing: Option<Failing>,
    catching_up: Option<CatchUp>,
    /// The last [`LAST_OK_MS`] written.
    written_ok_ms: Option<i64>,
}

impl Reach {
    /// A loop polling with `timeout`.
    pub fn new(timeout: std::time::Duration) -> Self {
        Self {
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            failing: None,
            catching_up: None,
            written_ok_ms: None,
        }
    }

    /// The loop starts: a record a previous hub left (`hung`, say) is replaced by `polling`,
    /// its last completed poll kept (`doctor` counts from this hub's start too).
    pub async fn started(&self, db: &Db) -> Result<(), HubError> {
        let state = serde_json::to_string(&self.recorded(None)).unwrap_or_default();
        db.write(Durability::Lazy, move |tx| kv::set(tx, STATE, &state))
            .await?;
        Ok(())
    }

    /// Whether the next poll is a short probe: the last one could not reach Telegram. Not
    /// after a 409: a probe answers at once even while another program long-polls, which
    /// would hide a lasting conflict from the poller's grace period.
    pub fn probe(&self) -> bool {
        self.failing.as_ref().is_some_and(|f| f.class.unreachable())
    }

    /// A poll completed with `polled`: the loop polls again, the footer clears, and an
    /// outage of a minute or more ends with one line to the person once it is caught up.
    pub async fn ok(&mut self, db: &Db, wakes: &Wakes, polled: Polled) -> Result<(), HubError> {
        let now = db.now_ms();
        let ended = self.failing.take();
        if let Some(f) = &ended {
            if f.told {
                wakes.telegram_down_since.store(0, Ordering::SeqCst);
                wakes.conductor.notify_one();
            }
            let away_ms = now - f.since_ms;
            tracing::info!(away_ms, class = ?f.class, "getUpdates works again");
            if f.told && away_ms >= BACK_AFTER_MS {
                self.catching_up = Some(CatchUp {
                    away_ms,
                    messages: 0,
                });
            }
        }
        let back = self.caught_up(polled);
        let recent = self
            .written_ok_ms
            .is_some_and(|w| now - w < OK_WRITE_EVERY_MS);
        if ended.is_none() && back.is_none() && recent {
            return Ok(());
        }
        self.written_ok_ms = Some(now);
        // The state goes with it: a previous hub's record (`hung`, say) is replaced too.
        let state = serde_json::to_string(&self.recorded(None)).unwrap_or_default();
        db.write(Durability::Lazy, move |tx| {
            kv::set_i64(tx, LAST_OK_MS, now)?;
            kv::set(tx, STATE, &state)?;
            if let Some((away_ms, messages)) = back
                && let Some(owner) = kv::get_i64(tx, kv::OWNER)?
            {
                let words = texts::back_after(away_ms, messages);
                let purpose = Purpose::NoticeBack { at: now };
                outbound::notice(tx, owner, None, &words, &purpose, now)?;
            }
            Ok(())
        })
        .await?;
        if back.is_some() {
            wakes.sender.notify_one();
        }
        Ok(())
    }

    /// Counts a batch into the catch-up after an outage; `Some((away, messages))` when it is
    /// the last (not full): the line is due.
    fn caught_up(&mut self, polled: Polled) -> Option<(i64, usize)> {
        let c = self.catching_up.as_mut()?;
        c.messages += polled.messages;
        if polled.full {
            return None;
        }
        let c = self.catching_up.take()?;
        Some((c.away_ms, c.messages))
    }

    /// A poll sent at `sent_ms` failed (`None`: it hung past its deadline). The first failure
    /// of a run, and a change of class, are recorded (state and incident); Telegram out of
    /// reach is told to the conductor from the second failure on, or at once when it hung
    /// (a hang has lasted the poll's whole deadline already).
    pub async fn failed(
        &mut self,
        db: &Db,
        wakes: &Wakes,
        sent_ms: i64,
        error: Option<&CallError>,
    ) -> Result<(), HubError> {
        let class = error.map_or(ErrorClass::Timeout, ErrorClass::of);
        let message = error.map_or_else(
            || "getUpdates: no answer within the poll's deadline (the connection hung)".to_owned(),
            ToString::to_string,
        );
        let f = self.failing.get_or_insert(Failing {
            since_ms: sent_ms,
            class,
            polls: 0,
            told: false,
            message: String::new(),
            changes_told: 0,
        });
        let changed = f.polls == 0 || f.class != class;
        // The same class failing otherwise (the pool's dead connection first, then the name
        // that no longer resolves): `status` shows the error of now, not the outage's first.
        let reworded = !changed && f.message != message;
        f.polls += 1;
        f.class = class;
        f.message.clone_from(&message);
        if class.unreachable() && !f.told && (f.polls >= 2 || class == ErrorClass::Timeout) {
            f.told = true;
            wakes
                .telegram_down_since
                .store(f.since_ms, Ordering::SeqCst);
            wakes.conductor.notify_one();
        }
        if !changed && !reworded {
            tracing::debug!(error = %message, "getUpdates failed again; retrying");
            return Ok(());
        }
        let tell = changed || f.changes_told < TOLD_CHANGES;
        if changed {
            tracing::warn!(error = %message, "getUpdates failed; retrying");
        } else if tell {
            f.changes_told += 1;
            tracing::warn!(error = %message, "getUpdates fails otherwise now; retrying");
        } else {
            tracing::debug!(error = %message, "getUpdates fails otherwise now; retrying");
        }
        let state = self.recorded(Some(message.clone()));
        let now = db.now_ms();
        db.write(Durability::Lazy, move |tx| {
            kv::set(
                tx,
                STATE,
                &serde_json::to_string(&state).unwrap_or_default(),
            )?;
            if tell {
                incidents::record(tx, now, "poll", &message)?;
            }
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// The state to record: `last_error` from a failure being recorded.
    fn recorded(&self, last_error: Option<String>) -> Recorded {
        let f = self.failing.as_ref();
        Recorded {
            state: match f.map(|f| f.class) {
                None => LoopState::Polling,
                Some(ErrorClass::Timeout) => LoopState::Hung,
                Some(_) => LoopState::BackingOff,
            },
            failing_since_ms: f.map(|f| f.since_ms),
            error_class: f.map(|f| f.class),
            last_error,
            timeout_ms: self.timeout_ms,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use telegram::ApiError;

    #[test]
    fn names_in_status_are_the_stored_ones() {
        for s in [LoopState::Polling, LoopState::BackingOff, LoopState::Hung] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for c in [
            ErrorClass::Timeout,
            ErrorClass::Network,
            ErrorClass::Conflict,
            ErrorClass::Flood,
            ErrorClass::Refused,
        ] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn only_the_network_and_a_hang_mean_telegram_is_out_of_reach() {
        let api = |code, d: &str| {
            CallError::Api(ApiError {
                code,
                description: d.into(),
                kind: ApiErrorKind::classify(code, d),
            })
        };
        let cases = [
            (
                CallError::Retryable("connection refused".into()),
                ErrorClass::Network,
            ),
            (
                CallError::CommitUnknown("reset".into()),
                ErrorClass::Network,
            ),
            (
                CallError::Flood {
                    retry_after: std::time::Duration::from_secs(3),
                    chat_id: None,
                },
                ErrorClass::Flood,
            ),
            (
                api(409, "Conflict: terminated by other getUpdates request"),
                ErrorClass::Conflict,
            ),
            (api(400, "Bad Request: wrong offset"), ErrorClass::Refused),
        ];
        for (e, class) in cases {
            assert_eq!(ErrorClass::of(&e), class, "{e}");
            assert_eq!(class.unreachable(), class == ErrorClass::Network, "{e}");
        }
        assert!(ErrorClass::Timeout.unreachable());
    }

    #[test]
    fn the_back_line_waits_for_the_first_batch_that_is_not_full() {
        let mut r = Reach::new(std::time::Duration::from_secs(50));
        assert_eq!(
            r.caught_up(Polled {
                messages: 3,
                full: false
            }),
            None,
            "no outage"
        );
        r.catching_up = Some(CatchUp {
            away_ms: 120_000,
            messages: 0,
        });
        assert_eq!(
            r.caught_up(Polled {
                messages: 90,
                full: true
            }),
            None
        );
        assert_eq!(
            r.caught_up(Polled {
                messages: 90,
                full: true
            }),
            None
        );
        assert_eq!(
            r.caught_up(Polled {
                messages: 4,
                full: false
            }),
            Some((120_000, 184))
        );
        assert_eq!(
            r.caught_up(Polled {
                messages: 1,
                full: false
            }),
            None,
            "said once"
        );
    }

    #[test]
    fn the_record_follows_the_run_of_failures() {
        let mut r = Reach::new(std::time::Duration::from_secs(50));
        assert!(!r.probe());
        assert_eq!(r.recorded(None).state, LoopState::Polling);
        assert_eq!(r.recorded(None).timeout_ms, 50_000);
        r.failing = Some(Failing {
            since_ms: 7,
            class: ErrorClass::Timeout,
            polls: 1,
            told: true,
            message: String::new(),
            changes_told: 0,
        });
        assert!(r.probe(), "after a hang the next poll is a probe");
        let hung = r.recorded(Some("x".into()));
        assert_eq!(
            (hung.state, hung.failing_since_ms, hung.error_class),
            (LoopState::Hung, Some(7), Some(ErrorClass::Timeout))
        );
        r.failing = Some(Failing {
            since_ms: 7,
            class: ErrorClass::Conflict,
            polls: 1,
            told: false,
            message: String::new(),
            changes_told: 0,
        });
        assert!(
            !r.probe(),
            "a 409 keeps long polls (the conflict's grace counts them)"
        );
        assert_eq!(r.recorded(None).state, LoopState::BackingOff);
    }
}
