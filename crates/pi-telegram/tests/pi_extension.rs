//! End to end with real pi and the extension: pi (hosted in RPC mode, with the extension
//! installed by `pi-telegram install-extension`) connects with `/telegram-connect`, starting the
//! hub itself; the owner talks to it; and a prompt is delivered into pi exactly once across a
//! hub crash between dispatch and acknowledgement.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, prompts_containing, setup};
use common::{OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};

fn install(s: &PiSetup) {
    let out = s.env.run(&["install-extension"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts pi (RPC host, so the test can type commands) in the work dir.
fn start_pi(s: &PiSetup) -> PiRpc {
    s.pi.spawn_rpc(["--no-session"]).unwrap()
}

/// Runs `/telegram-connect`, answering the extension's dialogs if any, until pi answers.
fn connect(pi: &mut PiRpc) {
    pi.send(&json!({ "id": "connect", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi.read_until(
        Duration::from_secs(60),
        "the connect command",
        |v: &Value| v["type"] == "response" && v["id"] == "connect",
    )
    .unwrap();
}

fn live_shims(s: &PiSetup) -> usize {
    s.env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["transport"] == "shim" && i["state"] != "gone")
        .count()
}

fn stop_hub_started_by_pi(s: &PiSetup) {
    if let Some(pid) = s.env.status()["hub"]["pid"].as_i64() {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
        wait_for("the hub to stop", 20, || {
            s.env.status()["hub"]["running"] == json!(false)
        });
    }
}

#[test]
fn telegram_connect_starts_the_hub_and_the_conversation_works() {
    let Some(s) = setup() else { return };
    install(&s);
    let mut pi = start_pi(&s);
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(&s) == 1);
    assert_eq!(
        s.env.status()["hub"]["running"],
        json!(true),
        "the extension started the hub"
    );
    wait_for("the connected notice", 30, || {
        s.env
            .bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: work"))
    });
    s.env.say("hello from telegram");
    wait_for("pi's answer", 30, || {
        s.env
            .bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: hello from telegram")
    });
    // The turn reached the model with the note that it came from Telegram.
    let req = s
        .llm
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.to_string().contains("hello from telegram"))
        .unwrap();
    assert!(
        req["messages"][0].to_string().contains("Telegram"),
        "no Telegram note in the system prompt"
    );
    // A second message while pi is busy waits and is answered after.
    s.env.say("[[slow]] take your time");
    wait_for("pi to start the slow one", 30, || {
        prompts_containing(&s.llm, "take your time") == 1
    });
    s.env.say("and then this");
    wait_for("both answers", 60, || {
        s.env
            .bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: and then this")
    });
    let texts = s.env.bot_texts(OWNER);
    let slow = texts
        .iter()
        .position(|t| t == "echo: [[slow]] take your time")
        .unwrap();
    assert!(
        slow < texts
            .iter()
            .position(|t| t == "echo: and then this")
            .unwrap()
    );
    assert_eq!(prompts_containing(&s.llm, "and then this"), 1);
    // pi exits: the hub notices and tells the owner.
    let _ = pi.close(Duration::from_secs(20));
    wait_for("the exit notice", 30, || {
        s.env
            .bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi work is gone"))
    });
    stop_hub_started_by_pi(&s);
}

fn crash_between_dispatch_and_ack(point: &str) {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    // The hub aborts at `point` while handing the first prompt to pi.
    let mut hub = env.serve_with(&[("PI_TELEGRAM_CRASH_AT", point)]);
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let mut pi = start_pi(&s);
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(&s) == 1);
    env.say("[[slow]] deliver me exactly once");
    assert_eq!(
        hub.wait(Duration::from_secs(30)),
        None,
        "{point}: the hub should abort:\n{}",
        hub.log_text()
    );
    // Restart: the extension reconnects on its own and reports what it received.
    let mut hub = env.serve();
    // After `turn_done.after_commit` the answer may have been claimed for the sender in that
    // commit: a send under way, which goes again marked as a possible repeat.
    let mark = hub::outgoing::texts::REPEAT_MARK.trim_end();
    let is_answer = |t: &str| {
        let t = t.strip_prefix(mark).map_or(t, str::trim_start);
        t == "echo: [[slow]] deliver me exactly once"
    };
    wait_for("the answer", 90, || {
        env.bot_texts(OWNER).iter().any(|t| is_answer(t))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        prompts_containing(&s.llm, "deliver me exactly once"),
        1,
        "{point}: pi received the prompt once"
    );
    let answers = env
        .bot_texts(OWNER)
        .iter()
        .filter(|t| t.contains("deliver me exactly once"))
        .count();
    assert_eq!(answers, 1, "{point}: answered once");
    let marked = env
        .bot_texts(OWNER)
        .iter()
        .any(|t| is_answer(t) && t.starts_with(mark));
    assert!(
        !marked || env.status()["outbox"]["resent"].as_i64().unwrap_or(0) > 0,
        "{point}: a copy marked as sent again is a counted resend"
    );
    assert_eq!(env.status()["turns"]["done"], json!(1));
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn exactly_once_into_pi_when_the_hub_dies_after_sending_the_prompt() {
    crash_between_dispatch_and_ack("dispatch.after_send");
}

#[test]
fn exactly_once_into_pi_when_the_hub_dies_before_sending_the_prompt() {
    crash_between_dispatch_and_ack("dispatch.after_commit");
}

#[test]
fn exactly_once_into_pi_when_the_hub_dies_after_pi_acknowledged() {
    crash_between_dispatch_and_ack("ack.before_commit");
}

#[test]
fn exactly_once_when_the_hub_dies_before_storing_the_answer() {
    crash_between_dispatch_and_ack("turn_done.before_commit");
}

#[test]
fn exactly_once_into_pi_when_the_hub_dies_before_recording_the_dispatch() {
    crash_between_dispatch_and_ack("dispatch.before_commit");
}

#[test]
fn exactly_once_when_the_hub_dies_after_storing_the_answer() {
    crash_between_dispatch_and_ack("turn_done.after_commit");
}

#[test]
fn a_hub_that_dies_while_pi_connects_gets_it_back_once() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    let pi = env.crash_at("attach.before_commit", || {
        wait_for("the hub socket", 20, || {
            env.profile_dir().join("hub.sock").exists()
        });
        let mut pi = start_pi(&s);
        connect(&mut pi);
        pi
    });
    // The extension finds no hub and starts one itself, then reconnects: one instance,
    // nothing half-registered.
    wait_for("pi to reconnect", 60, || live_shims(&s) == 1);
    env.say("after the restart");
    wait_for("the answer", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: after the restart")
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(prompts_containing(&s.llm, "after the restart"), 1);
    assert_eq!(live_shims(&s), 1);
    assert_eq!(env.status()["turns"]["done"], json!(1));
    let _ = pi.close(Duration::from_secs(20));
    stop_hub_started_by_pi(&s);
}

#[test]
fn two_pi_sessions_with_the_extension_each_answer_their_own_messages() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let mut first = start_pi(&s);
    connect(&mut first);
    wait_for("the first pi", 30, || live_shims(&s) == 1);
    // A second pi session in another project.
    let other = s.pi.root().join("other-project");
    std::fs::create_dir_all(&other).unwrap();
    let mut cmd = s.pi.command(["--mode", "rpc", "--no-session"]);
    cmd.current_dir(&other);
    let mut second = PiRpc::spawn(cmd).unwrap();
    connect(&mut second);
    wait_for("the second pi", 30, || live_shims(&s) == 2);
    env.say("for the selected one");
    wait_for("the first answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "[work]\necho: for the selected one")
    });
    // Switch to the other project with the /start chooser.
    env.say("/start");
    wait_for("the chooser", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.contains("Connected pi instances"))
    });
    let transcript = env
        .fake
        .control()
        .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
        .unwrap();
    let chooser = transcript
        .iter()
        .rev()
        .find(|m| m.reply_markup.is_some())
        .unwrap();
    let rows = chooser.reply_markup.as_ref().unwrap()["inline_keyboard"]
        .as_array()
        .unwrap()
        .clone();
    let button = rows
        .iter()
        .map(|r| &r[0])
        .find(|b| b["text"].as_str().unwrap().contains("other-project"))
        .unwrap();
    env.fake
        .control()
        .press(tg_fake::control::Press {
            message_id: chooser.message_id,
            data: button["callback_data"].as_str().unwrap().into(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("the switch", 30, || {
        env.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["label"] == "other-project" && i["selected"] == true)
    });
    env.say("for the other one");
    wait_for("the other answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "[other-project]\necho: for the other one")
    });
    assert_eq!(prompts_containing(&s.llm, "for the other one"), 1);
    let _ = first.close(Duration::from_secs(20));
    let _ = second.close(Duration::from_secs(20));
    wait_for("both gone", 30, || live_shims(&s) == 0);
    assert_eq!(hub.stop(), Some(0));
}

/// The hub a pi's extension started runs detached and outlives that pi: the test's environment
/// stops it when it goes, also when the test fails (it ran on, its folder deleted, for as long
/// as the machine did).
#[test]
fn a_hub_the_extension_started_is_stopped_with_the_test() {
    let Some(s) = setup() else { return };
    install(&s);
    let mut pi = start_pi(&s);
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(&s) == 1);
    let hub = s.env.status()["hub"]["pid"].as_i64().unwrap() as u32;
    drop(pi);
    std::thread::sleep(Duration::from_millis(500));
    assert!(common::is_serve(hub), "the hub outlives its pi");
    // A test failing now: its environment goes as the panic unwinds.
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _s = s;
        panic!("a test failing with the hub running (expected)");
    }));
    assert!(failed.is_err());
    wait_for("the hub to be stopped", 20, || !common::is_serve(hub));
}
