//! Command templates run beside the chat: a text-to-speech command that hangs holds none of
//! the hub's own messages and pi's next answer only a few seconds; one that runs out of time
//! leaves the written answer with a note. A speech-to-text command that hangs holds no other
//! message's files; one that runs out of time leaves the file to pi, and the person is told.
//! The commands are shell scripts that wait for a file the test creates, so "while it hangs"
//! is a fact of the test, not a matter of timing.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{OWNER, TestHub, eventually};
use serde_json::{Value, json};
use tg_fake::FakeConfig;
use tg_fake::control::{MediaItem, SendMedia, ThreadFilter, TranscriptEntry};
use tg_fake::world::MediaKind;

/// An executable shell script `name` in the hub's folder.
fn script(hub: &TestHub, name: &str, body: &str) -> PathBuf {
    let path = hub.dir.path().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

/// `telegram.json` with `f` applied to its top level.
fn configure(hub: &TestHub, f: impl FnOnce(&mut Value)) {
    let path = hub.dir.path().join("telegram.json");
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    f(&mut cfg);
    std::fs::write(&path, cfg.to_string()).unwrap();
}

fn bot_transcript(hub: &TestHub) -> Vec<TranscriptEntry> {
    hub.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

fn is_voice(m: &TranscriptEntry) -> bool {
    m.media.as_ref().is_some_and(|x| x.kind == MediaKind::Voice)
}

/// The words in a voice message the fake text-to-speech made.
fn spoken(hub: &TestHub, m: &TranscriptEntry) -> String {
    let media = m.media.as_ref().unwrap();
    let bytes = hub.fake.control().file_bytes(&media.file_id, None).unwrap();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A text-to-speech stand-in: writes an OGG file (its magic and the words read on stdin) to
/// its argument. Words with "slow" in them first mark `started` and wait until `release`
/// exists (`hang`: never, it sleeps until killed).
fn tts(hub: &TestHub, hang: bool) -> PathBuf {
    let dir = hub.dir.path().display().to_string();
    let wait = if hang {
        "sleep 300".to_owned()
    } else {
        format!("while [ ! -e {dir}/release ]; do sleep 0.05; done")
    };
    script(
        hub,
        "tts.sh",
        &format!(
            "words=$(cat)\ncase \"$words\" in *slow*) touch {dir}/started; {wait};; esac\n\
             {{ printf 'OggS'; printf '%s' \"$words\"; }} > \"$1\"\n"
        ),
    )
}

fn voice_note(hub: &TestHub, words: &str) -> tg_fake::control::Sent {
    hub.fake
        .control()
        .send_media(SendMedia {
            item: MediaItem {
                kind: MediaKind::Voice,
                data_base64: base64_of(words),
                filename: None,
                mime_type: Some("audio/ogg".into()),
                caption: None,
            },
            thread_id: None,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap()
}

fn base64_of(s: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | u32::from(c) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(T[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    eventually(what, || cond().then_some(())).await;
}

async fn hub_with(f: impl FnOnce(&TestHub)) -> TestHub {
    let mut hub = TestHub::prepare(FakeConfig::default(), json!({})).await;
    f(&hub);
    hub.launch().await;
    hub
}

fn started(dir: &Path) -> bool {
    dir.join("started").exists()
}

/// While a spoken answer's voice is being made (and the command hangs), the menu the person
/// asks for comes at once, and pi's next answer after a short wait; the slow voice arrives
/// when its command is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_voice_holds_neither_menus_nor_the_next_answer() {
    let mut hub = hub_with(|hub| {
        let tts = tts(hub, false);
        configure(hub, |c| {
            c["outboundHandlers"] =
                json!([{ "type": "voice", "template": format!("{} {{ogg}}", tts.display()) }]);
            c["voice"] = json!({ "replyMode": "always" });
        });
    })
    .await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    hub.say("first");
    let p1 = pi.recv_type("prompt").await;
    pi.answer(&p1, "a slow answer").await;
    until("the voice command to start", || started(hub.dir.path())).await;

    // The hub's own texts do not wait for the voice.
    let start = hub.say("/start");
    hub.wait_for_bot("the menu", |m| {
        m.iter().any(|(_, _, r)| *r == Some(start.message_id))
    })
    .await;
    let help = hub.say("/help");
    hub.wait_for_bot("the help", |m| {
        m.iter().any(|(_, _, r)| *r == Some(help.message_id))
    })
    .await;
    assert!(!hub.dir.path().join("release").exists());

    // pi's next answer waits a little for the spoken one, then goes.
    hub.say("second");
    let p2 = pi.recv_type("prompt").await;
    pi.answer(&p2, "a quick answer").await;
    until("the second answer, spoken", || {
        bot_transcript(&hub)
            .iter()
            .any(|m| is_voice(m) && spoken(&hub, m).contains("a quick answer"))
    })
    .await;
    assert!(
        !bot_transcript(&hub)
            .iter()
            .any(|m| is_voice(m) && spoken(&hub, m).contains("a slow answer")),
        "the first voice is still being made"
    );

    // The command finishes: the first answer's voice arrives too.
    std::fs::write(hub.dir.path().join("release"), "").unwrap();
    until("the first answer, spoken", || {
        bot_transcript(&hub)
            .iter()
            .any(|m| is_voice(m) && spoken(&hub, m).contains("a slow answer"))
    })
    .await;
    let written: Vec<String> = bot_transcript(&hub)
        .iter()
        .filter(|m| !is_voice(m))
        .filter_map(|m| m.text.clone())
        .filter(|t| t.contains("answer"))
        .collect();
    assert!(written.is_empty(), "spoken, not written: {written:?}");
    hub.stop().await;
}

/// A voice command that runs past its time is stopped: the written answer goes, with a note
/// that the spoken version took too long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_that_takes_too_long_leaves_the_written_answer_and_a_note() {
    let mut hub = hub_with(|hub| {
        let tts = tts(hub, true);
        configure(hub, |c| {
            // The template's own timeout wins over the hub's minute.
            c["outboundHandlers"] = json!([{ "type": "voice", "timeout": 1500,
                "template": format!("{} {{ogg}}", tts.display()) }]);
            c["voice"] = json!({ "replyMode": "always" });
        });
    })
    .await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("talk to me");
    let p = pi.recv_type("prompt").await;
    pi.answer(&p, "a slow answer").await;
    let note = hub::outgoing::texts::voice_too_slow(true);
    let msgs = hub
        .wait_for_bot("the note", |m| m.iter().any(|(_, t, _)| *t == note))
        .await;
    let answer = msgs.iter().position(|(_, t, _)| t == "a slow answer");
    let told = msgs.iter().position(|(_, t, _)| *t == note);
    assert!(
        answer.is_some() && answer < told,
        "the written answer, then the note: {msgs:#?}"
    );
    assert!(!bot_transcript(&hub).iter().any(is_voice));
    hub.stop().await;
}

/// A speech-to-text stand-in: prints the words of the file it is given. A file with "slow" in
/// it first marks `started` and waits until `release` exists (`hang`: never).
fn stt(hub: &TestHub, hang: bool) -> PathBuf {
    let dir = hub.dir.path().display().to_string();
    let wait = if hang {
        "sleep 300".to_owned()
    } else {
        format!("while [ ! -e {dir}/release ]; do sleep 0.05; done")
    };
    script(
        hub,
        "stt.sh",
        &format!(
            "words=$(cat \"$1\")\ncase \"$words\" in *slow*) touch {dir}/started; {wait};; esac\n\
             printf 'heard: %s' \"$words\"\n"
        ),
    )
}

/// While one voice note's transcription hangs, another message's voice note is downloaded,
/// transcribed and handed to pi.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_transcription_holds_no_other_messages_files() {
    let mut hub = hub_with(|hub| {
        let stt = stt(hub, false);
        configure(hub, |c| {
            c["inboundHandlers"] =
                json!([{ "type": "voice", "template": format!("{} {{file}}", stt.display()) }]);
        });
    })
    .await;
    let mut pi = hub.shim("/work/web", 4242).await;
    voice_note(&hub, "slow words");
    until("the transcription to start", || started(hub.dir.path())).await;
    voice_note(&hub, "quick words");
    let p = pi.recv_type("prompt").await;
    let text = |p: &Value| p["text"].as_str().unwrap_or_default().to_owned();
    assert!(text(&p).starts_with("heard: quick words"), "{p}");
    assert!(!hub.dir.path().join("release").exists());
    hub.wait_for_bot("the second transcript", |m| {
        m.iter().any(|(_, t, _)| t.contains("heard: quick words"))
    })
    .await;
    pi.answer(&p, "done quick").await;
    std::fs::write(hub.dir.path().join("release"), "").unwrap();
    let p = pi.recv_type("prompt").await;
    assert!(text(&p).starts_with("heard: slow words"), "{p}");
    hub.stop().await;
}

/// A transcription that runs past its time is stopped: pi gets the voice note as a file, and
/// the person is told it could not be transcribed in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcription_that_takes_too_long_hands_pi_the_file_and_says_so() {
    let mut hub = hub_with(|hub| {
        let stt = stt(hub, true);
        configure(hub, |c| {
            c["inboundHandlers"] = json!([{ "type": "voice", "timeout": 1500,
                "template": format!("{} {{file}}", stt.display()) }]);
        });
    })
    .await;
    let mut pi = hub.shim("/work/web", 4242).await;
    let sent = voice_note(&hub, "slow words");
    let p = pi.recv_type("prompt").await;
    let text = p["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("[attachments]") && text.contains(".ogg"),
        "the file reached pi: {p}"
    );
    let note = hub::outgoing::texts::handler_too_slow("", true);
    let msgs = hub
        .wait_for_bot("the note", |m| m.iter().any(|(_, t, _)| *t == note))
        .await;
    let told = msgs.iter().find(|(_, t, _)| *t == note).unwrap();
    assert_eq!(told.2, Some(sent.message_id), "a reply to the voice note");
    hub.stop().await;
}

/// An answer that starts with `-` never reaches a text-to-speech command as an option: with
/// `{text}` as a word of its own and no `--` before it, the command is not run and the answer
/// is written; with `--` before it, it is spoken. The command writes its arguments into the
/// voice file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_starting_with_a_dash_is_never_an_option_of_the_voice_command() {
    let argv_tts = |hub: &TestHub| {
        let dir = hub.dir.path().display().to_string();
        script(
            hub,
            "argv-tts.sh",
            &format!(
                "touch {dir}/ran\nout=$1; shift\n\
                 {{ printf 'OggS'; for a in \"$@\"; do printf '[%s]' \"$a\"; done; }} > \"$out\"\n"
            ),
        )
    };
    let use_template = |hub: &TestHub, template: String| {
        configure(hub, |c| {
            c["outboundHandlers"] = json!([{ "type": "voice", "template": template }]);
            c["voice"] = json!({ "replyMode": "always" });
        });
    };
    let mut hub = hub_with(|hub| {
        let tts = argv_tts(hub);
        use_template(hub, format!("{} {{ogg}} {{text}}", tts.display()));
    })
    .await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("the weather?");
    let p = pi.recv_type("prompt").await;
    pi.answer(&p, "-5 degrees and --output=/tmp/x").await;
    // Written instead, and the command never ran.
    hub.wait_for_bot("the written answer", |m| {
        m.iter()
            .any(|(_, t, _)| t == "-5 degrees and --output=/tmp/x")
    })
    .await;
    assert!(
        !hub.dir.path().join("ran").exists(),
        "the command was not run"
    );
    assert!(!bot_transcript(&hub).iter().any(is_voice));

    // Written the safe way, the same answer is spoken, the text one operand after `--`.
    let tts = hub.dir.path().join("argv-tts.sh");
    use_template(&hub, format!("{} {{ogg}} -- {{text}}", tts.display()));
    hub.say("and tomorrow?");
    let p = pi.recv_type("prompt").await;
    pi.answer(&p, "-3 degrees").await;
    until("the spoken answer", || {
        bot_transcript(&hub).iter().any(is_voice)
    })
    .await;
    let voice = bot_transcript(&hub).into_iter().find(is_voice).unwrap();
    assert_eq!(spoken(&hub, &voice), "OggS[--][-3 degrees]");
    hub.stop().await;
}
