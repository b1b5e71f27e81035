//! pi's Telegram tools, carried out for the instance whose model called them:
//!
//! - `telegram_attach(paths, caption?, chat_id?, thread_id?)`: files from pi's machine to the
//!   person. During a Telegram turn they go right after that turn's answer; outside one, now,
//!   to the instance's chat or topic. The turn is the one pi names in the call (`null`: a run
//!   typed in pi, none; a headless child names none: the one the instance works on), and
//!   whether it still waits for its answer is decided in the transaction that records the
//!   files: a turn answered (or interrupted) meanwhile has taken its files already, so these go
//!   now, in its place, after its answer. Each file is copied when the tool is called (pi may
//!   change or delete it afterwards) into a name of its own in `out/`, off the runtime,
//!   counting the bytes; a missing file, anything but a regular file (a folder, a FIFO, a
//!   device), a file of `/proc` or `/sys`, or one over the limit (as it says, or as it grows
//!   while copied) is a tool error the model sees, and no copy of it stays. The sender removes
//!   a copy once its message is settled (`sender`), retention what a crash left behind
//!   (`retention`).
//! - `telegram_message(text, chat_id?, thread_id?, thread?)`: Markdown sent now (a progress
//!   note during a turn arrives before the answer), to the instance's place or, by name, to
//!   another live instance's topic. `telegram_button` comments in it become its buttons.
//!
//! The work runs in a task of its own: copying files never holds the conductor.

use crate::db::Durability;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use store::outbox::Purpose;
use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError, attachments, kv};
use tokio::sync::Notify;

use super::Conductor;
use crate::assistant::Watched;
use crate::db::Db;
use crate::names::label_of;
use crate::outgoing::markup;
use crate::outgoing::outbound::{self, OutFile, Place};
use crate::pi::inbound::{limit_text, names, prompt::human_size};
use crate::pi::instance::{InstanceId, ToolCall, Uploaded};

/// Where the tools keep what they send, and how much they send.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    /// Copies of files being sent (created 0700).
    pub out_dir: PathBuf,
    /// Largest file sent.
    pub max_bytes: u64,
}

/// Telegram's caption limit.
const CAPTION_CHARS: usize = 1024;

/// What a tool call needs, taken from the conductor's state when it arrives.
struct Job {
    db: Db,
    sender: Arc<Notify>,
    settings: Arc<ToolSettings>,
    assistant: Arc<Watched>,
    identity: String,
    cwd: String,
    /// What pi says of the call's run.
    said: Said,
    /// The Telegram turn the instance was working on when the call arrived.
    outstanding: Option<i64>,
}

/// What a tool call says of the run that made it (`turn_id`).
#[derive(Debug, Clone, Copy)]
enum Said {
    /// Nothing (a headless child's tools): the turn is the instance's.
    Nothing,
    /// A run typed in pi, while a Telegram turn may wait in pi's queue.
    Local,
    /// Telegram turn number n.
    Turn(i64),
}

impl Said {
    fn of(turn: Option<&Option<wire::TurnId>>) -> Self {
        match turn {
            None => Self::Nothing,
            Some(None) => Self::Local,
            Some(Some(t)) => t.number().map_or(Self::Nothing, Self::Turn),
        }
    }
}

/// Where `telegram_attach`'s files went.
enum Recorded {
    /// Waiting for the answer of the turn, which is still open.
    WithAnswer,
    /// Queued now, in the turn's place: it was answered (or interrupted) before they could
    /// wait for its answer.
    AfterAnswer,
    /// Queued now: no turn, or a place pi chose.
    Now,
}

