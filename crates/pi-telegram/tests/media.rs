//! What is not plain text, end to end with real pi against the fake LLM: photos become images
//! in pi's prompt, documents land in the download folder with the same bytes, oversize files
//! are refused with a reason while the caption still goes to pi, albums become one turn,
//! forwards and their comment one attributed prompt, a long text Telegram split one prompt, a
//! reply carries what it replies to, hostile file names stay inside the folder, and a hub
//! killed mid-download downloads once more and prompts pi once.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::pi::{PiSetup, project, prompts_containing, setup, setup_threaded};
use common::{Env, OWNER, wait_for};
use serde_json::Value;
use tg_fake::control::{Forward, MediaItem, SendMedia, SendMediaGroup, SendText, ThreadFilter};
use tg_fake::world::MediaKind;

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn bot_texts(env: &Env) -> Vec<String> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .filter_map(|m| m.text)
        .collect()
}

fn wait_text(env: &Env, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let mut found = None;
    wait_for(what, 60, || {
        found = bot_texts(env).into_iter().find(|t| pred(t));
        found.is_some()
    });
    found.unwrap()
}

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    // Listening, not just a socket file left by a hub that was killed.
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(s.env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
}

fn connected(s: &PiSetup, name: &str) {
    s.env.spawn_pi(&project(&s.pi, name));
    wait_text(&s.env, "the connected notice", |t| {
        t.starts_with(&format!("pi connected: {name}"))
    });
}

fn send_media(env: &Env, kind: MediaKind, bytes: &[u8], name: Option<&str>, caption: &str) -> i64 {
    env.fake
        .control()
        .send_media(SendMedia {
            item: item(kind, bytes, name, caption),
            thread_id: None,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap()
        .message_id
}

fn item(kind: MediaKind, bytes: &[u8], name: Option<&str>, caption: &str) -> MediaItem {
    MediaItem {
        kind,
        data_base64: b64(bytes),
        filename: name.map(str::to_owned),
        mime_type: match kind {
            MediaKind::Document => Some("text/plain".into()),
            _ => None,
        },
        caption: (!caption.is_empty()).then(|| caption.to_owned()),
    }
}

/// The model requests that carried `needle`.
fn requests_with(s: &PiSetup, needle: &str) -> Vec<Value> {
    s.llm
        .requests()
        .into_iter()
        .filter(|r| r.to_string().contains(needle))
        .collect()
}

/// Image parts in a request's last user message.
fn images_in(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_array())
        .map_or(0, |parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "image_url" || p["type"] == "image")
                .count()
        })
}

fn downloads(s: &PiSetup) -> std::path::PathBuf {
    s.pi.agent_dir().join("tmp/telegram/default")
}

