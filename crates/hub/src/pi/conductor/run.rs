//! The conductor's loop: what wakes it (a link's event, the queue, a control's deadline, the
//! stop), and what it looks at after each wake-up: controls first, then the queue.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use store::instances::InstanceState;
use store::turns;
use tokio::sync::watch;

use super::{Conductor, is_own, save_states};
use crate::crashpoint;
use crate::db::Durability;
use crate::error::HubError;
use crate::pi::instance::{Command, ConductorMsg, InstanceId, LinkEvent};

impl Conductor {
    /// Runs until `stop`.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), HubError> {
        self.recover().await?;
        // Controls left by the hub before, and the queue: looked at on the first pass.
        let mut look_at_controls = true;
        let mut queue_changed = true;
        loop {
            // Before waiting (pi's streamed events come back here without the rest of a pass).
            if !self.unsaved_states.is_empty() && self.rx.is_empty() {
                self.save_states().await?;
            }
            let now = self.db.now_ms();
            tokio::select! {
                _ = stop.changed() => {
                    for live in self.live.values() {
                        let _ = live.commands.try_send(Command::Close("the hub is stopping".into()));
                    }
                    return Ok(());
                }
                msg = self.rx.recv() => match msg {
                    // pi's streamed events change nothing dispatch looks at (one per token).
                    Some(ConductorMsg::Link(id, LinkEvent::Pi { turn, event })) => {
                        self.pi_event(&id, turn, event).await?;
                        continue;
                    }
                    Some(m) => {
                        // pi's acks, busy/idle and answers change neither which controls can
                        // act nor how many turns wait; anything else (an instance came or
                        // went, a prompt was refused) may. A control that waits for pi to be
                        // idle would need busy/idle here again.
                        let quiet = matches!(
                            m,
                            ConductorMsg::Link(
                                _,
                                LinkEvent::Acked { .. } | LinkEvent::State { .. } | LinkEvent::TurnDone(_)
                            )
                        );
                        look_at_controls |= !quiet;
                        queue_changed |= !quiet;
                        self.handle(m).await?;
                    }
                    None => return Ok(()),
                },
                () = self.wakes.conductor.notified() => queue_changed = true,
                () = crate::wakes::sleep_for(self.controls_deadline.map(|d| {
                    std::time::Duration::from_millis(u64::try_from(d - now).unwrap_or(0))
                })) => {}
            }
            let waited_out = self
                .controls_deadline
                .is_some_and(|d| d <= self.db.now_ms());
            let recorded = self.wakes.controls.swap(false, Ordering::SeqCst);
            // Controls first: an abort must not wait behind a dispatch.
            if look_at_controls || recorded || waited_out {
                look_at_controls = false;
                self.controls_deadline = self.controls().await?;
            }
            queue_changed |= self.dispatch().await?;
            if std::mem::take(&mut queue_changed) {
                self.update_statuses().await?;
                self.look_at_fates().await?;
            }
        }
    }

    /// Busy/idle changes into the store, once nothing else waits for the conductor. For
    /// `status` only (a restarted hub hears busy/idle from pi again): synced lazily. An
    /// instance gone meanwhile keeps `gone` (`instances::set_state` leaves it).
    async fn save_states(&mut self) -> Result<(), HubError> {
        let states = std::mem::take(&mut self.unsaved_states);
        self.db
            .write(Durability::Lazy, move |tx| save_states(tx, &states))
            .await?;
        Ok(())
    }

    async fn handle(&mut self, msg: ConductorMsg) -> Result<(), HubError> {
        match msg {
            ConductorMsg::Attach(a, reply) => self.attach(a, reply).await,
            ConductorMsg::Link(id, event) => self.link(id, event).await,
            ConductorMsg::Spawn(cwd, env, reply) => {
                let spawner = self.spawner();
                // Spawning registers through this very loop: never wait for it here.
                tokio::spawn(async move {
                    let r = spawner.start_new(cwd, env).await.map(|s| s.id);
                    let _ = reply.send(r);
                });
                Ok(())
            }
            ConductorMsg::ResolveIntent(intent, create, reply) => {
                let now = self.db.now_ms();
                let result = self
                    .db
                    .write(Durability::OnDisk, move |tx| {
                        let settled = crate::outgoing::topics::resolve_intent(tx, intent, create)?;
                        // Settled away from its message: the question is unpinned all the same.
                        if settled.is_some() {
                            let asked = store::outbox::Purpose::NoticeIntent { id: intent };
                            crate::outgoing::outbound::unpin_questions_of(tx, &asked, now)?;
                        }
                        Ok(settled)
                    })
                    .await?;
                self.wakes.sender.notify_one();
                self.wakes.topics.notify_one();
                let _ = reply.send(match result {
                    Some(i) => {
                        Ok(json!({ "intent_id": i.id, "identity": i.identity, "slot": i.slot }))
                    }
                    None => Err(format!("there is no intent #{intent} (settled already?)")),
                });
                Ok(())
            }
            ConductorMsg::Tool(id, call) => {
                self.tool(&id, call);
                Ok(())
            }
            ConductorMsg::ToolsHello(token, reply) => {
                match (self.tools_owner(&token), self.tools_waiting.get_mut(&token)) {
                    (Some(id), _) => {
                        let _ = reply.send(Some(id));
                    }
                    // Its pi is starting: the answer comes when it attaches.
                    (None, Some(waiting)) => waiting.push(reply),
                    (None, None) => {
                        let _ = reply.send(None);
                    }
                }
                Ok(())
            }
            ConductorMsg::ExpectTools(token) => {
                self.tools_waiting.entry(token).or_default();
                Ok(())
            }
            ConductorMsg::ForgetTools(token) => {
                for w in self.tools_waiting.remove(&token).unwrap_or_default() {
                    let _ = w.send(None);
                }
                Ok(())
            }
            ConductorMsg::ControlSettled(id) => {
                self.control_settled(id);
                Ok(())
            }
            ConductorMsg::Stats(reply) => {
                let _ = reply.send(json!({ "store_transactions": self.db.transactions() }));
                Ok(())
            }
            ConductorMsg::List(reply) => {
                let list: Vec<Value> = self
                    .live
                    .iter()
                    .map(|(id, l)| {
                        json!({ "id": id.0, "identity": l.identity, "label": l.label, "cwd": l.cwd,
                                "transport": l.transport.as_str(), "pid": l.pid, "idle": l.idle,
                                "turn": l.outstanding })
                    })
                    .collect();
                let _ = reply.send(Value::Array(list));
                Ok(())
            }
        }
    }

    async fn link(&mut self, id: InstanceId, event: LinkEvent) -> Result<(), HubError> {
        let now = self.db.now_ms();
        match event {
            LinkEvent::Acked { turn } => {
                // pi has the prompt; the hub has not recorded it yet.
                crashpoint::hit(crashpoint::CrashPoint::AckBeforeCommit);
                // Not waiting for the disk: "acked" only tells a later hub that pi had the
                // prompt; lost with the machine, the turn reads as dispatched, which a
                // reattaching pi settles the same way. The check that the turn is the
                // instance's own is in the same transaction (one store round trip).
                let Some(n) = turn.number() else {
                    tracing::warn!(instance = %id, turn = %turn, "a link reported a turn id the hub never made; ignored");
                    return Ok(());
                };
                let instance = id.clone();
                let own = self
                    .db
                    .write(Durability::Lazy, move |tx| {
                        match turns::get(tx, n)?.filter(|t| is_own(t, &instance)) {
                            Some(_) => turns::mark_acked(tx, n, now).map(|_| true),
                            None => Ok(false),
                        }
                    })
                    .await?;
                if !own {
                    tracing::warn!(instance = %id, turn = n, "a link reported a turn that is not its own open turn; ignored");
                }
            }
            LinkEvent::AnsweredBefore { turn } => self.answered_before(&id, turn).await?,
            LinkEvent::PromptRefused { turn, error } => {
                let Some(n) = self.own_turn(&id, &turn).await? else {
                    return Ok(());
                };
                tracing::warn!(instance = %id, turn = %turn, error = %error, "pi did not take a prompt; it goes back to the queue");
                self.db
                    .write(Durability::OnDisk, move |tx| turns::requeue(tx, n))
                    .await?;
                if let Some(l) = self.live.get_mut(&id) {
                    l.outstanding = None;
                    l.idle = false;
                }
            }
            LinkEvent::TurnDone(result) => self.turn_done(&id, result).await?,
            LinkEvent::State { idle, pending } => {
                let Some(l) = self.live.get_mut(&id) else {
                    return Ok(());
                };
                let was = l.idle;
                if let Some(i) = idle {
                    l.idle = i;
                }
                if let Some(p) = pending {
                    l.pending = p;
                }
                if was != l.idle {
                    self.unsaved_states
                        .insert(id.0.clone(), InstanceState::working(!l.idle));
                }
            }
            LinkEvent::Pi { .. } => {}
            LinkEvent::Dialog(asked) => self.dialog_asked(&id, asked).await?,
            LinkEvent::DialogEnded { request_id, why } => {
                self.dialog_ended(&id, request_id, why).await?;
            }
            LinkEvent::TerminalPrompt { waiting, title } => {
                self.local_paused(&id, waiting).await;
                self.terminal_prompt(&id, waiting, title).await?;
            }
            LinkEvent::Gone(reason) => self.gone(&id, reason).await?,
        }
        Ok(())
    }
}