impl Conductor {
    /// Carries out `call` for instance `id` in a task of its own.
    pub(super) fn tool(&self, id: &InstanceId, call: ToolCall) {
        let Some(l) = self.live.get(id) else {
            let _ = call
                .reply
                .send(Err("this pi is not connected to Telegram any more".into()));
            return;
        };
        let job = Job {
            db: self.db.clone(),
            sender: self.wakes.sender.clone(),
            settings: self.tools.clone(),
            assistant: self.assistant.clone(),
            identity: l.identity.clone(),
            cwd: l.cwd.clone(),
            said: Said::of(call.turn.as_ref()),
            outstanding: l.outstanding,
        };
        tokio::spawn(async move {
            let result = match call.tool.as_str() {
                "telegram_attach" => job.attach(&call.args, call.uploaded).await,
                "telegram_message" => job.message(&call.args).await,
                other => Err(format!("{other} is not a tool of pi-telegram")),
            };
            if let Err(e) = &result {
                tracing::info!(tool = %call.tool, error = %e, "a tool call failed");
            }
            let _ = call.reply.send(result);
        });
    }

    /// The instance whose child connects its tools with `token`.
    pub(super) fn tools_owner(&self, token: &str) -> Option<InstanceId> {
        self.live
            .iter()
            .find(|(_, l)| l.tools_token.as_deref() == Some(token))
            .map(|(id, _)| id.clone())
    }
}

fn mime_of(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "pdf" => "application/pdf",
        "txt" | "log" | "md" => "text/plain",
        "json" => "application/json",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "zip" => "application/zip",
        "mp3" => "audio/mpeg",
        "ogg" | "opus" => "audio/ogg",
        "mp4" => "video/mp4",
        _ => return None,
    })
}

/// An explicit `chat_id`/`thread_id`: only the owner's own chat (and its topics).
fn explicit_place(tx: &Connection, args: &Value, owner: i64) -> Result<Option<Place>, String> {
    let chat = args.get("chat_id").and_then(Value::as_i64);
    let thread = args.get("thread_id").and_then(Value::as_i64);
    if chat.is_none() && thread.is_none() {
        return Ok(None);
    }
    if chat.is_some_and(|c| c != owner) {
        return Err(
            "pi-telegram sends only to the person it is paired with: leave chat_id out".into(),
        );
    }
    if let Some(t) = thread
        && store::threads::binding_by_thread(tx, owner, t)
            .map_err(|e| e.to_string())?
            .is_none()
    {
        return Err(format!("thread {t} is not one of pi-telegram's threads"));
    }
    Ok(Some(Place {
        chat: owner,
        thread,
        waiting: false,
        reply_to: None,
        own_topic: thread.is_some(),
    }))
}

