//! The conductor: the one task that knows the live instances. It registers them, reconciles
//! turns after reconnects, dispatches queued turns to idle instances, stores answers, and tells
//! the owner when instances come and go.
//!
//! Exactly-once into pi: a turn is marked `dispatched` (and committed) before its prompt is
//! written; an instance that reconnects reports the turn ids its process received, so a turn is
//! re-sent only if pi never got it, and a turn that finished while the hub was away is reported
//! with its result.
//!
//! Its parts: `run` (the loop and what wakes it), `attach` (instances connecting, and the
//! hub's own restart), `gone` (an instance going away), `dispatch` (queued turns into pi),
//! `answers` (a finished turn's answer), `pi_event` (pi's stream), `controls` and `tools` (the
//! person's controls and pi's Telegram tools, each in a task of its own). This file keeps the
//! conductor's state and what those parts share.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use store::instances::{self, InstanceState};
use store::lease::Epoch;
use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError};
use tokio::sync::{mpsc, oneshot};
use wire::TurnId;

mod answers;
mod attach;
mod compaction;
mod controls;
mod dialogs;
mod dispatch;
mod fates;
mod gone;
mod local_work;
mod pi_event;
mod run;
mod stale;
mod tools;

/// How an answer to a dialog reads back to the person (the handlers write it too).
pub(crate) use dialogs::{MAX_OPTIONS as DIALOG_MAX_OPTIONS, shown as dialog_answer_shown};
pub use tools::ToolSettings;

use crate::assistant;
use crate::db::Db;
use crate::error::HubError;
use crate::outgoing::activity::ToolRecord;
use crate::outgoing::preview::PreviewMsg;
use crate::pi::instance::{Command, ConductorMsg, InstanceId, Reach, Transport};
use crate::wakes::Wakes;

#[derive(Debug)]
struct Live {
    identity: String,
    label: String,
    /// pi's session file, as it said when it attached.
    session_file: Option<String>,
    cwd: String,
    transport: Transport,
    reach: Reach,
    pid: Option<i64>,
    idle: bool,
    pending: bool,
    /// The turn it is working on.
    outstanding: Option<i64>,
    commands: mpsc::Sender<Command>,
    last_status: Option<String>,
    /// Tools that finished since the last assistant message (shown as one activity message).
    tools: Vec<ToolRecord>,
    /// Arguments of tools running now, by call id.
    tool_args: std::collections::HashMap<String, Value>,
    /// A headless child's token for its tools connection.
    tools_token: Option<String>,
    /// The turn, text and time of an answer pi finished in a Telegram turn: the turn's
    /// answer, unless pi goes on in that same turn (a steer), when it becomes commentary. (A
    /// pi with the extension runs turns it holds after a hub restart without a dispatch
    /// here: only the same turn's start counts.)
    answered_before: Option<(i64, String, i64)>,
    /// pi compacts its context: no prompt goes to it until it is done.
    compacting: Option<compaction::Compacting>,
    /// How a compaction that ended before its turn's answer was written ended: said after it.
    compaction_ended: Option<String>,
    /// Work it does that did not come from Telegram, as the phone shows it.
    local: local_work::LocalWork,
}

impl Live {
    fn ready(&self) -> bool {
        self.idle && !self.pending && self.outstanding.is_none() && self.compacting.is_none()
    }
}

/// Conductor wiring.
pub struct Conductor {
    db: Db,
    rx: mpsc::Receiver<ConductorMsg>,
    tx: mpsc::Sender<ConductorMsg>,
    wakes: Wakes,
    epoch: Epoch,
    live: BTreeMap<InstanceId, Live>,
    /// How answers are shown (re-read when telegram.json changes).
    assistant: Arc<assistant::Watched>,
    /// The preview task.
    previews: mpsc::Sender<PreviewMsg>,
    /// Answers claimed for the sender in the commit that queues them.
    handoff: crate::outgoing::sender::Handoff,
    /// Controls carried out by tasks of their own.
    in_hand: controls::InHand,
    /// When the earliest control waiting for its pi gives up (ms).
    controls_deadline: Option<i64>,
    /// pi's Telegram tools: where copies go, how large.
    tools: Arc<ToolSettings>,
    /// `telegram.json` (`piBinary` for the headless instances it starts).
    config_path: std::path::PathBuf,
    /// Tokens of children being started, with the tools hellos that came before their pi
    /// attached (a child's extension may connect before pi answers the hub's first question).
    tools_waiting: std::collections::HashMap<String, Vec<oneshot::Sender<Option<InstanceId>>>>,
    /// Busy/idle changes not in the store yet (for `status` only). pi says "idle" right
    /// before its answer: the change goes into the answer's commit, or is written once nothing
    /// else waits, never as a store call of its own in front of the answer.
    unsaved_states: BTreeMap<String, InstanceState>,
    /// When each pi (identity) was last told the time with a prompt (`timeInjection:
    /// interval`). In memory: after a hub restart each is told again, once.
    told_time: std::collections::HashMap<String, i64>,
    /// What each person's message shows of its fate (`assistant.reactions`).
    fates: fates::Fates,
    /// Counts the previews of pis' own work (`local_work::LOCAL_DRAFTS`).
    local_seq: i64,
}

