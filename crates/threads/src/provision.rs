//! Provisioning: an instance with no live binding gets a topic.
//!
//! 1. Reuse: an `active`/`offline` binding of the identity becomes the instance's, no API call.
//! 2. Adopt: recovery evidence, or an intent that knows its thread id, becomes the binding.
//! 3. Block: an intent without a thread id blocks automatic creation (its outcome is unknown;
//!    the person decides).
//! 4. In one transaction: check the epoch, allocate the slot, write the intent. Commit.
//! 5. `createForumTopic`, exactly once, never retried automatically.
//! 6. Success: one transaction checks the epoch, writes the binding `active`, removes the intent.
//! 7. Definite failure: the intent is removed, its slot freed, the error surfaced.
//! 8. Outcome unknown: the intent becomes `ambiguous`; the slot stays held.
//! 9. Success but the epoch moved on: recovery evidence (not epoch-fenced), then stop; the
//!    current hub adopts it at step 2.

use std::time::Duration;

use store::lease::{self, Epoch};
use store::threads::{self, Binding, BindingState, Evidence, Intent, IntentState, NewIntent};
use store::{Connection, Store, StoreError};

use crate::{Hook, Point, Storage, ThreadsError, TopicApi, TopicError, slots, title};

/// What to provision.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub identity: &'a str,
    /// The live instance.
    pub instance_id: Option<&'a str>,
    /// The bot's private chat with the owner.
    pub chat_id: i64,
    /// Working directory.
    pub cwd: &'a str,
    /// Project name for the title.
    pub project: &'a str,
    /// Title template (`{slot}`, `{project}`).
    pub title_template: &'a str,
}

/// A [`Request`] that owns its text, for a store call that may run on another thread.
#[derive(Debug, Clone)]
struct OwnedRequest {
    identity: String,
    instance_id: Option<String>,
    chat_id: i64,
    cwd: String,
    project: String,
    title_template: String,
}

impl OwnedRequest {
    fn of(req: &Request<'_>) -> Self {
        Self {
            identity: req.identity.to_owned(),
            instance_id: req.instance_id.map(str::to_owned),
            chat_id: req.chat_id,
            cwd: req.cwd.to_owned(),
            project: req.project.to_owned(),
            title_template: req.title_template.to_owned(),
        }
    }

    fn request(&self) -> Request<'_> {
        Request {
            identity: &self.identity,
            instance_id: self.instance_id.as_deref(),
            chat_id: self.chat_id,
            cwd: &self.cwd,
            project: &self.project,
            title_template: &self.title_template,
        }
    }
}

/// How provisioning ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The identity's binding was reused.
    Reused(Binding),
    /// Recovery evidence or an intent that knew its thread became the binding.
    Adopted(Binding),
    /// A new topic.
    Created(Binding),
    /// An earlier intent of unknown outcome blocks automatic creation.
    Blocked(Intent),
    /// This call's `createForumTopic` outcome is unknown.
    Ambiguous(Intent),
    /// Telegram refused (intent removed).
    Refused(String),
    /// Nothing happened; try again later (after the wait, if any).
    Retry(Option<Duration>),
    /// Another hub holds the lease; evidence was recorded if a topic was created.
    LostLease,
    /// All 702 slots are held.
    NoSlot,
}

impl Outcome {
    /// The binding, when the identity has one now.
    pub fn binding(&self) -> Option<&Binding> {
        match self {
            Self::Reused(b) | Self::Adopted(b) | Self::Created(b) => Some(b),
            _ => None,
        }
    }
}

/// The detail of an intent whose hub stopped between writing it and learning the outcome.
pub const HUB_STOPPED: &str = "the hub stopped while creating this thread";

enum Prepared {
    Done(Outcome),
    Create {
        intent_id: i64,
        slot: String,
        title: String,
    },
}

