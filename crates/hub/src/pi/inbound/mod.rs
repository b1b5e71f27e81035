//! Inbound: what is not plain text on its way into pi. A handler records a turn that is not
//! ready yet (`turns.ready = 0`) with its files (`store::files`) in the update's transaction;
//! this task waits out the group the turn gathers (an album, a forward and its comment, a long
//! text Telegram split), downloads each file into `<agent-dir>/tmp/telegram/<profile>/`, runs
//! the configured inbound handlers (speech to text...), composes what pi reads besides the
//! person's words, and marks the turn ready for the conductor. Downloads run one at a time;
//! a turn's handlers run beside the rest (a task per turn, a few at a time), so a slow or hung
//! transcription holds up no other turn's files, and one that runs out of time
//! ([`handlers::DEFAULT_TIMEOUT`] unless its template sets a `timeout`) leaves the file to pi
//! as it is, and the person is told.
//!
//! Durable like everything else: a file is downloaded until it is settled (`saved`, `refused`
//! over a limit, `failed`), and a crash mid-download downloads it again into the same name. A
//! turn is handed to pi only once it is ready, and only once (the conductor's rules).
//!
//! Crash point: `inbound.after_download` (the bytes are here, nothing is written yet).

pub(crate) mod handlers;
pub(crate) mod media;
pub(crate) mod names;
pub(crate) mod prompt;

use crate::db::Durability;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use store::files::{self, File, FileState};
use store::outbox::Purpose;
use store::turns::{self, Turn};
use store::{Connection, StoreError};
use telegram::{ApiErrorKind, CallError, Client};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::crashpoint;
use crate::db::Db;
use crate::error::HubError;
use crate::outgoing::outbound;
use crate::wakes::{Wakes, sleep_for};

/// Download attempts before a file counts as failed.
const MAX_ATTEMPTS: i64 = 5;
/// How often old files are looked for.
const CLEANUP_EVERY: Duration = Duration::from_secs(6 * 3600);
/// Turns whose handlers run at the same time: a hung one holds up none of the others, and a
/// burst of voice notes does not start a speech-to-text engine for each at once.
const HANDLING_AT_ONCE: usize = 4;

/// How inbound files are handled.
#[derive(Debug, Clone)]
pub struct InboundSettings {
    /// Where files are saved (created 0700).
    pub dir: PathBuf,
    /// Files larger than this are not downloaded.
    pub max_bytes: u64,
    /// Files of finished turns older than this are removed.
    pub retention: Duration,
    /// `telegram.json`, re-read for its inbound handlers when a turn's files are settled.
    pub config_path: PathBuf,
}

/// The limit as people read it: `50 MiB`.
pub fn limit_text(bytes: u64) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        prompt::human_size(bytes as i64)
    }
}