impl Job {
    /// `telegram_attach`: the files copied, then recorded to go with the turn's answer or
    /// queued now. Returns what the model is told.
    async fn attach(&self, args: &Value, uploaded: Vec<Uploaded>) -> Result<String, String> {
        // Named files: what a pi on another machine uploaded (its own names), else the paths
        // pi gave, relative to its folder.
        let sources: Vec<(PathBuf, Option<String>)> = if uploaded.is_empty() {
            args.get("paths")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|p| (Path::new(&self.cwd).join(p), None))
                .collect()
        } else {
            uploaded
                .iter()
                .map(|u| (u.path.clone(), Some(u.name.clone())))
                .collect()
        };
        if sources.is_empty() {
            return Err("paths must list at least one file".into());
        }
        let caption: Option<String> = args
            .get("caption")
            .and_then(Value::as_str)
            // pi's comments never show, in a caption either.
            .map(|c| {
                markup::visible(c)
                    .chars()
                    .take(CAPTION_CHARS)
                    .collect::<String>()
            })
            .filter(|c| !c.trim().is_empty());
        let (out_dir, max, stamp) = (
            self.settings.out_dir.clone(),
            self.settings.max_bytes,
            self.db.now_ms(),
        );
        // Reading files may block for as long as the disk (or a network mount) takes: off the
        // runtime's threads. Uploads are the call's: gone once copied, whatever the outcome.
        let files = tokio::task::spawn_blocking(move || {
            let copied = copy_all(&sources, &out_dir, max, stamp);
            for u in &uploaded {
                let _ = std::fs::remove_file(&u.path);
            }
            copied
        })
        .await
        .map_err(|e| format!("the copy failed: {e}"))??;
        let listed = files
            .iter()
            .map(|f| format!("{} ({})", f.name, human_size(f.size)))
            .collect::<Vec<_>>()
            .join(", ");
        let filing = Filing {
            identity: self.identity.clone(),
            said: self.said,
            outstanding: self.outstanding,
            args: args.clone(),
            files: files.clone(),
            caption,
        };
        let now = self.db.now_ms();
        let went = self
            .db
            .write_as(
                Durability::OnDisk,
                move |tx| -> Result<Recorded, CallFailed> { record_files(tx, &filing, now) },
            )
            .await;
        let went = match went {
            Ok(went) => went,
            Err(e) => {
                // Nothing refers to the copies: they would only wait for retention.
                forget_copies(&files).await;
                return Err(e.to_string());
            }
        };
        match went {
            Recorded::WithAnswer => Ok(format!(
                "Will be sent to Telegram right after your answer: {listed}."
            )),
            Recorded::AfterAnswer => {
                self.sender.notify_one();
                Ok(format!(
                    "Sent to Telegram after your answer, which was on its way already: {listed}."
                ))
            }
            Recorded::Now => {
                self.sender.notify_one();
                Ok(format!("Sent to Telegram: {listed}."))
            }
        }
    }

    async fn message(&self, args: &Value) -> Result<String, String> {
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or("text must be a non-empty message")?
            .to_owned();
        let thread_name = args
            .get("thread")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        let extracted = markup::extract(&text);
        // What pi learns of its refused action comments (the log and `status` get no words).
        let refused: Vec<String> = extracted.rejected.iter().map(|r| r.to_string()).collect();
        if crate::outgoing::texts::trim_invisible(&extracted.text).is_empty() {
            markup_refusals(&self.db, &extracted.rejected).await;
            return Err(format!(
                "nothing to send: the text is only <!-- --> comments, which Telegram never shows{}",
                listed_refusals(&refused)
            ));
        }
        let rendering = self.assistant.current().rendering;
        let identity = self.identity.clone();
        let args = args.clone();
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let to = self
            .db
            .write_as(
                Durability::OnDisk,
                move |tx| -> Result<String, CallFailed> {
                    let owner = paired_owner(tx)?;
                    let (place, speaker) = match (&thread_name, explicit_place(tx, &args, owner)) {
                        (_, Err(why)) => return Err(CallFailed::Refused(why)),
                        (Some(name), _) => {
                            let target = named_instance(tx, name)?;
                            (outbound::place_of_instance(tx, &target, owner)?, target)
                        }
                        (None, Ok(Some(place))) => (place, identity.clone()),
                        (None, Ok(None)) => (
                            outbound::place_of_instance(tx, &identity, owner)?,
                            identity.clone(),
                        ),
                    };
                    crate::outgoing::rejections::record(
                        tx,
                        now,
                        "telegram_message",
                        None,
                        &extracted.rejected,
                    )?;
                    let markup = crate::outgoing::menu::prompt_buttons(
                        tx,
                        &clock,
                        owner,
                        &speaker,
                        &extracted.buttons,
                        now,
                    )?;
                    outbound::enqueue_markdown_with(
                        tx,
                        place,
                        &extracted.text,
                        rendering,
                        markup,
                        None,
                        outbound::Meta {
                            purpose: &Purpose::Message {
                                identity: identity.clone(),
                                at: now,
                            },
                            source_update_id: None,
                            identity: &speaker,
                            turn_id: None,
                            resend: true,
                        },
                        now,
                    )?;
                    Ok(label_of(&speaker))
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        self.sender.notify_one();
        Ok(format!(
            "Sent to Telegram ({to}).{}",
            listed_refusals(&refused)
        ))
    }
}

/// Keeps refused action comments of a call that sends nothing (one that sends keeps them in
/// its own transaction); a store that fails here loses only that note.
async fn markup_refusals(db: &crate::db::Db, rejected: &[markup::Rejected]) {
    if rejected.is_empty() {
        return;
    }
    let rejected = rejected.to_vec();
    let now = db.now_ms();
    let kept = db
        .write(Durability::Lazy, move |tx| {
            crate::outgoing::rejections::record(tx, now, "telegram_message", None, &rejected)
        })
        .await;
    if let Err(e) = kept {
        tracing::warn!(error = %e, "refused action comments could not be kept for status");
    }
}

/// The refused action comments, told to pi after what the call did.
fn listed_refusals(refused: &[String]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    format!(
        " Refused action comments (removed, they do nothing): {}.",
        refused.join("; ")
    )
}

/// `telegram_attach`'s copies, as the transaction that records them needs the call.
struct Filing {
    identity: String,
    said: Said,
    outstanding: Option<i64>,
    /// The call's arguments (an explicit place).
    args: Value,
    files: Vec<OutFile>,
    caption: Option<String>,
}

/// Records where `telegram_attach`'s copies go: a place pi chose, the turn's answer if it
/// still waits for it, after the answer that took the turn's files already, or the
/// instance's place.
fn record_files(tx: &Connection, f: &Filing, now: i64) -> Result<Recorded, CallFailed> {
    let (files, caption, identity) = (&f.files, f.caption.as_deref(), f.identity.as_str());
    let owner = paired_owner(tx)?;
    let explicit = explicit_place(tx, &f.args, owner).map_err(CallFailed::Refused)?;
    if let Some(place) = explicit {
        enqueue_now(tx, place, files, caption, identity, None, now)?;
        return Ok(Recorded::Now);
    }
    // Read in this transaction: the turn's answer, queued in another, takes the files
    // recorded before it and none after it.
    match call_turn(tx, f.said, f.outstanding, identity)? {
        Some(t) if matches!(t.state, TurnState::Dispatched | TurnState::Acked) => {
            for (i, file) in files.iter().enumerate() {
                attachments::create(
                    tx,
                    &attachments::NewAttachment {
                        turn_id: t.id,
                        path: &file.path,
                        name: &file.name,
                        mime: file.mime.as_deref(),
                        size: file.size,
                        caption: caption.filter(|_| i == 0),
                    },
                    now,
                )?;
            }
            Ok(Recorded::WithAnswer)
        }
        Some(t) => {
            // Where its answer went, after it (rows of a place go in order).
            let place = Place {
                reply_to: None,
                ..outbound::place_of_turn(tx, &t, identity)?
            };
            enqueue_now(tx, place, files, caption, identity, Some(t.id), now)?;
            Ok(Recorded::AfterAnswer)
        }
        None => {
            let place = outbound::place_of_instance(tx, identity, owner)?;
            enqueue_now(tx, place, files, caption, identity, None, now)?;
            Ok(Recorded::Now)
        }
    }
}

/// The turn a call belongs to: the one pi names when it is this identity's (pi's own view of
/// its run, right however late the call reaches the conductor: the link hands calls over in a
/// task of their own), none for a run typed in pi, else the one the instance was working on
/// when the call arrived.
fn call_turn(
    tx: &Connection,
    said: Said,
    outstanding: Option<i64>,
    identity: &str,
) -> Result<Option<Turn>, StoreError> {
    match said {
        Said::Local => return Ok(None),
        Said::Turn(n) => match turns::get(tx, n)? {
            Some(t) if t.identity.as_deref() == Some(identity) => return Ok(Some(t)),
            _ => tracing::debug!(turn = n, "a tool call named a turn that is not its pi's"),
        },
        Said::Nothing => {}
    }
    outstanding.map_or(Ok(None), |n| turns::get(tx, n))
}

/// `files` queued to go now, at `place`.
fn enqueue_now(
    tx: &Connection,
    place: Place,
    files: &[OutFile],
    caption: Option<&str>,
    identity: &str,
    turn: Option<i64>,
    now: i64,
) -> Result<usize, StoreError> {
    let purpose = match turn {
        Some(turn) => Purpose::AttachNow { turn, at: now },
        None => Purpose::AttachOf {
            identity: identity.to_owned(),
            at: now,
        },
    };
    outbound::enqueue_files(
        tx,
        place,
        files,
        caption,
        outbound::Meta {
            purpose: &purpose,
            // No cause to be unique for: two calls in one millisecond are two sends.
            source_update_id: None,
            identity,
            turn_id: turn,
            resend: false,
        },
        now,
    )
}

/// The files waiting for turn `turn_id`'s answer, marked queued, and the caption pi gave them.
pub(super) fn take_waiting(
    tx: &Connection,
    turn_id: i64,
) -> Result<(Vec<OutFile>, Option<String>), StoreError> {
    let waiting = attachments::take_waiting(tx, turn_id)?;
    let caption = waiting.iter().find_map(|a| a.caption.clone());
    let files = waiting
        .into_iter()
        .map(|a| OutFile {
            path: a.path,
            name: a.name,
            mime: a.mime,
            size: a.size,
        })
        .collect();
    Ok((files, caption))
}

/// In the transaction that interrupts turn `t` of `identity`: the files pi attached during it,
/// which waited for an answer that may never come, go now, in its place (a late answer comes
/// after them).
pub(super) fn send_waiting(
    tx: &Connection,
    t: &Turn,
    identity: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (files, caption) = take_waiting(tx, t.id)?;
    if files.is_empty() {
        return Ok(());
    }
    let place = Place {
        reply_to: None,
        ..outbound::place_of_turn(tx, t, identity)?
    };
    outbound::enqueue_files(
        tx,
        place,
        &files,
        caption.as_deref(),
        outbound::Meta {
            purpose: &Purpose::AttachInterrupted { turn: t.id },
            source_update_id: t.source_update_id,
            identity,
            turn_id: Some(t.id),
            resend: false,
        },
        now,
    )?;
    Ok(())
}

/// Checks every file, then copies each into `out_dir` (`<stamp>-<n>-<safe name>`): one bad path
/// fails the whole call, and then no copy is left behind.
fn copy_all(
    sources: &[(PathBuf, Option<String>)],
    out_dir: &Path,
    max: u64,
    stamp: i64,
) -> Result<Vec<OutFile>, String> {
    for (path, _) in sources {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{}: no such file", path.display()),
            _ => format!("{} could not be read: {e}", path.display()),
        })?;
        sendable(path, &meta, max)?;
    }
    make_private_dir(out_dir).map_err(|e| format!("cannot prepare the upload: {e}"))?;
    let mut files: Vec<OutFile> = Vec::new();
    for (i, (path, given)) in sources.iter().enumerate() {
        let name = given.clone().unwrap_or_else(|| {
            path.file_name()
                .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned())
        });
        // The type from the name pi's machine knows it by (an upload's own name says nothing).
        let typed = Path::new(&name);
        // Numbered: two files of one call may have the same name.
        let stem = format!(
            "{stamp}-{i}-{}",
            names::safe_name(Some(&name), "file", mime_of(typed))
        );
        match copy_one(path, out_dir, &stem, max) {
            Ok((copy, size)) => files.push(OutFile {
                path: copy.display().to_string(),
                mime: mime_of(typed).map(str::to_owned),
                name,
                size: size as i64,
            }),
            Err(why) => {
                for f in &files {
                    let _ = std::fs::remove_file(&f.path);
                }
                return Err(why);
            }
        }
    }
    Ok(files)
}

