//! pi's Telegram tools, carried out for the instance whose model called them:
//!
//! - `telegram_attach(paths, caption?, chat_id?, thread_id?)`: files from pi's machine to the
//!   person. During a Telegram turn they go right after that turn's answer; outside one, now,
//!   to the instance's chat or topic. The turn is the one pi names in the call (`null`: a run
//!   typed in pi, none; a headless child names none: the one the instance works on), and
//!   whether it still waits for its answer is decided in the transaction that records the
//!   files: a turn answered (or interrupted) meanwhile has taken its files already, so these go
//!   now, in its place, after its answer. Each file is copied
//!   when the tool is called (pi may change or delete it afterwards) into a name of its own in
//!   `out/`; a missing file, a directory, anything but a regular file or one over the limit is
//!   a tool error the model sees. The sender removes a copy once its message is settled
//!   (`sender`), retention what a crash left behind (`retention`).
//! - `telegram_message(text, chat_id?, thread_id?, thread?)`: Markdown sent now (a progress
//!   note during a turn arrives before the answer), to the instance's place or, by name, to
//!   another live instance's topic. `telegram_button` comments in it become its buttons.
//!
//! The work runs in a task of its own: copying files never holds the conductor.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use store::turns::{self, Turn, TurnState};
use store::{Connection, StoreError, attachments, kv};
use tokio::sync::Notify;