/// Runs until `stop`.
pub async fn run(
    db: Db,
    client: Client,
    settings: Arc<InboundSettings>,
    wakes: Wakes,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let dir = settings.dir.clone();
    let made = tokio::task::spawn_blocking(move || make_private_dir(&dir))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    if let Err(e) = made {
        tracing::warn!(dir = %settings.dir.display(), error = %e, "cannot create the download folder; files from Telegram will fail");
    }
    let mut next_cleanup = tokio::time::Instant::now();
    // Turns whose handlers run, each in its own task. Dropping the set at a stop kills their
    // commands (cmdtpl kills the process group of a dropped run); the turns stay not ready and
    // are handled again at the next start.
    let mut handling: JoinSet<(i64, Result<bool, HubError>)> = JoinSet::new();
    let mut busy: HashSet<i64> = HashSet::new();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= next_cleanup {
            cleanup(&db, &settings).await?;
            next_cleanup = tokio::time::Instant::now() + CLEANUP_EVERY;
        }
        let mut wake_at: Option<i64> = None;
        let mut later = |t: i64| wake_at = Some(wake_at.map_or(t, |w: i64| w.min(t)));
        for turn in db.read(turns::preparing).await? {
            if busy.contains(&turn.id) {
                continue;
            }
            let now = db.now_ms();
            if turn.gather_until_ms > now {
                later(turn.gather_until_ms);
                continue;
            }
            let mut pending = false;
            for f in db.read(move |c| files::of_turn(c, turn.id)).await? {
                if f.state != FileState::Pending {
                    continue;
                }
                if f.not_before_ms > db.now_ms() {
                    later(f.not_before_ms);
                    pending = true;
                    continue;
                }
                if !fetch(&db, &client, &settings, &turn, &f).await? {
                    pending = true;
                    let id = f.id;
                    if let Some(f) = db.read(move |c| files::get(c, id)).await? {
                        later(f.not_before_ms);
                    }
                }
                if *stop.borrow() {
                    return Ok(());
                }
            }
            if pending || busy.len() >= HANDLING_AT_ONCE {
                continue;
            }
            busy.insert(turn.id);
            let (db, settings) = (db.clone(), settings.clone());
            handling.spawn(async move {
                let id = turn.id;
                let done = async {
                    handle(&db, &settings, &turn).await?;
                    finish(&db, &settings, turn.id).await
                };
                (id, done.await)
            });
        }
        wakes.sender.notify_one();
        let wait =
            wake_at.map(|t| Duration::from_millis(u64::try_from(t - db.now_ms()).unwrap_or(0)));
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            () = wakes.inbound.notified() => {}
            () = sleep_for(wait) => {}
            () = tokio::time::sleep_until(next_cleanup) => {}
            Some(done) = handling.join_next() => {
                let (id, ready) = done.map_err(|e| HubError::Io {
                    context: "handling a turn's files".into(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                busy.remove(&id);
                if ready? {
                    wakes.conductor.notify_one();
                }
            }
        }
    }
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

/// Downloads one file and settles it. `false` when it is to be tried again later.
async fn fetch(
    db: &Db,
    client: &Client,
    settings: &InboundSettings,
    turn: &Turn,
    f: &File,
) -> Result<bool, HubError> {
    let limit = settings.max_bytes;
    let over = |size: u64| {
        format!(
            "{} is over the {} limit for files from Telegram",
            prompt::human_size(size as i64),
            limit_text(limit)
        )
    };
    if let Some(size) = f.size.and_then(|s| u64::try_from(s).ok())
        && size > limit
    {
        settle_not_saved(db, turn, f, FileState::Refused, &over(size)).await?;
        return Ok(true);
    }
    let bytes = match download(client, f).await {
        Ok(b) => b,
        Err(e) => return download_failed(db, turn, f, e).await,
    };
    let size = bytes.as_ref().len() as u64;
    if size > limit {
        settle_not_saved(db, turn, f, FileState::Refused, &over(size)).await?;
        return Ok(true);
    }
    crashpoint::hit(crashpoint::CrashPoint::InboundAfterDownload);
    keep(db, settings, turn, f, bytes).await?;
    Ok(true)
}

/// The file's bytes from Telegram (`getFile`, then its path). Named by what they can do, since
/// their type is the `bytes` crate's, which the hub does not depend on.
async fn download(client: &Client, f: &File) -> Result<impl Downloaded, CallError> {
    let info = client
        .call("getFile", &serde_json::json!({ "file_id": f.file_id }))
        .await?;
    let path = info
        .get("file_path")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| CallError::Retryable("getFile answered without file_path".into()))?
        .to_owned();
    client.download(&path).await
}

/// A downloaded file's bytes, cheap to clone.
trait Downloaded: AsRef<[u8]> + Clone + Send + 'static {}

impl<T: AsRef<[u8]> + Clone + Send + 'static> Downloaded for T {}

/// Settles a file Telegram would not give, or schedules another attempt (then `false`).
async fn download_failed(db: &Db, turn: &Turn, f: &File, e: CallError) -> Result<bool, HubError> {
    match e {
        CallError::Api(e) if e.description.contains("file is too big") => {
            let why = "Telegram's cloud Bot API gives bots files up to 20 MB and this one is \
                       bigger (a local Bot API server, set as apiBase, serves larger files)";
            settle_not_saved(db, turn, f, FileState::Refused, why).await?;
            Ok(true)
        }
        CallError::Api(e) if e.kind != ApiErrorKind::Unauthorized => {
            let why = format!("Telegram refused it: {}", e.description);
            settle_not_saved(db, turn, f, FileState::Failed, &why).await?;
            Ok(true)
        }
        e => {
            if f.attempts + 1 >= MAX_ATTEMPTS {
                let why = format!("could not be downloaded after {MAX_ATTEMPTS} attempts ({e})");
                settle_not_saved(db, turn, f, FileState::Failed, &why).await?;
                return Ok(true);
            }
            let backoff = 1000 * (1i64 << f.attempts.clamp(0, 6));
            // A flood wait is Telegram's to set: asking again sooner is refused again.
            let wait = match &e {
                CallError::Flood { retry_after, .. } => {
                    backoff.max(i64::try_from(retry_after.as_millis()).unwrap_or(i64::MAX))
                }
                _ => backoff,
            };
            tracing::info!(file = f.id, attempt = f.attempts + 1, error = %e, "a download failed; trying again");
            let (id, why, at) = (f.id, e.to_string(), db.now_ms() + wait);
            db.write(Durability::OnDisk, move |tx| {
                files::retry_later(tx, id, &why, at)
            })
            .await?;
            Ok(false)
        }
    }
}

/// Saves the downloaded bytes under the turn's name for the file and settles it (`failed`
/// when this machine cannot keep it).
async fn keep(
    db: &Db,
    settings: &InboundSettings,
    turn: &Turn,
    f: &File,
    bytes: impl Downloaded,
) -> Result<(), HubError> {
    let name = format!(
        "{}-{}-{}",
        turn.id,
        f.seq,
        names::safe_name(f.name.as_deref(), &f.kind, f.mime.as_deref())
    );
    let path = settings.dir.join(&name);
    let written = {
        let (path, bytes) = (path.clone(), bytes.clone());
        tokio::task::spawn_blocking(move || save(&path, bytes.as_ref()))
            .await
            .map_err(|e| HubError::Io {
                context: "saving a file".into(),
                source: std::io::Error::other(e.to_string()),
            })?
    };
    if let Err(e) = written {
        tracing::warn!(file = f.id, error = %e, "could not save a file from Telegram");
        let why = format!("could not be saved on this machine ({e})");
        return settle_not_saved(db, turn, f, FileState::Failed, &why).await;
    }
    let (id, p, size) = (
        f.id,
        path.display().to_string(),
        bytes.as_ref().len() as i64,
    );
    let now = db.now_ms();
    db.write(Durability::OnDisk, move |tx| {
        files::mark_saved(tx, id, &p, size, now)
    })
    .await?;
    tracing::debug!(file = f.id, turn = turn.id, bytes = size, "file saved");
    Ok(())
}

/// Writes `bytes` to `path` through a temporary name: a crash leaves no half file under the
/// final name, and a repeated download replaces the earlier copy.
fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(&part)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&part, path)
}