/// Whether what `path` resolves to (`meta`) can be sent: a regular file within `max`.
fn sendable(path: &Path, meta: &std::fs::Metadata, max: u64) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    let other = if kind.is_dir() {
        return Err(format!(
            "{} is a folder; attach the files in it",
            path.display()
        ));
    } else if kind.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else if !kind.is_file() {
        Some("not a file")
    } else {
        None
    };
    if let Some(other) = other {
        return Err(format!(
            "{} is {other}, not a regular file: only files are sent",
            path.display()
        ));
    }
    if meta.len() > max {
        return Err(over_limit(path, meta.len(), max));
    }
    Ok(())
}

fn over_limit(path: &Path, size: u64, max: u64) -> String {
    format!(
        "{} is {}, over the {} limit for files sent to Telegram",
        path.display(),
        human_size(size as i64),
        limit_text(max)
    )
}

/// Copies `path` into a new file of `dir` named `stem` (or `<n>-stem` when another call took
/// that name in the same millisecond: every copy is its row's alone, the sender removes it once
/// that row is settled), at most `max` bytes: a file may report one size and hold more (it
/// grows while it is copied; a kernel file says 0 and never ends). On any failure the partial
/// copy is removed.
fn copy_one(path: &Path, dir: &Path, stem: &str, max: u64) -> Result<(PathBuf, u64), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = |e: std::io::Error| format!("{} could not be read: {e}", path.display());
    // Non-blocking: a FIFO put in the file's place since the check must not hang the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(unreadable)?;
    // What was opened, not what the path named a moment ago.
    sendable(path, &file.metadata().map_err(unreadable)?, max)?;
    if let Some(fs) = kernel_file_system(&file) {
        return Err(format!(
            "{} is a file of {fs}, whose size says nothing of what it holds: it is not sent",
            path.display()
        ));
    }
    let (copy, mut out) =
        new_file(dir, stem).map_err(|e| format!("cannot prepare the upload: {e}"))?;
    let copy = copy.as_path();
    let copied = copy_at_most(file, &mut out, max);
    drop(out);
    match copied {
        Ok(Some(size)) => Ok((copy.to_owned(), size)),
        Ok(None) => {
            let _ = std::fs::remove_file(copy);
            Err(format!(
                "{} grew past the {} limit for files sent to Telegram while it was copied",
                path.display(),
                limit_text(max)
            ))
        }
        Err(e) => {
            let _ = std::fs::remove_file(copy);
            Err(unreadable(e))
        }
    }
}

