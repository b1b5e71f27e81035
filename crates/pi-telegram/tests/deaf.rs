//! Deaf or alive, visibly: the real binary against tg-fake when Telegram cannot be reached.
//! A visible failure (every poll's connection closed before an answer) and a silent one (every
//! request taken and never answered, for 90 s) each end with polling resumed within the hub's
//! bounds (5 s; the poll timeout + 5 s), `status` and `doctor` saying so meanwhile, pi's footer
//! too, one "Back after …" line after the long one, and every message sent meanwhile handled
//! once.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::shim::Shim;
use common::{Env, OWNER, wait_for};
use serde_json::{Value, json};
use tg_fake::{FaultKind, FaultSpec};

/// The hub's poll timeout in these tests (`common` sets `PI_TELEGRAM_POLL_TIMEOUT_SECS=2`).
const POLL_TIMEOUT: Duration = Duration::from_secs(2);

fn every(method: &str, kind: FaultKind) -> FaultSpec {
    FaultSpec {
        method: method.into(),
        kind,
        count: None,
        probability: Some(1.0),
        retry_after: None,
        delay_ms: None,
    }
}

fn poll(env: &Env) -> Value {
    env.status()["poll"].clone()
}

fn wait_poll_state(env: &Env, state: &str, secs: u64) -> Value {
    let mut last = Value::Null;
    wait_for(&format!("status poll.state {state}"), secs, || {
        last = poll(env);
        last["state"] == state
    });
    last
}

/// The last sequence number of tg-fake's request log.
fn last_seq(env: &Env) -> u64 {
    env.fake
        .control()
        .requests(0, None)
        .last()
        .map_or(0, |e| e.seq)
}

