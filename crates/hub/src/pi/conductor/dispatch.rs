//! Dispatch: each ready instance gets its next queued turn, marked `dispatched` in a commit
//! before its prompt (with the turn's photos and the lines that tell pi where it comes from,
//! `pi::preamble`) is written; a turn that waited too long while the hub or its pi was away is
//! held and asked about instead (`stale`); and the extension's footer status of how many turns
//! wait.

use std::sync::atomic::Ordering;

use store::outbox::Purpose;
use store::turns::{self, Turn};
use store::{Connection, StoreError};
use wire::TurnId;

use super::{Conductor, stale};
use crate::assistant::{Settings, TimeInjection, VoiceReply};
use crate::clock::Clock;
use crate::crashpoint;
use crate::db::Durability;
use crate::error::HubError;
use crate::outgoing::outbound;
use crate::outgoing::preview::PreviewMsg;
use crate::outgoing::reactions::Fate;
use crate::outgoing::texts;
use crate::pi::instance::{Command, InstanceId, PromptFile, Transport};
use crate::pi::preamble::{self, Preamble};
use crate::pi::waited::{self, Waited};

impl Conductor {
    /// Gives each ready instance its next queued turn. `true` when a turn left the queue.
    pub(super) async fn dispatch(&mut self) -> Result<bool, HubError> {
        let mut changed = false;
        if !self.live.values().any(|l| l.ready()) {
            return Ok(false);
        }
        // One read for all of them: a pass costs the same with 1 or 200 pi connected, and only
        // a pi with waiting turns gets a dispatching transaction.
        let waiting: std::collections::HashSet<String> = self
            .db
            .read(turns::queued_identities)
            .await?
            .into_iter()
            .collect();
        let ready: Vec<InstanceId> = self
            .live
            .iter()
            .filter(|(_, l)| l.ready() && waiting.contains(&l.identity))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ready {
            changed |= self.dispatch_to(&id).await?;
        }
        Ok(changed)
    }

    /// Gives instance `id` its next queued turn, dropping the skipped ones before it. `true`
    /// when a turn left the queue.
    async fn dispatch_to(&mut self, id: &InstanceId) -> Result<bool, HubError> {
        let Some(l) = self.live.get(id) else {
            return Ok(false);
        };
        let settings = self.assistant.current();
        let taker = Taker {
            identity: l.identity.clone(),
            instance: id.0.clone(),
            pid: l.pid,
            transport: l.transport,
            stale_after: settings.stale_after(),
            clock: self.db.clock().clone(),
        };
        let now = self.db.now_ms();
        let (turn, skipped) = self
            .db
            .write(Durability::BeforeTelling(l.reach), move |tx| {
                take_next(tx, &taker, now)
            })
            .await?;
        if skipped > 0 {
            self.wakes.sender.notify_one();
        }
        let Some(taken) = turn else {
            return Ok(skipped > 0);
        };
        crashpoint::hit(crashpoint::CrashPoint::DispatchAfterCommit);
        self.send_prompt(id, taken, &settings, now).await?;
        Ok(true)
    }

