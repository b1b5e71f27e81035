//! What became of each person's message, shown on it as the bot's reaction
//! (`outgoing::reactions`). Running and answered are shown where they happen (dispatch, the
//! answer, after the prompt and the answer are on their way); waiting, skipped and interrupted
//! are found by a look at the turns after each pass of the conductor that changed the queue.
//! In memory: after a hub restart, only turns still waiting are shown again.

use std::collections::HashMap;

use store::turns::{self, TurnState};

use super::Conductor;
use crate::error::HubError;
use crate::outgoing::reactions::{Fate, Reactions};

/// The fates shown, by turn, until a final one.
#[derive(Debug, Default)]
pub(super) struct Fates {
    out: Reactions,
    /// Turn -> (chat, message, fate shown).
    shown: HashMap<i64, (i64, i64, Fate)>,
    /// Turn -> the turns folded into it (after an `/abort`): their messages show its fate.
    followers: HashMap<i64, Vec<(i64, i64, Option<i64>)>>,
    /// Turns up to this number were looked at for being new: a look reads only newer ones.
    seen_upto: i64,
}

impl Fates {
    /// Fates sent to `out`.
    pub(super) fn new(out: Reactions) -> Self {
        Self {
            out,
            shown: HashMap::new(),
            followers: HashMap::new(),
            seen_upto: 0,
        }
    }

    /// The messages of `folded` (`(turn, chat, message)`) follow turn `leader`'s fate from
    /// now on (their own turns are cancelled, which would read as skipped).
    pub(super) fn follow(&mut self, leader: i64, folded: Vec<(i64, i64, Option<i64>)>) {
        if folded.is_empty() {
            return;
        }
        for (turn, ..) in &folded {
            self.shown.remove(turn);
        }
        self.followers.insert(leader, folded);
    }

    /// Shows `fate` on turn `turn`'s message, unless it shows it already.
    pub(super) fn show(&mut self, turn: i64, chat: i64, message: Option<i64>, fate: Fate) {
        let Some(message) = message else { return };
        if !self.out.is_on() {
            return;
        }
        if self.shown.get(&turn).is_some_and(|s| s.2 == fate) {
            return;
        }
        self.out.show(chat, message, fate);
        let followers = if fate.is_final() {
            self.shown.remove(&turn);
            self.followers.remove(&turn).unwrap_or_default()
        } else {
            self.shown.insert(turn, (chat, message, fate));
            self.followers.get(&turn).cloned().unwrap_or_default()
        };
        for (_, chat, message) in followers {
            if let Some(message) = message {
                self.out.show(chat, message, fate);
            }
        }
    }

    /// The fate of a turn `turn` already shown, moved on to `fate`.
    pub(super) fn moved(&mut self, turn: i64, fate: Fate) {
        if let Some(&(chat, message, _)) = self.shown.get(&turn) {
            self.show(turn, chat, Some(message), fate);
        }
    }
}

/// A turn's state as the person's message shows it.
fn fate_of(state: TurnState) -> Fate {
    match state {
        TurnState::Queued => Fate::Queued,
        TurnState::Dispatched | TurnState::Acked => Fate::Running,
        TurnState::Done => Fate::Answered,
        TurnState::Interrupted => Fate::Interrupted,
        TurnState::Cancelled => Fate::Skipped,
    }
}

impl Conductor {
    /// After a pass that changed the queue: turns left waiting show it, and turns shown
    /// before show what became of them.
    pub(super) async fn look_at_fates(&mut self) -> Result<(), HubError> {
        if !self.fates.out.is_on() || !self.assistant.current().reactions {
            return Ok(());
        }
        // Two columns of the turns shown, and only the turns newer than the last look: a look
        // after every pass read each waiting turn whole, which made a backlog's drain
        // quadratic (10,000 updates: 4.3 s of the hub's CPU, 2,500 a second).
        let range = (
            self.fates.shown.keys().min().copied(),
            self.fates.shown.keys().max().copied(),
        );
        let after = self.fates.seen_upto;
        let (new, states, newest) = self
            .db
            .read(move |c| {
                let states = match range {
                    (Some(from), Some(to)) => turns::states_between(c, from, to)?,
                    _ => Vec::new(),
                };
                Ok((turns::queued_after(c, after)?, states, turns::last_id(c)?))
            })
            .await?;
        let states: HashMap<i64, TurnState> = states.into_iter().collect();
        let shown: Vec<i64> = self.fates.shown.keys().copied().collect();
        for id in shown {
            match states.get(&id) {
                Some(s) => self.fates.moved(id, fate_of(*s)),
                // Pruned: nothing more to show.
                None => drop(self.fates.shown.remove(&id)),
            }
        }
        for (id, chat, message) in new {
            if !self.fates.shown.contains_key(&id) {
                self.fates.show(id, chat, Some(message), Fate::Queued);
            }
        }
        self.fates.seen_upto = newest;
        Ok(())
    }
}
