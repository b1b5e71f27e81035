//! Spoken answers: the reference's `voice.replyMode` (`hidden`: only where pi writes a
//! `telegram_voice` comment; `mirror`: answers to voice notes and audio; `always`) through the
//! text-to-speech command templates configured as `outboundHandlers` with `type: "voice"`
//! (placeholders `{text}`, `{lang}`, `{rate}`, `{mp3}`, `{ogg}`; the result is an `.ogg` or
//! `.opus` file: the template's `output`, or what it wrote to `{ogg}`).
//!
//! A spoken answer is an outbox row whose plan starts with a voice alternative, parked while
//! the voice is made (`outbox::park_making`): this task synthesizes it and releases the row as a
//! `sendVoice`, or, when no template gives a voice, moves it on to the text alternatives (the
//! answer is never lost). Voices are made beside the chat, several at a time: the hub's own
//! messages never wait for one, pi's later output in that chat only a few seconds
//! (`outbox::MAKING_HOLDS_MS`), so the order is the order pi wrote unless a voice is slow. A
//! template that runs longer than a person would wait is stopped ([`TTS_TIMEOUT`], unless it
//! sets its own `timeout`), and the person is told the spoken version took too long.

use crate::db::Durability;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use store::outbox;
use store::outbox::Purpose;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::db::Db;
use crate::error::HubError;
use crate::outgoing::delivery::{Alternative, Plan};
use crate::outgoing::message::{Outgoing, Speak, Spot, Upload, Voice};
use crate::outgoing::outbound::{self};
use crate::outgoing::texts;
use crate::wakes::Wakes;

/// The `handling` of a row parked until its voice is made.
pub const SYNTHESIZING: &str = outbox::MAKING;
/// How long one text-to-speech command may run unless its template sets a `timeout`: a few
/// sentences take seconds; a person who asked for a spoken answer waits a minute at most
/// before the written one is worth more.
pub const TTS_TIMEOUT: Duration = Duration::from_secs(60);
/// Voices made at the same time: enough that a hung command holds none of the others, few
/// enough that a burst of answers does not start a text-to-speech engine per answer at once.
const AT_ONCE: usize = 4;
/// Values pi supplies that a template must never pass as an option (see
/// `cmdtpl::RunOptions::operands`): the words to say.
const OPERANDS: &[&str] = &["text"];
/// Telegram's caption limit.
const CAPTION_CHARS: usize = 1024;

/// What to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spoken {
    /// The words.
    pub text: String,
    /// Language hint.
    pub lang: Option<String>,
    /// Rate hint (`+30%`).
    pub rate: Option<String>,
    /// Whether the words go along as the caption (`voice.sendTranscript`).
    pub transcript: bool,
}

/// A voice message saying `spoken` in `spot`, under `markup`.
fn voice_message(spot: Spot, markup: Option<Value>, spoken: &Spoken) -> Outgoing {
    Outgoing::Voice(Voice {
        spot,
        reply_markup: markup,
        caption: None,
        speak: Some(Speak {
            text: spoken.text.clone(),
            lang: spoken.lang.clone(),
            rate: spoken.rate.clone(),
            transcript: spoken.transcript,
        }),
        files: Vec::new(),
    })
}

/// `plan` with a voice message in front, where its first message goes and under its buttons:
/// the text stays as the fallback.
pub fn voice_first(plan: &Plan, spoken: &Spoken) -> Plan {
    let Some(first) = plan.current() else {
        return plan.clone();
    };
    let Some(spot) = first.spot().cloned() else {
        return plan.clone();
    };
    let mut alternatives = vec![Alternative {
        name: "voice".into(),
        messages: vec![voice_message(spot, first.markup().cloned(), spoken)],
    }];
    alternatives.extend(plan.alternatives.iter().cloned());
    Plan::of(alternatives)
}

/// A plan that is only a voice message, sent to `spot`.
pub fn voice_only(spot: Spot, spoken: &Spoken) -> Plan {
    Plan::of(vec![Alternative {
        name: "voice".into(),
        messages: vec![voice_message(spot, None, spoken)],
    }])
}

/// Where voices are made, and the file with the templates.
#[derive(Debug, Clone)]
pub struct VoiceSettings {
    /// Voice files (created 0700).
    pub out_dir: PathBuf,
    /// `telegram.json`, re-read for `outboundHandlers` each time.
    pub config_path: PathBuf,
}