async fn settle_not_saved(
    db: &Db,
    turn: &Turn,
    f: &File,
    state: FileState,
    why: &str,
) -> Result<(), HubError> {
    let (t, f, why) = (turn.clone(), f.clone(), why.to_owned());
    let now = db.now_ms();
    db.write(Durability::OnDisk, move |tx| {
        if files::mark_not_saved(tx, f.id, state, &why, now)? {
            tell_not_saved(tx, &t, &f, &why, now)?;
        }
        Ok(())
    })
    .await?;
    Ok(())
}

fn tell_not_saved(
    tx: &Connection,
    t: &Turn,
    f: &File,
    why: &str,
    now: i64,
) -> Result<(), StoreError> {
    let what = f.name.clone().unwrap_or_else(|| format!("The {}", f.kind));
    outbound::text(
        tx,
        &outbound::Text {
            chat: t.chat_id,
            thread: t.thread_id,
            text: &crate::outgoing::texts::file_not_saved(&what, why),
            reply_to: t.message_id,
            markup: None,
            purpose: &Purpose::File { id: f.id },
            source_update_id: f.source_update_id,
            resend: false,
        },
        now,
    )
    .map(drop)
}

/// Runs the inbound handlers over the turn's saved files (once per file). A voice note or an
/// audio file without words of the person's own becomes the prompt: its transcript, shown
/// back to the person.
async fn handle(db: &Db, settings: &InboundSettings, turn: &Turn) -> Result<(), HubError> {
    let id = turn.id;
    let list: Vec<File> = db
        .read(move |c| files::of_turn(c, id))
        .await?
        .into_iter()
        .filter(|f| f.state == FileState::Saved && f.output.is_none() && f.path.is_some())
        .collect();
    if list.is_empty() {
        return Ok(());
    }
    let config = settings.config_path.clone();
    let configured = tokio::task::spawn_blocking(move || handlers::load(&config))
        .await
        .unwrap_or_default();
    for f in list {
        let Some(path) = f.path.clone() else { continue };
        let voice = matches!(f.kind.as_str(), "voice" | "audio");
        let out =
            match handlers::output_for(&configured, Path::new(&path), &f.kind, f.mime.as_deref())
                .await
            {
                handlers::Made::Text(out) => out,
                handlers::Made::Nothing => continue,
                handlers::Made::TooSlow => {
                    // pi gets the file as it is; the person learns why no transcript came.
                    let (t, f) = (turn.clone(), f.clone());
                    let what = f.name.clone().unwrap_or_else(|| format!("The {}", f.kind));
                    let now = db.now_ms();
                    db.write(Durability::OnDisk, move |tx| {
                        files::set_output(tx, f.id, "")?;
                        outbound::text(
                            tx,
                            &outbound::Text {
                                chat: t.chat_id,
                                thread: t.thread_id,
                                text: &crate::outgoing::texts::handler_too_slow(&what, voice),
                                reply_to: t.message_id,
                                markup: None,
                                purpose: &Purpose::FileLate { id: f.id },
                                source_update_id: f.source_update_id,
                                resend: false,
                            },
                            now,
                        )
                        .map(drop)
                    })
                    .await?;
                    continue;
                }
            };
        let spoken = voice && turn.text.trim().is_empty();
        let t = turn.clone();
        let now = db.now_ms();
        db.write(Durability::OnDisk, move |tx| {
            if spoken {
                // The transcript is what the person said: the prompt itself.
                turns::edit_text(tx, t.id, &out)?;
                outbound::text(
                    tx,
                    &outbound::Text {
                        chat: t.chat_id,
                        thread: t.thread_id,
                        text: &crate::outgoing::texts::transcript(&out),
                        reply_to: t.message_id,
                        markup: None,
                        purpose: &Purpose::Transcript { id: f.id },
                        source_update_id: f.source_update_id,
                        resend: false,
                    },
                    now,
                )?;
                files::set_output(tx, f.id, "")
            } else {
                files::set_output(tx, f.id, &out)
            }
        })
        .await?;
    }
    Ok(())
}

