//! The inbound journal: every update stored before its offset is confirmed, handled in order,
//! marked handled in the same transaction as its effects.

use rusqlite::{Connection, OptionalExtension, params};

use crate::Cached;
use crate::{Result, StoreError, kv};

/// A journaled update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `update_id`.
    pub update_id: i64,
    /// The update's kind (`message`, `callback_query`, ...).
    pub kind: String,
    /// The update exactly as Telegram sent it.
    pub raw: String,
    /// When it was journaled.
    pub received_ms: i64,
}

stored_text_enum! {
    /// What handling an update did, as the journal records it (its `outcome` column; `status`,
    /// tests and people reading the store go by the text).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Outcome {
        units {
            /// The update is not JSON.
            IgnoredUnreadable = "ignored:unreadable",
            /// Nobody sent it.
            IgnoredNoSender = "ignored:no-sender",
            /// Written outside the private chat with the bot.
            IgnoredNotPrivate = "ignored:not-private",
            /// From someone who is not the owner.
            IgnoredNotOwner = "ignored:not-owner",
            /// Lacking what its kind must carry.
            IgnoredMalformed = "ignored:malformed",
            /// A topic's service message.
            IgnoredTopicService = "ignored:topic-service",
            /// An edit of a message that is no prompt, or that has no text.
            IgnoredEdit = "ignored:edit",
            /// Before pairing, something other than a message.
            IgnoredUnpaired = "ignored:unpaired",
            /// From a bot.
            IgnoredBot = "ignored:bot",
            /// Pairing refused (for now) to someone.
            IgnoredPairingRefused = "ignored:pairing-refused",
            /// The bot's membership changed.
            NotedMembership = "noted:membership",
            /// Paired: the first person to write.
            PairedFirstContact = "paired:first-contact",
            /// Paired with the code.
            PairedCode = "paired:code",
            /// Pairing needs a code and none is out.
            PairingNoCode = "pairing:no-code",
            /// Asked for the pairing code.
            PairingCodeNeeded = "pairing:code-needed",
            /// Too many wrong codes: refused.
            PairingRefused = "pairing:refused",
            /// A wrong code.
            PairingWrongCode = "pairing:wrong-code",
            /// The owner's `/link` in a forum group: asked in private to confirm.
            GroupLinkAsked = "group:link-asked",
            /// `/link` in a group without topics.
            GroupNotForum = "group:not-forum",
            /// The group is the workspace now.
            GroupLinked = "group:linked",
            /// The owner said no to linking (or answered an older question).
            GroupLinkDeclined = "group:link-declined",
            /// The group is no longer the workspace.
            GroupUnlinked = "group:unlinked",
            /// An anonymous admin's message in the linked group.
            GroupAnonymous = "group:anonymous",
            /// A message in the linked group's General topic that does not address the bot.
            GroupNotAddressed = "group:not-addressed",
            /// A member's reaction to someone else's prompt.
            ReactionNotTheirs = "reaction:not-theirs",
            /// `/start CODE` with an open invite's code: joined.
            JoinedInvite = "people:joined",
            /// A wrong invite code.
            InviteWrongCode = "people:wrong-code",
            /// The code of an invite used, withdrawn or expired.
            InviteSpent = "people:invite-spent",
            /// An invite code from a sender without attempts left.
            IgnoredInviteRefused = "ignored:invite-refused",
            /// Someone with a role sent an invite code.
            AlreadyIn = "people:already-in",
            /// A member asked for what is the owner's.
            OwnerOnly = "people:owner-only",
            /// A viewer wrote.
            ViewerReadOnly = "people:viewer-read-only",
            /// A member's or viewer's `/start` or `/help`.
            PeopleHelp = "people:help",
            /// A member's or viewer's `/status`.
            PeopleStatus = "people:status",
            /// `/people`.
            PeopleList = "people:list",
            /// An invite opened.
            InviteOpened = "people:invite",
            /// An invite withdrawn.
            InviteRevoked = "people:invite-revoked",
            /// Someone removed.
            PersonRemoved = "people:removed",
            /// A message without text or media: told what was not delivered.
            RepliedTextOnly = "replied:text-only",
            /// A turn for a live pi.
            Queued = "queued",
            /// A turn for a pi reconnecting after a hub restart.
            QueuedReturning = "queued:returning",
            /// A turn that waits for a pi that is away.
            QueuedWaits = "queued:waits",
            /// A turn that waits for the person's choice of pi.
            Chooser = "chooser",
            /// A turn for the first pi that connects.
            Held = "held",
            /// Joined an album being gathered.
            JoinedAlbum = "joined:album",
            /// Joined a forward being gathered.
            JoinedForward = "joined:forward",
            /// The comment joined the forward it came with.
            JoinedComment = "joined:comment",
            /// Joined a long text Telegram split.
            JoinedLongText = "joined:long-text",
            /// A waiting prompt's text changed.
            EditApplied = "edit:applied",
            /// An edit of a prompt pi already has.
            EditTooLate = "edit:too-late",
            /// An edit into a command the hub does not map.
            EditCommandRefused = "edit:command-refused",
            /// A reaction to a message that is no prompt.
            ReactionNotAPrompt = "reaction:not-a-prompt",
            /// A reaction to a prompt pi already has.
            ReactionTooLate = "reaction:too-late",
            /// `/new <folder>`: pi is started there.
            CommandNewSpawn = "command:new:spawn",
            /// `/new <folder>` outside the workspaces.
            CommandNewRefused = "command:new:refused",
            /// `/new`: the picker.
            CommandNewPicker = "command:new:picker",
            /// `/sessions`.
            CommandSessions = "command:sessions",
            /// `/sessions` with no pi here.
            CommandSessionsNoPi = "command:sessions:no-pi",
            /// `/close`.
            CommandClose = "command:close",
            /// `/close` with no pi here.
            CommandCloseNoPi = "command:close:no-pi",
            /// A command nobody knows.
            CommandUnknown = "command:unknown",
            /// One of pi's commands: a prompt.
            CommandPi = "command:pi",
            /// `/abort` with no pi to name.
            AbortWhich = "abort:which",
            /// `/abort` of a working pi.
            AbortRunning = "abort:running",
            /// `/abort` of an idle pi.
            AbortIdle = "abort:idle",
            /// `/stop` with no pi to name.
            StopWhich = "stop:which",
            /// `/stop` of a working pi.
            StopRunning = "stop:running",
            /// `/stop` of an idle pi.
            StopIdle = "stop:idle",
            /// `/next` with no pi to name.
            NextWhich = "next:which",
            /// `/next` of a working pi.
            NextRunning = "next:running",
            /// `/next` of an idle pi.
            NextIdle = "next:idle",
            /// `/continue`: a prompt.
            Continue = "continue",
            /// `/continue` with no pi to name.
            ContinueWhich = "continue:which",
            /// `/compact`: the question asked.
            CompactAsked = "compact:asked",
            /// `/compact` with no pi to name.
            CompactWhich = "compact:which",
            /// The menu's overview.
            MenuMain = "menu:menu",
            /// The menu's status.
            MenuStatus = "menu:status",
            /// The menu's models.
            MenuModel = "menu:model",
            /// The menu's thinking levels.
            MenuThinking = "menu:thinking",
            /// The menu's queue.
            MenuQueue = "menu:queue",
            /// The menu's settings.
            MenuSettings = "menu:settings",
            /// The menu's instances.
            MenuInstances = "menu:instances",
            /// The menu's help.
            MenuHelp = "menu:help",
            /// A button the store does not know (forged, stale, a stranger's).
            ButtonUnknown = "button:unknown",
            /// A button about a pi that is not connected any more.
            ButtonGone = "button:gone",
            /// A button of a question settled before.
            ButtonSettled = "button:settled",
            /// New messages go to the tapped pi.
            Selected = "selected",
            /// A waiting message went to the tapped pi.
            Sent = "sent",
            /// The message had gone somewhere already.
            SendTaken = "send:taken",
            /// The pi lives in this topic now.
            Moved = "moved",
            /// The topic could not be given to the pi.
            MoveRefused = "move:refused",
            /// A topic creation of unknown outcome, settled before.
            IntentSettled = "intent:settled",
            /// ... settled: a new thread.
            IntentCreate = "intent:create",
            /// ... settled: forgotten.
            IntentForget = "intent:forget",
            /// Topics offline past the retention: deleted.
            RetentionDelete = "retention:delete",
            /// ... kept.
            RetentionKeep = "retention:keep",
            /// Prompts that waited while the hub or their pi was away: run now.
            StaleRun = "stale:run",
            /// ... skipped.
            StaleSkip = "stale:skip",
            /// ... answered before.
            StaleSettled = "stale:settled",
            /// `/steer` while pi works: steered into its current work (or run next).
            CommandSteer = "command:steer",
            /// `/retry` with nothing to run again.
            CommandRetry = "command:retry",
            /// An answer to one of pi's dialogs, on its way to pi.
            DialogAnswered = "dialog:answered",
            /// An answer to a dialog that was over (a second tap, a late reply).
            DialogOver = "dialog:over",
            /// A control about a pi that is not connected.
            ControlGone = "control:gone",
            /// pi is started in a folder.
            ControlSpawn = "control:spawn",
            /// A model switch for pi.
            ControlSetModel = "control:set_model",
            /// A thinking level for pi.
            ControlSetThinking = "control:set_thinking",
            /// A compaction for pi.
            ControlCompact = "control:compact",
            /// A new session for pi.
            ControlNewSession = "control:new_session",
            /// A session resumed by pi.
            ControlSwitchSession = "control:switch_session",
            /// A folder pi may not be started in.
            SpawnRefused = "spawn:refused",
            /// A prompt button: a turn.
            Prompt = "prompt",
            /// A prompt button tapped again.
            PromptAgain = "prompt:again",
            /// A prompt button without its message.
            PromptNoMessage = "prompt:no-message",
            /// A button of a Generative App (`app::method`), which this hub does not run.
            PromptAppAction = "prompt:app-action",
            /// Cancelled.
            Dismissed = "dismissed",
            /// A queue button of a turn the store does not know.
            QueueUnknown = "queue:unknown",
            /// A setting button the hub does not know.
            SettingUnknown = "setting:unknown",
        }
        /// `reaction:…`: a reaction moved a waiting prompt to `lane` and/or set its skip
        /// (`reaction:unchanged` when neither changed).
        Reaction {
            /// The lane it moved to.
            lane: Option<crate::turns::Lane>,
            /// Skipped (`true`) or kept (`false`).
            skip: Option<bool>,
        },
        /// `ignored:<kind>`: an update of a kind the hub does not handle.
        IgnoredKind(String),
        /// `failed: <error>`: handling failed; marked handled so it is not retried forever.
        Failed(String),
        /// A text this release does not produce (an older hub's), read back as it is.
        Other(String),
    }
}

