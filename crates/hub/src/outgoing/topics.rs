//! The hub's Threaded Mode task: provisions a topic for every live instance (one at a time, so
//! slots and intents never race), runs the reconciler, re-provisions after a topic is deleted,
//! probes the capability, and releases stale offline bindings. Everything it decides is in the
//! store, so after a restart it picks up where the last hub stopped.

use crate::db::Durability;
use std::sync::Arc;
use std::time::Duration;
use store::Cached;
use store::outbox::Purpose;

use serde_json::{Value, json};
use store::lease::Epoch;
use store::threads::{self as tables, BindingState, Intent, IntentState};
use store::{Connection, StoreError, instances, kv};
use telegram::{ApiErrorKind, CallError, FloodScope, Pacer};
use threads::provision::{self, Outcome, Request};
use threads::{Point, TopicApi, TopicError, events, reconcile};
use tokio::sync::{Mutex, Notify, watch};

use crate::bot_api::{Api, BotApi};
use crate::buttons::Button;
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::outgoing::outbound;
use crate::outgoing::texts;
use crate::state;
use crate::wakes::Wakes;

/// Threaded Mode settings.
#[derive(Debug, Clone)]
pub struct TopicSettings {
    /// Topic title template.
    pub title_template: String,
    /// Offline bindings older than this release their slot.
    pub offline_retention: Duration,
    /// How often the capability is probed when nothing else prompts it.
    pub probe_every: Duration,
}

/// The topic calls, made with the hub's client and pacing.
pub struct ClientTopics {
    client: Api,
    pacer: Arc<Mutex<Pacer>>,
    clock: Clock,
}

impl ClientTopics {
    /// Topic calls through `client`, obeying `pacer` (which counts time by `clock`).
    pub fn new(client: Api, pacer: Arc<Mutex<Pacer>>, clock: Clock) -> Self {
        Self {
            client,
            pacer,
            clock,
        }
    }