/// Runs until `stop`.
pub async fn run(
    db: Db,
    settings: Arc<VoiceSettings>,
    wakes: Wakes,
    mut stop: watch::Receiver<bool>,
) -> Result<(), HubError> {
    // Rows being made: each in its own task, so a hung command holds up no other voice.
    let mut making: JoinSet<(i64, Result<(), HubError>)> = JoinSet::new();
    let mut busy: HashSet<i64> = HashSet::new();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let rows = db.read(|c| outbox::parked_with(c, SYNTHESIZING)).await?;
        for row in rows {
            if busy.len() >= AT_ONCE {
                break;
            }
            if !busy.insert(row.id) {
                continue;
            }
            let (db, settings) = (db.clone(), settings.clone());
            making.spawn(async move {
                let id = row.id;
                (id, speak(&db, &settings, row).await)
            });
        }
        // Dropping the set at a stop kills the commands still running (cmdtpl kills the
        // process group of a run that is dropped); their rows stay parked for the next start.
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            () = wakes.voice.notified() => {}
            Some(done) = making.join_next() => {
                let (id, result) = done.map_err(|e| HubError::Io {
                    context: "making a voice message".into(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                busy.remove(&id);
                result?;
                wakes.sender.notify_one();
            }
        }
    }
}

async fn speak(db: &Db, settings: &VoiceSettings, row: outbox::OutboxRow) -> Result<(), HubError> {
    let Some(plan) = Plan::from_value(&row.delivery) else {
        return Ok(());
    };
    // Parked only by `outbound` with the words to speak; without them it would wait for ever.
    let (voice, job) = match plan.current().cloned() {
        Some(Outgoing::Voice(v)) => match v.speak.clone() {
            Some(job) => (v, job),
            None => return no_words(db, settings, &row, &plan).await,
        },
        _ => return no_words(db, settings, &row, &plan).await,
    };
    let made = synthesize(settings, row.id, &job).await;
    match made {
        Ok(file) => spoken(db, settings, row.id, plan, voice, &job, file).await,
        Err(failed) => written(db, settings, &row, &plan, failed).await,
    }
}

async fn no_words(
    db: &Db,
    settings: &VoiceSettings,
    row: &outbox::OutboxRow,
    plan: &Plan,
) -> Result<(), HubError> {
    let failed = Failed {
        why: "a voice row without words to speak".into(),
        timed_out: false,
    };
    written(db, settings, row, plan, failed).await
}

/// The voice `file` made for row `id`: the row is released as that voice message.
async fn spoken(
    db: &Db,
    settings: &VoiceSettings,
    id: i64,
    mut plan: Plan,
    voice: Voice,
    job: &Speak,
    file: PathBuf,
) -> Result<(), HubError> {
    let now = db.now_ms();
    // Made in the voice folder, the file is the row's alone: the sender removes it once the
    // row is settled. A template's output elsewhere is not the hub's.
    let ours = file.parent() == Some(settings.out_dir.as_path());
    let made = Outgoing::Voice(Voice {
        speak: None,
        files: vec![Upload {
            field: "voice".into(),
            path: file.display().to_string(),
            name: Some("voice.ogg".into()),
            mime: Some("audio/ogg".into()),
            copy: ours,
        }],
        caption: job
            .transcript
            .then(|| job.text.chars().take(CAPTION_CHARS).collect()),
        ..voice
    });
    if let Some(m) = plan.current_mut() {
        *m = made;
    }
    db.write(Durability::OnDisk, move |tx| {
        outbox::replan(tx, id, &plan.to_value(), "spoken", now)
    })
    .await?;
    tracing::info!(row = id, "a voice message is ready");
    remove_leftovers(settings, id, Some(file)).await;
    Ok(())
}

/// No voice for `row`: it moves on to its written alternatives, or fails without any.
async fn written(
    db: &Db,
    settings: &VoiceSettings,
    row: &outbox::OutboxRow,
    plan: &Plan,
    failed: Failed,
) -> Result<(), HubError> {
    let (id, now) = (row.id, db.now_ms());
    let why = failed.why;
    tracing::warn!(row = id, error = %why, timed_out = failed.timed_out, "no voice message could be made; the text goes instead");
    // A person who waited for the voice learns why it did not come; the note goes right after
    // the written answer (it is queued after it in the same place).
    let note = failed.timed_out.then_some((row.chat_id, row.thread_id));
    let written = plan.fallback();
    let note_text = texts::voice_too_slow(written.is_some());
    let purpose = Purpose::VoiceLate { row: id };
    db.write(Durability::OnDisk, move |tx| {
        match &written {
            Some(next) => {
                let handling = format!("sent as text: {why}");
                outbox::replan(tx, id, &next.to_value(), &handling, now)?;
            }
            None => {
                outbox::mark_sending(tx, id, now)?;
                outbox::mark_failed(tx, id, &why, "dropped: no voice could be made", now)?;
            }
        }
        if let Some((chat, thread)) = note {
            outbound::notice(tx, chat, thread, &note_text, &purpose, now)?;
        }
        Ok(())
    })
    .await?;
    remove_leftovers(settings, id, None).await;
    Ok(())
}

/// After row `row`'s voice is settled (its plan committed): what the templates left in the
/// voice folder for it (`voice-<row>-<n>.*`: an `.mp3` on the way to the `.ogg`, a failed
/// template's half file) removed, all but `keep`, the file the row sends. A crash before this
/// leaves them to retention.
async fn remove_leftovers(settings: &VoiceSettings, row: i64, keep: Option<PathBuf>) {
    let dir = settings.out_dir.clone();
    let prefix = format!("voice-{row}-");
    let _ = tokio::task::spawn_blocking(move || {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            let named = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix));
            if named
                && keep.as_deref() != Some(path.as_path())
                && let Err(e) = crate::regular::remove(&path)
            {
                tracing::warn!(row, error = %e, "could not remove a voice template's file");
            }
        }
    })
    .await;
}

