//! `pi-telegram serve` as a child process against tg-fake: lock, shutdown, backlog, the one
//! coalesced notice, 409s, flood waits across restarts, commit-unknown sends, status.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Env, OWNER, wait_for};
use serde_json::json;
use tg_fake::{FaultKind, FaultSpec};

fn fault(env: &Env, method: &str, kind: FaultKind, retry_after: Option<u64>) {
    env.fake
        .control()
        .add_fault(FaultSpec {
            method: method.into(),
            kind,
            count: Some(1),
            probability: None,
            retry_after,
            delay_ms: None,
        })
        .unwrap();
}

/// Messages (not other calls) the store records as sent.
fn sent_messages(env: &Env) -> usize {
    env.open_store()
        .read(store::outbox::all)
        .unwrap()
        .into_iter()
        .filter(|r| r.method() == "sendMessage" && r.state == store::outbox::State::Sent)
        .count()
}

fn sends(env: &Env) -> usize {
    env.fake.control().requests(0, Some("sendMessage")).len()
}

#[test]
fn one_hub_per_profile_and_a_clean_stop_on_sigterm() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    wait_for("the hub to take the lock", 10, || {
        env.status()["hub"]["running"] == json!(true)
    });
    assert_eq!(env.status()["hub"]["pid"], json!(hub.pid()));
    let second = env.run(&["serve"]);
    assert_eq!(second.status.code(), Some(3));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains(&format!("pid {}", hub.pid())), "{err}");
    env.say("/help");
    wait_for("the help reply", 10, || env.bot_texts(OWNER).len() == 1);
    assert_eq!(hub.stop(), Some(0));
    let st = env.status();
    assert_eq!(st["hub"]["running"], json!(false));
    assert_eq!(st["journal"], json!({ "pending": 0, "handled": 1 }));
    // The reply, and the bot's command list the hub publishes at start.
    assert_eq!(st["outbox"]["sent"], json!(2));
    assert_eq!(sent_messages(&env), 1);
}

#[test]
fn a_backlog_waiting_at_start_is_handled_in_order_with_one_notice() {
    let env = Env::new();
    env.preset_owner();
    // 300 owner messages wait at Telegram before the hub ever starts, a /help among them.
    for i in 0..300 {
        env.say(&format!("message {i}"));
        if i == 150 {
            env.say("/help");
        }
    }
    let mut hub = env.serve();
    wait_for("the backlog", 20, || {
        env.status()["journal"]["handled"] == json!(301)
    });
    wait_for("the replies", 10, || env.bot_texts(OWNER).len() == 2);
    let texts = env.bot_texts(OWNER);
    assert!(texts[0].contains("keeping your message"), "{texts:?}");
    assert!(texts[1].contains("pi-telegram is running"), "{texts:?}");
    // More messages in the same episode do not bring more notices.
    for i in 0..20 {
        env.say(&format!("later {i}"));
    }
    wait_for("the later ones", 10, || env.status()["held"] == json!(320));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        env.bot_texts(OWNER).len(),
        2,
        "one coalesced notice, never one per message"
    );
    assert_eq!(hub.stop(), Some(0));
    let st = env.status();
    assert_eq!(st["journal"], json!({ "pending": 0, "handled": 321 }));
    let first = env.fake.control().requests(0, Some("getUpdates"));
    // Offsets only confirmed what was journaled: the first poll had no offset.
    assert!(first[0].params.get("offset").is_none());
}

#[test]
fn sustained_conflict_stops_the_hub_and_a_short_burst_is_tolerated() {
    let env = Env::new();
    env.preset_owner();
    // A short burst: one competing poll, then the other program goes away.
    let mut hub = env.serve_with(&[("PI_TELEGRAM_CONFLICT_GRACE_MS", "4000")]);
    wait_for("the first poll", 10, || {
        !env.fake
            .control()
            .requests(0, Some("getUpdates"))
            .is_empty()
    });
    let http = reqwest::blocking_get_updates(&env);
    assert_eq!(http, 200);
    env.say("/help");
    wait_for("the reply after the blip", 15, || {
        env.bot_texts(OWNER).len() == 1
    });
    // Now another program polls for good.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let url = env.fake.method_url(common::TOKEN, "getUpdates");
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = reqwest::post_json(&url, &json!({ "timeout": 1 }));
            }
        })
    };
    let started = Instant::now();
    let code = hub.wait(Duration::from_secs(30));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    other.join().unwrap();
    assert_eq!(code, Some(4), "log:\n{}", hub.log_text());
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(
        hub.log_text()
            .contains("another program is receiving this bot's updates"),
        "{}",
        hub.log_text()
    );
    let st = env.status();
    assert!(
        st["last_errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("Conflict"))
    );
}

