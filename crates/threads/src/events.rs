//! What happens to bindings when instances come and go, and when Telegram says a topic is gone.
//! Each runs inside the caller's transaction, so it commits together with the caller's own
//! changes.

use store::lease::{self, Epoch};
use store::threads::{self, Binding, BindingState};
use store::{Connection, StoreError};

/// The instance's connection was lost: the binding goes `offline` and nothing is deleted (a
/// missed heartbeat is not a proof).
pub fn went_offline(tx: &Connection, identity: &str, now_ms: i64) -> Result<bool, StoreError> {
    match threads::binding(tx, identity)? {
        Some(b) if b.state == BindingState::Active => {
            threads::set_binding_state(tx, identity, BindingState::Offline, None, now_ms)
        }
        _ => Ok(false),
    }
}

/// The person ran `/telegram-disconnect`: the binding goes and its topic is deleted with that
/// proof. Fenced by the epoch. Returns the binding removed.
pub fn disconnected(
    tx: &Connection,
    identity: &str,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    released(tx, identity, epoch, "disconnected", now_ms)
}

/// The instance quit on purpose and `threads.automaticCleanup` is on: like
/// [`disconnected`], its binding goes and its topic is deleted (proof `quit:<identity>`); the
/// identity gets a new topic when it comes back.
pub fn quit(
    tx: &Connection,
    identity: &str,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    released(tx, identity, epoch, "quit", now_ms)
}

fn released(
    tx: &Connection,
    identity: &str,
    epoch: Epoch,
    why: &str,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    if !lease::is_current(tx, epoch)? {
        return Ok(None);
    }
    let Some(b) = threads::binding(tx, identity)? else {
        return Ok(None);
    };
    threads::delete_binding(tx, identity)?;
    if b.state != BindingState::Lost {
        threads::add_cleanup(
            tx,
            b.chat_id,
            b.thread_id,
            &format!("{why}:{identity}"),
            now_ms,
        )?;
    }
    Ok(Some(b))
}

/// Telegram answered `message thread not found` for a topic: terminal for its binding, which
/// goes `lost` (the next provisioning makes a new topic, preferably with the same letter).
/// Returns the identity whose topic it was.
pub fn topic_gone(
    tx: &Connection,
    chat_id: i64,
    thread_id: i64,
    now_ms: i64,
) -> Result<Option<String>, StoreError> {
    let Some(b) = threads::binding_by_thread(tx, chat_id, thread_id)? else {
        return Ok(None);
    };
    if b.state != BindingState::Lost {
        threads::set_binding_state(
            tx,
            &b.identity,
            BindingState::Lost,
            b.instance_id.as_deref(),
            now_ms,
        )?;
    }
    Ok(Some(b.identity))
}

/// "Move here": the identity's binding moves to `thread_id` (a topic the person made); its old
/// topic is deleted with that proof. Fenced by the epoch.
pub fn move_here(
    tx: &Connection,
    identity: &str,
    chat_id: i64,
    thread_id: i64,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    if !lease::is_current(tx, epoch)?
        || threads::binding_by_thread(tx, chat_id, thread_id)?.is_some()
    {
        return Ok(None);
    }
    let Some(old) = threads::binding(tx, identity)? else {
        return Ok(None);
    };
    threads::delete_binding(tx, identity)?;
    if old.state != BindingState::Lost && old.thread_id != thread_id {
        threads::add_cleanup(
            tx,
            old.chat_id,
            old.thread_id,
            &format!("moved:{identity}"),
            now_ms,
        )?;
    }
    // A lost binding found its new topic: it is usable again.
    let state = match old.state {
        BindingState::Lost if old.instance_id.is_some() => BindingState::Active,
        BindingState::Lost => BindingState::Offline,
        other => other,
    };
    let b = Binding {
        chat_id,
        thread_id,
        state,
        epoch: epoch.0,
        updated_ms: now_ms,
        ..old
    };
    threads::insert_binding(tx, &b)?;
    Ok(Some(b))
}