    /// Writes a dispatched turn's prompt to its instance; a prompt that cannot leave puts the
    /// turn back in the queue.
    async fn send_prompt(
        &mut self,
        id: &InstanceId,
        taken: Taken,
        settings: &Settings,
        now: i64,
    ) -> Result<(), HubError> {
        let Taken {
            turn,
            place,
            files,
            waited,
            folded,
        } = taken;
        let Some(l) = self.live.get_mut(id) else {
            return Ok(());
        };
        // Nothing but this task changes `live`, and it did not since the readiness check.
        if crate::never!(
            !l.ready(),
            "turn {} dispatched to {id}, which is not ready (outstanding {:?})",
            turn.id,
            l.outstanding
        ) {
            let n = turn.id;
            self.db
                .write(Durability::OnDisk, move |tx| {
                    turns::requeue(tx, n).map(drop)
                })
                .await?;
            return Ok(());
        }
        let from_voice = files
            .iter()
            .any(|f| matches!(f.kind.as_str(), "voice" | "audio"));
        let prompt_text = turn.prompt();
        let told = self.told_time.get(&l.identity).copied();
        let tell_time = match settings.time_injection {
            TimeInjection::Hidden => false,
            TimeInjection::Always => true,
            TimeInjection::Interval => told.is_none_or(|t| now - t >= settings.time_interval_ms),
        } && !preamble::is_command(&prompt_text);
        if tell_time {
            self.told_time.insert(l.identity.clone(), now);
        }
        let lines = Preamble {
            thread: place.own_topic.then_some(l.label.as_str()),
            time_ms: tell_time.then_some(now),
            waited: Some(waited),
            spoken: match settings.voice_reply {
                VoiceReply::Always => true,
                VoiceReply::Mirror => from_voice,
                VoiceReply::Manual => false,
            },
            from: turn.from_name.as_deref(),
        };
        let named = prompt_files(&files);
        let images = photos_of(files).await;
        let context = lines.context_for(&prompt_text, now);
        let prompt = Command::Prompt {
            turn: TurnId::from_number(turn.id),
            text: prompt_text,
            context,
            images,
            files: named,
        };
        if l.commands.try_send(prompt).is_err() {
            // The link is closing or stuck: the prompt never left.
            let n = turn.id;
            self.db
                .write(Durability::OnDisk, move |tx| {
                    turns::requeue(tx, n).map(drop)
                })
                .await?;
            return Ok(());
        }
        // Busy-ness comes from pi's own events; `outstanding` alone keeps a second turn out.
        l.outstanding = Some(turn.id);
        l.answered_before = None;
        let _ = self.previews.try_send(PreviewMsg::Begin {
            turn: turn.id,
            chat: place.chat,
            thread: place.thread,
        });
        self.bind_stop_button(turn.id);
        tracing::debug!(instance = %id, turn = turn.id, "dispatched");
        crate::latency::mark(crate::latency::Step::Dispatched, turn.id);
        crashpoint::hit(crashpoint::CrashPoint::DispatchAfterSend);
        // After the prompt left: the reaction is a message to the reactions task, no call here.
        if settings.reactions {
            // The messages folded into it show what becomes of it.
            self.fates.follow(turn.id, folded);
            self.fates
                .show(turn.id, turn.chat_id, turn.message_id, Fate::Running);
        }
        // The link's task, just woken on this thread, writes the prompt before the
        // conductor's next store call holds the thread.
        tokio::task::yield_now().await;
        Ok(())
    }

    /// Footer status of extension instances: connected, whether the hub reaches Telegram, and
    /// how many messages wait for them.
    pub(super) async fn update_statuses(&mut self) -> Result<(), HubError> {
        if !self.live.values().any(|l| l.transport == Transport::Shim) {
            return Ok(());
        }
        let down_since = match self.wakes.telegram_down_since.load(Ordering::SeqCst) {
            0 => None,
            since => Some(since),
        };
        let counts = self.db.read(turns::queued_counts).await?;
        for l in self
            .live
            .values_mut()
            .filter(|l| l.transport == Transport::Shim)
        {
            let queued = counts
                .iter()
                .find(|(i, _)| i.as_deref() == Some(l.identity.as_str()))
                .map_or(0, |(_, n)| *n);
            let status = texts::footer(queued, down_since);
            if l.last_status.as_deref() != Some(status.as_str()) {
                let _ = l
                    .commands
                    .try_send(Command::SetStatus(Some(status.clone())));
                l.last_status = Some(status);
            }
        }
        Ok(())
    }
}

/// The instance a turn is dispatched to, as the store records it, and what dispatch judges
/// its turns by.
struct Taker {
    identity: String,
    instance: String,
    pid: Option<i64>,
    transport: Transport,
    /// `staleAfterMinutes` in ms (`None`: the guard is off).
    stale_after: Option<i64>,
    /// For the buttons of a stale question.
    clock: Clock,
}

/// A turn marked dispatched, with where its answer goes, its files (and those of the turns
/// folded into it), how long it waited, and the turns folded into it (`(turn, chat,
/// message)`: their messages show its fate).
struct Taken {
    turn: Turn,
    place: outbound::Place,
    files: Vec<store::files::File>,
    waited: Waited,
    folded: Vec<(i64, i64, Option<i64>)>,
}

/// The `error` of a waiting turn that went to pi inside the person's next message, after an
/// `/abort` (`state::Fold`).
pub(crate) const FOLDED: &str = "went to pi with the next message, after an abort";