/// Busy/idle of instances, for `status`.
fn save_states(
    tx: &Connection,
    states: &BTreeMap<String, InstanceState>,
) -> Result<(), StoreError> {
    for (id, state) in states {
        instances::set_state(tx, id, *state)?;
    }
    Ok(())
}

/// What the conductor is told at start, with no defaults: a guessed path would read another
/// profile's (or the working directory's) `telegram.json`.
#[derive(Debug, Clone)]
pub struct ConductorSettings {
    /// `telegram.json` (`piBinary` for the headless instances it starts).
    pub config_path: std::path::PathBuf,
    /// pi's Telegram tools: where copies go, how large.
    pub tools: ToolSettings,
}

impl Conductor {
    /// A conductor reading `rx`; `tx` is handed to links it starts; `wake` is notified by the
    /// worker when turns or the selection change; `sender` wakes the outbox sender; answers
    /// go to the sender through `handoff` when it waits idle.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        db: Db,
        rx: mpsc::Receiver<ConductorMsg>,
        tx: mpsc::Sender<ConductorMsg>,
        wakes: Wakes,
        epoch: Epoch,
        assistant: Arc<assistant::Watched>,
        previews: mpsc::Sender<PreviewMsg>,
        handoff: crate::outgoing::sender::Handoff,
        settings: ConductorSettings,
    ) -> Self {
        Self {
            db,
            rx,
            tx,
            wakes,
            epoch,
            live: BTreeMap::new(),
            assistant,
            previews,
            handoff,
            in_hand: controls::InHand::default(),
            controls_deadline: None,
            tools: Arc::new(settings.tools),
            config_path: settings.config_path,
            tools_waiting: std::collections::HashMap::new(),
            unsaved_states: BTreeMap::new(),
            told_time: std::collections::HashMap::new(),
            fates: fates::Fates::default(),
            local_seq: 0,
        }
    }

    /// Reactions on the person's messages go to `out` (the task of `outgoing::reactions`);
    /// without it none are shown (the simulation).
    pub fn with_reactions(mut self, out: crate::outgoing::reactions::Reactions) -> Self {
        self.fates = fates::Fates::new(out);
        self
    }

    fn spawner(&self) -> crate::pi::spawned::Spawner {
        crate::pi::spawned::Spawner {
            db: self.db.clone(),
            conductor: self.tx.clone(),
            config_path: self.config_path.clone(),
            wakes: self.wakes.clone(),
        }
    }

    /// The turn `turn` if it was dispatched to instance `id` and is still open; otherwise logs
    /// that a link reported a turn that is not its own.
    async fn own_turn(&self, id: &InstanceId, turn: &TurnId) -> Result<Option<i64>, HubError> {
        let Some(n) = turn.number() else {
            tracing::warn!(instance = %id, turn = %turn, "a link reported a turn id the hub never made; ignored");
            return Ok(None);
        };
        let t = self.db.read(move |c| turns::get(c, n)).await?;
        if !t.as_ref().is_some_and(|t| is_own(t, id)) {
            tracing::warn!(instance = %id, turn = n, "a link reported a turn that is not its own open turn; ignored");
            return Ok(None);
        }
        Ok(Some(n))
    }

    /// Ends a turn's previews, waiting (a little) until no preview call for it is in flight.
    async fn fence(&self, turn: i64) {
        let (fenced, done) = oneshot::channel();
        let end = PreviewMsg::End { turn, fenced };
        if tokio::time::timeout(FENCE_WAIT, self.previews.send(end))
            .await
            .is_ok_and(|r| r.is_ok())
        {
            let _ = tokio::time::timeout(FENCE_WAIT, done).await;
        }
    }
}

/// How long the conductor waits for the preview task to fence a turn.
const FENCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether `t` was dispatched to instance `id` and is still open.
fn is_own(t: &Turn, id: &InstanceId) -> bool {
    t.instance_id.as_deref() == Some(id.0.as_str())
        && matches!(t.state, TurnState::Dispatched | TurnState::Acked)
}