#[test]
fn a_photo_reaches_pi_as_an_image_with_its_caption() {
    let Some(s) = setup() else { return };
    let mut hub = start(&s);
    connected(&s, "web");
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    send_media(
        &s.env,
        MediaKind::Photo,
        &png,
        None,
        "what is in this picture",
    );
    wait_text(&s.env, "the answer", |t| {
        t.starts_with("echo: what is in this picture")
    });
    let reqs = requests_with(&s, "what is in this picture");
    assert_eq!(reqs.len(), 1, "one model request");
    assert_eq!(images_in(&reqs[0]), 1, "{}", reqs[0]);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_document_is_saved_with_its_bytes_and_pi_can_read_it() {
    let Some(s) = setup() else { return };
    let mut hub = start(&s);
    connected(&s, "web");
    let content = "line one of the notes\nline two\n";
    let cmd = format!("[[bash:cat {}/*-notes.txt]]", downloads(&s).display());
    send_media(
        &s.env,
        MediaKind::Document,
        content.as_bytes(),
        Some("notes.txt"),
        &cmd,
    );
    let answer = wait_text(&s.env, "the tool's answer", |t| t.contains("tool said:"));
    assert!(answer.contains("line one of the notes"), "{answer}");
    let saved: Vec<_> = std::fs::read_dir(downloads(&s))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(std::fs::read_to_string(&saved[0]).unwrap(), content);
    // The prompt named the saved file.
    let req = &requests_with(&s, "notes.txt")[0];
    assert!(req.to_string().contains("[attachments]"), "{req}");
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn an_oversize_file_is_refused_with_a_reason_and_the_caption_still_reaches_pi() {
    let Some(s) = setup() else { return };
    let mut hub = s
        .env
        .serve_with(&[("PI_TELEGRAM_INBOUND_FILE_MAX_BYTES", "1000")]);
    wait_for("the hub socket", 20, || {
        s.env.profile_dir().join("hub.sock").exists()
    });
    connected(&s, "web");
    send_media(
        &s.env,
        MediaKind::Document,
        &[b'x'; 5000],
        Some("big.log"),
        "look at the log",
    );
    let refusal = wait_text(&s.env, "the refusal", |t| {
        t.starts_with("📎 big.log was not downloaded")
    });
    assert!(refusal.contains("over the 1.0 KB limit"), "{refusal}");
    let answer = wait_text(&s.env, "the answer", |t| {
        t.starts_with("echo: look at the log")
    });
    assert!(answer.contains("not downloaded"), "{answer}");
    assert!(std::fs::read_dir(downloads(&s)).map_or(true, |d| d.count() == 0));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn an_album_is_one_turn_with_every_image() {
    let Some(s) = setup() else { return };
    let mut hub = start(&s);
    connected(&s, "web");
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    let items = vec![
        item(MediaKind::Photo, &png, None, "three views of the bug"),
        item(MediaKind::Photo, &png, None, ""),
        item(MediaKind::Photo, &png, None, ""),
    ];
    s.env
        .fake
        .control()
        .send_media_group(SendMediaGroup {
            items,
            thread_id: None,
            user_id: None,
            token: None,
        })
        .unwrap();
    wait_text(&s.env, "the answer", |t| {
        t.starts_with("echo: three views of the bug")
    });
    std::thread::sleep(Duration::from_millis(500));
    let reqs = requests_with(&s, "three views of the bug");
    assert_eq!(reqs.len(), 1, "one turn");
    assert_eq!(images_in(&reqs[0]), 3, "{}", reqs[0]);
    assert_eq!(s.env.status()["turns"]["done"], serde_json::json!(1));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn forwards_and_their_comment_are_one_attributed_prompt_and_replies_carry_their_quote() {
    let Some(s) = setup() else { return };
    let mut hub = start(&s);
    connected(&s, "web");
    let say = |text: &str, forward: Option<Forward>, reply: Option<i64>| {
        s.env
            .fake
            .control()
            .send_text(SendText {
                text: text.into(),
                forward,
                reply_to_message_id: reply,
                ..SendText::default()
            })
            .unwrap()
            .message_id
    };
    // A comment first, then the forward (what "forward with a comment" sends), while pi is
    // busy: the comment still waits when the forward comes, in whatever update batch.
    say("[[slow]] keep pi busy for a moment", None, None);
    wait_for("pi busy", 30, || {
        prompts_containing(&s.llm, "keep pi busy") == 1
    });
    say("please summarise this", None, None);
    say(
        "the build broke on main after the merge",
        Some(Forward {
            sender_name: Some("Grace".into()),
            ..Forward::default()
        }),
        None,
    );
    let answer = wait_text(&s.env, "the answer", |t| {
        t.starts_with("echo: please summarise this")
    });
    assert!(answer.contains("[forward|from:Grace]"), "{answer}");
    assert!(answer.contains("the build broke on main"), "{answer}");
    assert_eq!(prompts_containing(&s.llm, "please summarise this"), 1);
    assert_eq!(
        prompts_containing(&s.llm, "the build broke"),
        1,
        "one prompt"
    );
    // A forward, then the comment.
    say(
        "deploy failed: disk full",
        Some(Forward {
            sender_name: Some("Linus".into()),
            ..Forward::default()
        }),
        None,
    );
    say("what should I do", None, None);
    let answer = wait_text(&s.env, "the second answer", |t| {
        t.starts_with("echo: what should I do")
    });
    assert!(answer.contains("[forward|from:Linus]"), "{answer}");
    assert_eq!(prompts_containing(&s.llm, "deploy failed"), 1);
    // A reply carries its quote.
    let first = s
        .env
        .fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .find(|m| {
            m.from_bot
                && m.text
                    .as_deref()
                    .is_some_and(|t| t.starts_with("echo: please"))
        })
        .unwrap()
        .message_id;
    say("and shorter please", None, Some(first));
    let answer = wait_text(&s.env, "the reply's answer", |t| {
        t.starts_with("echo: and shorter please")
    });
    assert!(answer.contains("[reply|from:pi]"), "{answer}");
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_long_text_telegram_split_is_one_prompt_and_ordinary_messages_do_not_wait() {
    let Some(s) = setup() else { return };
    let mut hub = start(&s);
    connected(&s, "web");
    let first = format!("START {}", "a".repeat(4090));
    let say = |text: &str| {
        s.env.say(text);
    };
    say(&first);
    say("and the END of it");
    let answer = wait_text(&s.env, "the answer", |t| t.contains("and the END of it"));
    assert!(answer.contains("START"), "joined: {}", &answer[..40]);
    assert_eq!(prompts_containing(&s.llm, "START"), 1);
    // An ordinary message is not held for grouping (no fixed wait on the path).
    let t0 = std::time::Instant::now();
    say("quick one");
    wait_text(&s.env, "the quick answer", |t| t == "echo: quick one");
    eprintln!("ordinary message answered in {:?}", t0.elapsed());
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_hostile_file_name_is_saved_inside_the_folder() {
    let Some(s) = setup() else { return };
    let mut hub = start(&s);
    connected(&s, "web");
    let long = format!("../../{}\u{202e}txt.exe", "n".repeat(300));
    for name in ["../../escape.txt", long.as_str(), "..", "\u{0}\u{1}.txt"] {
        send_media(
            &s.env,
            MediaKind::Document,
            b"payload",
            Some(name),
            &format!("file {}", name.len()),
        );
    }
    wait_for("four answers", 60, || {
        bot_texts(&s.env)
            .iter()
            .filter(|t| t.starts_with("echo: file"))
            .count()
            == 4
    });
    let dir = downloads(&s);
    let saved: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(saved.len(), 4, "{saved:?}");
    for n in &saved {
        assert!(n.len() <= 120 && !n.starts_with('.'), "{n}");
        assert!(
            n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c)),
            "{n}"
        );
    }
    assert!(!dir.join("../../escape.txt").exists());
    assert!(!s.pi.agent_dir().join("tmp/escape.txt").exists());
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_hub_killed_mid_download_downloads_again_and_prompts_pi_once() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    // No pi yet: the message waits; the hub dies with the bytes in hand, before saving them.
    let content = "the one and only copy";
    env.crash_at("inbound.after_download", || {
        wait_for("the hub socket", 20, || {
            env.profile_dir().join("hub.sock").exists()
        });
        send_media(
            env,
            MediaKind::Document,
            content.as_bytes(),
            Some("once.txt"),
            "read once.txt",
        );
    });
    let mut hub = start(&s);
    connected(&s, "web");
    wait_text(env, "the answer", |t| t.starts_with("echo: read once.txt"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(prompts_containing(&s.llm, "read once.txt"), 1);
    let saved: Vec<_> = std::fs::read_dir(downloads(&s))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(saved.len(), 1, "one copy, no leftovers");
    assert_eq!(std::fs::read_to_string(saved[0].path()).unwrap(), content);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn in_threaded_mode_a_photo_goes_to_the_topics_pi() {
    let Some(s) = setup_threaded() else { return };
    let mut hub = start(&s);
    s.env.spawn_pi(&project(&s.pi, "web"));
    let thread = Some(s.env.bound_topic("web", 30));
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    s.env
        .fake
        .control()
        .send_media(SendMedia {
            item: item(MediaKind::Photo, &png, None, "topic picture"),
            thread_id: thread,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_text(&s.env, "the answer", |t| {
        t.starts_with("echo: topic picture")
    });
    assert_eq!(images_in(&requests_with(&s, "topic picture")[0]), 1);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_voice_note_goes_through_the_speech_to_text_template_and_the_transcript_is_the_prompt() {
    let Some(s) = setup() else { return };
    // A stand-in for a local whisper: prints a fixed transcript for the file it is given.
    let stt = s.pi.root().join("stt.sh");
    std::fs::write(
        &stt,
        "#!/bin/sh\ntest -f \"$2\" && echo 'turn on the lights in the hall'\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&stt).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&stt, perms).unwrap();
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(s.env.config_path()).unwrap()).unwrap();
    cfg["inboundHandlers"] = serde_json::json!([
        { "type": "voice", "template": format!("{} --file {{file}}", stt.display()) }
    ]);
    std::fs::write(s.env.config_path(), cfg.to_string()).unwrap();
    let mut hub = start(&s);
    connected(&s, "web");
    send_media(&s.env, MediaKind::Voice, b"OggS fake voice", None, "");
    let shown = wait_text(&s.env, "the transcript shown back", |t| t.starts_with("🎙"));
    assert!(shown.contains("turn on the lights in the hall"), "{shown}");
    wait_text(&s.env, "the answer", |t| {
        t.starts_with("echo: turn on the lights in the hall")
    });
    assert_eq!(prompts_containing(&s.llm, "turn on the lights"), 1);
    // Without a handler, a voice note is a file for pi.
    cfg["inboundHandlers"] = serde_json::json!([]);
    std::fs::write(s.env.config_path(), cfg.to_string()).unwrap();
    send_media(&s.env, MediaKind::Voice, b"OggS another", None, "");
    let answer = wait_text(&s.env, "the file answer", |t| {
        t.starts_with("echo: [attachments]")
    });
    assert!(answer.contains("(voice, audio/ogg"), "{answer}");
    assert_eq!(hub.stop(), Some(0));
}