/// The dispatching transaction: the instance's next queued turn marked dispatched, the
/// skipped ones before it dropped, the stale ones before it held and asked about. Returns it
/// and how many were dropped or held (each wrote a message).
fn take_next(
    tx: &Connection,
    taker: &Taker,
    now: i64,
) -> Result<(Option<Taken>, usize), StoreError> {
    let mut skipped = 0;
    let attached = store::instances::connected_ms(tx, &taker.instance)?.unwrap_or(now);
    let left = store::instances::left_before(tx, &taker.identity, attached)?;
    let judge = |t: &Turn| {
        waited::judge(
            waited::Times {
                sent_ms: t.sent_ms,
                created_ms: t.created_ms,
                attached_ms: attached,
                left_ms: left,
            },
            now,
        )
    };
    if let Some(fold) = crate::state::fold_of(tx, &taker.identity)? {
        match turns::cut_short(tx, fold.aborted)? {
            Some(true) => return take_folding(tx, taker, fold, &judge, now),
            // Still with a pi (one that left and is not given up on yet): wait.
            None => return Ok((None, 0)),
            // Over before the abort reached pi, or back in the queue (pi never had it):
            // nothing was aborted, the queue runs on.
            Some(false) => crate::state::clear_fold(tx, &taker.identity)?,
        }
    }
    let (t, waited) = loop {
        let Some(t) = turns::next_queued(tx, &taker.identity)? else {
            return Ok((None, skipped));
        };
        if t.skip {
            if !drop_skipped(tx, &t, now)? {
                return Ok((None, skipped));
            }
            skipped += 1;
            continue;
        }
        let waited = judge(&t);
        if t.held.is_none() && waited.is_stale(taker.stale_after) {
            // `next_queued` read it queued in this transaction, and never returns a held turn.
            let held = stale::hold(tx, &taker.clock, &t, &taker.identity, now)?;
            if crate::never!(!held, "queued turn {} could not be held", t.id) {
                return Ok((None, skipped));
            }
            skipped += 1;
            continue;
        }
        break (t, waited);
    };
    Ok((
        Some(mark_taken(tx, taker, t, waited, Vec::new(), now)?),
        skipped,
    ))
}

/// `t` marked dispatched to the taker, with where its answer goes and its files (and those of
/// `folded`, before its own).
fn mark_taken(
    tx: &Connection,
    taker: &Taker,
    t: Turn,
    waited: Waited,
    folded: Vec<Turn>,
    now: i64,
) -> Result<Taken, StoreError> {
    turns::mark_dispatched(tx, t.id, &taker.instance, taker.pid, taker.transport, now)?;
    let place = outbound::place_of_turn(tx, &t, &taker.identity)?;
    // Read here rather than after the commit: one store round trip less between the person's
    // message and pi.
    let mut files = Vec::new();
    for f in &folded {
        files.extend(store::files::of_turn(tx, f.id)?);
    }
    files.extend(store::files::of_turn(tx, t.id)?);
    crashpoint::hit(crashpoint::CrashPoint::DispatchBeforeCommit);
    Ok(Taken {
        turn: t,
        place,
        files,
        waited,
        folded: folded
            .iter()
            .map(|f| (f.id, f.chat_id, f.message_id))
            .collect(),
    })
}

/// Dispatch while the queue waits after an `/abort` (`state::Fold`): nothing, until the
/// person's next message (the first turn made after the abort, in the queue's order) is
/// ready; then it goes to pi with the prompts that waited behind the aborted turn before its
/// own words (their files too), those turns leave the queue (`FOLDED`), and the queue runs on
/// as usual. All in the dispatching transaction, the prompt written into the turn: a prompt
/// sent again after a restart is the same. A skipped prompt among them is dropped as ever; one
/// asked about (stale) keeps its question; one whose files are on their way holds the fold
/// until they are settled. A command the person sends meanwhile runs as it is, and the queue
/// waits on.
fn take_folding(
    tx: &Connection,
    taker: &Taker,
    fold: crate::state::Fold,
    judge: &dyn Fn(&Turn) -> Waited,
    now: i64,
) -> Result<(Option<Taken>, usize), StoreError> {
    let queue = turns::queue_of(tx, &taker.identity)?;
    let open = |t: &&Turn| t.held != Some(turns::Held::Asked);
    let Some(next) = queue
        .iter()
        .filter(open)
        .find(|t| t.id > fold.upto && t.ready && !t.skip)
        .cloned()
    else {
        return Ok((None, 0));
    };
    let waited = judge(&next);
    if crate::pi::preamble::is_command(&next.prompt()) {
        return Ok((
            Some(mark_taken(tx, taker, next, waited, Vec::new(), now)?),
            0,
        ));
    }
    let behind: Vec<Turn> = queue
        .iter()
        .filter(open)
        .filter(|t| t.id <= fold.upto)
        .cloned()
        .collect();
    if behind.iter().any(|t| !t.ready) {
        return Ok((None, 0));
    }
    let mut skipped = 0;
    let mut folded = Vec::new();
    for t in behind {
        if t.skip {
            if drop_skipped(tx, &t, now)? {
                skipped += 1;
            }
        } else if turns::cancel(tx, t.id, FOLDED, now)? {
            folded.push(t);
        }
    }
    crate::state::clear_fold(tx, &taker.identity)?;
    let mut next = next;
    if !folded.is_empty() {
        let earlier: Vec<String> = folded.iter().map(Turn::prompt).collect();
        let text = texts::folded_prompt(&earlier, &next.text);
        // `next_queued`-like: it is queued in this transaction.
        turns::edit_text(tx, next.id, &text)?;
        next.text = text;
    }
    Ok((
        Some(mark_taken(tx, taker, next, waited, folded, now)?),
        skipped,
    ))
}

