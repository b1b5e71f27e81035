//! What a person switching from the reference system expects, end to end with real pi against
//! the fake LLM and tg-fake: pi's own compaction told in its place (and no prompt dispatched
//! while it runs), topics that tidy up after a pi that quit (`threads.automaticCleanup`) and
//! the offer to delete long-offline ones, work typed in pi's terminal looking alive on the
//! phone, and a Generative App button refused rather than sent to pi as a prompt.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, project, setup};
use common::{Env, OWNER, wait_for};
use serde_json::{Value, json};
use tg_fake::control::{ThreadFilter, TranscriptEntry};

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(s.env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
}

/// Every message the bot sent the owner (any topic), not deleted, in order.
fn bot_messages(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

/// The first bot message whose text satisfies `pred`, waiting up to `secs`.
fn wait_message(env: &Env, what: &str, secs: u64, pred: impl Fn(&str) -> bool) -> TranscriptEntry {
    let mut found = None;
    wait_for(what, secs, || {
        found = bot_messages(env)
            .into_iter()
            .find(|m| m.text.as_deref().is_some_and(&pred));
        found.is_some()
    });
    found.unwrap()
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
    wait_message(env, "the connected notice", 60, |t| {
        t.starts_with("pi connected: web")
    });
    let one = long("first prompt", 80);
    env.say(&one);
    let first = wait_message(env, "the first answer", 60, |t| t.starts_with("echo: first prompt"));
    let notice = wait_message(env, "the compaction, told", 60, |t| {
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
    let second = wait_message(env, "the second answer", 90, |t| t.starts_with("echo: second prompt"));
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
                && r.params["text"].as_str().is_some_and(|t| t.starts_with("🗜"))
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
