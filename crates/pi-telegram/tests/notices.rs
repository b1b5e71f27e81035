//! What the person reads, through the real binary against tg-fake with scripted instances:
//! every notice says what happens in the place it is posted; a restart nobody asked for is
//! quiet; no text carries an internal error chain; the `/start` keyboard follows the selection;
//! a photo or file says that only its caption reached pi.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::shim::Shim;
use common::{Env, OWNER, wait_for};
use serde_json::json;
use tg_fake::control::{MediaItem, Press, SendMedia, SendText, ThreadFilter, TranscriptEntry};
use tg_fake::world::MediaKind;
use tg_fake::{FakeConfig, FaultKind, FaultSpec};

fn threaded_env() -> Env {
    let env = Env::with(FakeConfig {
        has_topics_enabled: true,
        ..FakeConfig::default()
    });
    env.preset_owner();
    env
}

fn classic_env() -> Env {
    let env = Env::new();
    env.preset_owner();
    env
}

fn wait_socket(env: &Env) {
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
}

fn transcript(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
}

/// Bot texts in one place (`None`: the main chat).
fn texts_in(env: &Env, thread: Option<i64>) -> Vec<String> {
    transcript(env)
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted && m.thread_id == thread)
        .filter_map(|m| m.text)
        .collect()
}

fn topic_of(env: &Env, project: &str) -> i64 {
    env.bound_topic(project, 20)
}

fn say_in(env: &Env, thread: Option<i64>, text: &str) -> tg_fake::control::Sent {
    env.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            thread_id: thread,
            ..Default::default()
        })
        .unwrap()
}

/// The newest bot message with a button labelled `label`: (message id, callback data).
fn button(env: &Env, label: &str) -> (i64, String) {
    let mut found = None;
    wait_for(&format!("a button {label:?}"), 20, || {
        found = transcript(env).into_iter().rev().find_map(|m| {
            let rows = m
                .reply_markup
                .as_ref()?
                .get("inline_keyboard")?
                .as_array()?
                .clone();
            rows.iter()
                .flat_map(|r| r.as_array().cloned().unwrap_or_default())
                .find(|b| b["text"] == json!(label))
                .and_then(|b| b["callback_data"].as_str().map(str::to_owned))
                .map(|d| (m.message_id, d))
        });
        found.is_some()
    });
    found.unwrap()
}

