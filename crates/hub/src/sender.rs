//! Outbound: the outbox, sent by one sender that obeys pacing and flood waits, repeats only what
//! is safe to repeat, and records what it did about sends whose outcome is unknown.

use crate::db::Durability;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use store::outbox::{self, OutboxRow};
use store::{CommitNo, flood, incidents};
use telegram::{ApiErrorKind, CallError, FloodScope, Pacer};
use tokio::sync::{Mutex, mpsc, watch};

use crate::bot_api::{Api, BotApi};
use crate::crashpoint;
use crate::db::Db;
use crate::delivery::Plan;
use crate::error::HubError;
use crate::texts;
use crate::topics;
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

/// Sends queued messages until `stop`.
pub async fn run(
    db: Db,
    client: Api,
    pacer: Arc<Mutex<Pacer>>,
    wakes: Wakes,
    mut claims: Claims,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let mut producers = true;
    loop {
        if *stop.borrow() {
            break;
        }
        if let Ok(c) = claims.rows.try_recv() {
            send_marked(&db, &*client, &pacer, &wakes, c).await?;
            continue;
        }
        let now = db.now_ms();
        // The row is picked and marked `sending` in one transaction (one store call less on
        // an answer's way out), judged by a copy of the pacer: the real one counts the send
        // when its call is over (`send_one`).
        let mut pace = pacer.lock().await.clone();
        let ((chosen, mut wait), commit) = db
            .write_numbered(
                Durability::Lazy,
                move |tx| pick_and_mark(tx, &mut pace, now, |_| true),
                |_| false,
            )
            .await?;
        if let Some(row) = chosen {
            send_marked(&db, &*client, &pacer, &wakes, Claimed { row, commit }).await?;
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
            send_marked(&db, &*client, &pacer, &wakes, c).await?;
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

/// A row marked `sending` (picked here, or claimed by a producer, which usually flushed its
/// commit while this task woke): its mark on disk first, since after a crash of the machine
/// the row must be ambiguous rather than sent again unmarked; then sent.
async fn send_marked(
    db: &Db,
    client: &dyn BotApi,
    pacer: &Mutex<Pacer>,
    wakes: &Wakes,
    c: Claimed,
) -> Result<(), HubError> {
    crate::latency::mark(crate::latency::Step::Picked, c.row.id);
    db.sync_through(c.commit).await?;
    send_one(db, client, pacer, wakes, c.row).await
}

/// A row that uploads files (`__files`: `[{field, path, name, mime}]` in its parameters): the
/// parameters without them and the files read. `None` for rows that upload nothing.
async fn uploads(
    params: &serde_json::Value,
) -> Option<Result<(serde_json::Value, Vec<telegram::Upload>), String>> {
    let list = params.get(crate::outbound::FILES_KEY)?.as_array()?.clone();
    let mut rest = params.clone();
    if let Some(o) = rest.as_object_mut() {
        o.remove(crate::outbound::FILES_KEY);
    }
    let mut files = Vec::with_capacity(list.len());
    for f in &list {
        let text = |k: &str| {
            f.get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let (Some(field), Some(path)) = (text("field"), text("path")) else {
            return Some(Err("a file entry without field or path".into()));
        };
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) => return Some(Err(format!("{path}: {e}"))),
        };
        files.push(telegram::Upload {
            field,
            file_name: text("name").unwrap_or_else(|| "file".into()),
            mime_type: text("mime"),
            bytes: bytes.into(),
        });
    }
    Some(Ok((rest, files)))
}

/// The chat whose pace a row counts against; `None` for calls that are not messages of a chat.
fn pace_key(row: &OutboxRow) -> Option<i64> {
    telegram::paced_per_chat(&row.method).then_some(row.chat_id)
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
    for row in outbox::heads(tx, now)?.into_iter().filter(|r| wanted(r)) {
        let w = pace.ready_in(pace_key(&row), now as u64);
        if w.is_zero() {
            outbox::mark_sending(tx, row.id, now)?;
            return Ok((Some(row), None));
        }
        wait = Some(wait.map_or(w, |x| x.min(w)));
    }
    Ok((None, wait))
}

/// Sends a row already marked `sending` (and synced) and records the outcome.
async fn send_one(
    db: &Db,
    client: &dyn BotApi,
    pacer: &Mutex<Pacer>,
    wakes: &Wakes,
    row: OutboxRow,
) -> Result<(), HubError> {
    let id = row.id;
    crashpoint::hit(crashpoint::CrashPoint::SendAfterMarkSending);
    crate::latency::mark(crate::latency::Step::Calling, id);
    // A copy sent after an unknown outcome says so: the person may see the first one too.
    let plan = Plan::from_value(row.plan.as_ref());
    let repeat = plan.as_ref().map_or(row.resent > 0, Plan::is_repeat);
    let result = match uploads(&row.params).await {
        // Files pi sent: the copies the hub made when the tool was called. A spoken answer
        // sent again carries the mark in its caption (a file without one gets the mark alone).
        Some(Ok((params, files))) => {
            let params = if repeat {
                let mut p = marked_repeat(&params);
                if p.get("caption").is_none() && p.get("media").is_none() {
                    p["caption"] = serde_json::json!(texts::REPEAT_MARK.trim_end());
                }
                p
            } else {
                params
            };
            client.call_multipart(&row.method, &params, files).await
        }
        Some(Err(why)) => {
            let purpose = row.purpose.clone();
            tracing::warn!(purpose = %purpose, error = %why, "a file to send is gone");
            let now = db.now_ms();
            db.write(Durability::OnDisk, move |tx| {
                outbox::mark_failed(tx, id, &why, "dropped: the file to send is gone", now)?;
                incidents::record(tx, now, "send", &format!("{purpose}: {why}"))
            })
            .await?;
            release_copies(db, &row.params, None).await;
            return Ok(());
        }
        None if repeat => client.call(&row.method, &marked_repeat(&row.params)).await,
        None => client.call(&row.method, &row.params).await,
    };
    crashpoint::hit(crashpoint::CrashPoint::SendAfterCall);
    crate::latency::mark(crate::latency::Step::Called, id);
    let now = db.now_ms();
    // Counted when the call is over: Telegram counts a message when it arrives, which is
    // before its answer, and this sender makes one call at a time, so the next message arrives
    // at least a paced interval after this one. Counted when the call left, a request held up
    // on its way (a busy machine at start-up) arrived closer to the next one than the pace
    // allows (a `429` in the pacing bench); counted at the pick, a slow durable mark did so.
    pacer.lock().await.consume(pace_key(&row), now as u64);
    match result {
        Ok(v) => {
            let message_id = v.get("message_id").and_then(serde_json::Value::as_i64);
            // Replies to this message route to the instance it speaks for.
            let route = row.identity.clone().zip(message_id);
            let (chat, turn) = (row.chat_id, row.turn_id);
            // More messages in this row's plan: the next one goes at once, in the same place.
            let next = plan.as_ref().and_then(Plan::next_part);
            let here = (row.chat_id, row.thread_id);
            let after = db
                .write(Durability::OnDisk, move |tx| {
                    let after = match next.as_ref().and_then(|p| p.current().map(|c| (p, c))) {
                        Some((p, (method, params))) => {
                            let params = placed(params, here);
                            outbox::advance(tx, id, method, &params, &p.to_value(), None, now)?;
                            Some(params)
                        }
                        None => {
                            outbox::mark_sent(tx, id, message_id, now)?;
                            None
                        }
                    };
                    if let Some((identity, message)) = &route {
                        store::routes::record(tx, chat, *message, identity, turn, now)?;
                    }
                    Ok(after)
                })
                .await?;
            release_copies(db, &row.params, after.as_ref()).await;
        }
        Err(CallError::Flood {
            retry_after,
            chat_id,
        }) => {
            let scope = FloodScope::of(chat_id);
            let until = now + retry_after.as_millis() as i64;
            pacer.lock().await.impose(scope, until as u64);
            let secs = retry_after.as_secs() as i64;
            tracing::warn!(retry_after_s = secs, scope = %scope.key(), "flood wait");
            let key = scope.key();
            db.write(Durability::OnDisk, move |tx| {
                flood::record(tx, &key, until, secs, now)?;
                outbox::mark_retry(tx, id, until, &format!("429: retry after {secs} s"), now)?;
                incidents::record(
                    tx,
                    now,
                    "send",
                    &format!("flood wait of {secs} s for {key}"),
                )
            })
            .await?;
        }
        Err(CallError::Retryable(e)) => {
            let at = now + backoff_ms(row.attempts + 1);
            db.write(Durability::OnDisk, move |tx| {
                outbox::mark_retry(tx, id, at, &e, now)
            })
            .await?;
        }
        Err(CallError::CommitUnknown(e)) => {
            let purpose = row.purpose.clone();
            if row.resend_if_unknown {
                let at = now + backoff_ms(row.attempts + 1);
                db.write(Durability::OnDisk, move |tx| {
                    outbox::mark_resend(tx, id, at, &e, now)?;
                    incidents::record(
                        tx,
                        now,
                        "send",
                        &format!("{purpose}: outcome unknown ({e}); sending again"),
                    )
                })
                .await?;
            } else {
                db.write(Durability::OnDisk, move |tx| {
                    outbox::mark_ambiguous(
                        tx,
                        id,
                        &e,
                        "not resent: the outcome is unknown and it may have arrived",
                        now,
                    )?;
                    incidents::record(
                        tx,
                        now,
                        "send",
                        &format!("{purpose}: outcome unknown ({e}); not resent"),
                    )
                })
                .await?;
            }
        }
        Err(CallError::Api(e)) if e.kind == ApiErrorKind::NotModified => {
            // The edit already shows: that is the outcome we wanted.
            db.write(Durability::OnDisk, move |tx| {
                outbox::mark_sent(tx, id, None, now)
            })
            .await?;
            release_copies(db, &row.params, None).await;
        }
        Err(CallError::Api(e))
            if e.kind == ApiErrorKind::TopicClosed && row.thread_id.is_some() =>
        {
            // The person closed the topic; the message still has to arrive.
            let text = e.to_string();
            db.write(Durability::OnDisk, move |tx| {
                outbox::move_to_main_chat(tx, id, &text, now)?;
                incidents::record(
                    tx,
                    now,
                    "send",
                    &format!("topic closed ({text}): sent to the main chat"),
                )
            })
            .await?;
        }
        Err(CallError::Api(e))
            if e.kind == ApiErrorKind::ThreadNotFound && row.thread_id.is_some() =>
        {
            let (chat, thread) = (row.chat_id, row.thread_id.unwrap_or_default());
            let text = e.to_string();
            // Threaded Mode switched off hides every topic: ask Telegram before calling this
            // one gone. Without an answer, decide nothing yet.
            let Some(threaded) = topics::probe(db, client, &wakes.sender).await? else {
                let at = now + backoff_ms(row.attempts + 1);
                db.write(Durability::OnDisk, move |tx| {
                    outbox::mark_retry(tx, id, at, &text, now)
                })
                .await?;
                crashpoint::hit(crashpoint::CrashPoint::SendAfterRecord);
                return Ok(());
            };
            // Terminal for a bound topic, never retried against it: the row waits for the
            // topic that replaces it, the binding is marked lost and the topics task provisions
            // anew. Otherwise the message still has to arrive: in the main chat.
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
        }
        Err(CallError::Api(e))
            if plan.as_ref().and_then(Plan::fallback).is_some()
                && !matches!(e.kind, ApiErrorKind::Forbidden | ApiErrorKind::ChatNotFound) =>
        {
            // Refused as written (markup, length): the same words another way. The reason
            // goes to the incidents, never the text.
            let from = plan.as_ref().map_or("", Plan::name).to_owned();
            let Some(next) = plan.as_ref().and_then(Plan::fallback) else {
                return Ok(());
            };
            let to = next.name().to_owned();
            let purpose = row.purpose.clone();
            let reason = e.description.clone();
            let here = (row.chat_id, row.thread_id);
            tracing::warn!(purpose = %purpose, from = %from, to = %to, reason = %reason, "Telegram refused a message; sending it another way");
            let after = db
                .write(Durability::OnDisk, move |tx| {
                    let mut after = None;
                    if let Some((method, params)) = next.current() {
                        let handling = format!("sent as {to}: {from} was refused");
                        let params = placed(params, here);
                        outbox::advance(
                            tx,
                            id,
                            method,
                            &params,
                            &next.to_value(),
                            Some(&handling),
                            now,
                        )?;
                        after = Some(params);
                    }
                    incidents::record(
                        tx,
                        now,
                        "send",
                        &format!("{purpose}: {from} refused ({reason}); sent as {to}"),
                    )?;
                    Ok(after)
                })
                .await?;
            // Without a next message the row stays as it was (nothing was advanced).
            if let Some(after) = &after {
                release_copies(db, &row.params, Some(after)).await;
            }
        }
        Err(CallError::Api(e)) => {
            let purpose = row.purpose.clone();
            let text = e.to_string();
            tracing::warn!(purpose = %purpose, error = %text, "Telegram refused a send");
            db.write(Durability::OnDisk, move |tx| {
                outbox::mark_failed(tx, id, &text, "dropped: Telegram refused it", now)?;
                incidents::record(tx, now, "send", &format!("{purpose}: {text}"))
            })
            .await?;
            release_copies(db, &row.params, None).await;
        }
    }
    crashpoint::hit(crashpoint::CrashPoint::SendAfterRecord);
    Ok(())
}

/// The paths of the hub's own copies (`copy` entries of `__files`) that `params` uploads.
fn copies(params: &serde_json::Value) -> Vec<String> {
    params
        .get(crate::outbound::FILES_KEY)
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| f.get(crate::outbound::COPY) == Some(&serde_json::Value::Bool(true)))
        .filter_map(|f| f.get("path").and_then(serde_json::Value::as_str))
        .map(str::to_owned)
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
async fn release_copies(db: &Db, before: &serde_json::Value, after: Option<&serde_json::Value>) {
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

/// A planned message's parameters addressed where its row is now: a row moved to a new topic
/// (the old one was deleted) or to the main chat (its topic was closed) takes its next
/// messages along. A reply into a topic the row left is dropped.
fn placed(params: &serde_json::Value, (chat, thread): (i64, Option<i64>)) -> serde_json::Value {
    let mut p = params.clone();
    let planned = p
        .get("message_thread_id")
        .and_then(serde_json::Value::as_i64);
    p["chat_id"] = serde_json::json!(chat);
    if let Some(o) = p.as_object_mut() {
        match thread {
            Some(t) => {
                o.insert("message_thread_id".into(), serde_json::json!(t));
            }
            None => {
                o.remove("message_thread_id");
            }
        }
        if planned != thread {
            o.remove("reply_parameters");
        }
    }
    p
}

/// `params` with the repeat mark before the text (or caption), entities shifted to match.
pub fn marked_repeat(params: &serde_json::Value) -> serde_json::Value {
    let mut p = params.clone();
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
        let m = marked_repeat(&p);
        let text = m["text"].as_str().unwrap_or_default();
        assert!(text.starts_with(texts::REPEAT_MARK) && text.ends_with("héllo"));
        let shift = tg_format::utf16::len(texts::REPEAT_MARK) as i64;
        assert_eq!(m["entities"][0]["offset"], serde_json::json!(1 + shift));
        assert_eq!(marked_repeat(&m), m, "marked once");
        let cap = serde_json::json!({ "caption": "c" });
        assert!(
            marked_repeat(&cap)["caption"]
                .as_str()
                .unwrap_or_default()
                .starts_with(texts::REPEAT_MARK)
        );
        let none = serde_json::json!({ "callback_query_id": "q" });
        assert_eq!(marked_repeat(&none), none);
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