/// "Move here" for an identity without a binding: its intent (usually one of unknown outcome,
/// whose topic the person found) becomes a binding to `thread_id`. Fenced by the epoch.
pub fn adopt_intent_at(
    tx: &Connection,
    identity: &str,
    chat_id: i64,
    thread_id: i64,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    if !lease::is_current(tx, epoch)?
        || threads::binding(tx, identity)?.is_some()
        || threads::binding_by_thread(tx, chat_id, thread_id)?.is_some()
    {
        return Ok(None);
    }
    let Some(i) = threads::intent_for(tx, identity)? else {
        return Ok(None);
    };
    threads::delete_intent(tx, i.id)?;
    // Topics the hub knows this identity made but the person chose against: replaced.
    let known = i.thread_id.map(|t| (i.chat_id, t)).into_iter().chain(
        threads::evidence(tx, Some(identity))?
            .into_iter()
            .map(|e| (e.chat_id, e.thread_id)),
    );
    for (chat, thread) in known.collect::<Vec<_>>() {
        if (chat, thread) != (chat_id, thread_id) {
            threads::add_cleanup(tx, chat, thread, &format!("replaced:{identity}"), now_ms)?;
        }
    }
    for e in threads::evidence(tx, Some(identity))? {
        threads::delete_evidence(tx, e.intent_id)?;
    }
    let b = Binding {
        identity: identity.to_owned(),
        chat_id,
        thread_id,
        slot: i.slot,
        title: i.title,
        state: if i.instance_id.is_some() {
            BindingState::Active
        } else {
            BindingState::Offline
        },
        offline_since_ms: i.instance_id.is_none().then_some(now_ms),
        instance_id: i.instance_id,
        cwd: i.cwd,
        epoch: epoch.0,
        created_ms: now_ms,
        updated_ms: now_ms,
    };
    threads::insert_binding(tx, &b)?;
    Ok(Some(b))
}

/// Who "move here" binds when the identity has neither binding nor intent.
#[derive(Debug, Clone)]
pub struct Newcomer<'a> {
    pub identity: &'a str,
    /// Its live instance, if any.
    pub instance_id: Option<&'a str>,
    /// Working directory.
    pub cwd: &'a str,
    /// Project name for the title.
    pub project: &'a str,
    pub title_template: &'a str,
}

/// "Move here" for an identity with neither binding nor intent (its intent was forgotten, or it
/// never got a topic): `thread_id` becomes its binding, with a fresh slot. Fenced by the epoch;
/// `None` when fenced, when the topic is bound already, or when no slot is free.
pub fn bind_here(
    tx: &Connection,
    who: &Newcomer<'_>,
    chat_id: i64,
    thread_id: i64,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    if !lease::is_current(tx, epoch)?
        || threads::binding(tx, who.identity)?.is_some()
        || threads::intent_for(tx, who.identity)?.is_some()
        || threads::binding_by_thread(tx, chat_id, thread_id)?.is_some()
    {
        return Ok(None);
    }
    let Some(slot) = crate::provision::allocate(tx, None)? else {
        return Ok(None);
    };
    let slot_text = slot.to_string();
    threads::set_cursor(tx, &slot_text)?;
    let b = Binding {
        identity: who.identity.to_owned(),
        chat_id,
        thread_id,
        slot: slot_text,
        title: crate::title(who.title_template, slot, who.project),
        state: if who.instance_id.is_some() {
            BindingState::Active
        } else {
            BindingState::Offline
        },
        instance_id: who.instance_id.map(str::to_owned),
        cwd: who.cwd.to_owned(),
        epoch: epoch.0,
        created_ms: now_ms,
        updated_ms: now_ms,
        offline_since_ms: who.instance_id.is_none().then_some(now_ms),
    };
    threads::insert_binding(tx, &b)?;
    Ok(Some(b))
}

/// "Move here": `thread_id` becomes the identity's topic the first way that applies: its
/// binding moves there, else its intent is adopted there, else (a live instance, `newcomer`,
/// with neither) a new binding with a fresh slot. Fenced by the epoch; `None` when nothing
/// applies.
pub fn bind_topic(
    tx: &Connection,
    identity: &str,
    newcomer: Option<&Newcomer<'_>>,
    chat_id: i64,
    thread_id: i64,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Option<Binding>, StoreError> {
    if let Some(b) = move_here(tx, identity, chat_id, thread_id, epoch, now_ms)? {
        return Ok(Some(b));
    }
    if let Some(b) = adopt_intent_at(tx, identity, chat_id, thread_id, epoch, now_ms)? {
        return Ok(Some(b));
    }
    match newcomer {
        Some(who) => bind_here(tx, who, chat_id, thread_id, epoch, now_ms),
        None => Ok(None),
    }
}

/// Offline bindings older than `retention_ms` release their slot. Their topics are left alone
/// (deleting them needs the person's consent: the hub offers it). Returns the bindings
/// released.
pub fn release_stale(
    tx: &Connection,
    retention_ms: i64,
    epoch: Epoch,
    now_ms: i64,
) -> Result<Vec<Binding>, StoreError> {
    if !lease::is_current(tx, epoch)? {
        return Ok(Vec::new());
    }
    let mut released = Vec::new();
    for b in threads::bindings(tx)? {
        let stale = b.state == BindingState::Offline
            && b.offline_since_ms
                .is_some_and(|t| now_ms - t > retention_ms);
        if stale {
            threads::delete_binding(tx, &b.identity)?;
            released.push(b);
        }
    }
    Ok(released)
}