use super::Conductor;
use crate::assistant::Watched;
use crate::db::Db;
use crate::inbound::{limit_text, names, prompt::human_size};
use crate::instance::{InstanceId, ToolCall};
use crate::markup;
use crate::names::label_of;
use crate::outbound::{self, OutFile, Place};

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
                "telegram_attach" => job.attach(&call.args).await,
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
    async fn attach(&self, args: &Value) -> Result<String, String> {
        let paths: Vec<String> = args
            .get("paths")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if paths.is_empty() {
            return Err("paths must list at least one file".into());
        }
        let caption: Option<String> = args
            .get("caption")
            .and_then(Value::as_str)
            .map(|c| c.chars().take(CAPTION_CHARS).collect());
        // Check every file before sending any: one bad path fails the whole call.
        let mut checked = Vec::new();
        for p in &paths {
            let path = Path::new(&self.cwd).join(p);
            let meta = tokio::fs::metadata(&path)
                .await
                .map_err(|_| format!("{}: no such file", path.display()))?;
            if meta.is_dir() {
                return Err(format!(
                    "{} is a folder; attach the files in it",
                    path.display()
                ));
            }
            if !meta.is_file() {
                return Err(format!("{} is not a regular file", path.display()));
            }
            if meta.len() > self.settings.max_bytes {
                return Err(format!(
                    "{} is {}, over the {} limit for files sent to Telegram",
                    path.display(),
                    human_size(meta.len() as i64),
                    limit_text(self.settings.max_bytes)
                ));
            }
            checked.push(path);
        }
        let mut files: Vec<OutFile> = Vec::new();
        for path in checked {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "file".into());
            let stem = format!(
                "{}-{}",
                self.db.now_ms(),
                names::safe_name(Some(&name), "file", mime_of(&path))
            );
            let (from, dir, max) = (
                path.clone(),
                self.settings.out_dir.clone(),
                self.settings.max_bytes,
            );
            let copied = tokio::task::spawn_blocking(move || copy_in(&from, &dir, &stem, max))
                .await
                .unwrap_or_else(|e| Err(CopyError::Io(std::io::Error::other(e))));
            let (copy, size) = match copied {
                Ok(c) => c,
                Err(e) => {
                    forget_copies(&files).await;
                    return Err(match e {
                        CopyError::Prepare(e) => format!("cannot prepare the upload: {e}"),
                        CopyError::Io(e) => format!("{} could not be read: {e}", path.display()),
                        CopyError::TooBig => format!(
                            "{} grew over the {} limit for files sent to Telegram",
                            path.display(),
                            limit_text(self.settings.max_bytes)
                        ),
                    });
                }
            };
            files.push(OutFile {
                path: copy.display().to_string(),
                name,
                mime: mime_of(&path).map(str::to_owned),
                size: size as i64,
            });
        }
        let listed = files
            .iter()
            .map(|f| format!("{} ({})", f.name, human_size(f.size)))
            .collect::<Vec<_>>()
            .join(", ");
        let (identity, said, outstanding) = (self.identity.clone(), self.said, self.outstanding);
        let args = args.clone();
        let now = self.db.now_ms();
        let recorded = files.clone();
        let went = self
            .db
            .write(move |tx| {
                let files = recorded;
                let owner = kv::get_i64(tx, kv::OWNER)?.ok_or_else(|| {
                    StoreError::Corrupt("pi-telegram is not paired with anyone yet".into())
                })?;
                let explicit = explicit_place(tx, &args, owner).map_err(StoreError::Corrupt)?;
                if let Some(place) = explicit {
                    enqueue_now(tx, place, &files, caption.as_deref(), &identity, None, now)?;
                    return Ok(Recorded::Now);
                }
                // Read in this transaction: the turn's answer, queued in another, takes the
                // files recorded before it and none after it.
                match call_turn(tx, said, outstanding, &identity)? {
                    Some(t) if matches!(t.state, TurnState::Dispatched | TurnState::Acked) => {
                        for (i, f) in files.iter().enumerate() {
                            attachments::create(
                                tx,
                                &attachments::NewAttachment {
                                    turn_id: t.id,
                                    path: &f.path,
                                    name: &f.name,
                                    mime: f.mime.as_deref(),
                                    size: f.size,
                                    caption: caption.as_deref().filter(|_| i == 0),
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
                            ..outbound::place_of_turn(tx, &t, &identity)?
                        };
                        enqueue_now(
                            tx,
                            place,
                            &files,
                            caption.as_deref(),
                            &identity,
                            Some(t.id),
                            now,
                        )?;
                        Ok(Recorded::AfterAnswer)
                    }
                    None => {
                        let place = outbound::place_of_instance(tx, &identity, owner)?;
                        enqueue_now(tx, place, &files, caption.as_deref(), &identity, None, now)?;
                        Ok(Recorded::Now)
                    }
                }
            })
            .await;
        let went = match went {
            Ok(went) => went,
            Err(e) => {
                // Nothing refers to the copies: they would only wait for retention.
                forget_copies(&files).await;
                return Err(match e {
                    StoreError::Corrupt(why) => why,
                    other => format!("the hub could not record it: {other}"),
                });
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
        let rendering = self.assistant.current().rendering;
        let identity = self.identity.clone();
        let args = args.clone();
        let now = self.db.now_ms();
        let clock = self.db.clock().clone();
        let to = self
            .db
            .write(move |tx| {
                let owner = kv::get_i64(tx, kv::OWNER)?.ok_or_else(|| {
                    StoreError::Corrupt("pi-telegram is not paired with anyone yet".into())
                })?;
                let (place, speaker) = match (&thread_name, explicit_place(tx, &args, owner)) {
                    (_, Err(why)) => return Err(StoreError::Corrupt(why)),
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
                let markup = crate::menu::prompt_buttons(
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
                        purpose: &format!("message:{identity}:{now}"),
                        source_update_id: None,
                        identity: &speaker,
                        turn_id: None,
                        resend: true,
                    },
                    now,
                )?;
                Ok(label_of(&speaker))
            })
            .await
            .map_err(|e| match e {
                StoreError::Corrupt(why) => why,
                other => format!("the hub could not record it: {other}"),
            })?;
        self.sender.notify_one();
        Ok(format!("Sent to Telegram ({to})."))
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
        Some(t) => format!("attach:{t}:{now}"),
        None => format!("attach:{identity}:{now}"),
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
            purpose: &format!("attach:{}:interrupted", t.id),
            source_update_id: t.source_update_id,
            identity,
            turn_id: Some(t.id),
            resend: false,
        },
        now,
    )?;
    Ok(())
}

/// A live instance by the name the person sees (its label), case-insensitively.
fn named_instance(tx: &Connection, name: &str) -> Result<String, StoreError> {
    let live = store::instances::live(tx)?;
    let wanted = name.to_lowercase();
    let found: Vec<_> = live
        .iter()
        .filter(|i| i.label.to_lowercase() == wanted)
        .collect();
    match found.as_slice() {
        [one] => Ok(one.identity.clone()),
        [] => Err(StoreError::Corrupt(format!(
            "no live pi is called {name:?}; live: {}",
            live.iter()
                .map(|i| i.label.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        _ => Err(StoreError::Corrupt(format!(
            "several live pi are called {name:?}; name one by its folder"
        ))),
    }
}

/// Why a file could not be copied for sending.
enum CopyError {
    /// The folder for the copies.
    Prepare(std::io::Error),
    /// The file itself.
    Io(std::io::Error),
    /// Over the limit by the time it was copied.
    TooBig,
}

/// Copies the regular file at `from` (opened without waiting: a FIFO swapped in after the
/// check is refused, not waited on) into `dir` under `stem`, or `<n>-stem` when that name is
/// taken: every copy is its row's alone (the sender removes it once that row is settled), also
/// for two files of the same name in one call. At most `max` bytes. Blocks on the disk.
fn copy_in(from: &Path, dir: &Path, stem: &str, max: u64) -> Result<(PathBuf, u64), CopyError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let src = crate::regular::open(from).map_err(CopyError::Io)?;
    make_private_dir(dir).map_err(CopyError::Prepare)?;
    for n in 0..1000 {
        let to = if n == 0 {
            dir.join(stem)
        } else {
            dir.join(format!("{n}-{stem}"))
        };
        let mut dst = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&to)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(CopyError::Prepare(e)),
        };
        let copied = std::io::copy(&mut (&src).take(max.saturating_add(1)), &mut dst);
        return match copied {
            Ok(size) if size <= max => Ok((to, size)),
            Ok(_) => {
                let _ = std::fs::remove_file(&to);
                Err(CopyError::TooBig)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&to);
                Err(CopyError::Io(e))
            }
        };
    }
    Err(CopyError::Prepare(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("no free name for {stem} in {}", dir.display()),
    )))
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