/// A file of `dir` made now, 0600, named `stem` or, when that is taken, `<n>-stem`.
fn new_file(dir: &Path, stem: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    for n in 0..1000 {
        let to = if n == 0 {
            dir.join(stem)
        } else {
            dir.join(format!("{n}-{stem}"))
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&to)
        {
            Ok(f) => return Ok((to, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("no free name for {stem} in {}", dir.display()),
    ))
}

/// Copies `from` into `to`: the number of bytes, or `None` as soon as there are more than
/// `max`.
fn copy_at_most(
    from: impl std::io::Read,
    to: &mut impl std::io::Write,
    max: u64,
) -> std::io::Result<Option<u64>> {
    let copied = std::io::copy(&mut from.take(max.saturating_add(1)), to)?;
    Ok((copied <= max).then_some(copied))
}

/// The kernel's file system `file` lives on when it is one whose files report sizes unrelated
/// to their content (`/proc`, `/sys` and their kin).
#[cfg(target_os = "linux")]
// The magic's type is i64 here, u32 or i32 on other targets.
#[allow(clippy::unnecessary_cast)]
fn kernel_file_system(file: &std::fs::File) -> Option<&'static str> {
    let magic = rustix::fs::fstatfs(file).ok()?.f_type as i64;
    Some(match magic {
        m if m == rustix::fs::PROC_SUPER_MAGIC as i64 => "/proc",
        0x6265_6572 => "/sys",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7365_6373 => "securityfs",
        _ => return None,
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel_file_system(_file: &std::fs::File) -> Option<&'static str> {
    None
}

/// Why a tool call's transaction did not record it; either way it rolled back.
#[derive(Debug, thiserror::Error)]
enum CallFailed {
    /// The call cannot be done as asked: pi is told why, in words meant for the model.
    #[error("{0}")]
    Refused(String),
    /// The store failed: not the call's fault.
    #[error("the hub could not record it: {0}")]
    Store(#[from] StoreError),
}

/// The owner, or the refusal a tool call gets before anyone paired.
fn paired_owner(tx: &Connection) -> Result<i64, CallFailed> {
    kv::get_i64(tx, kv::OWNER)?
        .ok_or_else(|| CallFailed::Refused("pi-telegram is not paired with anyone yet".into()))
}

/// A live instance by the name the person sees (its label), case-insensitively.
fn named_instance(tx: &Connection, name: &str) -> Result<String, CallFailed> {
    let live = store::instances::live(tx)?;
    let wanted = name.to_lowercase();
    let found: Vec<_> = live
        .iter()
        .filter(|i| i.label.to_lowercase() == wanted)
        .collect();
    match found.as_slice() {
        [one] => Ok(one.identity.clone()),
        [] => Err(CallFailed::Refused(format!(
            "no live pi is called {name:?}; live: {}",
            live.iter()
                .map(|i| i.label.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        _ => Err(CallFailed::Refused(format!(
            "several live pi are called {name:?}; name one by its folder"
        ))),
    }
}

/// Removes copies no row refers to (the call failed after making them).
async fn forget_copies(files: &[OutFile]) {
    let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    let _ = tokio::task::spawn_blocking(move || {
        for p in paths {
            let _ = std::fs::remove_file(p);
        }
    })
    .await;
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_store_fault_is_never_told_to_pi_as_a_refusal_and_a_refusal_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = store::Store::open(&dir.path().join("state.db")).unwrap();
        let refused = store.write(|tx| -> Result<(), CallFailed> {
            kv::set(tx, "probe", "written")?;
            paired_owner(tx)?;
            Ok(())
        });
        assert_eq!(
            refused.unwrap_err().to_string(),
            "pi-telegram is not paired with anyone yet"
        );
        assert_eq!(store.read(|c| kv::get(c, "probe")).unwrap(), None);
        // A corruption reads as one, whatever its words.
        let fault = CallFailed::from(StoreError::Corrupt("no live pi is called x".into()));
        assert!(
            fault
                .to_string()
                .starts_with("the hub could not record it:"),
            "{fault}"
        );
    }

    #[test]
    fn a_copy_stops_at_the_limit() {
        let mut to = Vec::new();
        assert_eq!(copy_at_most(&b"12345"[..], &mut to, 5).unwrap(), Some(5));
        assert_eq!(to, b"12345");
        // Endless, as a file that grows while it is copied (or a kernel file) may be.
        let mut to = Vec::new();
        assert_eq!(
            copy_at_most(std::io::repeat(b'x'), &mut to, 1000).unwrap(),
            None
        );
        assert_eq!(to.len(), 1001, "one byte past the limit, no more");
    }

    #[test]
    fn what_is_opened_is_checked_again_and_leaves_no_copy() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("grows.log");
        std::fs::write(&file, vec![b'a'; 100]).unwrap();
        let out = dir.path().join("out");
        // Within the limit when the path was checked, past it when opened (it grew meanwhile).
        let meta = std::fs::metadata(&file).unwrap();
        assert!(sendable(&file, &meta, 150).is_ok());
        make_private_dir(&out).unwrap();
        let err = copy_one(&file, &out, "copy", 50).unwrap_err();
        assert!(err.contains("over the 50 B limit"), "{err}");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        // Two files of one name: two copies.
        let files = copy_all(&[(file.clone(), None), (file.clone(), None)], &out, 1000, 7).unwrap();
        assert_eq!(files.len(), 2);
        assert_ne!(files[0].path, files[1].path);
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 2);
        // Another call in the same millisecond: a name of its own.
        let again = copy_all(&[(file.clone(), None)], &out, 1000, 7).unwrap();
        assert!(
            again[0].path.ends_with("1-7-0-grows.log"),
            "{}",
            again[0].path
        );
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
    }
}