    async fn paced(&self, chat: i64) {
        loop {
            let wait = {
                let mut pacer = self.pacer.lock().await;
                let wait = pacer.ready_in(Some(chat), self.clock.now_ms() as u64);
                if wait.is_zero() {
                    // Under way until `called`, judged and taken under one lock: the sender
                    // sees it, and it is counted at its end as the sender's calls are (one
                    // view of the budget for both).
                    pacer.begin(Some(chat));
                    return;
                }
                wait
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn called(&self, chat: i64) {
        self.pacer
            .lock()
            .await
            .end(Some(chat), self.clock.now_ms() as u64);
    }

    async fn note_flood(&self, e: &CallError) {
        if let CallError::Flood {
            retry_after,
            chat_id,
        } = e
        {
            let scope = FloodScope::of(*chat_id);
            self.pacer.lock().await.impose(
                scope,
                self.clock.now_ms() as u64 + retry_after.as_millis() as u64,
            );
        }
    }
}

fn topic_error(e: CallError) -> TopicError {
    match e {
        CallError::Flood { retry_after, .. } => TopicError::Flood(retry_after),
        CallError::Retryable(m) => TopicError::Transient(m),
        CallError::CommitUnknown(m) => TopicError::Unknown(m),
        CallError::Api(a) if a.kind == ApiErrorKind::ThreadNotFound => TopicError::Gone,
        CallError::Api(a) => TopicError::Refused(a.description),
    }
}

impl TopicApi for ClientTopics {
    async fn create(&self, chat_id: i64, name: &str) -> Result<i64, TopicError> {
        self.paced(chat_id).await;
        let called = self
            .client
            .call(
                "createForumTopic",
                &json!({ "chat_id": chat_id, "name": name }),
            )
            .await;
        self.called(chat_id).await;
        match called {
            Ok(v) => v
                .get("message_thread_id")
                .and_then(Value::as_i64)
                .ok_or_else(|| {
                    TopicError::Unknown(
                        "createForumTopic answered without a message_thread_id".into(),
                    )
                }),
            Err(e) => {
                self.note_flood(&e).await;
                Err(topic_error(e))
            }
        }
    }

    async fn delete(&self, chat_id: i64, thread_id: i64) -> Result<(), TopicError> {
        self.paced(chat_id).await;
        let params = json!({ "chat_id": chat_id, "message_thread_id": thread_id });
        let called = self.client.call("deleteForumTopic", &params).await;
        self.called(chat_id).await;
        match called {
            Ok(_) => Ok(()),
            Err(e) => {
                self.note_flood(&e).await;
                Err(topic_error(e))
            }
        }
    }
}

/// Runs the Threaded Mode task until `stop`. `wake` is notified whenever something may need a
/// topic (an instance connected, a topic was reported gone, an intent was settled, a cleanup
/// was queued).
pub async fn run(
    db: Db,
    client: Api,
    pacer: Arc<Mutex<Pacer>>,
    epoch: Epoch,
    settings: TopicSettings,
    wakes: Wakes,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let sender = wakes.sender.clone();
    let api = ClientTopics::new(client.clone(), pacer, db.clock().clone());
    // Intents an earlier hub left in flight have an unknown outcome; with those it marked
    // ambiguous but could not ask about before it stopped, the person decides.
    db.write(Durability::OnDisk, move |tx| {
        provision::mark_interrupted(tx, epoch)
    })
    .await?;
    for i in db.read(tables::intents).await? {
        if i.state == IntentState::Ambiguous {
            ask_about(&db, &i).await?;
        }
    }
    sender.notify_one();
    release_stale(&db, epoch, settings.offline_retention).await?;
    let mut next_probe = tokio::time::Instant::now() + settings.probe_every;
    loop {
        let mut next_due = None;
        if db.read(state::topics_on).await? {
            let provisioned = provision_all(&db, &api, epoch, &settings, &sender).await?;
            if provisioned.refused {
                // Telegram refused a topic: maybe the capability changed.
                probe(&db, &*client, &sender).await?;
            }
            // A creation to try again (a flood wait, a transient failure) must not wait for
            // the next wake or the slow clock: it is due on its own.
            next_due = provisioned.retry_at;
            let report = {
                let mut hook = |p: Point| {
                    crashpoint::hit_threads(p);
                    Ok(())
                };
                reconcile::reconcile(&db, &api, epoch, db.now_ms(), &mut hook)
                    .await
                    .map_err(threads_error)?
            };
            if report.lost_lease {
                tracing::warn!("another hub holds the lease now: stopping topic work");
                return Ok(());
            }
            check_invariants(&db).await;
            next_due = match (next_due, report.next_due_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            () = wakes.topics.notified() => {}
            () = crate::wakes::sleep_for(reconcile::wait_until(next_due, db.now_ms())) => {}
            () = tokio::time::sleep_until(next_probe) => {
                // The slow clock: the capability, and bindings offline for days.
                next_probe = tokio::time::Instant::now() + settings.probe_every;
                probe(&db, &*client, &sender).await?;
                release_stale(&db, epoch, settings.offline_retention).await?;
            }
        }
    }
}

/// After a pass the thread system's invariants hold (slots, one binding or intent per
/// identity, no thread bound twice, intents in flight only in this epoch). Checked where a
/// broken one panics (debug builds, the simulation): it reads every binding and intent.
async fn check_invariants(db: &Db) {
    if !crate::never::panics() {
        return;
    }
    match db.read(|c| threads::invariants::check_in(c, None)).await {
        Ok(problems) => {
            crate::never!(
                !problems.is_empty(),
                "threads invariants after a topics pass: {problems:?}"
            );
        }
        // A check that cannot read changes nothing of what the task does.
        Err(e) => {
            tracing::warn!(error = %e, "could not read the store to check the threads invariants")
        }
    }
}

/// Offline bindings past the retention give up their slot, and their topics are offered for
/// deletion in one message (in the same commit: a crash neither loses the offer nor makes two).
async fn release_stale(db: &Db, epoch: Epoch, retention: Duration) -> Result<(), HubError> {
    let days = retention.as_secs() / 86_400;
    let retention = retention.as_millis() as i64;
    let now = db.now_ms();
    let clock = db.clock().clone();
    let released = db
        .write(Durability::OnDisk, move |tx| {
            let released = events::release_stale(tx, retention, epoch, now)?;
            offer_deletion(tx, &clock, &released, days, now)?;
            Ok(released)
        })
        .await?;
    if !released.is_empty() {
        tracing::info!(
            count = released.len(),
            "released slots of long-offline bindings"
        );
    }
    Ok(())
}

/// The offer to delete the topics of `released` bindings (their pis were offline for more
/// than `days` days): one message in the main chat, with Delete / Keep.
fn offer_deletion(
    tx: &Connection,
    clock: &Clock,
    released: &[tables::Binding],
    days: u64,
    now: i64,
) -> Result<(), StoreError> {
    let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
        return Ok(());
    };
    if released.is_empty() {
        return Ok(());
    }
    let topics: Vec<(i64, i64)> = released.iter().map(|b| (b.chat_id, b.thread_id)).collect();
    let titles: Vec<&str> = released.iter().map(|b| b.title.as_str()).collect();
    let delete = Button::Retention {
        topics: topics.clone(),
        delete: true,
    };
    let keep = Button::Retention {
        topics,
        delete: false,
    };
    let ttl = outbound::QUESTION_TTL_MS;
    let markup = json!({ "inline_keyboard": [[
        outbound::button(tx, clock, owner, "🗑 Delete them", &delete, now, ttl)?,
        outbound::button(tx, clock, owner, "Keep them", &keep, now, ttl)?,
    ]] });
    outbound::text(
        tx,
        &outbound::Text {
            chat: owner,
            thread: None,
            text: &texts::retention_offer(&titles, days),
            reply_to: None,
            markup: Some(markup),
            purpose: &Purpose::NoticeRetention { at: now },
            source_update_id: None,
            resend: false,
        },
        now,
    )
    .map(drop)
}

/// The person's answer to [`offer_deletion`]: each topic is queued for deletion (the
/// reconciler's proofs still apply: one a pi is bound to again is kept). Returns how many.
pub fn delete_offered(
    tx: &Connection,
    topics: &[(i64, i64)],
    now: i64,
) -> Result<usize, StoreError> {
    for (chat, thread) in topics {
        tables::add_cleanup(tx, *chat, *thread, &format!("retention:{thread}"), now)?;
    }
    Ok(topics.len())
}

fn threads_error(e: threads::ThreadsError) -> HubError {
    match e {
        threads::ThreadsError::Store(s) => HubError::Store(s),
        threads::ThreadsError::Crash(c) => HubError::Usage(c.to_string()),
    }
}

/// `getMe`: is Threaded Mode on? Records a change and tells the owner.
pub async fn probe(
    db: &Db,
    client: &dyn BotApi,
    sender: &Notify,
) -> Result<Option<bool>, HubError> {
    let me = match client.call("getMe", &json!({})).await {
        Ok(me) => me,
        Err(e) => {
            tracing::debug!(error = %e, "capability probe failed");
            return Ok(None);
        }
    };
    let on = me
        .get("has_topics_enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let now = db.now_ms();
    let changed = db
        .write(Durability::OnDisk, move |tx| {
            let was = state::threaded(tx)?;
            kv::set(tx, tables::MODE, if on { "threaded" } else { "classic" })?;
            kv::set(tx, kv::BOT_TOPICS, if on { "true" } else { "false" })?;
            if was != on
                && let Some(owner) = kv::get_i64(tx, kv::OWNER)?
            {
                outbound::notice(
                    tx,
                    owner,
                    None,
                    &texts::mode_changed(on),
                    &Purpose::NoticeMode { at: now },
                    now,
                )?;
            }
            Ok(was != on)
        })
        .await?;
    if changed {
        tracing::info!(threaded = on, "Threaded Mode changed");
        sender.notify_one();
    }
    Ok(Some(on))
}

/// What a provisioning round left to do.
#[derive(Debug, Default)]
struct Provisioned {
    /// Telegram refused a topic.
    refused: bool,
    /// When a creation that did not happen is due again (Unix ms).
    retry_at: Option<i64>,
}

/// The wait before a creation that failed without an answer (no flood wait given) is tried
/// again.
const RETRY_CREATE_MS: i64 = 5_000;

/// Gives every live instance without an active binding its topic.
async fn provision_all(
    db: &Db,
    api: &ClientTopics,
    epoch: Epoch,
    settings: &TopicSettings,
    sender: &Notify,
) -> Result<Provisioned, HubError> {
    let (owner, live, bindings, skipped) = db
        .read(|c| {
            let live = instances::live(c)?;
            let mut skipped = Vec::new();
            for i in &live {
                if kv::get(c, &state::skip_key(&i.identity))?.as_deref() == Some(i.id.as_str()) {
                    skipped.push(i.id.clone());
                }
            }
            Ok((state::workspace(c)?, live, tables::bindings(c)?, skipped))
        })
        .await?;
    let Some(chat) = owner else {
        return Ok(Provisioned::default());
    };
    let mut done = Provisioned::default();
    let mut no_slot = Vec::new();
    for inst in live {
        // A binding in another chat (the workspace moved to a group, or back) is not this
        // chat's topic: provisioning gives the pi one here.
        let has = bindings.iter().any(|b| {
            b.identity == inst.identity
                && b.chat_id == chat
                && b.state == BindingState::Active
                && b.instance_id.as_deref() == Some(inst.id.as_str())
        });
        // The person said "forget" for this instance's thread: it stays in the main chat.
        if has || skipped.contains(&inst.id) {
            continue;
        }
        let req = Request {
            identity: &inst.identity,
            instance_id: Some(&inst.id),
            chat_id: chat,
            cwd: &inst.cwd,
            project: &inst.label,
            title_template: &settings.title_template,
        };
        let outcome = {
            let mut hook = |p: Point| {
                crashpoint::hit_threads(p);
                Ok(())
            };
            provision::provision(db, api, epoch, &req, db.now_ms(), &mut hook)
                .await
                .map_err(threads_error)?
        };
        tracing::info!(identity = %inst.identity, outcome = ?outcome_name(&outcome), "provisioned");
        let was_offline = bindings
            .iter()
            .any(|b| b.identity == inst.identity && b.state == BindingState::Offline);
        after_provision(db, &inst, chat, &outcome, was_offline).await?;
        sender.notify_one();
        match outcome {
            Outcome::LostLease => return Ok(done),
            Outcome::NoSlot => no_slot.push(inst.label.clone()),
            Outcome::Refused(_) => done.refused = true,
            Outcome::Retry(wait) => {
                let wait = wait.map_or(RETRY_CREATE_MS, |d| {
                    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
                });
                let at = db.now_ms().saturating_add(wait);
                done.retry_at = Some(done.retry_at.map_or(at, |t: i64| t.min(at)));
            }
            _ => {}
        }
    }
    // Every live pi without a thread came through this pass, so the list is whole.
    if settle_no_slot(db, chat, no_slot).await? {
        sender.notify_one();
    }
    Ok(done)
}

/// What the no-thread notice says now (`state::NO_SLOT_NOTICE`).
#[derive(Debug, Default, serde::Deserialize)]
struct NoSlotNotice {
    /// Its outbox row.
    row: Option<i64>,
    labels: Vec<String>,
}

/// Keeps the one notice about pi without a thread current: written when the first one has
/// none, edited when the list changes (rewritten while it has not left), told when it is
/// over; nothing when nothing changed. Every pass would otherwise repeat it for every such pi
/// (a storm of N notices on each attach). `true` when something was written for the sender.
async fn settle_no_slot(db: &Db, chat: i64, mut labels: Vec<String>) -> Result<bool, HubError> {
    labels.sort();
    labels.dedup();
    let said: NoSlotNotice = db
        .read(|c| {
            // An unreadable record is as good as none: the next notice is a new message.
            Ok(kv::get(c, state::NO_SLOT_NOTICE)?
                .and_then(|v| serde_json::from_str(&v).ok())
                .unwrap_or_default())
        })
        .await?;
    if said.labels == labels {
        return Ok(false);
    }
    let now = db.now_ms();
    db.write(Durability::OnDisk, move |tx| {
        let purpose = Purpose::NoticeNoSlot { at: now };
        let words = if labels.is_empty() {
            texts::no_slot_over()
        } else {
            texts::no_slot(&labels, threads::slots::COUNT)
        };
        let old = said
            .row
            .map(|r| store::outbox::get(tx, r))
            .transpose()?
            .flatten();
        let text = |chat, thread| outbound::Text {
            chat,
            thread,
            text: &words,
            reply_to: None,
            markup: None,
            purpose: &purpose,
            source_update_id: None,
            resend: false,
        };
        let row = match old {
            Some(o) if outbound::rewrite_text(tx, o.id, &text(o.chat_id, o.thread_id))? => {
                Some(o.id)
            }
            Some(o) if o.sent_message_id.is_some() => {
                let sent = o.sent_message_id.unwrap_or_default();
                outbound::edit(tx, o.chat_id, sent, &words, None, &purpose, None, now)?;
                Some(o.id)
            }
            // Nothing to edit (never sent, or its outcome unknown): a new one, unless there is
            // nothing left to say.
            _ if labels.is_empty() => None,
            _ => outbound::text(tx, &text(chat, None), now)?,
        };
        if labels.is_empty() {
            kv::delete(tx, state::NO_SLOT_NOTICE)
        } else {
            let record = json!({ "row": row, "labels": labels }).to_string();
            kv::set(tx, state::NO_SLOT_NOTICE, &record)
        }
    })
    .await?;
    Ok(true)
}

fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Reused(_) => "reused",
        Outcome::Adopted(_) => "adopted",
        Outcome::Created(_) => "created",
        Outcome::Blocked(_) => "blocked",
        Outcome::Ambiguous(_) => "ambiguous",
        Outcome::Refused(_) => "refused",
        Outcome::Retry(_) => "retry",
        Outcome::LostLease => "lost lease",
        Outcome::NoSlot => "no slot",
    }
}

/// Greets in the topic, releases output that waited for it, or asks the person. A pi that
/// gets its topic back is greeted only when the person was told it went offline (a hub restart
/// is quiet) or when held messages are delivered there.
async fn after_provision(
    db: &Db,
    inst: &instances::InstanceRow,
    chat: i64,
    outcome: &Outcome,
    was_offline: bool,
) -> Result<(), HubError> {
    let now = db.now_ms();
    match outcome.clone() {
        Outcome::Created(b) | Outcome::Adopted(b) | Outcome::Reused(b) => {
            let fresh = !matches!(outcome, Outcome::Reused(_));
            let label = inst.label.clone();
            let cwd = inst.cwd.clone();
            let identity = inst.identity.clone();
            let id = inst.id.clone();
            db.write(Durability::OnDisk, move |tx| {
                let moved = retarget_waiting(tx, &identity, b.chat_id, b.thread_id)?;
                if !fresh && !was_offline && moved == 0 {
                    return Ok(());
                }
                let text = texts::thread_greeting(&label, &cwd, fresh, moved);
                outbound::notice(
                    tx,
                    b.chat_id,
                    Some(b.thread_id),
                    &text,
                    &Purpose::NoticeThread {
                        instance: id,
                        thread: b.thread_id,
                    },
                    now,
                )
            })
            .await?;
        }
        Outcome::Ambiguous(i) | Outcome::Blocked(i) => ask_about(db, &i).await?,
        Outcome::Refused(why) => {
            let label = inst.label.clone();
            let (identity, id) = (inst.identity.clone(), inst.id.clone());
            db.write(Durability::OnDisk, move |tx| {
                // Not asked again (nor said again) until this pi reconnects: it works in the
                // main chat meanwhile.
                kv::set(tx, &state::skip_key(&identity), &id)?;
                outbound::notice(
                    tx,
                    chat,
                    None,
                    &texts::thread_refused(&label, &why),
                    &Purpose::NoticeRefused { at: now },
                    now,
                )
            })
            .await?;
        }
        // One notice for all of them, after the pass: `settle_no_slot`.
        Outcome::NoSlot | Outcome::Retry(_) | Outcome::LostLease => {}
    }
    Ok(())
}

/// Output that waited for a new topic goes there now.
fn retarget_waiting(
    tx: &Connection,
    identity: &str,
    chat: i64,
    thread: i64,
) -> Result<usize, StoreError> {
    store::outbox::retarget_waiting(tx, identity, chat, thread, state::WAITING_FOR_THREAD)
}

/// The owner decides about an intent whose outcome is unknown: one message with two buttons.
async fn ask_about(db: &Db, intent: &Intent) -> Result<(), HubError> {
    let i = intent.clone();
    let now = db.now_ms();
    let clock = db.clock().clone();
    db.write(Durability::OnDisk, move |tx| {
        let key = format!("threads.asked.{}", i.id);
        if kv::get(tx, &key)?.is_some() {
            return Ok(());
        }
        kv::set(tx, &key, "1")?;
        let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
            return Ok(());
        };
        let create = Button::Intent { id: i.id, create: true };
        let forget = Button::Intent { id: i.id, create: false };
        let markup = json!({ "inline_keyboard": [[
            outbound::button(tx, &clock, owner, "Create a new thread", &create, now, outbound::QUESTION_TTL_MS)?,
            outbound::button(tx, &clock, owner, "Forget it", &forget, now, outbound::QUESTION_TTL_MS)?,
        ]] });
        let hub_stopped = i.detail.as_deref() == Some(provision::HUB_STOPPED);
        let text = texts::ambiguous_intent(&i.title, hub_stopped);
        outbound::text(
            tx,
            &outbound::Text {
                chat: owner,
                thread: None,
                text: &text,
                reply_to: None,
                markup: Some(markup),
                purpose: &Purpose::NoticeIntent { id: i.id },
                source_update_id: None,
                resend: false,
            },
            now,
        )
        .map(drop)
    })
    .await?;
    Ok(())
}

/// Settles an intent of unknown outcome: it is removed (freeing its slot). `create`: the
/// identity provisions again right away (a duplicate topic is possible, the person accepted
/// that). Otherwise its live instance is not provisioned again until it reconnects; the person
/// can still bind a topic they found with "move here". `None` when there is no such intent.
pub fn resolve_intent(
    tx: &Connection,
    intent_id: i64,
    create: bool,
) -> Result<Option<Intent>, StoreError> {
    let Some(intent) = tables::intent(tx, intent_id)? else {
        return Ok(None);
    };
    tables::delete_intent(tx, intent_id)?;
    let skip = state::skip_key(&intent.identity);
    if create {
        kv::delete(tx, &skip)?;
    } else if let Some(i) = instances::live(tx)?
        .into_iter()
        .find(|i| i.identity == intent.identity)
    {
        kv::set(tx, &skip, &i.id)?;
    }
    Ok(Some(intent))
}

/// Marks the binding of a deleted topic lost and holds its pending output (called by the
/// sender on `message thread not found`). Returns whether the topic was bound.
pub fn topic_gone(tx: &Connection, chat: i64, thread: i64, now: i64) -> Result<bool, StoreError> {
    let Some(identity) = events::topic_gone(tx, chat, thread, now)? else {
        return Ok(false);
    };
    // Everything pending for the dead topic waits for the identity's next one.
    tx.exec(
        "UPDATE outbox SET not_before_ms = ?3, identity = ?4,
                handling = 'waiting for a new thread: the topic was deleted'
         WHERE state = 'pending' AND chat_id = ?1 AND thread_id = ?2",
        (chat, thread, state::WAITING_FOR_THREAD, identity),
    )
    .map_err(StoreError::sqlite("holding output for a deleted topic"))?;
    Ok(true)
}