/// Every file of the turn is settled: compose what pi reads and mark it ready. `false` when
/// it was ready already.
async fn finish(db: &Db, settings: &InboundSettings, turn: i64) -> Result<bool, HubError> {
    let dir = settings.dir.clone();
    Ok(db
        .write(Durability::OnDisk, move |tx| {
            let Some(t) = turns::get(tx, turn)? else {
                return Ok(false);
            };
            let list = files::of_turn(tx, turn)?;
            let blocks: Vec<String> = prompt::attachments_block(&dir, &list)
                .into_iter()
                .chain(t.context.clone())
                .filter(|b| !b.trim().is_empty())
                .collect();
            let context = (!blocks.is_empty()).then(|| blocks.join("\n\n"));
            turns::set_ready(tx, turn, context.as_deref())
        })
        .await?)
}

/// Removes downloaded files of finished turns older than the retention.
async fn cleanup(db: &Db, settings: &InboundSettings) -> Result<(), HubError> {
    let before = db.now_ms() - settings.retention.as_millis() as i64;
    let old = db.read(move |c| files::saved_before(c, before)).await?;
    let mut removed = 0;
    for f in old {
        let Some(path) = f.path.as_deref() else {
            continue;
        };
        // Only what this hub saved, in its own folder.
        if Path::new(path).parent() != Some(settings.dir.as_path()) {
            continue;
        }
        let owned = path.to_owned();
        let gone = tokio::task::spawn_blocking(move || std::fs::remove_file(owned))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        match gone {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = f.id, error = %e, "could not remove an old download");
                continue;
            }
        }
        let id = f.id;
        db.write(Durability::OnDisk, move |tx| files::forget_path(tx, id))
            .await?;
    }
    if removed > 0 {
        tracing::info!(removed, "old downloads removed");
    }
    Ok(())
}
