//! Outbound: the outbox, sent by one sender that obeys pacing and flood waits, repeats only what
//! is safe to repeat, and records what it did about sends whose outcome is unknown.

use crate::db::Durability;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use store::outbox::{self, OutboxRow, Purpose};
use store::{CommitNo, flood, incidents};
use telegram::{ApiErrorKind, CallError, FloodScope, Pacer};
use tokio::sync::{Mutex, mpsc, watch};

use crate::assistant::{Notifications, Watched};
use crate::bot_api::{Api, BotApi};
use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::outgoing::attention;
use crate::outgoing::delivery::Plan;
use crate::outgoing::message::{Call, Outgoing};
use crate::outgoing::outbound;
use crate::outgoing::texts;
use crate::outgoing::topics;
use crate::wakes::Wakes;

/// Retry delay after the `attempts`-th failure: 1 s doubling to at most a minute.
fn backoff_ms(attempts: i64) -> i64 {
    1000 * (1i64 << attempts.clamp(1, 7).saturating_sub(1)).min(60)
}

/// The producer's side of a hand-over: a turn's first message marked `sending` in the very
/// commit that queues it, and given to the sender with that commit's number. The sender then
/// needs no transaction of its own before the call, and finds the commit on disk already (the
/// producer flushes it in the same store call): one store call and one thread wake-up less
/// between pi's answer and Telegram.
///
/// A claim is only made while the sender waits with nothing to do, and only when the pacer, as
/// it stands inside the claiming transaction, lets the row go now; so a claimed row goes out at
/// once, and from the commit to the call it is a send under way like any other (a crash there
/// leaves it `sending`: sent again marked, or ambiguous).
#[derive(Debug, Clone)]
pub struct Handoff {
    pacer: Arc<Mutex<Pacer>>,
    rows: mpsc::UnboundedSender<Claimed>,
    idle: Arc<AtomicBool>,
}

/// Leave to claim a row in a producer's transaction ([`Handoff::open`]).
#[derive(Debug)]
pub struct Opening {
    pacer: Arc<Mutex<Pacer>>,
}

impl Opening {
    /// Leave judged by `pacer` alone, for a caller that knows no sender is sending (tests).
    pub fn with_pacer(pacer: Arc<Mutex<Pacer>>) -> Self {
        Self { pacer }
    }
}

/// The sender's side of [`Handoff`].
#[derive(Debug)]
pub struct Claims {
    rows: mpsc::UnboundedReceiver<Claimed>,
    idle: Arc<AtomicBool>,
}

/// A row marked `sending` in the commit numbered `commit`.
#[derive(Debug)]
pub struct Claimed {
    row: OutboxRow,
    commit: CommitNo,
}

/// A hand-over between producers of answers and the sender, which shares `pacer`.
pub fn handoff(pacer: Arc<Mutex<Pacer>>) -> (Handoff, Claims) {
    let (tx, rx) = mpsc::unbounded_channel();
    let idle = Arc::new(AtomicBool::new(false));
    (
        Handoff {
            pacer,
            rows: tx,
            idle: idle.clone(),
        },
        Claims { rows: rx, idle },
    )
}

impl Handoff {
    /// Leave to claim, when the sender waits idle. The pace is judged later, in the claim's
    /// transaction: a copy taken here went stale when the sender, woken meanwhile, sent and
    /// counted a message before that transaction began, and the claimed row then reached
    /// Telegram early (a `429` in the pacing bench's first 50 ms, five runs in eight).
    pub fn open(&self) -> Option<Opening> {
        self.idle.load(Ordering::Acquire).then(|| Opening {
            pacer: self.pacer.clone(),
        })
    }

    /// In the producer's transaction, after it queued turn `turn`'s messages: the first of them
    /// that heads its chat and that the pacer lets go now, marked `sending`. Nothing is claimed
    /// while someone else holds the pacer (the sender counting a send): the sender then picks
    /// the row itself.
    ///
    /// Every send counted after this judgement is of a row still open in the store when it was
    /// made (the sender counts a send when its call is over, and marks it sent after that), so
    /// nothing of the row's chat was claimable behind it.
    ///
    /// The claimed row's token is taken here, under the same lock as the judgement (see
    /// `pick_and_mark`). A transaction that fails after the claim keeps it taken: a failed
    /// write ends the conductor, and the hub with it.
    pub fn claim(
        tx: &store::Connection,
        opening: Opening,
        turn: i64,
        now: i64,
    ) -> Result<Option<OutboxRow>, store::StoreError> {
        let Ok(mut pace) = opening.pacer.try_lock() else {
            return Ok(None);
        };
        pick_and_mark(tx, &mut pace, now, |row| row.turn_id == Some(turn)).map(|(row, _)| row)
    }