/// How long after `since` (the moment the network came back) a `getUpdates` logged after
/// `seq` was answered: polling resumed.
fn resumed_after(env: &Env, seq: u64, since: Instant, bound: Duration) -> Duration {
    let deadline = since + bound + Duration::from_secs(20);
    loop {
        let answered = env
            .fake
            .control()
            .requests(seq, Some("getUpdates"))
            .into_iter()
            .any(|e| e.status == Some(200));
        if answered {
            return since.elapsed();
        }
        assert!(Instant::now() < deadline, "polling never resumed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn doctor_check(env: &Env, id: &str) -> Value {
    let out = env.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

fn back_lines(env: &Env) -> Vec<String> {
    env.bot_texts(OWNER)
        .into_iter()
        .filter(|t| t.starts_with("Back after "))
        .collect()
}

#[test]
fn a_visible_failure_ends_with_polling_resumed_within_5_s() {
    let env = Env::new();
    env.preset_owner();
    let _hub = env.serve();
    wait_poll_state(&env, "polling", 20);
    let healthy = doctor_check(&env, "hearing");
    assert_eq!(healthy["outcome"], "pass", "{healthy}");

    // Every poll's connection is closed before an answer (what a refused or reset connection
    // looks like to the client): failures at once, for longer than doctor allows.
    env.fake
        .control()
        .add_fault(every("getUpdates", FaultKind::DropBefore))
        .unwrap();
    let down = Instant::now();
    let p = wait_poll_state(&env, "backing_off", 20);
    assert_eq!(p["error_class"], "network", "{p}");
    assert!(p["failing_since_ms"].is_i64(), "{p}");
    let deaf_after = POLL_TIMEOUT + Duration::from_secs(11);
    std::thread::sleep(deaf_after.saturating_sub(down.elapsed()) + Duration::from_secs(2));
    let deaf = doctor_check(&env, "hearing");
    assert_eq!(deaf["outcome"], "warn", "{deaf}");
    assert!(
        deaf["detail"]
            .as_str()
            .unwrap()
            .contains("heard nothing from Telegram"),
        "{deaf}"
    );
    let human = String::from_utf8_lossy(&env.run(&["status"]).stdout).to_string();
    assert!(human.contains("telegram     polls fail since"), "{human}");

    let seq = last_seq(&env);
    env.fake.control().clear_faults();
    let back = Instant::now();
    let delay = resumed_after(&env, seq, back, Duration::from_secs(5));
    println!("visible failure: polling resumed {delay:?} after the network came back");
    assert!(
        delay <= Duration::from_secs(5),
        "resumed after {delay:?}, more than 5 s"
    );
    let p = wait_poll_state(&env, "polling", 10);
    assert!(p["failing_since_ms"].is_null(), "{p}");
    // Shorter than a minute: no line for it.
    std::thread::sleep(Duration::from_secs(1));
    assert!(back_lines(&env).is_empty(), "{:?}", env.bot_texts(OWNER));
}

/// What the scripted extension saw and did after the network came back.
#[derive(Default)]
struct Seen {
    footers: Vec<String>,
    prompts: Vec<String>,
}

/// Reads the shim until `done` holds, answering prompts (`answer to <text>`) and get_commands.
fn read_shim(shim: &mut Shim, seen: &mut Seen, mut done: impl FnMut(&Seen) -> bool) {
    while !done(seen) {
        let m = shim
            .recv()
            .expect("the hub closed the instance's connection");
        match m["type"].as_str() {
            Some("set_status") => seen
                .footers
                .push(m["text"].as_str().unwrap_or_default().to_owned()),
            Some("prompt") => {
                let text = m["text"].as_str().unwrap_or_default().to_owned();
                shim.answer(&m, &format!("answer to {text}"));
                seen.prompts.push(text);
            }
            Some("get_commands") => shim.send(
                &json!({ "type": "response", "id": m["id"], "ok": true, "data": { "commands": [] } }),
            ),
            _ => {}
        }
    }
}

#[test]
fn ninety_silent_seconds_end_with_one_back_line_and_every_message_once() {
    let env = Env::new();
    env.preset_owner();
    let _hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let mut shim = Shim::plain(&env, "/tmp/deaf-project", 4242);
    let mut seen = Seen::default();
    read_shim(&mut shim, &mut seen, |s| {
        s.footers.last().is_some_and(|f| f == "telegram: connected")
    });
    wait_poll_state(&env, "polling", 20);
    // Whatever the hub queued at the attach (the command list) is out before the outage.
    wait_for("the outbox drained", 20, || {
        env.status()["outbox"]["pending"] == 0
    });

    // The network goes quiet: every request is taken and never answered.
    env.fake
        .control()
        .add_fault(every("*", FaultKind::Hang))
        .unwrap();
    let down = Instant::now();
    let hung = wait_poll_state(&env, "hung", 30);
    println!(
        "silent outage: status says hung {:?} after it began",
        down.elapsed()
    );
    assert_eq!(hung["error_class"], "timeout", "{hung}");
    read_shim(&mut shim, &mut seen, |s| {
        s.footers
            .last()
            .is_some_and(|f| f.starts_with("telegram: hub cannot reach Telegram since "))
    });
    for text in ["one", "two", "three"] {
        env.say(text);
    }
    let early = poll(&env)["last_ok_age_ms"].as_i64().unwrap();
    std::thread::sleep(Duration::from_secs(80).saturating_sub(down.elapsed()));
    let late = poll(&env);
    let late_age = late["last_ok_age_ms"].as_i64().unwrap();
    println!("silent outage: last_ok_age_ms {early} then {late_age}");
    assert!(late_age >= early + 50_000, "{early} -> {late}");
    assert_eq!(late["state"], "hung", "{late}");

    std::thread::sleep(Duration::from_secs(90).saturating_sub(down.elapsed()));
    let seq = last_seq(&env);
    env.fake.control().clear_faults();
    let back = Instant::now();
    let bound = POLL_TIMEOUT + Duration::from_secs(5);
    let delay = resumed_after(&env, seq, back, bound);
    println!("silent outage: polling resumed {delay:?} after Telegram answered again");
    assert!(
        delay <= bound,
        "resumed after {delay:?}, more than {bound:?}"
    );

    // Each message reaches pi once and is answered once; the footer clears; one line says so.
    read_shim(&mut shim, &mut seen, |s| {
        s.prompts.len() == 3 && s.footers.last().is_some_and(|f| f == "telegram: connected")
    });
    assert_eq!(seen.prompts, ["one", "two", "three"]);
    wait_for("the answers and the Back line", 30, || {
        let texts = env.bot_texts(OWNER);
        ["one", "two", "three"]
            .iter()
            .all(|t| texts.contains(&format!("answer to {t}")))
            && !back_lines(&env).is_empty()
    });
    std::thread::sleep(Duration::from_secs(POLL_TIMEOUT.as_secs() + 1));
    let texts = env.bot_texts(OWNER);
    for t in ["one", "two", "three"] {
        let answers = texts
            .iter()
            .filter(|x| **x == format!("answer to {t}"))
            .count();
        assert_eq!(answers, 1, "{t}: {texts:?}");
    }
    let lines = back_lines(&env);
    println!("silent outage: {lines:?}");
    assert_eq!(lines.len(), 1, "{texts:?}");
    assert!(
        lines[0].starts_with("Back after 1 min without Telegram; 3 messages caught up"),
        "{lines:?}"
    );
    let p = poll(&env);
    assert_eq!(p["state"], "polling", "{p}");
    assert!(p["last_ok_age_ms"].as_i64().unwrap() < 10_000, "{p}");
    // The outage is in the journal once each: no update handled twice.
    assert_eq!(env.status()["journal"]["pending"], 0);
}

#[test]
fn a_long_poll_that_hangs_as_the_network_returns_is_given_up_within_its_timeout_and_5_s() {
    // The worst case of a silent outage: the network comes back while a long poll (not yet a
    // short probe) hangs. Only the poll's deadline ends it.
    let env = Env::new();
    env.preset_owner();
    let _hub = env.serve();
    wait_poll_state(&env, "polling", 20);
    let seq = last_seq(&env);
    env.fake
        .control()
        .add_fault(every("getUpdates", FaultKind::Hang))
        .unwrap();
    wait_for("a long poll held", 20, || {
        env.fake
            .control()
            .requests(seq, Some("getUpdates"))
            .iter()
            .any(|e| e.fault.as_deref() == Some("hang"))
    });
    let seq = last_seq(&env);
    env.fake.control().clear_faults();
    let back = Instant::now();
    env.say("while it hung");
    let bound = POLL_TIMEOUT + Duration::from_secs(5);
    let delay = resumed_after(&env, seq, back, bound);
    println!("a long poll hung: polling resumed {delay:?} after Telegram answered again");
    assert!(
        delay <= bound,
        "resumed after {delay:?}, more than {bound:?}"
    );
    wait_poll_state(&env, "polling", 10);
    assert!(back_lines(&env).is_empty(), "{:?}", env.bot_texts(OWNER));
}