/// Why no voice was made.
#[derive(Debug)]
struct Failed {
    /// For the log and the row's `handling` (never the words).
    why: String,
    /// A template ran out of time: the person waited for it.
    timed_out: bool,
}

/// Runs the voice templates in order; the first that gives an `.ogg`/`.opus` file wins.
async fn synthesize(settings: &VoiceSettings, row: i64, job: &Speak) -> Result<PathBuf, Failed> {
    let failed = |why: String| Failed {
        why,
        timed_out: false,
    };
    let handlers = load(&settings.config_path);
    if handlers.is_empty() {
        return Err(failed(
            "no outboundHandlers entry of type voice is configured".into(),
        ));
    }
    make_private_dir(&settings.out_dir)
        .map_err(|e| failed(format!("cannot prepare the voice folder: {e}")))?;
    let mut timed_out = false;
    let text = job.text.as_str();
    let mut last = String::new();
    for (i, (origin, template)) in handlers.iter().enumerate() {
        let stem = settings.out_dir.join(format!("voice-{row}-{i}"));
        let (mp3, ogg) = (stem.with_extension("mp3"), stem.with_extension("ogg"));
        let mut values = cmdtpl::Values::new()
            .with("text", text)
            .with("mp3", mp3.display().to_string())
            .with("ogg", ogg.display().to_string());
        for (key, v) in [("lang", &job.lang), ("rate", &job.rate)] {
            if let Some(v) = v {
                values.insert(key, v);
            }
        }
        let opts = cmdtpl::RunOptions {
            default_timeout: Some(TTS_TIMEOUT),
            operands: OPERANDS.iter().map(|&n| n.to_owned()).collect(),
            ..cmdtpl::RunOptions::default()
        };
        let outcome = template
            .run(&values, Some(text.as_bytes().to_vec()), &opts)
            .await;
        let file = match outcome {
            Ok(o) => match o.output {
                cmdtpl::OutputValue::File(p) => p,
                cmdtpl::OutputValue::Stdout(_) => ogg.clone(),
            },
            Err(e) => {
                timed_out |= matches!(e.kind, cmdtpl::RunErrorKind::Timeout { .. });
                last = format!("{origin}: {}", e.without_output());
                // What the command printed may quote the answer: only at debug.
                tracing::warn!(handler = %origin, error = %e.without_output(), "a voice template failed; trying the next");
                tracing::debug!(handler = %origin, error = %e, "the voice template's failure in full");
                continue;
            }
        };
        let ext_ok = file
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("ogg") || e.eq_ignore_ascii_case("opus"));
        if ext_ok && std::fs::metadata(&file).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Ok(file);
        }
        last = format!("{origin}: no .ogg/.opus file came out ({})", file.display());
    }
    Err(Failed {
        why: last,
        timed_out,
    })
}

fn load(config: &Path) -> Vec<(String, cmdtpl::Template)> {
    let doc: Value = std::fs::read_to_string(config)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let Some(list) = doc.get("outboundHandlers").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .enumerate()
        .filter(|(_, h)| h.get("type").and_then(Value::as_str) == Some("voice"))
        .filter_map(|(i, h)| {
            let origin = format!("outboundHandlers[{i}]");
            match cmdtpl::Template::parse_with_host_keys(h, &["type", "mime", "match"]) {
                Ok(t) => Some((origin, t)),
                Err(e) => {
                    tracing::warn!(handler = %origin, error = %e, "a voice template is invalid; ignored");
                    None
                }
            }
        })
        .collect()
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