    /// After the claim's commit: the row to the sender. A sender gone (the hub stopping)
    /// leaves it `sending`, for the next start's recovery of interrupted sends.
    pub fn give(&self, row: OutboxRow, commit: CommitNo) {
        let _ = self.rows.send(Claimed { row, commit });
    }
}

/// Sends queued messages until `stop`; `settings` say which of them notify
/// (`attention::of`).
pub async fn run(
    db: Db,
    client: Api,
    pacer: Arc<Mutex<Pacer>>,
    wakes: Wakes,
    mut claims: Claims,
    settings: Arc<Watched>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let out = Out {
        db: &db,
        client: &*client,
        pacer: &pacer,
        wakes: &wakes,
        settings: &settings,
    };
    let mut producers = true;
    loop {
        if *stop.borrow() {
            break;
        }
        if let Ok(c) = claims.rows.try_recv() {
            send_marked(&out, c).await?;
            continue;
        }
        let now = db.now_ms();
        // The row is picked and marked `sending` in one transaction (one store call less on
        // an answer's way out), judged by the pacer and its token taken under one lock
        // (`pick_and_mark`), so that the topics task cannot judge the same token free before
        // the call begins; the send is counted when its call is over (`send_one`).
        let mut pace = pacer.clone().lock_owned().await;
        let ((chosen, mut wait), commit) = db
            .write_numbered(
                Durability::Lazy,
                move |tx| pick_and_mark(tx, &mut pace, now, |_| true),
                |_| false,
            )
            .await?;
        if let Some(row) = chosen {
            send_marked(&out, Claimed { row, commit }).await?;
            continue;
        }
        // Heads due now were seen above (sent, or their pacing wait is in `wait`).
        if let Some(due) = db.read(move |c| outbox::next_due_ms(c, now)).await? {
            let until_due = Duration::from_millis(due.saturating_sub(db.now_ms()).max(0) as u64);
            wait = Some(wait.map_or(until_due, |w| w.min(until_due)));
        }
        claims.idle.store(true, Ordering::Release);
        let claimed = tokio::select! {
            _ = stop.changed() => break,
            () = wakes.sender.notified() => None,
            () = crate::wakes::sleep_for(wait) => None,
            c = claims.rows.recv(), if producers => {
                producers = c.is_some();
                c
            }
        };
        claims.idle.store(false, Ordering::Release);
        if let Some(c) = claimed {
            send_marked(&out, c).await?;
        }
    }
    release(&db, claims).await
}

/// At a stop: no more claims, and rows claimed but never called go back to `pending` (left
/// `sending`, the next start would send them again marked as possible repeats). A claim given
/// after this still stays `sending`: the window is the conductor's last commit.
async fn release(db: &Db, mut claims: Claims) -> Result<(), HubError> {
    claims.idle.store(false, Ordering::Release);
    claims.rows.close();
    let mut ids = Vec::new();
    while let Ok(c) = claims.rows.try_recv() {
        ids.push(c.row.id);
    }
    if ids.is_empty() {
        return Ok(());
    }
    let now = db.now_ms();
    db.write(Durability::Lazy, move |tx| {
        for id in ids {
            outbox::mark_retry(tx, id, now, "claimed, not sent before the hub stopped", now)?;
        }
        Ok(())
    })
    .await?;
    Ok(())
}

/// What a send uses.
struct Out<'a> {
    db: &'a Db,
    client: &'a dyn BotApi,
    pacer: &'a Mutex<Pacer>,
    wakes: &'a Wakes,
    settings: &'a Watched,
}

/// A row marked `sending` (picked here, or claimed by a producer, which usually flushed its
/// commit while this task woke): its mark on disk first, since after a crash of the machine
/// the row must be ambiguous rather than sent again unmarked; then sent.
async fn send_marked(out: &Out<'_>, c: Claimed) -> Result<(), HubError> {
    crate::latency::mark(crate::latency::Step::Picked, c.row.id);
    out.db.sync_through(c.commit).await?;
    let notifications = out.settings.current().notifications;
    send_one(
        out.db,
        out.client,
        out.pacer,
        out.wakes,
        c.row,
        notifications,
    )
    .await
}

/// The files a message uploads, read. `Err`: one is gone.
async fn read_uploads(message: &Outgoing) -> Result<Vec<telegram::Upload>, String> {
    let list = message.uploads();
    let mut files = Vec::with_capacity(list.len());
    for f in list {
        let bytes = tokio::fs::read(&f.path)
            .await
            .map_err(|e| format!("{}: {e}", f.path))?;
        files.push(telegram::Upload {
            field: f.field.clone(),
            file_name: f.name.clone().unwrap_or_else(|| "file".into()),
            mime_type: f.mime.clone(),
            bytes: bytes.into(),
        });
    }
    Ok(files)
}

