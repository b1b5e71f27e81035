//! The person's message shows its fate: a reaction by the bot (`setMessageReaction`) on the
//! message a turn came from. Best effort, like previews: the conductor only `try_send`s, this
//! task makes its calls itself, one at a time, straight to the client and never through the
//! outbox, so a reaction never stands between a prompt and pi or between an answer and the
//! sender (whose pace and order it does not share). Only the latest fate of a message is
//! sent: a quick turn's "running" still waiting when its answer comes is never sent.
//!
//! Telegram reports reactions to the bot only when a person changes theirs
//! (`message_reaction` carries that user and their own old and new reactions; a bot's own
//! reactions produce no update), so these never read as the person's queue shortcuts
//! (`handlers::queue`), whose emoji the set below does not use either.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use telegram::{CallError, Client};
use tokio::sync::{mpsc, watch};

use crate::assistant::Watched;
use crate::error::HubError;

/// What became of a person's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It waits behind other work (not shown when it goes to pi at once).
    Queued,
    /// pi is working on it.
    Running,
    /// pi answered it.
    Answered,
    /// It was dropped without a model turn (skipped, cancelled).
    Skipped,
    /// Its pi went away while it had it.
    Interrupted,
}

impl Fate {
    /// Its emoji, from Telegram's list of reactions a bot may set.
    pub fn emoji(self) -> &'static str {
        match self {
            Self::Queued => "👀",
            Self::Running => "✍",
            Self::Answered => "👌",
            Self::Skipped => "🙈",
            Self::Interrupted => "💔",
        }
    }

    /// Whether nothing comes after it.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Answered | Self::Skipped | Self::Interrupted)
    }
}

/// One reaction to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct React {
    pub chat: i64,
    /// The person's message.
    pub message: i64,
    pub fate: Fate,
}

/// The producers' side: a full or absent task drops a reaction, never waits.
#[derive(Debug, Clone, Default)]
pub struct Reactions {
    tx: Option<mpsc::Sender<React>>,
}

/// Reactions waiting for the task at most; more are dropped (best effort).
const QUEUE: usize = 1024;

/// The longest flood wait the task sits out before it drops what waits.
const LONGEST_WAIT: Duration = Duration::from_secs(60);

impl Reactions {
    /// A handle and the receiver for [`run`].
    pub fn channel() -> (Self, mpsc::Receiver<React>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Self { tx: Some(tx) }, rx)
    }

    /// Whether a task reads them.
    pub fn is_on(&self) -> bool {
        self.tx.as_ref().is_some_and(|t| !t.is_closed())
    }

    /// Shows `fate` on message `message` of `chat`.
    pub fn show(&self, chat: i64, message: i64, fate: Fate) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(React {
                chat,
                message,
                fate,
            });
        }
    }
}

/// Sets reactions until `stop`, the latest per message, when `assistant.reactions` is on.
pub async fn run(
    client: Client,
    settings: Arc<Watched>,
    mut rx: mpsc::Receiver<React>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    // By message, the latest fate; sent in order of the messages (older first).
    let mut waiting: BTreeMap<(i64, i64), Fate> = BTreeMap::new();
    loop {
        if waiting.is_empty() {
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                r = rx.recv() => match r {
                    Some(r) => { waiting.insert((r.chat, r.message), r.fate); }
                    None => return Ok(()),
                },
            }
        }
        while let Ok(r) = rx.try_recv() {
            waiting.insert((r.chat, r.message), r.fate);
        }
        if *stop.borrow() {
            return Ok(());
        }
        if !settings.current().reactions {
            waiting.clear();
            continue;
        }
        let Some(((chat, message), fate)) = waiting.pop_first() else {
            continue;
        };
        let params = json!({
            "chat_id": chat,
            "message_id": message,
            "reaction": [{ "type": "emoji", "emoji": fate.emoji() }],
        });
        match client.call("setMessageReaction", &params).await {
            Ok(_) => {}
            Err(CallError::Flood { retry_after, .. }) => {
                // Telegram asked to wait: later fates replace what waits meanwhile.
                waiting.entry((chat, message)).or_insert(fate);
                if retry_after > LONGEST_WAIT {
                    waiting.clear();
                }
                tokio::select! {
                    _ = stop.changed() => return Ok(()),
                    () = tokio::time::sleep(retry_after.min(LONGEST_WAIT)) => {}
                }
            }
            Err(e) => tracing::debug!(error = %e, "a reaction was not set"),
        }
    }
}
