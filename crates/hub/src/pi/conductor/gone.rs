//! An instance going away: its turns, the selection, its topic's binding, and what the person
//! is told.

use store::lease::Epoch;
use store::outbox::Purpose;
use store::threads as tables;
use store::turns;
use store::{Connection, StoreError, instances, kv};
use threads::events;

use super::{Conductor, tools};
use crate::db::Durability;
use crate::error::HubError;
use crate::outgoing::bot_commands;
use crate::outgoing::outbound;
use crate::outgoing::texts;
use crate::pi::instance::{GoneReason, InstanceId, Transport};
use crate::state::{self, SELECTED};

/// What the store is told of an instance that went away.
struct Departure {
    /// Its instance id.
    key: String,
    identity: String,
    label: String,
    cwd: String,
    /// Its process is gone (or it was never an extension): its open turns are over.
    final_turns: bool,
    /// The person disconnected it: its topic's binding is released.
    disconnected: bool,
    /// `threads.automaticCleanup`: the topic of a pi that quit on purpose is deleted.
    cleanup: bool,
    /// A hub-started pi that exited by itself: not started again at the next start.
    exited: bool,
    /// What happened, in plain words for the person.
    why: String,
    /// What happened, in detail for `status`.
    detail: String,
    /// Why, as stored.
    reason: GoneReason,
    epoch: Epoch,
    /// The instances still live: (identity, label).
    others: Vec<(String, String)>,
    /// pi's session file as it said at its hello.
    session_file: Option<String>,
}

impl Conductor {
    /// Forgets a live instance and records, in one transaction, what its going means.
    pub(super) async fn gone(
        &mut self,
        id: &InstanceId,
        reason: GoneReason,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.remove(id) else {
            return Ok(());
        };
        if let Some(turn) = l.outstanding {
            self.fence(turn).await;
        }
        tracing::info!(instance = %id, reason = ?reason, "instance gone");
        let others: Vec<(String, String)> = self
            .live
            .values()
            .map(|o| (o.identity.clone(), o.label.clone()))
            .collect();
        let now = self.db.now_ms();
        let departure = Departure {
            key: id.0.clone(),
            final_turns: reason.process_gone() || l.transport != Transport::Shim,
            disconnected: reason == GoneReason::Disconnected,
            cleanup: self.assistant.current().thread_cleanup,
            exited: matches!(reason, GoneReason::Exited(_)) && l.transport == Transport::Rpc,
            why: reason.describe(),
            detail: reason.detail(),
            reason: reason.clone(),
            epoch: self.epoch,
            identity: l.identity,
            label: l.label,
            cwd: l.cwd,
            others,
            session_file: l.session_file,
        };
        self.db
            .write(Durability::OnDisk, move |tx| {
                record_departure(tx, &departure, now)
            })
            .await?;
        self.wakes.sender.notify_one();
        self.wakes.topics.notify_one();
        Ok(())
    }
}