/// The chat whose pace a row counts against; `None` for calls that are not messages of a chat.
fn pace_key(row: &OutboxRow) -> Option<i64> {
    telegram::paced_per_chat(row.method()).then_some(row.chat_id)
}

/// The first `wanted` head of a chat whose pace allows a send now, marked `sending`; otherwise
/// how long until one may go (`None`: no wanted head waits on pacing).
fn pick_and_mark(
    tx: &store::Connection,
    pace: &mut Pacer,
    now: i64,
    wanted: impl Fn(&OutboxRow) -> bool,
) -> Result<(Option<OutboxRow>, Option<Duration>), store::StoreError> {
    let mut wait: Option<Duration> = None;
    let mut heads = outbox::heads(tx, now)?;
    // Strangers' tap answers go last (a stable sort keeps the order of the rest): every send
    // takes one of the bot's global budget, and a flood of them must not hold the owner's
    // messages back.
    heads.sort_by_key(|r| r.purpose == Purpose::AnswerStranger);
    for mut row in heads.into_iter().filter(|r| wanted(r)) {
        let w = pace.ready_in(pace_key(&row), now as u64);
        if w.is_zero() {
            // A claim only for the head of its conversation. Checked where a broken invariant
            // panics: claims run in the producer's transaction, on an answer's way out.
            if crate::never::panics() {
                let ahead = outbox::sending_before(tx, row.chat_id, row.thread_id, row.id)?;
                if crate::never!(
                    ahead.is_some(),
                    "outbox row {} is claimed while row {ahead:?} before it is sending",
                    row.id
                ) {
                    continue;
                }
            }
            outbox::mark_sending(tx, row.id, now)?;
            // Under way from now: its token is held until `send_one` counts or releases it.
            pace.begin(pace_key(&row));
            // The row as the sender gets it: what it now is in the store.
            row.state = outbox::State::Sending;
            return Ok((Some(row), None));
        }
        wait = Some(wait.map_or(w, |x| x.min(w)));
    }
    Ok((None, wait))
}

/// What came of an attempt to send a row's current message: the judgement's input.
#[derive(Debug)]
pub enum Attempt {
    /// A file to upload is gone (nothing was called).
    FilesGone(String),
    /// The call was made; Telegram's answer.
    Called(Result<serde_json::Value, CallError>),
}

/// What the sender does about an attempt ([`judge`]); [`record`] carries it out.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Arrived: the row is sent, or goes on at once with `next`, the next message of its plan
    /// (addressed where the row is now).
    Delivered {
        /// The message Telegram made, if it said.
        message_id: Option<i64>,
        /// The plan from the next message on.
        next: Option<Plan>,
    },
    /// Refused as written (markup, length): the same words another way, at once.
    Fallback {
        /// The plan from the other way on (addressed where the row is now).
        next: Plan,
        /// The refused alternative.
        from: String,
        /// Telegram's reason (never the text).
        reason: String,
    },
    /// Nothing happened: tried again at `at`.
    Retry {
        /// When.
        at: i64,
        /// Why.
        error: String,
    },
    /// Telegram asked to wait: the row and every call of `scope` wait until `until`.
    Flood {
        /// Whose calls wait.
        scope: FloodScope,
        /// Until when.
        until: i64,
        /// The wait asked for, in seconds.
        secs: i64,
    },
    /// The outcome is unknown and the row must arrive: sent again at `at`, marked as a
    /// possible repeat.
    Resend {
        /// When.
        at: i64,
        /// Why.
        error: String,
    },
    /// The outcome is unknown and the row is not repeated: ambiguous.
    Unknown {
        /// Why.
        error: String,
    },
    /// Its topic is closed: to the main chat, at once.
    MainChat {
        /// Telegram's answer.
        error: String,
    },
    /// Its topic is not found: whether it is gone for good is asked of Telegram first.
    TopicUnreachable {
        /// The topic.
        thread: i64,
        /// Telegram's answer.
        error: String,
    },
    /// Given up for good.
    GiveUp {
        /// Why.
        error: String,
        /// What was done (the row's `handling`).
        handling: &'static str,
    },
}

