//! The reconciler: the only code that deletes topics. Each cleanup carries its proof (the
//! instance disconnected, the binding was replaced or moved, a duplicate); a topic that is
//! bound, held by an intent, or was written in during the last 30 s is never touched, nor one
//! with messages still on their way into it. Local
//! state is marked done only after Telegram confirms the delete or says the topic is gone; a
//! failure is retried later with backoff, never in a hot loop.

use std::time::Duration;

use store::StoreError;
use store::lease::{self, Epoch};
use store::threads::{self, Cleanup};

use crate::{Hook, Point, Storage, ThreadsError, TopicApi, TopicError};

/// A topic written in more recently than this is left alone for now.
pub const RECENTLY_OPEN_MS: i64 = 30_000;

// The turns that show a topic was written in recently must outlive retention's pruning.
const _: () = assert!(RECENTLY_OPEN_MS < store::retention::MIN_AGE_MS);

/// What a pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Topics deleted (or found gone).
    pub deleted: Vec<(i64, i64)>,
    /// Cleanups cancelled because the topic is protected.
    pub protected: Vec<(i64, i64)>,
    /// Cleanups postponed (recent activity, failures, flood waits).
    pub postponed: usize,
    /// The next time a cleanup is due, if any.
    pub next_due_ms: Option<i64>,
    /// The pass stopped because the lease moved on.
    pub lost_lease: bool,
}

impl Report {
    fn due_at(&mut self, at_ms: i64) {
        self.next_due_ms = Some(self.next_due_ms.map_or(at_ms, |n| n.min(at_ms)));
    }

    fn postpone(&mut self, to_ms: i64) {
        self.postponed += 1;
        self.due_at(to_ms);
    }
}

fn backoff_ms(attempts: i64) -> i64 {
    (60_000i64 << attempts.clamp(0, 8)).min(6 * 3_600_000)
}

enum Check {
    Protected(&'static str),
    Recent,
    /// Messages are still on their way into it (a pi's last answer, its goodbye).
    Delivering,
    Go,
}

/// How soon a cleanup whose topic still has messages on their way is looked at again. Not a
/// poll of Telegram: one outbox read, and only while a deletion waits for the sender.
pub const DELIVERING_RECHECK_MS: i64 = 1_000;

/// Runs every due cleanup once (each store call through `store`, its own transaction).
pub async fn reconcile<S: Storage, A: TopicApi>(
    store: &S,
    api: &A,
    epoch: Epoch,
    now_ms: i64,
    hook: Hook<'_>,
) -> Result<Report, ThreadsError> {
    let mut report = Report::default();
    let pending = store.read(threads::pending_cleanups).await?;
    for c in pending {
        if c.next_ms > now_ms {
            report.due_at(c.next_ms);
            continue;
        }
        let checked = c.clone();
        let check = store
            .read(move |tx| {
                if !lease::is_current(tx, epoch)? {
                    return Ok(None);
                }
                Ok::<_, StoreError>(Some(protection(tx, &checked, now_ms)?))
            })
            .await?;
        let Some(check) = check else {
            report.lost_lease = true;
            return Ok(report);
        };
        match check {
            Check::Protected(why) => {
                let id = c.id;
                store
                    .write(move |tx| threads::finish_cleanup(tx, id, Some(why), now_ms))
                    .await?;
                report.protected.push((c.chat_id, c.thread_id));
                continue;
            }
            Check::Recent => {
                let next = now_ms + RECENTLY_OPEN_MS;
                let id = c.id;
                store
                    .write(move |tx| threads::retry_cleanup(tx, id, next, "written in recently"))
                    .await?;
                report.postpone(next);
                continue;
            }
            Check::Delivering => {
                report.postpone(now_ms + DELIVERING_RECHECK_MS);
                continue;
            }
            Check::Go => {}
        }
        hook(Point::BeforeDelete)?;
        match api.delete(c.chat_id, c.thread_id).await {
            Ok(()) | Err(TopicError::Gone) => {
                hook(Point::Deleted)?;
                let id = c.id;
                let done = store
                    .write(move |tx| {
                        if !lease::is_current(tx, epoch)? {
                            return Ok(false);
                        }
                        threads::finish_cleanup(tx, id, None, now_ms)?;
                        Ok::<_, StoreError>(true)
                    })
                    .await?;
                if !done {
                    // The next lease holder repeats it and hears "gone".
                    report.lost_lease = true;
                    return Ok(report);
                }
                report.deleted.push((c.chat_id, c.thread_id));
            }
            Err(e) => {
                let wait = match &e {
                    TopicError::Flood(d) => d.as_millis() as i64,
                    _ => backoff_ms(c.attempts),
                };
                let next = now_ms + wait.max(1000);
                let (id, why) = (c.id, e.to_string());
                store
                    .write(move |tx| threads::retry_cleanup(tx, id, next, &why))
                    .await?;
                report.postpone(next);
            }
        }
    }
    Ok(report)
}

fn protection(tx: &store::Connection, c: &Cleanup, now_ms: i64) -> Result<Check, StoreError> {
    if threads::binding_by_thread(tx, c.chat_id, c.thread_id)?.is_some() {
        return Ok(Check::Protected("protected: a binding uses it"));
    }
    if threads::intents(tx)?
        .iter()
        .any(|i| i.thread_id == Some(c.thread_id) && i.chat_id == c.chat_id)
    {
        return Ok(Check::Protected("protected: an intent holds it"));
    }
    if threads::active_since(tx, c.chat_id, c.thread_id, now_ms - RECENTLY_OPEN_MS)? {
        return Ok(Check::Recent);
    }
    if store::outbox::on_its_way(tx, c.chat_id, c.thread_id)? {
        return Ok(Check::Delivering);
    }
    Ok(Check::Go)
}

/// The wait before the next due cleanup, for a caller that sleeps until then.
pub fn wait_until(next_due_ms: Option<i64>, now_ms: i64) -> Option<Duration> {
    next_due_ms.map(|n| Duration::from_millis(n.saturating_sub(now_ms).max(0) as u64))
}
