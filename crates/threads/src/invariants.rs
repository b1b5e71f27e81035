//! The properties Threaded Mode keeps, checked by tests after every step (crash tests,
//! simulations). Each violation is a sentence saying what is wrong.

use std::collections::{BTreeMap, BTreeSet};

use store::threads::{self, BindingState, IntentState};
use store::{Connection, Store, StoreError, lease};

/// A topic as the fake Telegram reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenTopic {
    pub chat_id: i64,
    pub thread_id: i64,
    /// Not deleted.
    pub alive: bool,
    /// Created by the bot (else by the person).
    pub by_bot: bool,
}

/// Checks the store against what Telegram shows. `None` skips the Telegram-side checks.
pub fn check(store: &Store, topics: Option<&[SeenTopic]>) -> Result<Vec<String>, StoreError> {
    store.read(|c| check_in(c, topics))
}

/// [`check`] in one read transaction the caller holds, so every table is seen at one moment
/// (the hub checks after each pass of its topics task, on its own store handle).
pub fn check_in(c: &Connection, topics: Option<&[SeenTopic]>) -> Result<Vec<String>, StoreError> {
    let mut v = Vec::new();
    let bindings = threads::bindings(c)?;
    let intents = threads::intents(c)?;
    let evidence = threads::evidence(c, None)?;
    let cleanups = threads::pending_cleanups(c)?;
    let epoch = lease::current(c)?.map(|l| l.epoch.0);

    // Slots: each held by exactly one binding or intent.
    let mut slot_holders: BTreeMap<&str, usize> = BTreeMap::new();
    for s in bindings
        .iter()
        .map(|b| b.slot.as_str())
        .chain(intents.iter().map(|i| i.slot.as_str()))
    {
        *slot_holders.entry(s).or_default() += 1;
    }
    for (slot, n) in slot_holders {
        if n > 1 {
            v.push(format!("slot {slot} is held {n} times"));
        }
    }
    // One binding or intent per identity; no thread bound twice.
    let mut identities: BTreeMap<&str, usize> = BTreeMap::new();
    for id in bindings
        .iter()
        .map(|b| b.identity.as_str())
        .chain(intents.iter().map(|i| i.identity.as_str()))
    {
        *identities.entry(id).or_default() += 1;
    }
    for (id, n) in identities {
        if n > 1 {
            v.push(format!("identity {id} has {n} bindings or intents"));
        }
    }
    let threads_bound: BTreeSet<(i64, i64)> =
        bindings.iter().map(|b| (b.chat_id, b.thread_id)).collect();
    if threads_bound.len() != bindings.len() {
        v.push("a thread is bound twice".into());
    }
    // Intents have a cause: in flight only in the current epoch, otherwise ambiguous.
    for i in &intents {
        if i.state == IntentState::InFlight && Some(i.epoch) != epoch && i.thread_id.is_none() {
            v.push(format!(
                "intent {} is in flight for dead epoch {}",
                i.id, i.epoch
            ));
        }
    }
    let Some(topics) = topics else { return Ok(v) };
    let alive: BTreeSet<(i64, i64)> = topics
        .iter()
        .filter(|t| t.alive)
        .map(|t| (t.chat_id, t.thread_id))
        .collect();
    // Bindings point to existing topics (a lost binding knows its topic is gone).
    for b in &bindings {
        if b.state != BindingState::Lost && !alive.contains(&(b.chat_id, b.thread_id)) {
            v.push(format!(
                "{} is bound to thread {}, which does not exist",
                b.identity, b.thread_id
            ));
        }
    }
    // Every live topic the bot made is accounted for: bound, evidence, scheduled for cleanup,
    // or possibly the one an ambiguous intent made (at most one each).
    let known: BTreeSet<(i64, i64)> = bindings
        .iter()
        .map(|b| (b.chat_id, b.thread_id))
        .chain(evidence.iter().map(|e| (e.chat_id, e.thread_id)))
        .chain(cleanups.iter().map(|c| (c.chat_id, c.thread_id)))
        .chain(
            intents
                .iter()
                .filter_map(|i| i.thread_id.map(|t| (i.chat_id, t))),
        )
        .collect();
    let unknown = topics
        .iter()
        .filter(|t| t.alive && t.by_bot && !known.contains(&(t.chat_id, t.thread_id)))
        .count();
    let ambiguous = intents.iter().filter(|i| i.thread_id.is_none()).count();
    if unknown > ambiguous {
        v.push(format!("{unknown} live bot topics are unaccounted for (only {ambiguous} ambiguous intents could explain them)"));
    }
    Ok(v)
}