/// The judgement of an attempt to send row `row`'s current message of `plan` at `now`: pure,
/// so that every outcome's consequence is a row of a table (see the tests).
pub fn judge(row: &OutboxRow, plan: &Plan, attempt: &Attempt, now: i64) -> Decision {
    let result = match attempt {
        Attempt::FilesGone(why) => {
            return Decision::GiveUp {
                error: why.clone(),
                handling: "dropped: the file to send is gone",
            };
        }
        Attempt::Called(r) => r,
    };
    let here = |p: Plan| p.placed(row.chat_id, row.thread_id);
    let later = || now + backoff_ms(row.attempts + 1);
    let e = match result {
        Ok(v) => {
            return Decision::Delivered {
                message_id: v.get("message_id").and_then(serde_json::Value::as_i64),
                next: plan.next_part().map(here),
            };
        }
        Err(CallError::Flood {
            retry_after,
            chat_id,
        }) => {
            return Decision::Flood {
                scope: FloodScope::of(*chat_id),
                until: now + retry_after.as_millis() as i64,
                secs: retry_after.as_secs() as i64,
            };
        }
        // A pin is worth one try: retried, it would hold up the taps' queue behind it.
        Err(CallError::Retryable(e)) if plan.current().is_some_and(Outgoing::is_best_effort) => {
            return Decision::GiveUp {
                error: e.clone(),
                handling: "dropped: best effort, tried once",
            };
        }
        Err(CallError::Retryable(e)) => {
            return Decision::Retry {
                at: later(),
                error: e.clone(),
            };
        }
        Err(CallError::CommitUnknown(e)) if row.resend_if_unknown => {
            return Decision::Resend {
                at: later(),
                error: e.clone(),
            };
        }
        Err(CallError::CommitUnknown(e)) => return Decision::Unknown { error: e.clone() },
        Err(CallError::Api(e)) => e,
    };
    match (e.kind, row.thread_id, plan.fallback()) {
        // The edit already shows: that is the outcome we wanted.
        (ApiErrorKind::NotModified, _, _) => Decision::Delivered {
            message_id: None,
            next: None,
        },
        // The person closed the topic; the message still has to arrive.
        (ApiErrorKind::TopicClosed, Some(_), _) => Decision::MainChat {
            error: e.to_string(),
        },
        (ApiErrorKind::ThreadNotFound, Some(thread), _) => Decision::TopicUnreachable {
            thread,
            error: e.to_string(),
        },
        // Another way helps nothing when the chat is out of reach.
        (ApiErrorKind::Forbidden | ApiErrorKind::ChatNotFound, _, _) | (_, _, None) => {
            Decision::GiveUp {
                error: e.to_string(),
                handling: "dropped: Telegram refused it",
            }
        }
        (_, _, Some(next)) => Decision::Fallback {
            next: here(next),
            from: plan.name().to_owned(),
            reason: e.description.clone(),
        },
    }
}

/// Sends a row already marked `sending` (and synced) and records the outcome.
async fn send_one(
    db: &Db,
    client: &dyn BotApi,
    pacer: &Mutex<Pacer>,
    wakes: &Wakes,
    row: OutboxRow,
    notifications: Notifications,
) -> Result<(), HubError> {
    let id = row.id;
    crashpoint::hit(crashpoint::CrashPoint::SendAfterMarkSending);
    crate::latency::mark(crate::latency::Step::Calling, id);
    // Picked and marked in one transaction, or claimed in the producer's: never another row.
    if crate::never!(
        row.state != outbox::State::Sending,
        "outbox row {id} is sent while {}",
        row.state
    ) {
        pacer.lock().await.release(pace_key(&row));
        return Ok(());
    }
    let Some((plan, message, call)) = readable(&row, notifications) else {
        pacer.lock().await.release(pace_key(&row));
        return unreadable(db, &row).await;
    };
    let attempt = match read_uploads(&message).await {
        Err(why) => Attempt::FilesGone(why),
        Ok(files) => {
            // A copy sent after an unknown outcome says so: the person may see the first one too.
            let params = if plan.is_repeat() {
                marked_repeat(&call.params, !files.is_empty())
            } else {
                call.params
            };
            let result = if files.is_empty() {
                client.call(call.method, &params).await
            } else {
                // Files pi sent: the copies the hub made when the tool was called.
                client.call_multipart(call.method, &params, files).await
            };
            crashpoint::hit(crashpoint::CrashPoint::SendAfterCall);
            crate::latency::mark(crate::latency::Step::Called, id);
            Attempt::Called(result)
        }
    };
    let now = db.now_ms();
    let called = matches!(attempt, Attempt::Called(_));
    if !called {
        pacer.lock().await.release(pace_key(&row));
    }
    if called {
        // Counted when the call is over: Telegram counts a message when it arrives, which is
        // before its answer, and this sender makes one call at a time, so the next message
        // arrives at least a paced interval after this one. Counted when the call left, a
        // request held up on its way (a busy machine at start-up) arrived closer to the next
        // one than the pace allows (a `429` in the pacing bench); counted at the pick, a slow
        // durable mark did so.
        pacer.lock().await.end(pace_key(&row), now as u64);
    }
    let decision = judge(&row, &plan, &attempt, now);
    if let Decision::Flood { scope, until, .. } = &decision {
        pacer.lock().await.impose(*scope, *until as u64);
    }
    record(db, client, wakes, &row, &message, decision, now).await?;
    // (A row whose file is gone is settled before any call.)
    if called {
        crashpoint::hit(crashpoint::CrashPoint::SendAfterRecord);
    }
    Ok(())
}

