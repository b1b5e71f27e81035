//! A message waiting for the person's choice is never given away: not across a hub SIGKILL
//! (with real pi and the extension reconnecting), not when every pi is briefly away. The same
//! shape elsewhere: the classic-mode selection survives a restart, and a reply to a pi that is
//! gone waits for it (or goes where the person sends it).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, project, prompts_containing, setup_threaded};
use common::shim::Shim;
use common::{Env, OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::FakeConfig;
use tg_fake::control::{Press, SendText, ThreadFilter};

fn wait_socket(env: &Env) {
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
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

fn reply_to(env: &Env, message_id: i64, text: &str) {
    env.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            reply_to_message_id: Some(message_id),
            ..Default::default()
        })
        .unwrap();
}

fn texts_in(env: &Env, thread: Option<i64>) -> Vec<String> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted && m.thread_id == thread)
        .filter_map(|m| m.text)
        .collect()
}

fn topic_of(env: &Env, project: &str) -> i64 {
    env.bound_topic(project, 60)
}

/// The newest bot message with a button labelled `label`: (message id, callback data).
fn button(env: &Env, label: &str) -> (i64, String) {
    let mut found = None;
    wait_for(&format!("a button {label:?}"), 30, || {
        found = env
            .fake
            .control()
            .transcript(Some(OWNER), ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .rev()
            .find_map(|m| {
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

fn live_shims(env: &Env) -> usize {
    env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["transport"] == "shim" && i["state"] != "gone")
        .count()
}

fn install(s: &PiSetup) {
    let out = s.env.run(&["install-extension"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// pi with the extension in `dir`, connected with `/telegram-connect`.
fn pi_in(s: &PiSetup, dir: &str) -> PiRpc {
    let mut cmd = s.pi.command(["--mode", "rpc", "--no-session"]);
    cmd.current_dir(dir);
    let mut pi = PiRpc::spawn(cmd).unwrap();
    pi.send(&json!({ "id": "connect", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi.read_until(
        Duration::from_secs(60),
        "the connect command",
        |v: &Value| v["type"] == "response" && v["id"] == "connect",
    )
    .unwrap();
    pi
}

#[test]
fn a_waiting_choice_survives_a_hub_kill_with_real_pi() {
    let Some(s) = setup_threaded() else { return };
    install(&s);
    let env = &s.env;
    let mut hub = env.serve();
    wait_socket(env);
    let alpha_dir = project(&s.pi, "alpha");
    let beta_dir = project(&s.pi, "beta");
    let alpha = pi_in(&s, &alpha_dir);
    let beta = pi_in(&s, &beta_dir);
    wait_for("both pi", 60, || live_shims(env) == 2);
    topic_of(env, "alpha");
    let beta_topic = topic_of(env, "beta");
    say_in(env, None, "which project is this for?");
    let to_beta = button(env, "Send to beta");
    // The hub dies before the person chooses; the extensions reconnect to the next one.
    hub.kill();
    let _ = std::fs::remove_file(env.profile_dir().join("hub.sock"));
    let mut hub = env.serve();
    wait_for("both pi back", 60, || live_shims(env) == 2);
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(
        prompts_containing(&s.llm, "which project is this for?"),
        0,
        "no pi got the message before the person chose"
    );
    // The tap, after the restart, delivers it to the chosen pi, answered in its topic.
    press(env, &to_beta);
    wait_for("beta's answer in its topic", 60, || {
        texts_in(env, Some(beta_topic))
            .iter()
            .any(|t| t == "echo: which project is this for?")
    });
    assert_eq!(prompts_containing(&s.llm, "which project is this for?"), 1);
    let _ = alpha.close(Duration::from_secs(20));
    let _ = beta.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_waiting_choice_survives_every_pi_leaving_for_a_moment() {
    let env = Env::with(FakeConfig {
        has_topics_enabled: true,
        ..FakeConfig::default()
    });
    env.preset_owner();
    let mut hub = env.serve();
    wait_socket(&env);
    let web = Shim::plain(&env, "/work/web", 7801);
    let api = Shim::plain(&env, "/work/api", 7802);
    topic_of(&env, "web");
    topic_of(&env, "api");
    say_in(&env, None, "for whom?");
    let to_api = button(&env, "Send to api");
    drop(web);
    drop(api);
    wait_for("both offline", 20, || live_shims(&env) == 0);
    // The first to come back gets nothing it was not given.
    let mut web = Shim::plain(&env, "/work/web", 7801);
    std::thread::sleep(Duration::from_secs(1));
    let mut api = Shim::plain(&env, "/work/api", 7802);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(env.status()["turns"]["queued"], json!(1));
    press(&env, &to_api);
    let p = api.recv_type("prompt");
    assert_eq!(p["text"], json!("for whom?"));
    api.answer(&p, "mine");
    wait_for("api's answer", 20, || {
        env.bot_texts(OWNER).iter().any(|t| t == "mine")
    });
    // web never got a prompt: whatever the hub sent it is status at most.
    std::thread::sleep(Duration::from_millis(300));
    web.writer.set_nonblocking(true).unwrap();
    loop {
        let mut line = String::new();
        match std::io::BufRead::read_line(&mut web.reader, &mut line) {
            Ok(n) if n > 0 => assert!(
                !line.contains("\"prompt\""),
                "web got a prompt it was never given: {line}"
            ),
            _ => break,
        }
    }
    assert_eq!(env.status()["turns"]["done"], json!(1));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn the_classic_selection_survives_a_restart() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    wait_socket(&env);
    let web = Shim::plain(&env, "/work/web", 7901);
    let api = Shim::plain(&env, "/work/api", 7902);
    say_in(&env, None, "/start");
    press(&env, &button(&env, "api"));
    wait_for("api selected", 20, || {
        env.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["label"] == "api" && i["selected"] == true)
    });
    drop(web);
    drop(api);
    hub.kill();
    let _ = std::fs::remove_file(env.profile_dir().join("hub.sock"));
    let mut hub = env.serve();
    wait_socket(&env);
    // web reconnects first; the person's choice still holds.
    let mut web = Shim::plain(&env, "/work/web", 7901);
    let mut api = Shim::plain(&env, "/work/api", 7902);
    say_in(&env, None, "still for api");
    let p = api.recv_type("prompt");
    assert_eq!(p["text"], json!("still for api"));
    api.answer(&p, "api here");
    wait_for("api's answer", 20, || {
        env.bot_texts(OWNER).iter().any(|t| t.ends_with("api here"))
    });
    web.send(&json!({ "type": "state", "idle": true }));
    assert_eq!(env.status()["turns"]["done"], json!(1));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_reply_to_a_pi_that_is_gone_waits_for_it_or_goes_where_the_person_sends_it() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    wait_socket(&env);
    let mut web = Shim::plain(&env, "/work/web", 8001);
    let mut api = Shim::plain(&env, "/work/api", 8002);
    say_in(&env, None, "question for web");
    let p = web.recv_type("prompt");
    web.answer(&p, "web's answer");
    wait_for("web's answer", 20, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.ends_with("web's answer"))
    });
    let answer_id = env
        .fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .find(|m| {
            m.from_bot
                && m.text
                    .as_deref()
                    .is_some_and(|t| t.ends_with("web's answer"))
        })
        .unwrap()
        .message_id;
    web.send(&json!({ "type": "bye", "reason": "shutdown" }));
    wait_for("web gone", 20, || live_shims(&env) == 1);
    reply_to(&env, answer_id, "follow-up for web");
    wait_for("the waits notice", 20, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi web is offline. Your message waits for it"))
    });
    assert_eq!(env.status()["turns"]["queued"], json!(1));
    press(&env, &button(&env, "Send to api"));
    let p = api.recv_type("prompt");
    // With what it replies to, for pi.
    assert_eq!(
        p["text"],
        json!("follow-up for web\n\n[reply|from:pi]\n[web]\nweb's answer")
    );
    api.answer(&p, "api took it");
    wait_for("api's answer", 20, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.ends_with("api took it"))
    });
    assert_eq!(hub.stop(), Some(0));
}
