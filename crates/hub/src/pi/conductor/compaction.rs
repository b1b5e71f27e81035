//! pi compacting its context of its own accord (the threshold, or an overflow it recovers
//! from): told in the pi's chat or topic as one message, "compacting…" edited to the outcome,
//! and no prompt dispatched to it meanwhile. A compaction the person asked for (`/compact`,
//! reason `manual`) is told by its control; here it only holds dispatch.

use serde_json::Value;
use store::outbox::{self, Purpose};
use store::{Connection, StoreError, kv};
use wire::PiEvent;

use super::Conductor;
use crate::db::Durability;
use crate::error::HubError;
use crate::outgoing::{outbound, texts};
use crate::pi::instance::InstanceId;

/// A compaction pi is running.
#[derive(Debug, Clone)]
pub(super) struct Compacting {
    /// The notice's outbox row (none for a manual one, one held back, or no owner yet).
    row: Option<i64>,
    manual: bool,
    /// pi compacts after the turn's answer and before its end: the notice waits for the
    /// answer's commit, so it comes after the answer it followed.
    held: Option<String>,
}

/// What a turn's answer commit writes after the answer: a compaction's notice held back for
/// it (`compacting` still runs: its row is then recorded with [`noticed`]).
pub(super) fn after_answer(
    compacting: &mut Option<Compacting>,
    ended: &mut Option<String>,
) -> Option<String> {
    if let Some(c) = compacting.as_mut()
        && let Some(words) = c.held.take()
    {
        return Some(words);
    }
    ended.take()
}

/// The held notice was written as row `row` (when its compaction still runs).
pub(super) fn noticed(compacting: &mut Option<Compacting>, row: Option<i64>) {
    if let Some(c) = compacting.as_mut()
        && c.row.is_none()
    {
        c.row = row;
    }
}

/// Why pi compacts, as its events say (`manual`, `threshold`, `overflow`).
fn reason(event: &PiEvent) -> &str {
    event.0.get("reason").and_then(Value::as_str).unwrap_or("")
}

/// How a compaction ended, from `compaction_end`.
pub(crate) fn outcome(event: &PiEvent) -> texts::Compacted {
    let e = &event.0;
    let tokens = |k: &str| e.pointer(&format!("/result/{k}")).and_then(Value::as_u64);
    let retry = e.get("willRetry").and_then(Value::as_bool).unwrap_or(false);
    if e.get("result").is_some_and(Value::is_object) {
        texts::Compacted::Done {
            before: tokens("tokensBefore"),
            after: tokens("estimatedTokensAfter"),
            retry,
        }
    } else if e.get("aborted").and_then(Value::as_bool).unwrap_or(false) {
        texts::Compacted::Stopped
    } else {
        texts::Compacted::Failed {
            why: e
                .get("errorMessage")
                .and_then(Value::as_str)
                .unwrap_or("pi gave no reason")
                .to_owned(),
        }
    }
}

impl Conductor {
    /// `compaction_start`: dispatch holds, and the person is told unless they asked for it.
    pub(super) async fn compaction_started(
        &mut self,
        id: &InstanceId,
        event: &PiEvent,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        let manual = reason(event) == "manual";
        let words = texts::compacting(&l.label, reason(event) == "overflow");
        // The turn's answer is known and not written yet (it is, at the turn's end).
        let hold = l.answered_before.is_some() && !manual;
        l.compacting = Some(Compacting {
            row: None,
            manual,
            held: hold.then(|| words.clone()),
        });
        if manual || hold {
            return Ok(());
        }
        let identity = l.identity.clone();
        let now = self.db.now_ms();
        let row = self
            .db
            .write(Durability::OnDisk, move |tx| {
                write_notice(tx, &identity, &words, now)
            })
            .await?;
        if let Some(c) = self.live.get_mut(id).and_then(|l| l.compacting.as_mut()) {
            c.row = row;
        }
        self.wakes.sender.notify_one();
        Ok(())
    }

    /// `compaction_end`: dispatch goes on, and the notice says how it ended.
    pub(super) async fn compaction_ended(
        &mut self,
        id: &InstanceId,
        event: &PiEvent,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        let was = l.compacting.take();
        // A manual one is the control's to tell; one whose start this hub did not see (it
        // started before a restart) is told all the same.
        if was.as_ref().is_some_and(|c| c.manual) || reason(event) == "manual" {
            return Ok(());
        }
        let words = texts::compacted_by_pi(&l.label, &outcome(event));
        if was.as_ref().is_some_and(|c| c.held.is_some()) {
            // Still before the answer: the outcome alone follows it.
            l.compaction_ended = Some(words);
            return Ok(());
        }
        let identity = l.identity.clone();
        let row = was.and_then(|c| c.row);
        let now = self.db.now_ms();
        self.db
            .write(Durability::OnDisk, move |tx| {
                settle_notice(tx, &identity, row, &words, now)
            })
            .await?;
        self.wakes.sender.notify_one();
        Ok(())
    }
}

/// The "compacting" notice, in the pi's topic or the owner's chat. Its outbox row, if any.
pub(super) fn write_notice(
    tx: &Connection,
    identity: &str,
    words: &str,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
        return Ok(None);
    };
    let place = outbound::place_of_instance(tx, identity, owner)?;
    let purpose = Purpose::Compaction {
        identity: identity.to_owned(),
        at: now,
    };
    outbound::text(tx, &notice(place.chat, place.thread, words, &purpose), now)
}

/// The notice as one of the hub's texts: no buttons, nothing behind it, not sent again.
fn notice<'a>(
    chat: i64,
    thread: Option<i64>,
    words: &'a str,
    purpose: &'a Purpose,
) -> outbound::Text<'a> {
    outbound::Text {
        chat,
        thread,
        text: words,
        reply_to: None,
        markup: None,
        purpose,
        source_update_id: None,
        resend: false,
    }
}

/// The notice says how it ended: rewritten while it has not left, edited once it has, a new
/// message when there is none to edit (its start was before this hub, or its send's outcome
/// is unknown).
fn settle_notice(
    tx: &Connection,
    identity: &str,
    row: Option<i64>,
    words: &str,
    now: i64,
) -> Result<(), StoreError> {
    let Some(row) = row.map(|r| outbox::get(tx, r)).transpose()?.flatten() else {
        return write_notice(tx, identity, words, now).map(drop);
    };
    let purpose = Purpose::Compaction {
        identity: identity.to_owned(),
        at: now,
    };
    let text = notice(row.chat_id, row.thread_id, words, &purpose);
    if outbound::rewrite_text(tx, row.id, &text)? {
        return Ok(());
    }
    match row.sent_message_id {
        Some(sent) => outbound::edit(tx, row.chat_id, sent, words, None, &purpose, None, now),
        None => write_notice(tx, identity, words, now).map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_how_a_compaction_ended() {
        let done = PiEvent(json!({"type":"compaction_end","reason":"threshold",
            "result":{"tokensBefore":150000,"estimatedTokensAfter":32000},"aborted":false,"willRetry":false}));
        assert_eq!(
            outcome(&done),
            texts::Compacted::Done {
                before: Some(150_000),
                after: Some(32_000),
                retry: false
            }
        );
        let stopped = PiEvent(json!({"type":"compaction_end","aborted":true}));
        assert_eq!(outcome(&stopped), texts::Compacted::Stopped);
        let failed = PiEvent(json!({"type":"compaction_end","aborted":false,"errorMessage":"429"}));
        assert_eq!(
            outcome(&failed),
            texts::Compacted::Failed { why: "429".into() }
        );
    }
}