/// Runs the provisioning steps for one identity. Each store call is its own transaction, made
/// through `store` (the hub's runs off its runtime threads).
pub async fn provision<S: Storage, A: TopicApi>(
    store: &S,
    api: &A,
    epoch: Epoch,
    req: &Request<'_>,
    now_ms: i64,
    hook: Hook<'_>,
) -> Result<Outcome, ThreadsError> {
    let owned = OwnedRequest::of(req);
    let prepared = {
        let owned = owned.clone();
        store
            .write(move |tx| prepare(tx, epoch, &owned.request(), now_ms))
            .await?
    };
    let (intent_id, slot, title) = match prepared {
        Prepared::Done(outcome) => return Ok(outcome),
        Prepared::Create {
            intent_id,
            slot,
            title,
        } => (intent_id, slot, title),
    };
    hook(Point::IntentCommitted)?;
    if !store.read(move |c| lease::is_current(c, epoch)).await? {
        // Not called: the intent stays, and the current hub treats it as of unknown outcome.
        return Ok(Outcome::LostLease);
    }
    match api.create(req.chat_id, &title).await {
        Ok(thread_id) => {
            hook(Point::TopicCreated)?;
            let b = Binding {
                identity: owned.identity.clone(),
                chat_id: owned.chat_id,
                thread_id,
                slot,
                title,
                state: BindingState::Active,
                instance_id: owned.instance_id.clone(),
                cwd: owned.cwd.clone(),
                epoch: epoch.0,
                created_ms: now_ms,
                updated_ms: now_ms,
                offline_since_ms: None,
            };
            let bound = store
                .write(move |tx| {
                    if !lease::is_current(tx, epoch)? {
                        return Ok(None);
                    }
                    threads::delete_intent(tx, intent_id)?;
                    threads::insert_binding(tx, &b)?;
                    Ok::<_, StoreError>(Some(b))
                })
                .await?;
            match bound {
                Some(b) => {
                    hook(Point::Bound)?;
                    Ok(Outcome::Created(b))
                }
                None => {
                    // Lost the lease during the call: only evidence, which is not fenced.
                    let evidence = Evidence {
                        intent_id,
                        identity: owned.identity.clone(),
                        epoch: epoch.0,
                        chat_id: owned.chat_id,
                        thread_id,
                        recorded_ms: now_ms,
                    };
                    store
                        .write(move |tx| threads::record_evidence(tx, &evidence))
                        .await?;
                    Ok(Outcome::LostLease)
                }
            }
        }
        Err(TopicError::Unknown(detail)) => {
            let intent = store
                .write(move |tx| {
                    if !lease::is_current(tx, epoch)? {
                        return Ok(None);
                    }
                    // The client's message names the method already.
                    threads::set_intent_ambiguous(tx, intent_id, &detail)?;
                    threads::intent(tx, intent_id)
                })
                .await?;
            match intent {
                Some(i) => {
                    hook(Point::AmbiguousCommitted)?;
                    Ok(Outcome::Ambiguous(i))
                }
                None => Ok(Outcome::LostLease),
            }
        }
        Err(e) => {
            // Definitely nothing was created: the intent goes and its slot is free again.
            let fenced = store
                .write(move |tx| {
                    if !lease::is_current(tx, epoch)? {
                        return Ok(false);
                    }
                    threads::delete_intent(tx, intent_id)?;
                    Ok::<_, StoreError>(true)
                })
                .await?;
            if !fenced {
                return Ok(Outcome::LostLease);
            }
            Ok(match e {
                TopicError::Flood(d) => Outcome::Retry(Some(d)),
                TopicError::Transient(_) => Outcome::Retry(None),
                TopicError::Refused(msg) => Outcome::Refused(msg),
                TopicError::Gone => Outcome::Refused("the chat has no topics".into()),
                TopicError::Unknown(_) => Outcome::Retry(None),
            })
        }
    }
}