impl Outcome {
    /// The stored text.
    pub fn text(&self) -> std::borrow::Cow<'static, str> {
        match self {
            Self::Reaction { lane, skip } => {
                let parts: Vec<&str> = lane
                    .map(crate::turns::Lane::as_str)
                    .into_iter()
                    .chain(skip.map(|s| if s { "skip" } else { "keep" }))
                    .collect();
                if parts.is_empty() {
                    "reaction:unchanged".into()
                } else {
                    format!("reaction:{}", parts.join("+")).into()
                }
            }
            Self::IgnoredKind(kind) => {
                let text = format!("ignored:{kind}");
                // A kind named like one of the hub's own outcomes (`edit`) would read back as it.
                if Self::unit(&text).is_some() {
                    format!("ignored:update:{kind}").into()
                } else {
                    text.into()
                }
            }
            Self::Failed(message) => format!("failed: {message}").into(),
            Self::Other(text) => text.clone().into(),
            unit => unit.unit_text().unwrap_or_default().into(),
        }
    }

    /// From its stored text; a text this release does not produce is [`Outcome::Other`], so
    /// every text reads back as it was written.
    pub fn parse(text: &str) -> Self {
        if let Some(o) = Self::unit(text) {
            return o;
        }
        let parsed = if let Some(rest) = text.strip_prefix("reaction:") {
            Self::reaction(rest)
        } else if let Some(message) = text.strip_prefix("failed: ") {
            Some(Self::Failed(message.to_owned()))
        } else {
            let kind = text
                .strip_prefix("ignored:update:")
                .or_else(|| text.strip_prefix("ignored:"));
            kind.map(|kind| Self::IgnoredKind(kind.to_owned()))
        };
        // Only a parse that writes the same text back counts (`reaction:skip+priority` is no
        // text this release writes).
        match parsed {
            Some(o) if o.text() == text => o,
            _ => Self::Other(text.to_owned()),
        }
    }

    fn reaction(rest: &str) -> Option<Self> {
        let (mut lane, mut skip) = (None, None);
        if rest != "unchanged" {
            for part in rest.split('+') {
                match part {
                    "priority" => lane = Some(crate::turns::Lane::Priority),
                    "normal" => lane = Some(crate::turns::Lane::Normal),
                    "skip" => skip = Some(true),
                    "keep" => skip = Some(false),
                    _ => return None,
                }
            }
        }
        Some(Self::Reaction { lane, skip })
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// An update to journal.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    /// `update_id`.
    pub update_id: i64,
    /// Its kind.
    pub kind: &'a str,
    /// Its JSON.
    pub raw: &'a str,
}