/// The row's plan, its current message and that message's call, silent or not as the row's
/// purpose and `notifications` say; `None` when this version cannot read what the row sends.
fn readable(row: &OutboxRow, notifications: Notifications) -> Option<(Plan, Outgoing, Call)> {
    let plan = Plan::from_value(&row.delivery)?;
    let message = plan.current()?.clone();
    let call = message
        .call(attention::of(&row.purpose, plan.part, notifications))
        .ok()?;
    Some((plan, message, call))
}

/// A row whose delivery this version cannot read: failed, never sent as something else.
async fn unreadable(db: &Db, row: &OutboxRow) -> Result<(), HubError> {
    let (id, now, purpose) = (row.id, db.now_ms(), row.purpose.clone());
    tracing::warn!(row = id, purpose = %purpose, "an outbox row this version cannot read");
    db.write(Durability::OnDisk, move |tx| {
        let why = "what it sends cannot be read";
        outbox::mark_failed(tx, id, why, "dropped: unreadable", now)?;
        incidents::record(tx, now, "send", &format!("{purpose}: {why}"))
    })
    .await?;
    Ok(())
}

/// Records `decision` about row `row` (its current message `before`) in the store, in one
/// commit, and lets go of the copies it no longer needs after that commit.
async fn record(
    db: &Db,
    client: &dyn BotApi,
    wakes: &Wakes,
    row: &OutboxRow,
    before: &Outgoing,
    decision: Decision,
    now: i64,
) -> Result<(), HubError> {
    let (id, purpose) = (row.id, row.purpose.clone());
    // The message the row goes on with (whose copies stay), if it is settled otherwise.
    let settled: Option<Option<Outgoing>> = match &decision {
        Decision::Delivered { next, .. } => Some(next.as_ref().and_then(|p| p.current().cloned())),
        Decision::Fallback { next, .. } => Some(next.current().cloned()),
        Decision::GiveUp { .. } => Some(None),
        _ => None,
    };
    match decision {
        Decision::TopicUnreachable { thread, error } => {
            return topic_unreachable(db, client, wakes, row, thread, error, now).await;
        }
        Decision::Delivered { message_id, next } => {
            // Replies to this message route to the instance it speaks for.
            let route = row.identity.clone().zip(message_id);
            let (chat, turn) = (row.chat_id, row.turn_id);
            // A question that waits for the person is pinned once it is there (its last
            // message: the one with the buttons; an edit of it is no new question).
            let pin = message_id.filter(|_| {
                next.is_none() && before.spot().is_some() && attention::waits_for_person(&purpose)
            });
            db.write(Durability::OnDisk, move |tx| {
                match &next {
                    Some(p) => outbox::advance(tx, id, &p.to_value(), None, now)?,
                    None => outbox::mark_sent(tx, id, message_id, now)?,
                }
                if let Some((identity, message)) = &route {
                    store::routes::record(tx, chat, *message, identity, turn, now)?;
                }
                if let Some(message) = pin {
                    outbound::pin_question(tx, chat, message, now)?;
                }
                Ok(())
            })
            .await?;
        }
        decision => {
            log(&purpose, &decision);
            db.write(Durability::OnDisk, move |tx| {
                settle(tx, id, &purpose, &decision, now)
            })
            .await?;
        }
    }
    if let Some(after) = settled {
        release_copies(db, before, after.as_ref()).await;
    }
    Ok(())
}

/// What the log says of a decision (never the text).
fn log(purpose: &Purpose, decision: &Decision) {
    match decision {
        Decision::Flood { scope, secs, .. } => {
            tracing::warn!(retry_after_s = secs, scope = %scope.key(), "flood wait");
        }
        Decision::Fallback {
            next, from, reason, ..
        } => {
            tracing::warn!(purpose = %purpose, from = %from, to = %next.name(), reason = %reason, "Telegram refused a message; sending it another way");
        }
        Decision::GiveUp { error, handling } if handling.contains("file") => {
            tracing::warn!(purpose = %purpose, error = %error, "a file to send is gone");
        }
        Decision::GiveUp { error, .. } => {
            tracing::warn!(purpose = %purpose, error = %error, "Telegram refused a send");
        }
        _ => {}
    }
}