fn press(env: &Env, (message_id, data): &(i64, String)) {
    env.fake
        .control()
        .press(Press {
            message_id: *message_id,
            data: data.clone(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

fn bot_message_count(env: &Env) -> usize {
    transcript(env).iter().filter(|m| m.from_bot).count()
}

/// Pieces of internal error text that must never reach the person.
const INTERNAL: [&str; 12] = [
    "transport failure",
    "client error",
    "SendRequest",
    "createForumTopic",
    "sendMessage",
    "error sending request",
    "os error",
    "outcome unknown",
    "HTTP 5",
    "hyper",
    "telegram refused",
    "malformed line",
];

fn assert_plain(texts: &[String]) {
    for t in texts {
        for marker in INTERNAL {
            assert!(
                !t.contains(marker),
                "internal error text {marker:?} in {t:?}"
            );
        }
    }
}

#[test]
fn threaded_notices_say_what_happens_where_they_are_posted() {
    let env = threaded_env();
    let mut hub = env.serve();
    wait_socket(&env);
    let web = Shim::plain(&env, "/work/web", 7101);
    let mut api = Shim::plain(&env, "/work/api", 7102);
    let web_topic = topic_of(&env, "web");
    let api_topic = topic_of(&env, "api");
    // web's connection drops: its own topic says messages there wait for it, nothing about
    // where "new messages" go (that is classic-mode talk).
    drop(web);
    wait_for("the offline notice in web's topic", 20, || {
        texts_in(&env, Some(web_topic))
            .iter()
            .any(|t| t.contains("went offline"))
    });
    let notice = texts_in(&env, Some(web_topic))
        .into_iter()
        .find(|t| t.contains("went offline"))
        .unwrap();
    assert!(
        notice.contains("Messages you write here wait for it") && notice.contains("/work/web"),
        "{notice}"
    );
    assert!(!notice.contains("New messages now go to"), "{notice}");
    assert!(
        texts_in(&env, None).iter().all(|t| !t.contains("web")),
        "nothing about web in the main chat: {:?}",
        texts_in(&env, None)
    );
    // Two messages in its topic: they wait, and the person is told once per absence; with
    // another pi live, they may send it there instead.
    say_in(&env, Some(web_topic), "first while away");
    wait_for("the waits notice", 20, || {
        texts_in(&env, Some(web_topic))
            .iter()
            .any(|t| t.starts_with("pi web is offline. Your message waits for it"))
    });
    let redirect = button(&env, "Send to api");
    press(&env, &redirect);
    let p = api.recv_type("prompt");
    assert_eq!(p["text"], json!("first while away"));
    api.answer(&p, "done by api");
    // web comes back: "pi is back" (the person was told it went away), and a later message
    // goes to it.
    let mut web = Shim::plain(&env, "/work/web", 7101);
    wait_for("web's return", 20, || {
        texts_in(&env, Some(web_topic))
            .iter()
            .any(|t| t.starts_with("pi is back: web"))
    });
    say_in(&env, Some(web_topic), "second");
    let p = web.recv_type("prompt");
    assert_eq!(p["text"], json!("second"));
    web.answer(&p, "done by web");
    wait_for("web's answer", 20, || {
        texts_in(&env, Some(web_topic))
            .iter()
            .any(|t| t == "done by web")
    });
    // /telegram-disconnect: the main chat says it is gone and its thread removed.
    web.disconnect();
    wait_for("the disconnect notice", 20, || {
        texts_in(&env, None).iter().any(|t| {
            t.starts_with("pi web is gone: disconnected from Telegram")
                && t.contains("Its thread is removed.")
        })
    });
    assert!(
        texts_in(&env, Some(api_topic))
            .iter()
            .any(|t| t == "done by api")
    );
    let all: Vec<String> = transcript(&env)
        .into_iter()
        .filter_map(|m| m.text)
        .collect();
    assert_plain(&all);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn classic_notices_and_the_start_keyboard_follow_the_selection() {
    let env = classic_env();
    let mut hub = env.serve();
    wait_socket(&env);
    let mut web = Shim::plain(&env, "/work/web", 7201);
    let mut api = Shim::plain(&env, "/work/api", 7202);
    say_in(&env, None, "/start");
    let to_api = button(&env, "api");
    let start_message = to_api.0;
    let marked = |env: &Env| -> Vec<String> {
        transcript(env)
            .into_iter()
            .find(|m| m.message_id == start_message)
            .and_then(|m| m.reply_markup)
            .map(|r| {
                r["inline_keyboard"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|row| row[0]["text"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    // The instances, then the sections of the menu.
    let sections = ["Status", "Queue", "Help"].map(str::to_owned);
    assert_eq!(marked(&env)[..2], ["▶ web".to_owned(), "api".to_owned()]);
    assert_eq!(marked(&env)[2..], sections);
    press(&env, &to_api);
    // The same message now marks api, in its keyboard and its list.
    wait_for("the marker to follow the tap", 20, || {
        marked(&env)[..]
            == [
                "web".to_owned(),
                "▶ api".to_owned(),
                sections[0].clone(),
                sections[1].clone(),
                sections[2].clone(),
            ]
    });
    let text = transcript(&env)
        .into_iter()
        .find(|m| m.message_id == start_message)
        .and_then(|m| m.text)
        .unwrap();
    assert!(
        text.contains("▶ api: /work/api") && text.contains("• web: /work/web"),
        "{text}"
    );
    say_in(&env, None, "for api");
    let p = api.recv_type("prompt");
    assert_eq!(p["text"], json!("for api"));
    api.answer(&p, "ok");
    // api closes: in classic mode the one chat says where new messages go now.
    api.send(&json!({ "type": "bye", "reason": "shutdown" }));
    wait_for("the gone notice", 20, || {
        texts_in(&env, None)
            .iter()
            .any(|t| t == "pi api is gone: pi closed its session. New messages now go to web.")
    });
    say_in(&env, None, "for web");
    let p = web.recv_type("prompt");
    assert_eq!(p["text"], json!("for web"));
    assert_plain(&texts_in(&env, None));
    assert_eq!(hub.stop(), Some(0));
}

/// Kills the hub and starts a new one; the scripted pi reconnects as the extension does.
fn restart_hard(env: &Env, hub: &mut common::Hub) -> common::Hub {
    hub.kill();
    let _ = std::fs::remove_file(env.profile_dir().join("hub.sock"));
    let next = env.serve();
    wait_socket(env);
    next
}

fn quiet_restart(env: &Env, threaded: bool) {
    let mut hub = env.serve();
    wait_socket(env);
    let web = Shim::plain(env, "/work/web", 7301);
    if threaded {
        topic_of(env, "web");
    }
    wait_for("the greeting", 20, || bot_message_count(env) >= 1);
    std::thread::sleep(Duration::from_millis(300));
    let before = bot_message_count(env);
    // The hub dies first and the connection closes with it, as in a crash: a hub that saw
    // the connection close while still running would rightly say the pi left.
    hub.kill();
    drop(web);
    let mut hub = restart_hard(env, &mut hub);
    // A message written while the hub was away.
    let thread = threaded.then(|| topic_of(env, "web"));
    say_in(env, thread, "written during the restart");
    let mut web = Shim::plain(env, "/work/web", 7301);
    let p = web.recv_type("prompt");
    assert_eq!(p["text"], json!("written during the restart"));
    web.answer(&p, "answered after the restart");
    wait_for("the answer", 20, || {
        transcript(env)
            .iter()
            .any(|m| m.text.as_deref() == Some("answered after the restart"))
    });
    std::thread::sleep(Duration::from_millis(800));
    let after: Vec<String> = transcript(env)
        .into_iter()
        .filter(|m| m.from_bot)
        .skip(before)
        .filter_map(|m| m.text)
        .collect();
    assert_eq!(
        after,
        vec!["answered after the restart".to_owned()],
        "a restart nobody asked for says nothing but the answer"
    );
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_hub_restart_is_quiet_in_classic_mode() {
    quiet_restart(&classic_env(), false);
}

#[test]
fn a_hub_restart_is_quiet_in_threaded_mode() {
    quiet_restart(&threaded_env(), true);
}

#[test]
fn an_unknown_topic_outcome_is_explained_without_error_text() {
    let env = threaded_env();
    env.fake
        .control()
        .add_fault(FaultSpec {
            method: "createForumTopic".into(),
            kind: FaultKind::CommitThenDrop,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: None,
        })
        .unwrap();
    let mut hub = env.serve();
    wait_socket(&env);
    let _web = Shim::plain(&env, "/work/web", 7401);
    wait_for("the question", 20, || {
        texts_in(&env, None)
            .iter()
            .any(|t| t.contains("cannot tell whether it was made"))
    });
    let question = texts_in(&env, None)
        .into_iter()
        .find(|t| t.contains("cannot tell whether it was made"))
        .unwrap();
    assert!(
        question.contains("Telegram's answer was lost"),
        "{question}"
    );
    assert_plain(&texts_in(&env, None));
    // The detail is in status, named once.
    let st = env.status();
    let detail = st["intents"][0]["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("createForumTopic"), "{detail}");
    assert!(
        !detail.contains("createForumTopic: createForumTopic"),
        "{detail}"
    );
    assert_eq!(hub.stop(), Some(0));
}

fn media(env: &Env, kind: MediaKind, caption: Option<&str>) {
    env.fake
        .control()
        .send_media(SendMedia {
            item: MediaItem {
                kind,
                data_base64: base64::engine::general_purpose::STANDARD.encode(b"not really a file"),
                filename: Some("notes.txt".into()),
                mime_type: None,
                caption: caption.map(str::to_owned),
            },
            thread_id: None,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

#[test]
fn a_photo_is_an_image_and_a_file_is_named_in_the_prompt() {
    let env = classic_env();
    let mut hub = env.serve();
    wait_socket(&env);
    let mut web = Shim::plain(&env, "/work/web", 7501);
    media(&env, MediaKind::Photo, Some("what is on this screen?"));
    let p = web.recv_type("prompt");
    assert!(
        p["text"]
            .as_str()
            .unwrap()
            .starts_with("what is on this screen?\n\n[attachments]"),
        "{p}"
    );
    let images = p["images"].as_array().unwrap();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0]["type"], json!("image"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(images[0]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, b"not really a file", "the photo's bytes");
    web.answer(&p, "a");
    media(&env, MediaKind::Document, Some("summarise the log"));
    let p = web.recv_type("prompt");
    let text = p["text"].as_str().unwrap();
    assert!(
        text.starts_with("summarise the log\n\n[attachments] "),
        "{text}"
    );
    assert!(text.contains("-notes.txt (document"), "{text}");
    assert!(
        p.get("images").is_none(),
        "a document is a file, not an image"
    );
    web.answer(&p, "b");
    assert_eq!(hub.stop(), Some(0));
}