/// Stores a `getUpdates` batch and the offset that confirms it, in the caller's transaction:
/// the offset only moves together with the updates it confirms. Returns how many were new
/// (an update already journaled is kept as it was).
pub fn append_batch(
    conn: &Connection,
    batch: &[Incoming<'_>],
    new_offset: i64,
    now_ms: i64,
) -> Result<usize> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO journal(update_id, kind, raw, received_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(update_id) DO NOTHING",
        )
        .map_err(StoreError::sqlite("journaling updates"))?;
    let mut added = 0;
    for u in batch {
        added += stmt
            .execute(params![u.update_id, u.kind, u.raw, now_ms])
            .map_err(StoreError::sqlite("journaling updates"))?;
    }
    let current = kv::get_i64(conn, kv::OFFSET)?.unwrap_or(i64::MIN);
    if new_offset > current {
        kv::set_i64(conn, kv::OFFSET, new_offset)?;
    }
    Ok(added)
}

/// The next `getUpdates` offset, if any update was ever journaled.
pub fn offset(conn: &Connection) -> Result<Option<i64>> {
    kv::get_i64(conn, kv::OFFSET)
}

/// Up to `limit` unhandled updates, oldest first.
pub fn pending(conn: &Connection, limit: usize) -> Result<Vec<Entry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT update_id, kind, raw, received_ms FROM journal
             WHERE handled_ms IS NULL ORDER BY update_id LIMIT ?1",
        )
        .map_err(StoreError::sqlite("reading the journal"))?;
    let rows = stmt
        .query_map([limit as i64], |r| {
            Ok(Entry {
                update_id: r.get(0)?,
                kind: r.get(1)?,
                raw: r.get(2)?,
                received_ms: r.get(3)?,
            })
        })
        .map_err(StoreError::sqlite("reading the journal"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::sqlite("reading the journal"))
}

