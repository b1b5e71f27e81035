//! An instance going away: its turns, the selection, its topic's binding, and what the person
//! is told.

use store::threads as tables;
use store::turns;
use store::{instances, kv};
use threads::events;

use super::{Conductor, tools};
use crate::bot_commands;
use crate::db::Durability;
use crate::error::HubError;
use crate::instance::{GoneReason, InstanceId, Transport};
use crate::outbound;
use crate::state::{self, SELECTED};
use crate::texts;

impl Conductor {
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
        let key = id.0.clone();
        let final_turns = reason.process_gone() || l.transport != Transport::Shim;
        let disconnected = reason == GoneReason::Disconnected;
        // A hub-started pi that exited by itself is not started again at the next start.
        let exited = matches!(reason, GoneReason::Exited(_)) && l.transport == Transport::Rpc;
        let epoch = self.epoch;
        // The person reads what happened in plain words; status keeps the detail.
        let why = reason.describe();
        let detail = reason.detail();
        let cwd = l.cwd.clone();
        self.db
            .write(Durability::OnDisk, move |tx| {
                instances::mark_gone(tx, &key, &detail, now)?;
                if exited {
                    crate::spawned::exited(tx, &key, &detail, now)?;
                }
                // Its commands leave the bot's list (unless another live pi has them too).
                bot_commands::refresh(tx, now)?;
                if final_turns {
                    for t in turns::outstanding(tx)?
                        .into_iter()
                        .filter(|t| t.instance_id.as_deref() == Some(key.as_str()))
                    {
                        if turns::mark_interrupted(tx, t.id, &detail, now)? {
                            outbound::prompt_notice(
                                tx,
                                t.chat_id,
                                t.thread_id,
                                &texts::turn_interrupted(&l.label, &t.text),
                                &format!("notice:interrupted:{}", t.id),
                                now,
                            )?;
                            tools::send_waiting(tx, &t, &l.identity, now)?;
                        }
                    }
                }
                let selected = kv::get(tx, SELECTED)?;
                let mut now_selected = None;
                if selected.as_deref() == Some(l.identity.as_str()) {
                    match others.first() {
                        Some((identity, label)) => {
                            kv::set(tx, SELECTED, identity)?;
                            now_selected = Some(label.clone());
                        }
                        None => kv::delete(tx, SELECTED)?,
                    }
                } else if let Some(s) = selected {
                    now_selected = others
                        .iter()
                        .find(|(i, _)| *i == s)
                        .map(|(_, label)| label.clone());
                }
                let queued = turns::queued_counts(tx)?
                    .into_iter()
                    .find(|(i, _)| i.as_deref() == Some(l.identity.as_str()))
                    .map_or(0, |(_, n)| n);
                // The binding: kept (offline) for a lost connection, released with proof for a
                // disconnect. Each notice says what happens in the place it is posted.
                let threaded = state::threaded(tx)?;
                let topic = if disconnected {
                    events::disconnected(tx, &l.identity, epoch, now)?;
                    None
                } else {
                    events::went_offline(tx, &l.identity, now)?;
                    if threaded {
                        tables::binding(tx, &l.identity)?.map(|b| (b.chat_id, b.thread_id))
                    } else {
                        None
                    }
                };
                let Some(owner) = kv::get_i64(tx, kv::OWNER)? else {
                    return Ok(());
                };
                let purpose = format!("notice:gone:{key}");
                match (threaded, topic) {
                    // In its own topic, where messages wait for it.
                    (true, Some((chat, thread))) => outbound::notice(
                        tx,
                        chat,
                        Some(thread),
                        &texts::topic_went_offline(&l.label, &why, &cwd, queued),
                        &purpose,
                        now,
                    )?,
                    // In the main chat, where every message is asked about.
                    (true, None) => outbound::notice(
                        tx,
                        owner,
                        None,
                        &texts::threaded_gone(&l.label, &why, queued, disconnected),
                        &purpose,
                        now,
                    )?,
                    // Classic mode: the one chat, where the selection decides.
                    (false, _) => outbound::notice(
                        tx,
                        owner,
                        None,
                        &texts::instance_gone(&l.label, &why, queued, now_selected.as_deref()),
                        &purpose,
                        now,
                    )?,
                }
                Ok(())
            })
            .await?;
        self.wakes.sender.notify_one();
        self.wakes.topics.notify_one();
        Ok(())
    }
}