/// A skipped turn dropped without a model turn, and the person told. `false` only when the
/// store would not drop it (an invariant broken: dispatch stops here rather than read the
/// same turn again).
fn drop_skipped(tx: &Connection, t: &Turn, now: i64) -> Result<bool, StoreError> {
    let dropped = turns::drop_skipped(tx, t.id, now)?;
    // `next_queued` read it queued in this transaction.
    if crate::never!(
        !dropped,
        "skipped turn {} read {} could not be dropped",
        t.id,
        t.state.as_str()
    ) {
        return Ok(false);
    }
    outbound::text(
        tx,
        &outbound::Text {
            chat: t.chat_id,
            thread: t.thread_id,
            text: &texts::skipped(&t.text),
            reply_to: t.message_id,
            markup: None,
            purpose: &Purpose::Skipped { turn: t.id },
            source_update_id: t.source_update_id,
            // The only trace of the message that was dropped.
            resend: true,
        },
        now,
    )?;
    Ok(true)
}

/// The largest photo handed to pi as an image (larger ones stay files on disk).
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// At most this much image data in one prompt (the extension reads hub lines up to 64 MiB;
/// base64 makes 32 MB about 43).
const MAX_PROMPT_IMAGE_BYTES: u64 = 32 * 1024 * 1024;

/// The saved files of a prompt, as it names them.
fn prompt_files(saved: &[store::files::File]) -> Vec<PromptFile> {
    saved
        .iter()
        .filter(|f| f.state == store::files::FileState::Saved)
        .filter_map(|f| {
            let path = std::path::PathBuf::from(f.path.as_deref()?);
            let name = f
                .name
                .clone()
                .or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))?;
            Some(PromptFile { path, name })
        })
        .collect()
}

/// The photos of a turn, as images for pi's prompt. A photo that cannot be read (removed,
/// too large) is left out: the prompt still names its file.
async fn photos_of(saved: Vec<store::files::File>) -> Vec<wire::ImagePart> {
    use base64::Engine as _;
    let mut images = Vec::new();
    let mut total = 0u64;
    for f in saved
        .into_iter()
        .filter(|f| f.kind == "photo" && f.state == store::files::FileState::Saved)
    {
        let Some(path) = f.path else { continue };
        let size = tokio::fs::metadata(&path)
            .await
            .map_or(u64::MAX, |m| m.len());
        let fits = size <= MAX_IMAGE_BYTES && total + size <= MAX_PROMPT_IMAGE_BYTES;
        if fits {
            total += size;
        }
        match tokio::fs::read(&path).await {
            Ok(bytes) if fits => images.push(wire::ImagePart {
                kind: "image".into(),
                // What the bytes are, whatever was declared (Telegram photos are JPEG).
                mime_type: sniff_image(&bytes)
                    .map(str::to_owned)
                    .or(f.mime)
                    .unwrap_or_else(|| "image/jpeg".into()),
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
            Ok(_) => tracing::info!(file = f.id, "a photo too large to hand to pi as an image"),
            Err(e) => tracing::warn!(file = f.id, error = %e, "a photo could not be read for pi"),
        }
    }
    images
}

/// The image type of `bytes` by their signature.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => Some("image/webp"),
        _ => None,
    }
}

impl Conductor {
    /// The working card's ⏹ Stop for `turn`, bound to the owner in a commit of its own, after
    /// the prompt left (the card shows only after [`WORKING_CARD_AFTER`]; nothing on the way to
    /// pi waits for it).
    ///
    /// [`WORKING_CARD_AFTER`]: crate::outgoing::preview::WORKING_CARD_AFTER
    fn bind_stop_button(&self, turn: i64) {
        let db = self.db.clone();
        let previews = self.previews.clone();
        tokio::spawn(async move {
            let now = db.now_ms();
            let clock = db.clock().clone();
            let bound = db
                .write(crate::db::Durability::Lazy, move |tx| {
                    let Some(owner) = store::kv::get_i64(tx, store::kv::OWNER)? else {
                        return Ok(None);
                    };
                    let ttl = crate::outgoing::outbound::BUTTON_TTL_MS;
                    let stop = crate::buttons::Button::Stop { turn };
                    let button = crate::outgoing::outbound::button(
                        tx, &clock, owner, "⏹ Stop", &stop, now, ttl,
                    )?;
                    Ok(Some(serde_json::json!({ "inline_keyboard": [[button]] })))
                })
                .await;
            match bound {
                Ok(Some(markup)) => {
                    let _ = previews.try_send(PreviewMsg::StopButton { turn, markup });
                }
                Ok(None) => {}
                Err(e) => tracing::debug!(turn, error = %e, "the stop button was not bound"),
            }
        });
    }
}