/// Marks an update handled with its outcome. Handling one twice is a broken invariant and an
/// error (the caller's transaction then rolls back).
pub fn mark_handled(
    conn: &Connection,
    update_id: i64,
    outcome: &Outcome,
    now_ms: i64,
) -> Result<()> {
    let changed = conn
        .exec(
            "UPDATE journal SET handled_ms = ?2, outcome = ?3 WHERE update_id = ?1 AND handled_ms IS NULL",
            params![update_id, now_ms, outcome],
        )
        .map_err(StoreError::sqlite("marking an update handled"))?;
    if changed != 1 {
        return Err(StoreError::Corrupt(format!(
            "update {update_id} is not pending in the journal (handled twice?)"
        )));
    }
    Ok(())
}

/// How an update was handled: `(handled_ms, outcome)`, `None` while pending or unknown.
pub fn outcome(conn: &Connection, update_id: i64) -> Result<Option<(i64, Outcome)>> {
    conn.row(
        "SELECT handled_ms, outcome FROM journal WHERE update_id = ?1 AND handled_ms IS NOT NULL",
        [update_id],
        |r| {
            Ok((
                r.get(0)?,
                // A handled row always has one; an empty text stands for a missing one.
                r.get::<_, Option<Outcome>>(1)?
                    .unwrap_or_else(|| Outcome::Other(String::new())),
            ))
        },
    )
    .optional()
    .map_err(StoreError::sqlite("reading an outcome"))
}