/// Steps 1-4 in one transaction.
fn prepare(
    tx: &Connection,
    epoch: Epoch,
    req: &Request<'_>,
    now_ms: i64,
) -> Result<Prepared, StoreError> {
    if !lease::is_current(tx, epoch)? {
        return Ok(Prepared::Done(Outcome::LostLease));
    }
    let mut preferred = None;
    if let Some(b) = threads::binding(tx, req.identity)? {
        match b.state {
            BindingState::Active | BindingState::Offline if b.chat_id == req.chat_id => {
                threads::set_binding_state(
                    tx,
                    req.identity,
                    BindingState::Active,
                    req.instance_id,
                    now_ms,
                )?;
                drop_duplicates(tx, req.identity, None, now_ms)?;
                let b = threads::binding(tx, req.identity)?.unwrap_or(b);
                return Ok(Prepared::Done(Outcome::Reused(b)));
            }
            // The topic is gone, or in another chat than the one asked for (the workspace
            // moved to a group or back; the old topic stays as it is): a new one, preferably
            // with the same letter.
            BindingState::Lost | BindingState::Active | BindingState::Offline => {
                preferred = slots::parse(&b.slot);
                threads::delete_binding(tx, req.identity)?;
            }
        }
    }
    let intent = threads::intent_for(tx, req.identity)?;
    let evidence = threads::evidence(tx, Some(req.identity))?;
    let adopt = evidence
        .first()
        .map(|e| (e.intent_id, e.thread_id, e.chat_id))
        .or_else(|| {
            intent
                .as_ref()
                .and_then(|i| i.thread_id.map(|t| (i.id, t, i.chat_id)))
        });
    if let Some((intent_id, thread_id, chat_id)) = adopt {
        let (slot, title_text) = match intent.as_ref().filter(|i| i.id == intent_id) {
            Some(i) => (i.slot.clone(), i.title.clone()),
            None => {
                let Some(slot) = allocate(tx, preferred)? else {
                    return Ok(Prepared::Done(Outcome::NoSlot));
                };
                (
                    slot.to_string(),
                    title(req.title_template, slot, req.project),
                )
            }
        };
        if let Some(i) = &intent {
            threads::delete_intent(tx, i.id)?;
        }
        threads::delete_evidence(tx, intent_id)?;
        let b = Binding {
            identity: req.identity.to_owned(),
            chat_id,
            thread_id,
            slot,
            title: title_text,
            state: BindingState::Active,
            instance_id: req.instance_id.map(str::to_owned),
            cwd: req.cwd.to_owned(),
            epoch: epoch.0,
            created_ms: now_ms,
            updated_ms: now_ms,
            offline_since_ms: None,
        };
        threads::insert_binding(tx, &b)?;
        drop_duplicates(tx, req.identity, Some(thread_id), now_ms)?;
        return Ok(Prepared::Done(Outcome::Adopted(b)));
    }
    if let Some(mut i) = intent {
        if i.state == IntentState::InFlight && i.epoch != epoch.0 {
            // Its hub stopped between writing it and learning the outcome.
            threads::set_intent_ambiguous(tx, i.id, HUB_STOPPED)?;
            i.state = IntentState::Ambiguous;
        }
        return Ok(Prepared::Done(Outcome::Blocked(i)));
    }
    let Some(slot) = allocate(tx, preferred)? else {
        return Ok(Prepared::Done(Outcome::NoSlot));
    };
    let title_text = title(req.title_template, slot, req.project);
    let slot_text = slot.to_string();
    let intent_id = threads::insert_intent(
        tx,
        &NewIntent {
            identity: req.identity,
            instance_id: req.instance_id,
            chat_id: req.chat_id,
            cwd: req.cwd,
            slot: &slot_text,
            title: &title_text,
            epoch: epoch.0,
        },
        now_ms,
    )?;
    threads::set_cursor(tx, &slot_text)?;
    Ok(Prepared::Create {
        intent_id,
        slot: slot_text,
        title: title_text,
    })
}

pub(crate) fn allocate(
    tx: &Connection,
    preferred: Option<slots::Slot>,
) -> Result<Option<slots::Slot>, StoreError> {
    let held: Vec<slots::Slot> = threads::held_slots(tx)?
        .iter()
        .filter_map(|s| slots::parse(s))
        .collect();
    let cursor = threads::cursor(tx)?.as_deref().and_then(slots::parse);
    Ok(slots::next(cursor, &held, preferred))
}

/// Evidence of other topics for an identity that has a binding now: duplicates, deleted with
/// the proof that they were replaced.
fn drop_duplicates(
    tx: &Connection,
    identity: &str,
    keep: Option<i64>,
    now_ms: i64,
) -> Result<(), StoreError> {
    for e in threads::evidence(tx, Some(identity))? {
        if Some(e.thread_id) != keep {
            threads::add_cleanup(
                tx,
                e.chat_id,
                e.thread_id,
                &format!("replaced:{identity}"),
                now_ms,
            )?;
        }
        threads::delete_evidence(tx, e.intent_id)?;
    }
    Ok(())
}

/// After a hub start: intents left in flight by an earlier epoch have an unknown outcome.
/// Returns the ones it marked.
pub fn mark_interrupted_intents(store: &Store, epoch: Epoch) -> Result<Vec<Intent>, StoreError> {
    store.write(|tx| mark_interrupted(tx, epoch))
}

/// [`mark_interrupted_intents`] in the caller's transaction.
pub fn mark_interrupted(tx: &Connection, epoch: Epoch) -> Result<Vec<Intent>, StoreError> {
    let mut marked = Vec::new();
    for i in threads::intents(tx)? {
        if i.state == IntentState::InFlight && i.epoch != epoch.0 && i.thread_id.is_none() {
            threads::set_intent_ambiguous(tx, i.id, HUB_STOPPED)?;
            if let Some(i) = threads::intent(tx, i.id)? {
                marked.push(i);
            }
        }
    }
    Ok(marked)
}