/// The store's side of a decision other than a delivery or an unreachable topic, in the
/// sender's transaction.
fn settle(
    tx: &store::Connection,
    id: i64,
    purpose: &Purpose,
    decision: &Decision,
    now: i64,
) -> Result<(), store::StoreError> {
    let incident = |what: String| incidents::record(tx, now, "send", &what);
    match decision {
        Decision::Flood { scope, until, secs } => {
            let key = scope.key();
            flood::record(tx, &key, *until, *secs, now)?;
            outbox::mark_retry(tx, id, *until, &format!("429: retry after {secs} s"), now)?;
            incident(format!("flood wait of {secs} s for {key}"))
        }
        Decision::Retry { at, error } => outbox::mark_retry(tx, id, *at, error, now),
        Decision::Resend { at, error } => {
            outbox::mark_resend(tx, id, *at, error, now)?;
            incident(format!(
                "{purpose}: outcome unknown ({error}); sending again"
            ))
        }
        Decision::Unknown { error } => {
            let handling = "not resent: the outcome is unknown and it may have arrived";
            outbox::mark_ambiguous(tx, id, error, handling, now)?;
            incident(format!("{purpose}: outcome unknown ({error}); not resent"))
        }
        Decision::MainChat { error } => {
            outbox::move_to_main_chat(tx, id, error, now)?;
            incident(format!("topic closed ({error}): sent to the main chat"))
        }
        Decision::Fallback { next, from, reason } => {
            let to = next.name();
            let handling = format!("sent as {to}: {from} was refused");
            outbox::advance(tx, id, &next.to_value(), Some(&handling), now)?;
            incident(format!(
                "{purpose}: {from} refused ({reason}); sent as {to}"
            ))
        }
        Decision::GiveUp { error, handling } => {
            outbox::mark_failed(tx, id, error, handling, now)?;
            incident(format!("{purpose}: {error}"))
        }
        Decision::Delivered { .. } | Decision::TopicUnreachable { .. } => {
            // Recorded by `record` itself (a route; a question to Telegram first).
            Ok(())
        }
    }
}

/// `message thread not found` for row `row` in topic `thread`.
async fn topic_unreachable(
    db: &Db,
    client: &dyn BotApi,
    wakes: &Wakes,
    row: &OutboxRow,
    thread: i64,
    text: String,
    now: i64,
) -> Result<(), HubError> {
    let (id, chat) = (row.id, row.chat_id);
    // Threaded Mode switched off hides every topic: ask Telegram before calling this one
    // gone. Without an answer, decide nothing yet.
    let Some(threaded) = topics::probe(db, client, &wakes.sender).await? else {
        let at = now + backoff_ms(row.attempts + 1);
        db.write(Durability::OnDisk, move |tx| {
            outbox::mark_retry(tx, id, at, &text, now)
        })
        .await?;
        return Ok(());
    };
    // Terminal for a bound topic, never retried against it: the row waits for the topic that
    // replaces it, the binding is marked lost and the topics task provisions anew. Otherwise
    // the message still has to arrive: in the main chat.
    let gone = db
        .write(Durability::OnDisk, move |tx| {
            let bound = store::threads::binding_by_thread(tx, chat, thread)?.is_some();
            if threaded && bound {
                // Pending again, so the hold below takes this row with the others.
                outbox::mark_retry(tx, id, crate::state::WAITING_FOR_THREAD, &text, now)?;
                topics::topic_gone(tx, chat, thread, now)?;
            } else {
                outbox::move_to_main_chat(tx, id, &text, now)?;
            }
            incidents::record(
                tx,
                now,
                "send",
                &format!("topic {thread} unreachable ({text})"),
            )?;
            Ok(threaded && bound)
        })
        .await?;
    tracing::warn!(thread, gone, "a topic is unreachable");
    if gone {
        wakes.topics.notify_one();
    }
    Ok(())
}

/// The paths of the hub's own copies that `message` uploads.
fn copies(message: &Outgoing) -> Vec<String> {
    message
        .uploads()
        .iter()
        .filter(|f| f.copy)
        .map(|f| f.path.clone())
        .collect()
}

/// After a row's outcome is committed: the hub's copies its message (`before`) uploaded and
/// its next message (`after`; `None`: the row is settled, sent or failed for good) does not,
/// removed unless an unsent row still refers to one. Only settled messages let go of their
/// copies: a row to be sent again (a retry, a resend, a topic that moved) keeps them, and an
/// `ambiguous` one keeps them for retention. Removed after the commit, never before: a crash
/// in between leaves a copy no row needs, which retention removes (`hub::retention`); the
/// other way round, a send recovered as interrupted would find its file gone. Failing here
/// costs only a file that retention removes later, so it is logged, not returned.
async fn release_copies(db: &Db, before: &Outgoing, after: Option<&Outgoing>) {
    let mut gone = copies(before);
    if let Some(after) = after {
        let kept = copies(after);
        gone.retain(|p| !kept.contains(p));
    }
    if gone.is_empty() {
        return;
    }
    let in_use = match db.read(store::retention::files_in_use).await {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "could not check the copies of a sent file; retention removes them");
            return;
        }
    };
    gone.retain(|p| !in_use.contains(p));
    let removed = tokio::task::spawn_blocking(move || {
        let mut removed = 0;
        for p in gone {
            match crate::regular::remove(std::path::Path::new(&p)) {
                Ok(r) => removed += usize::from(r),
                Err(e) => tracing::warn!(error = %e, "could not remove the copy of a sent file"),
            }
        }
        removed
    })
    .await
    .unwrap_or(0);
    tracing::debug!(removed, "copies of sent files removed");
}