/// The instance's row, its turns, the selection and its binding; then the owner's notice.
fn record_departure(tx: &Connection, d: &Departure, now: i64) -> Result<(), StoreError> {
    instances::mark_gone(tx, &d.key, &d.reason, now)?;
    // Its dialogs can no longer be answered: their questions say so.
    super::dialogs::void_of(tx, &d.key, now)?;
    if d.exited {
        crate::pi::spawned::exited(tx, &d.key, &d.detail, now)?;
    }
    // Its commands leave the bot's list (unless another live pi has them too).
    bot_commands::refresh(tx, now)?;
    if d.final_turns {
        interrupt_turns(tx, d, now)?;
    }
    let now_selected = reselect(tx, d)?;
    let queued = turns::queued_counts(tx)?
        .into_iter()
        .find(|(i, _)| i.as_deref() == Some(d.identity.as_str()))
        .map_or(0, |(_, n)| n);
    // The binding: kept (offline) for a lost connection, released with proof for a
    // disconnect. Each notice says what happens in the place it is posted.
    let threaded = state::topics_on(tx)?;
    // A pi that quit on purpose leaves no topic behind (`threads.automaticCleanup`), unless
    // messages wait for it there: they stay where the person wrote them.
    let tidy = threaded && d.cleanup && queued == 0 && quit_on_purpose(tx, d)?;
    // A pi that never had a thread (every slot held) has none to remove.
    let had_topic = threaded && tables::binding(tx, &d.identity)?.is_some();
    let topic = if d.disconnected {
        events::disconnected(tx, &d.identity, d.epoch, now)?;
        None
    } else if tidy {
        events::quit(tx, &d.identity, d.epoch, now)?;
        None
    } else {
        events::went_offline(tx, &d.identity, now)?;
        if threaded {
            tables::binding(tx, &d.identity)?.map(|b| (b.chat_id, b.thread_id))
        } else {
            None
        }
    };
    let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
        return Ok(());
    };
    let purpose = Purpose::NoticeGone { key: d.key.clone() };
    let (label, why) = (d.label.as_str(), d.why.as_str());
    // A pi whose process is gone: how to go on with its session in a terminal.
    // (Not when the hub closed it: `/close`'s own reply says it.)
    let closed = matches!(d.reason, GoneReason::Closed(_));
    let resume = if (d.final_turns || d.disconnected) && !closed {
        session_of(tx, d)?
            .map(|file| format!("\n{}", texts::go_on_in_terminal(&d.cwd, &file)))
            .unwrap_or_default()
    } else {
        String::new()
    };
    match (threaded, topic) {
        // In its own topic, where messages wait for it.
        (true, Some((chat, thread))) => outbound::notice(
            tx,
            chat,
            Some(thread),
            &(texts::topic_went_offline(label, why, &d.cwd, queued) + &resume),
            &purpose,
            now,
        )?,
        // In the main chat, where every message is asked about.
        (true, None) => outbound::notice(
            tx,
            owner,
            None,
            &(texts::threaded_gone(label, why, queued, had_topic && (d.disconnected || tidy))
                + &resume),
            &purpose,
            now,
        )?,
        // Classic mode: the one chat, where the selection decides.
        (false, _) => outbound::notice(
            tx,
            owner,
            None,
            &(texts::instance_gone(label, why, queued, now_selected.as_deref()) + &resume),
            &purpose,
            now,
        )?,
    }
    Ok(())
}

/// Whether the pi ended because someone meant it to: pi quit (`/quit`, Ctrl+D), a headless
/// pi closed from Telegram or exiting by itself with success. A crash, a lost connection or a
/// session replaced in the same process is no quit.
fn quit_on_purpose(tx: &Connection, d: &Departure) -> Result<bool, StoreError> {
    Ok(match &d.reason {
        GoneReason::Quit => true,
        GoneReason::Exited(status) => status == "exit status: 0",
        GoneReason::Closed(_) => store::spawned::closed_by_person(tx, &d.key)?,
        _ => false,
    })
}

/// The departed pi's session file: a hub-started pi's latest (its row follows `/new` and
/// resumes), else the one it said at its hello.
fn session_of(tx: &Connection, d: &Departure) -> Result<Option<String>, StoreError> {
    let spawned = store::spawned::by_instance(tx, &d.key)?.and_then(|r| r.session_file);
    Ok(spawned.or_else(|| d.session_file.clone()))
}

/// The instance's open turns are over: each is interrupted, and the person told where it was
/// asked.
fn interrupt_turns(tx: &Connection, d: &Departure, now: i64) -> Result<(), StoreError> {
    for t in turns::outstanding(tx)?
        .into_iter()
        .filter(|t| t.instance_id.as_deref() == Some(d.key.as_str()))
    {
        let interrupted = turns::mark_interrupted(tx, t.id, &d.detail, now)?;
        // `outstanding` read it dispatched or acked in this transaction.
        if crate::never!(
            !interrupted,
            "outstanding turn {} of gone instance {} could not be interrupted",
            t.id,
            d.key
        ) {
            continue;
        }
        outbound::prompt_notice(
            tx,
            t.chat_id,
            t.thread_id,
            &texts::turn_interrupted(&d.label, &t.text),
            &Purpose::NoticeInterrupted { turn: t.id },
            now,
        )?;
        tools::send_waiting(tx, &t, &d.identity, now)?;
    }
    Ok(())
}

/// The selection after the instance left: another live pi if it was selected (none if no pi
/// is live). Returns the label of the pi selected now, if it is live.
fn reselect(tx: &Connection, d: &Departure) -> Result<Option<String>, StoreError> {
    let selected = kv::get(tx, SELECTED)?;
    if selected.as_deref() == Some(d.identity.as_str()) {
        return match d.others.first() {
            Some((identity, label)) => {
                kv::set(tx, SELECTED, identity)?;
                Ok(Some(label.clone()))
            }
            None => {
                kv::delete(tx, SELECTED)?;
                Ok(None)
            }
        };
    }
    Ok(selected.and_then(|s| {
        d.others
            .iter()
            .find(|(i, _)| *i == s)
            .map(|(_, label)| label.clone())
    }))
}