/// `(pending, handled)`; `handled` includes entries pruned since.
pub fn counts(conn: &Connection) -> Result<(i64, i64)> {
    let (pending, handled): (i64, i64) = conn
        .row(
            "SELECT count(*) FILTER (WHERE handled_ms IS NULL), count(*) FILTER (WHERE handled_ms IS NOT NULL) FROM journal",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(StoreError::sqlite("counting the journal"))?;
    let pruned = kv::get_i64(conn, PRUNED)?.unwrap_or(0);
    Ok((pending, handled + pruned))
}

/// Handled entries pruned so far (`retention`), still counted as handled.
pub(crate) const PRUNED: &str = "journal.pruned_handled";

/// The first unhandled update after `update_id`, if it is journaled already (a handler may
/// look one step ahead: a comment the person sent right before a forward).
pub fn next_after(conn: &Connection, update_id: i64) -> Result<Option<Entry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT update_id, kind, raw, received_ms FROM journal
             WHERE handled_ms IS NULL AND update_id > ?1 ORDER BY update_id LIMIT 1",
        )
        .map_err(StoreError::sqlite("reading the journal"))?;
    let mut rows = stmt
        .query_map([update_id], |r| {
            Ok(Entry {
                update_id: r.get(0)?,
                kind: r.get(1)?,
                raw: r.get(2)?,
                received_ms: r.get(3)?,
            })
        })
        .map_err(StoreError::sqlite("reading the journal"))?;
    rows.next()
        .transpose()
        .map_err(StoreError::sqlite("reading the journal"))
}

#[cfg(test)]
mod tests {
    use super::Outcome;
    use crate::turns::Lane;

    #[test]
    fn every_outcome_reads_back_as_written() {
        let mut texts: Vec<String> = Outcome::UNITS.iter().map(Outcome::to_string).collect();
        texts.extend(
            [
                "reaction:unchanged",
                "reaction:priority",
                "reaction:normal+skip",
                "reaction:keep",
                "ignored:poll_answer",
                "failed: the store is locked",
            ]
            .map(String::from),
        );
        for text in &texts {
            let o = Outcome::parse(text);
            assert!(!matches!(o, Outcome::Other(_)), "{text} is produced");
            assert_eq!(&o.to_string(), text);
        }
        assert_eq!(
            Outcome::parse("reaction:normal+skip"),
            Outcome::Reaction {
                lane: Some(Lane::Normal),
                skip: Some(true)
            }
        );
        // An update kind named like one of the hub's outcomes keeps its own meaning (found by
        // the update fuzzer: a kind `edit` read back as `ignored:edit`, an edit ignored).
        for kind in ["edit", "bot", "malformed"] {
            let o = Outcome::IgnoredKind(kind.into());
            assert_eq!(Outcome::parse(&o.to_string()), o, "{kind}");
        }
        // Texts of older hubs, and ones no parse writes back the same, stay as they are.
        for text in ["turn", "reaction:skip+priority", "reaction:", ""] {
            assert_eq!(Outcome::parse(text), Outcome::Other(text.into()), "{text}");
            assert_eq!(Outcome::parse(text).to_string(), text);
        }
    }
}
