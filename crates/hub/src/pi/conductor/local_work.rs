//! Work a connected pi does that did not come from Telegram (typed in its terminal, an
//! extension's follow-up) looks alive where the pi lives on the phone: the preview task shows
//! it as for a Telegram turn (a growing draft, or typing without drafts), paused while pi waits
//! for the person at its terminal, and fenced before each piece of it is pushed
//! (`assistant.proactivePush`; off, nothing of it shows).
//!
//! Its previews are keyed apart from turns: [`LOCAL_DRAFTS`] plus a sequence number, never a
//! turn id (turn ids count from 1 and stay far below), so a local draft never replaces a
//! Telegram turn's draft.

use wire::{EventKind, PiEvent};

use super::Conductor;
use crate::error::HubError;
use crate::outgoing::outbound;
use crate::outgoing::preview::PreviewMsg;
use crate::pi::instance::InstanceId;

/// Where the keys (and draft ids) of local work's previews start.
pub(super) const LOCAL_DRAFTS: i64 = 1 << 40;

/// What a pi's own work shows now.
#[derive(Debug, Default)]
pub(super) struct LocalWork {
    /// pi runs something that did not come from Telegram.
    running: bool,
    /// pi waits for the person at its terminal: nothing shows meanwhile.
    paused: bool,
    /// The preview shown for it.
    preview: Option<i64>,
}

impl Conductor {
    /// One of pi's events outside any Telegram turn.
    pub(super) async fn local_event(
        &mut self,
        id: &InstanceId,
        kind: &EventKind,
        event: &PiEvent,
    ) -> Result<(), HubError> {
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        match kind {
            EventKind::AgentStart => l.local.running = true,
            EventKind::AgentSettled => {
                l.local.running = false;
                return self.end_local_preview(id).await;
            }
            _ => {}
        }
        // A Telegram turn shows its own preview.
        if !l.local.running || l.local.paused || l.outstanding.is_some() {
            return Ok(());
        }
        let key = match l.local.preview {
            Some(key) => key,
            None => {
                // Read once per preview, not per streamed event (it stats telegram.json).
                if !self.assistant.current().proactive_push {
                    return Ok(());
                }
                let Some(l) = self.live.get(id) else {
                    return Ok(());
                };
                let identity = l.identity.clone();
                let place = self
                    .db
                    .read(move |c| {
                        let Some(owner) = store::kv::get_i64(c, store::kv::OWNER)? else {
                            return Ok(None);
                        };
                        outbound::place_of_instance(c, &identity, owner).map(Some)
                    })
                    .await?;
                // No owner yet, or its topic is being replaced.
                let Some(place) = place.filter(|p| !p.waiting) else {
                    return Ok(());
                };
                self.local_seq += 1;
                let key = LOCAL_DRAFTS + self.local_seq;
                let _ = self.previews.try_send(PreviewMsg::Begin {
                    turn: key,
                    chat: place.chat,
                    thread: place.thread,
                });
                if let Some(l) = self.live.get_mut(id) {
                    l.local.preview = Some(key);
                }
                key
            }
        };
        // Best effort, as for a turn: the next block end corrects a dropped delta.
        let _ = self.previews.try_send(PreviewMsg::Event {
            turn: key,
            event: event.clone(),
        });
        Ok(())
    }

    /// pi started (`true`) or stopped waiting for the person at its terminal.
    pub(super) async fn local_paused(&mut self, id: &InstanceId, waiting: bool) {
        if let Some(l) = self.live.get_mut(id) {
            l.local.paused = waiting;
        }
        if waiting {
            let _ = self.end_local_preview(id).await;
        }
    }

    /// Ends the preview of pi's own work, waiting (a little) until nothing of it is in
    /// flight: before what it wrote is pushed, so no draft follows the message.
    pub(super) async fn end_local_preview(&mut self, id: &InstanceId) -> Result<(), HubError> {
        let Some(key) = self.live.get_mut(id).and_then(|l| l.local.preview.take()) else {
            return Ok(());
        };
        self.fence(key).await;
        Ok(())
    }
}