#[test]
fn a_flood_wait_survives_a_restart() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    fault(&env, "sendMessage", FaultKind::Flood, Some(6));
    env.say("/help");
    wait_for("the 429", 10, || {
        env.fake.control().requests(0, Some("sendMessage")).len() == 1
    });
    let refused_at = Instant::now();
    wait_for("the recorded wait", 10, || {
        !env.status()["flood_waits"].as_array().unwrap().is_empty()
    });
    assert_eq!(hub.stop(), Some(0));
    let st = env.status();
    let w = &st["flood_waits"][0];
    assert_eq!(
        (
            w["scope"].clone(),
            w["chat_id"].clone(),
            w["retry_after_s"].clone()
        ),
        (json!("chat:1001"), json!(OWNER), json!(6))
    );
    assert_eq!(st["outbox"]["pending"], json!(1));
    // After a restart the hub knows the wait and does not touch the chat during its rest...
    let before = sends(&env);
    let mut hub = env.serve();
    wait_for("the restarted hub to poll", 10, || {
        env.fake.control().requests(0, Some("getUpdates")).len() >= 2
    });
    assert!(
        hub.log_text()
            .contains("honouring a flood wait from before the restart"),
        "{}",
        hub.log_text()
    );
    std::thread::sleep(Duration::from_millis(1000));
    if refused_at.elapsed() < Duration::from_secs(5) {
        assert_eq!(
            sends(&env),
            before,
            "the hub hammered Telegram during a penalty"
        );
    }
    // ...and sends the reply exactly once when it is over.
    wait_for("the reply", 15, || env.bot_texts(OWNER).len() == 1);
    assert!(refused_at.elapsed() >= Duration::from_secs(5));
    assert_eq!(hub.stop(), Some(0));
    assert_eq!(sends(&env), before + 1);
    assert_eq!(sent_messages(&env), 1);
    // The same, from the fake's log and whatever the machine's speed: the one later send came
    // after the 6 s penalty.
    let log = env.fake.control().requests(0, Some("sendMessage"));
    assert_eq!(log.len(), 2);
    assert!(
        log[1].at_ms >= log[0].at_ms + 6_000,
        "sent {} ms after the 429",
        log[1].at_ms - log[0].at_ms
    );
}

#[test]
fn a_send_whose_answer_is_lost_is_recorded_ambiguous_and_not_repeated() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    fault(&env, "sendMessage", FaultKind::CommitThenDrop, None);
    env.say("/help");
    wait_for("the ambiguous outcome", 10, || {
        env.status()["outbox"]["ambiguous"] == json!(1)
    });
    // The message did arrive (the fault committed it) and was not sent a second time.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(env.bot_texts(OWNER).len(), 1);
    assert_eq!(sends(&env), 1);
    // A 5xx is also unknown; a refused connection before sending is retried.
    fault(&env, "sendMessage", FaultKind::Http500, None);
    env.say("/help");
    wait_for("the second ambiguous outcome", 10, || {
        env.status()["outbox"]["ambiguous"] == json!(2)
    });
    assert_eq!(hub.stop(), Some(0));
    let s = env.open_store();
    let rows: Vec<_> = s
        .read(store::outbox::all)
        .unwrap()
        .into_iter()
        .filter(|r| r.method() == "sendMessage")
        .collect();
    assert!(
        rows.iter()
            .all(|r| r.handling.as_deref().unwrap_or("").contains("not resent")),
        "{rows:?}"
    );
    let st = env.status();
    assert!(
        st["last_errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("outcome unknown"))
    );
}

#[test]
fn status_json_is_complete_and_never_shows_the_token() {
    let env = Env::new();
    env.setup();
    let out = env.run(&["status", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!text.contains("fake-token"), "token in status: {text}");
    let st: serde_json::Value = serde_json::from_str(&text).unwrap();
    for key in [
        "owner_user_id",
        "hub",
        "offset",
        "journal",
        "outbox",
        "flood_waits",
        "last_errors",
        "bot",
        "pairing",
    ] {
        assert!(st.get(key).is_some(), "status --json lacks {key}: {st}");
    }
    assert_eq!(st["hub"]["pid"], json!(null));
    assert_eq!(st["journal"]["pending"], json!(0));
    for state in ["pending", "sending", "sent", "ambiguous", "failed"] {
        assert_eq!(st["outbox"][state], json!(0));
    }
    let human = String::from_utf8_lossy(&env.run(&["status"]).stdout).to_string();
    assert!(
        human.contains("not paired (pairing code open)") && !human.contains("fake-token"),
        "{human}"
    );
    // A named profile without a token says how to set one up.
    let out = env.run(&["--profile", "work", "serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pi-telegram setup --profile work"));
    let bad = env.run(&["--profile", "Bad-Name", "status"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Minimal blocking HTTP helpers (the tests' own, not the product's).
mod reqwest {
    use serde_json::Value;

    pub fn post_json(url: &str, body: &Value) -> Result<u16, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let client = super::common::http();
            client
                .post(url)
                .json(body)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| e.to_string())
        })
    }

    pub fn blocking_get_updates(env: &super::Env) -> u16 {
        post_json(
            &env.fake.method_url(super::common::TOKEN, "getUpdates"),
            &serde_json::json!({ "timeout": 0 }),
        )
        .unwrap_or(0)
    }
}
