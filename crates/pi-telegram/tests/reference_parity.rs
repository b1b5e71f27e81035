//! What a person switching from the reference system expects, end to end with real pi against
//! the fake LLM and tg-fake: pi's own compaction told in its place (and no prompt dispatched
//! while it runs), topics that tidy up after a pi that quit (`threads.automaticCleanup`) and
//! the offer to delete long-offline ones, work typed in pi's terminal looking alive on the
//! phone, and a Generative App button refused rather than sent to pi as a prompt.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::chat::{bot_messages, press, wait_message};
use common::pi::{PiSetup, connected_pi, install_extension, project, setup, setup_threaded};
use common::{Env, OWNER, wait_for};
use serde_json::{Value, json};
use tg_fake::control::TranscriptEntry;
use tg_fake::world::TopicState;

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(s.env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
}

fn text(m: &TranscriptEntry) -> &str {
    m.text.as_deref().unwrap_or_default()
}

/// pi's settings.json in the agent dir, merged with `patch`.
fn pi_settings(s: &PiSetup, patch: Value) {
    let path = s.pi.agent_dir().join("settings.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for (k, val) in patch.as_object().unwrap() {
        if let (Some(old), Some(new)) = (v[k].as_object_mut(), val.as_object()) {
            for (k2, v2) in new {
                old.insert(k2.clone(), v2.clone());
            }
        } else {
            v[k] = val.clone();
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// A prompt of `words` words after `tag` (pi keeps its last 50 tokens when it compacts: a
/// conversation of short messages has nothing to summarise).
fn long(tag: &str, words: usize) -> String {
    let filler: Vec<String> = (1..=words).map(|i| format!("word{i}")).collect();
    format!("{tag} {}", filler.join(" "))
}

#[test]
fn pis_own_compaction_is_told_after_the_answer_it_followed() {
    let Some(s) = setup() else { return };
    // The fake model's 32,000-token window with 31,900 reserved: every exchange crosses the
    // threshold, so pi compacts after each answer.
    pi_settings(&s, json!({ "compaction": { "reserveTokens": 31_900 } }));
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_message(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    let one = long("first prompt", 80);
    env.say(&one);
    let first = wait_message(env, "the first answer", |t| {
        t.starts_with("echo: first prompt")
    });
    let notice = wait_message(env, "the compaction, told", |t| {
        t.starts_with("🗜 web's context is compacted")
    });
    // After the answer it followed, with the tokens before and after.
    assert!(first.message_id < notice.message_id, "{first:?} {notice:?}");
    assert!(text(&notice).contains(" → "), "{:?}", notice.text);
    assert!(text(&notice).ends_with(" tokens."), "{:?}", notice.text);
    let summaries = || {
        s.llm
            .requests()
            .iter()
            .filter(|r| r.to_string().contains("summarization"))
            .count()
    };
    assert!(summaries() >= 1);
    // The next prompt waits for pi's compaction and is answered after it; every compaction
    // notice is silent.
    env.say(&long("second prompt", 80));
    let second = wait_message(env, "the second answer", |t| {
        t.starts_with("echo: second prompt")
    });
    assert!(notice.message_id < second.message_id);
    // (pi's summaries quote the conversation: the answers count, not the requests.)
    let answers = env
        .bot_texts(OWNER)
        .iter()
        .filter(|t| t.starts_with("echo: second prompt"))
        .count();
    assert_eq!(answers, 1);
    let told: Vec<Value> = env
        .fake
        .control()
        .requests(0, None)
        .into_iter()
        .filter(|r| {
            matches!(r.method.as_str(), "sendMessage" | "editMessageText")
                && r.params["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("🗜"))
        })
        .map(|r| r.params)
        .collect();
    assert!(!told.is_empty());
    for p in &told {
        if p.get("message_id").is_none() {
            assert_eq!(p["disable_notification"], json!(true), "{p}");
        }
    }
    assert_eq!(hub.stop(), Some(0));
}

/// The state of the topic `thread` at Telegram.
fn topic_state(env: &Env, thread: i64) -> TopicState {
    env.fake
        .control()
        .topics(Some(OWNER), None)
        .unwrap()
        .into_iter()
        .find(|t| t.thread_id == thread)
        .map(|t| t.state)
        .unwrap()
}

/// `threads.automaticCleanup` in telegram.json (the Settings button writes the same key).
fn set_cleanup(env: &Env, on: bool) {
    let path = env.config_path();
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v["threads"] = json!({ "automaticCleanup": on });
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn a_pi_that_quits_leaves_no_topic_and_one_that_crashes_keeps_it() {
    let Some(s) = setup_threaded() else { return };
    install_extension(&s);
    let env = &s.env;
    let mut hub = start(&s);

    // pi quits (its terminal closes: stdin ends) after an answer: the answer arrives, then the
    // topic goes, and the main chat says so.
    let web = project(&s.pi, "web");
    let pi = connected_pi(&s, Some(&web));
    let topic = env.bound_topic("web", 60);
    send_in(env, topic, "last words");
    wait_message(env, "the answer in the topic", |t| t == "echo: last words");
    pi.close(Duration::from_secs(30)).unwrap();
    wait_message(env, "the notice in the main chat", |t| {
        t.starts_with("pi web is gone: pi quit.") && t.contains("Its thread is removed.")
    });
    wait_for("the topic deleted", 60, || {
        topic_state(env, topic) == TopicState::Deleted
    });
    // The answer was delivered before the topic went.
    let requests = env.fake.control().requests(0, None);
    let answered = requests
        .iter()
        .position(|r| r.params.to_string().contains("echo: last words"))
        .unwrap();
    let deleted = requests
        .iter()
        .position(|r| r.method == "deleteForumTopic")
        .unwrap();
    assert!(answered < deleted);

    // A pi that crashes keeps its topic (offline, as before).
    let api = project(&s.pi, "api");
    let pi = connected_pi(&s, Some(&api));
    let topic = env.bound_topic("api", 60);
    drop(pi); // SIGKILL
    wait_offline(env, topic);
    std::thread::sleep(Duration::from_secs(2));
    assert_ne!(topic_state(env, topic), TopicState::Deleted);

    // With the setting off, a quit keeps the topic too.
    set_cleanup(env, false);
    let docs = project(&s.pi, "docs");
    let pi = connected_pi(&s, Some(&docs));
    let topic = env.bound_topic("docs", 60);
    pi.close(Duration::from_secs(30)).unwrap();
    wait_offline(env, topic);
    std::thread::sleep(Duration::from_secs(2));
    assert_ne!(topic_state(env, topic), TopicState::Deleted);
    let deletes = || {
        env.fake
            .control()
            .requests(0, None)
            .iter()
            .filter(|r| r.method == "deleteForumTopic")
            .count()
    };
    assert_eq!(deletes(), 1);

    // A headless pi closed from Telegram (the setting on again): its topic goes once /close's
    // reply there is delivered.
    set_cleanup(env, true);
    env.spawn_pi(&project(&s.pi, "ops"));
    let topic = env.bound_topic("ops", 60);
    send_in(env, topic, "/close");
    wait_for("the topic deleted", 60, || {
        topic_state(env, topic) == TopicState::Deleted
    });
    assert_eq!(deletes(), 2);
    assert_eq!(hub.stop(), Some(0));
}

/// Waits until the binding of topic `thread` is offline (its pi gone, the topic kept).
fn wait_offline(env: &Env, thread: i64) {
    wait_for("the topic's pi offline", 60, || {
        env.status()["threads"].as_array().is_some_and(|bs| {
            bs.iter()
                .any(|b| b["thread_id"] == json!(thread) && b["state"] == json!("offline"))
        })
    });
}

/// Writes `text` in topic `thread` as the owner.
fn send_in(env: &Env, thread: i64, text: &str) {
    env.fake
        .control()
        .send_text(tg_fake::control::SendText {
            text: text.into(),
            thread_id: Some(thread),
            user_id: Some(OWNER),
            ..Default::default()
        })
        .unwrap();
}

#[test]
fn topics_offline_past_the_retention_are_offered_for_deletion_in_one_message() {
    let Some(s) = setup_threaded() else { return };
    install_extension(&s);
    let env = &s.env;
    // Retention 0 days: every offline topic is past it at the next start.
    let path = env.config_path();
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v["threadRetentionDays"] = json!(0);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let mut hub = start(&s);
    let mut topics = Vec::new();
    for name in ["old", "older"] {
        let pi = connected_pi(&s, Some(&project(&s.pi, name)));
        let topic = env.bound_topic(name, 60);
        drop(pi); // a crash: the topic stays, offline
        wait_offline(env, topic);
        topics.push(topic);
    }
    assert_eq!(hub.stop(), Some(0));
    let mut hub = start(&s);
    let offer = wait_message(env, "the offer", |t| t.starts_with("🧹 2 topics"));
    assert!(text(&offer).contains("A · old"), "{:?}", offer.text);
    assert!(text(&offer).contains("B · older"), "{:?}", offer.text);
    assert_eq!(offer.thread_id, None, "in the main chat");
    for t in &topics {
        assert_ne!(topic_state(env, *t), TopicState::Deleted);
    }
    press(env, offer.message_id, "🗑 Delete them");
    wait_for("both deleted", 60, || {
        topics
            .iter()
            .all(|t| topic_state(env, *t) == TopicState::Deleted)
    });
    wait_for("the offer settled", 30, || {
        bot_messages(env)
            .iter()
            .any(|m| m.message_id == offer.message_id && text(m).ends_with("→ Deleting 2."))
    });
    // One offer, not one per topic, and none again at the next start.
    assert_eq!(hub.stop(), Some(0));
    let mut hub = start(&s);
    std::thread::sleep(Duration::from_secs(2));
    let offers = bot_messages(env)
        .iter()
        .filter(|m| text(m).starts_with("🧹"))
        .count();
    assert_eq!(offers, 1);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn work_typed_in_the_terminal_looks_alive_on_the_phone() {
    let Some(s) = setup() else { return };
    install_extension(&s);
    let env = &s.env;
    let mut hub = start(&s);
    let mut pi = connected_pi(&s, Some(&project(&s.pi, "desk")));
    wait_message(env, "the connected notice", |t| {
        t.starts_with("pi connected: desk")
    });
    // Typed at the terminal (the RPC host plays it): a slow answer, 20 words 150 ms apart.
    let words: Vec<String> = (1..=20).map(|i| format!("t{i}")).collect();
    let prompt = format!("[[slow]] typed here {}", words.join(" "));
    pi.send(&json!({ "id": "typed", "type": "prompt", "message": prompt }))
        .unwrap();
    let pushed = wait_message(env, "the pushed answer", |t| t.contains("typed here t1"));
    let requests = env.fake.control().requests(0, None);
    let drafts: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.method.ends_with("Draft")
                && r.params["draft_id"].as_i64().is_some_and(|d| d >= 1 << 40)
        })
        .map(|(i, _)| i)
        .collect();
    assert!(!drafts.is_empty(), "no draft of the terminal's work");
    assert!(
        drafts
            .iter()
            .any(|i| requests[*i].params.to_string().contains("t3")),
        "the draft grew with the answer"
    );
    // No draft after the pushed answer.
    let answer_at = requests
        .iter()
        .position(|r| {
            !r.method.ends_with("Draft") && r.params.to_string().contains("typed here t1")
        })
        .unwrap();
    assert!(
        drafts.iter().all(|i| *i < answer_at),
        "a draft after the answer"
    );
    assert_eq!(pushed.thread_id, None);

    // Without drafts: typing while it works.
    let path = env.config_path();
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v["assistant"] = json!({ "draftPreviews": false });
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let typing_before = env
        .fake
        .control()
        .requests(0, None)
        .iter()
        .filter(|r| r.method == "sendChatAction")
        .count();
    pi.send(
        &json!({ "id": "typed2", "type": "prompt", "message": "[[slow]] again a b c d e f g h" }),
    )
    .unwrap();
    wait_message(env, "the second pushed answer", |t| t.contains("again a b"));
    let typing = env
        .fake
        .control()
        .requests(0, None)
        .iter()
        .filter(|r| r.method == "sendChatAction")
        .count();
    assert!(typing > typing_before, "no typing for the terminal's work");
    drop(pi);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_generative_app_button_is_refused_not_sent_to_pi() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_message(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    // The fake model echoes: its answer carries the buttons, one of them an app action.
    env.say("pick\n\n<!-- telegram_button [{Add|todo::add(3)} {Plain|say hello}] -->");
    let answer = wait_message(env, "the answer with buttons", |t| {
        t.starts_with("echo: pick")
    });
    let requests = s.llm.requests().len();
    let answers = || {
        env.fake
            .control()
            .requests(0, None)
            .into_iter()
            .filter(|r| r.method == "answerCallbackQuery")
            .map(|r| r.params["text"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    press(env, answer.message_id, "Add");
    wait_for("the tap answered", 30, || {
        answers().iter().any(|t| t.contains("Generative App"))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        s.llm.requests().len(),
        requests,
        "the app action reached pi"
    );
    // An ordinary button still sends its prompt.
    press(env, answer.message_id, "Plain");
    wait_message(env, "the plain button's answer", |t| t == "echo: say hello");
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_reference_telegram_json_warns_once_per_key_this_hub_does_not_use() {
    let env = Env::new();
    env.preset_owner();
    // Every key the reference 0.42 documents, beside the profile the test wrote.
    let path = env.config_path();
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let profile = v["profiles"]["default"].as_object_mut().unwrap();
    profile.insert("botUsername".into(), json!("my_bot"));
    profile.insert("botId".into(), json!(123));
    profile.insert("lastUpdateId".into(), json!(7));
    for (k, val) in json!({
        "inboundHandlers": [], "attachmentHandlers": [], "outboundHandlers": [],
        "assistant": { "draftPreviews": true, "rendering": "rich", "activity": "verbose",
                       "timeInjection": "interval", "activityVerbosity": "verbose" },
        "voice": { "replyMode": "manual" },
        "time": { "interval": 1_800_000 },
        "threads": { "automaticCleanup": true },
        "followerProbeTimeoutMs": 5000
    })
    .as_object()
    .unwrap()
    {
        v[k] = val.clone();
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    // (The test's own write left it world-readable; that warning is not this test's.)
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&path, private).unwrap();
    let warnings: Vec<String> = env.status()["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("assistant.activityVerbosity is not used"))
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("followerProbeTimeoutMs is not used"))
    );
    // doctor says the same, as a warning, not a failure.
    let out = env.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("followerProbeTimeoutMs is not used"),
        "{text}"
    );
}