/// `params` with the repeat mark before the text (or caption), entities shifted to match. A
/// message that uploads `files` (a spoken answer sent again) without a caption gets the mark
/// alone as its caption.
pub fn marked_repeat(params: &serde_json::Value, files: bool) -> serde_json::Value {
    let mut p = params.clone();
    if files && p.get("caption").is_none() && p.get("media").is_none() {
        p["caption"] = serde_json::json!(texts::REPEAT_MARK.trim_end());
        return p;
    }
    let mark = texts::REPEAT_MARK;
    // A rich message: the mark is a line of Markdown (it has nothing to escape).
    if let Some(md) = p
        .pointer("/rich_message/markdown")
        .and_then(serde_json::Value::as_str)
    {
        if !md.starts_with(mark) {
            p["rich_message"]["markdown"] = serde_json::Value::String(format!("{mark}{md}"));
        }
        return p;
    }
    let shift = tg_format::utf16::len(mark) as i64;
    for (field, entities) in [("text", "entities"), ("caption", "caption_entities")] {
        let Some(text) = p.get(field).and_then(serde_json::Value::as_str) else {
            continue;
        };
        if text.starts_with(mark) {
            return p;
        }
        p[field] = serde_json::Value::String(format!("{mark}{text}"));
        if let Some(list) = p
            .get_mut(entities)
            .and_then(serde_json::Value::as_array_mut)
        {
            for e in list {
                if let Some(o) = e.get("offset").and_then(serde_json::Value::as_i64) {
                    e["offset"] = serde_json::json!(o + shift);
                }
            }
        }
        return p;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_marked_once_and_entities_follow_the_text() {
        let p = serde_json::json!({ "chat_id": 1, "text": "héllo", "entities": [{ "type": "bold", "offset": 1, "length": 2 }] });
        let m = marked_repeat(&p, false);
        let text = m["text"].as_str().unwrap_or_default();
        assert!(text.starts_with(texts::REPEAT_MARK) && text.ends_with("héllo"));
        let shift = tg_format::utf16::len(texts::REPEAT_MARK) as i64;
        assert_eq!(m["entities"][0]["offset"], serde_json::json!(1 + shift));
        assert_eq!(marked_repeat(&m, false), m, "marked once");
        let cap = serde_json::json!({ "caption": "c" });
        assert!(
            marked_repeat(&cap, false)["caption"]
                .as_str()
                .unwrap_or_default()
                .starts_with(texts::REPEAT_MARK)
        );
        let none = serde_json::json!({ "callback_query_id": "q" });
        assert_eq!(marked_repeat(&none, false), none);
    }

    /// A row of chat 5 in topic `thread`, at its second attempt.
    fn row(thread: Option<i64>, resend: bool) -> OutboxRow {
        OutboxRow {
            id: 1,
            chat_id: 5,
            thread_id: thread,
            delivery: serde_json::Value::Null,
            purpose: Purpose::Answer { turn: 1 }.piece(0),
            source_update_id: None,
            resend_if_unknown: resend,
            state: outbox::State::Sending,
            attempts: 1,
            not_before_ms: 0,
            sent_message_id: None,
            last_error: None,
            handling: None,
            identity: None,
            turn_id: None,
            resent: 0,
        }
    }

    fn api(kind: ApiErrorKind) -> Attempt {
        Attempt::Called(Err(CallError::Api(telegram::ApiError {
            code: 400,
            description: "Bad Request: x".into(),
            kind,
        })))
    }

    /// Every outcome of a call and what the sender does about it.
    #[test]
    fn each_outcome_has_its_decision() {
        use crate::assistant::Rendering;
        use crate::outgoing::delivery::{Target, plans};
        const NOW: i64 = 10_000;
        let target = Target {
            chat_id: 5,
            thread_id: Some(9),
            reply_to: Some(3),
        };
        let long = format!("# T\n\n{}", "words of a sentence. ".repeat(400));
        let rich = plans(&long, Rendering::Rich, &target).remove(0);
        let html = rich.fallback().unwrap_or_else(|| rich.clone());
        let plain = Plan::single(crate::outgoing::delivery::text_message(
            crate::outgoing::message::Spot::new(5, Some(9), None),
            "x".into(),
            false,
        ));
        let ok = |id: i64| Attempt::Called(Ok(serde_json::json!({ "message_id": id })));
        let flood = Attempt::Called(Err(CallError::Flood {
            retry_after: Duration::from_secs(3),
            chat_id: Some(5),
        }));
        let retry = || Attempt::Called(Err(CallError::Retryable("HTTP 502".into())));
        let unknown = || Attempt::Called(Err(CallError::CommitUnknown("reset".into())));
        let gone = Attempt::FilesGone("/f: gone".into());
        let refused = |e: &str| e.to_owned();
        let later = NOW + backoff_ms(2);
        let table: Vec<(&str, OutboxRow, &Plan, Attempt, Decision)> = vec![
            (
                "ok, one message",
                row(Some(9), false),
                &plain,
                ok(7),
                Decision::Delivered {
                    message_id: Some(7),
                    next: None,
                },
            ),
            (
                "ok, more parts follow",
                row(Some(9), false),
                &html,
                ok(7),
                Decision::Delivered {
                    message_id: Some(7),
                    next: html.next_part(),
                },
            ),
            (
                "ok, the row moved to the main chat: the next part follows it, no reply",
                row(None, false),
                &html,
                ok(7),
                Decision::Delivered {
                    message_id: Some(7),
                    next: html.next_part().map(|p| p.placed(5, None)),
                },
            ),
            (
                "flood wait",
                row(Some(9), false),
                &plain,
                flood,
                Decision::Flood {
                    scope: FloodScope::Chat(5),
                    until: NOW + 3000,
                    secs: 3,
                },
            ),
            (
                "nothing happened",
                row(Some(9), false),
                &plain,
                retry(),
                Decision::Retry {
                    at: later,
                    error: "HTTP 502".into(),
                },
            ),
            (
                "unknown, must arrive",
                row(Some(9), true),
                &plain,
                unknown(),
                Decision::Resend {
                    at: later,
                    error: "reset".into(),
                },
            ),
            (
                "unknown, may not repeat",
                row(Some(9), false),
                &plain,
                unknown(),
                Decision::Unknown {
                    error: "reset".into(),
                },
            ),
            (
                "file gone",
                row(Some(9), false),
                &plain,
                gone,
                Decision::GiveUp {
                    error: "/f: gone".into(),
                    handling: "dropped: the file to send is gone",
                },
            ),
            (
                "not modified",
                row(None, false),
                &plain,
                api(ApiErrorKind::NotModified),
                Decision::Delivered {
                    message_id: None,
                    next: None,
                },
            ),
            (
                "topic closed",
                row(Some(9), false),
                &rich,
                api(ApiErrorKind::TopicClosed),
                Decision::MainChat {
                    error: refused("400 Bad Request: x"),
                },
            ),
            (
                "topic not found",
                row(Some(9), false),
                &rich,
                api(ApiErrorKind::ThreadNotFound),
                Decision::TopicUnreachable {
                    thread: 9,
                    error: refused("400 Bad Request: x"),
                },
            ),
            (
                "refused, another way",
                row(Some(9), false),
                &rich,
                api(ApiErrorKind::ParseEntities),
                Decision::Fallback {
                    next: html.clone(),
                    from: "rich".into(),
                    reason: "Bad Request: x".into(),
                },
            ),
            (
                "refused, no other way",
                row(Some(9), false),
                &plain,
                api(ApiErrorKind::ParseEntities),
                Decision::GiveUp {
                    error: refused("400 Bad Request: x"),
                    handling: "dropped: Telegram refused it",
                },
            ),
            (
                "forbidden: no other way helps",
                row(Some(9), false),
                &rich,
                api(ApiErrorKind::Forbidden),
                Decision::GiveUp {
                    error: refused("400 Bad Request: x"),
                    handling: "dropped: Telegram refused it",
                },
            ),
            (
                "chat not found",
                row(Some(9), false),
                &rich,
                api(ApiErrorKind::ChatNotFound),
                Decision::GiveUp {
                    error: refused("400 Bad Request: x"),
                    handling: "dropped: Telegram refused it",
                },
            ),
        ];
        for (what, row, plan, attempt, want) in table {
            assert_eq!(judge(&row, plan, &attempt, NOW), want, "{what}");
        }
    }

    #[test]
    fn backoff_doubles_to_a_minute() {
        let v: Vec<i64> = (1..=9).map(backoff_ms).collect();
        assert_eq!(
            v,
            vec![1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]
        );
    }
}
