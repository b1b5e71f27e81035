//! Small facts every part of the hub reads, kept in the store's key-value table: the mode
//! (Threaded or classic), the classic-mode selection, the "told once" marks of notices, and
//! whether an instance is expected back after a hub restart.

use store::threads as tables;
use store::{Connection, StoreError, instances, kv};

/// Key of the identity new owner messages go to (classic mode).
pub const SELECTED: &str = "classic.selected";

/// Key of the outbox id of the current "no instance connected" notice; present while an episode
/// of messages waiting for any instance is open (one notice per episode, never one per message).
pub const HELD_NOTICE: &str = "notice.held.outbox_id";
/// The one notice naming the pi that have no thread because every slot is held: its outbox
/// row and the labels it names (`outgoing::topics::settle_no_slot` keeps it current).
pub const NO_SLOT_NOTICE: &str = "notice.noslot";

/// `gone_reason` of instances that were live when a hub stopped.
pub const HUB_RESTARTED: instances::GoneReason = instances::GoneReason::HubRestarted;

/// Rows waiting for a topic that does not exist yet (the old one was deleted) carry this
/// `not_before_ms`; provisioning retargets and releases them.
pub const WAITING_FOR_THREAD: i64 = i64::MAX;

/// Whether the hub runs in Threaded Mode (the last probe said so).
pub fn threaded(tx: &Connection) -> Result<bool, StoreError> {
    Ok(kv::get(tx, tables::MODE)?.as_deref() == Some("threaded"))
}

/// Key of the forum group linked as the workspace (its chat id): pi's topics are there.
pub const GROUP: &str = "group.linked";
/// Key of the group a `/link` asked about, waiting for the owner's confirmation (its chat id).
pub const GROUP_ASKED: &str = "group.asked";

/// The forum group linked as the workspace, if any.
pub fn linked_group(tx: &Connection) -> Result<Option<i64>, StoreError> {
    kv::get_i64(tx, GROUP)
}

/// Whether pi get topics: in the linked forum group, or in the owner's private chat with the
/// bot's Threaded Mode on.
pub fn topics_on(tx: &Connection) -> Result<bool, StoreError> {
    Ok(linked_group(tx)?.is_some() || threaded(tx)?)
}

/// The chat where pi's topics are made: the linked group, else the owner's private chat (in
/// Threaded Mode). `None` with no owner.
pub fn workspace(tx: &Connection) -> Result<Option<i64>, StoreError> {
    match linked_group(tx)? {
        Some(g) => Ok(Some(g)),
        None => kv::get_i64(tx, kv::OWNER),
    }
}

/// Whether messages in `chat` are routed by their topic: the linked group's, or the owner's
/// private chat in Threaded Mode. A member's private chat never is (it has no pi topics).
pub fn routes_by_topic(tx: &Connection, chat: i64) -> Result<bool, StoreError> {
    if linked_group(tx)? == Some(chat) {
        return Ok(true);
    }
    Ok(threaded(tx)? && kv::get_i64(tx, kv::OWNER)? == Some(chat))
}

/// The classic-mode selection.
pub fn selected(tx: &Connection) -> Result<Option<String>, StoreError> {
    kv::get(tx, SELECTED)
}

/// Key marking that the person was told their messages wait for `identity` (cleared when it
/// connects).
pub fn waits_notice_key(identity: &str) -> String {
    format!("notice.waits.{identity}")
}

/// Key marking that provisioning skips `identity` while this instance id stays connected (the
/// person chose "forget" for its intent of unknown outcome, or Telegram refused its topic).
pub fn skip_key(identity: &str) -> String {
    format!("threads.skip.{identity}")
}

/// Whether `identity` is a pi with the extension that was live when the last hub stopped and
/// has not reconnected yet: it reconnects on its own, so waiting for it is quiet.
pub fn returning(tx: &Connection, identity: &str) -> Result<bool, StoreError> {
    Ok(instances::last_of(tx, identity)?.is_some_and(|r| {
        r.state == store::instances::InstanceState::Gone
            && r.transport == instances::Transport::Shim
            && r.gone_reason == Some(HUB_RESTARTED)
    }))
}

/// A pi's queue after the person's `/abort` of a Telegram turn (the reference's folding): the
/// prompts that waited behind the aborted turn wait on, and go to pi with the next message
/// the person sends, as what they said before it. Kept until that message takes them, or
/// `/next`, `/stop`, `/continue`, or a run of pi's own that did not come from Telegram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fold {
    /// The turn the person aborted: only when it ended cut short does the queue wait.
    pub aborted: i64,
    /// The newest turn at the abort: the ones up to it waited behind it, a later one is the
    /// person's next message.
    pub upto: i64,
}

fn fold_key(identity: &str) -> String {
    format!("queue.fold.{identity}")
}

/// `identity`'s queue waits for the person's next message (after an `/abort`).
pub fn set_fold(tx: &Connection, identity: &str, fold: Fold) -> Result<(), StoreError> {
    let value = serde_json::to_string(&fold).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    kv::set(tx, &fold_key(identity), &value)
}

/// Whether `identity`'s queue waits for the person's next message. A mark that does not read
/// is none (the queue runs on).
pub fn fold_of(tx: &Connection, identity: &str) -> Result<Option<Fold>, StoreError> {
    Ok(kv::get(tx, &fold_key(identity))?.and_then(|v| serde_json::from_str(&v).ok()))
}

/// `identity`'s queue runs on as it is.
pub fn clear_fold(tx: &Connection, identity: &str) -> Result<(), StoreError> {
    kv::delete(tx, &fold_key(identity))
}

/// Key of the strangers whose taps were answered lately: a JSON object, user id -> when (ms).
pub const STRANGERS_ANSWERED: &str = "strangers.answered";

/// A stranger's taps are answered at most once in this long (ms).
pub const STRANGER_ANSWER_EVERY_MS: i64 = 60_000;

/// Strangers answered within [`STRANGER_ANSWER_EVERY_MS`], at most: more taps from new
/// strangers in that time go unanswered.
pub const STRANGERS_ANSWERED_MAX: usize = 32;

/// Whether a stranger's tap is answered now, and if so, noted as answered. A stranger's tap
/// does nothing, and its answer only stops their button from spinning; every answer is a call
/// the owner's messages could wait behind, so a flood of taps gets one answer per stranger a
/// minute, and no more than [`STRANGERS_ANSWERED_MAX`] strangers a minute (an unanswered
/// button stops spinning on its own). A note that does not read counts as none.
pub fn answer_stranger(tx: &Connection, user: i64, now: i64) -> Result<bool, StoreError> {
    let mut answered: std::collections::BTreeMap<i64, i64> = kv::get(tx, STRANGERS_ANSWERED)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    answered.retain(|_, at| now.saturating_sub(*at) < STRANGER_ANSWER_EVERY_MS && *at <= now);
    if answered.contains_key(&user) || answered.len() >= STRANGERS_ANSWERED_MAX {
        return Ok(false);
    }
    answered.insert(user, now);
    let value = serde_json::to_string(&answered).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    kv::set(tx, STRANGERS_ANSWERED, &value)?;
    Ok(true)
}
