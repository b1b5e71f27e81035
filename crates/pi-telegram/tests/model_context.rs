//! What the model is told, end to end with real pi against the fake LLM's request log, through
//! both transports: a Telegram turn carries the origin tag, the time and the voice line (as
//! set), the `telegram-bridge` skill's listing and the extension's note; a turn typed in the
//! terminal carries none of it. And stale orders: prompts that waited while the hub or their
//! pi was away are asked about (one question), held across a hub kill, and run in order or
//! dropped as the person answers; one that waited behind work the person saw is not.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, project, prompts_containing, setup};
use common::{Env, OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::control::{Press, SendText, ThreadFilter, TranscriptEntry};

fn configure(s: &PiSetup, f: impl FnOnce(&mut Value)) {
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(s.env.config_path()).unwrap()).unwrap();
    f(&mut cfg);
    std::fs::write(s.env.config_path(), cfg.to_string()).unwrap();
}

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    wait_for("the hub", 20, || {
        std::os::unix::net::UnixStream::connect(s.env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
}

fn install(s: &PiSetup) {
    let out = s.env.run(&["install-extension"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// pi with the extension in `dir` (an RPC host, so the test can type into it as a person at
/// the terminal would), connected with `/telegram-connect`.
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

fn live(env: &Env) -> usize {
    env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["state"] != "gone")
        .count()
}

fn bot_messages(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

fn wait_message(env: &Env, what: &str, pred: impl Fn(&TranscriptEntry) -> bool) -> TranscriptEntry {
    let mut found = None;
    wait_for(what, 60, || {
        found = bot_messages(env).into_iter().find(|m| pred(m));
        found.is_some()
    });
    found.unwrap()
}

fn says(m: &TranscriptEntry, f: impl Fn(&str) -> bool) -> bool {
    m.text.as_deref().is_some_and(f)
}

/// The model request whose last user message holds `needle`: (system prompt, user message).
fn request_for(s: &PiSetup, needle: &str) -> (String, String) {
    let req = s
        .llm
        .requests()
        .into_iter()
        .rev()
        .find(|r| last_user(r).contains(needle))
        .unwrap_or_else(|| panic!("no model request holds {needle:?}"));
    let system = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| fake_llm::plan::text_of(m.get("content")))
        .collect::<Vec<_>>()
        .join("\n");
    (system, last_user(&req))
}

fn last_user(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| fake_llm::plan::text_of(m.get("content")))
        .unwrap_or_default()
}

/// About four characters a token (English and markup; a measure, not a tokenizer).
fn tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}

const NOTE: &str = "came from the person through Telegram";
const SKILL: &str = "telegram-bridge";

#[test]
fn a_telegram_turn_through_the_extension_says_where_it_is_and_a_terminal_turn_does_not() {
    let Some(s) = setup() else { return };
    install(&s);
    configure(&s, |c| {
        c["assistant"] = json!({ "timeInjection": "always" });
        c["voice"] = json!({ "replyMode": "always" });
    });
    let mut hub = start(&s);
    let dir = project(&s.pi, "web");
    let mut pi = pi_in(&s, &dir);
    wait_for("pi to connect", 30, || live(&s.env) == 1);
    s.env.say("hello from the phone");
    wait_message(&s.env, "the answer", |m| {
        says(m, |t| t == "echo: hello from the phone")
    });
    let (system, user) = request_for(&s, "hello from the phone");
    assert!(user.starts_with("[telegram]\n[time] "), "{user}");
    assert!(
        user.contains("\n[voice] delivery: automatic voice\n\nhello from the phone"),
        "{user}"
    );
    assert!(system.contains(NOTE), "the extension's note: {system}");
    assert!(system.contains(SKILL), "the skill's listing: {system}");
    assert!(
        !system.contains("## Write for a phone"),
        "the skill's text is not in the prompt until the model reads it"
    );
    // Typed at the terminal: no tag, no note (the skill stays listed, as every skill is).
    pi.send(&json!({ "id": "typed", "type": "prompt", "message": "typed at the desk" }))
        .unwrap();
    wait_for("the typed turn's request", 60, || {
        prompts_containing(&s.llm, "typed at the desk") == 1
    });
    let (typed_system, typed_user) = request_for(&s, "typed at the desk");
    assert_eq!(typed_user, "typed at the desk");
    assert!(!typed_system.contains(NOTE), "{typed_system}");
    assert!(typed_system.contains(SKILL));
    // What a Telegram turn costs besides the person's words.
    let preamble = user.len() - "hello from the phone".len();
    let note = system.len().saturating_sub(typed_system.len());
    eprintln!(
        "extension turn: preamble {preamble} chars (~{} tokens), note {note} chars (~{} tokens)",
        tokens(preamble),
        tokens(note)
    );
    assert!(
        tokens(preamble + note) < 300,
        "the context grows a turn by {} tokens",
        tokens(preamble + note)
    );
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_telegram_turn_of_a_headless_pi_says_where_it_is_with_the_time_once_an_interval() {
    let Some(s) = setup() else { return };
    // Interval (the default): told with the first prompt, not with the next one soon after.
    let mut hub = start(&s);
    s.env.spawn_pi(&project(&s.pi, "api"));
    wait_for("pi to connect", 30, || live(&s.env) == 1);
    s.env.say("first from the phone");
    wait_message(&s.env, "the first answer", |m| {
        says(m, |t| t == "echo: first from the phone")
    });
    s.env.say("second from the phone");
    wait_message(&s.env, "the second answer", |m| {
        says(m, |t| t == "echo: second from the phone")
    });
    let (system, first) = request_for(&s, "first from the phone");
    assert!(first.starts_with("[telegram]\n[time] "), "{first}");
    assert!(!first.contains("[voice]"), "manual voice: no line: {first}");
    let (_, second) = request_for(&s, "second from the phone");
    assert_eq!(second, "[telegram]\n\nsecond from the phone");
    assert!(system.contains(NOTE), "the child's note: {system}");
    assert!(system.contains(SKILL), "the skill's listing: {system}");
    eprintln!(
        "headless turn: first preamble {} chars (~{} tokens), later ones {} chars",
        first.len() - "first from the phone".len(),
        tokens(first.len() - "first from the phone".len()),
        second.len() - "second from the phone".len()
    );
    assert_eq!(hub.stop(), Some(0));
}

/// The bot's stale question (its latest text) and its buttons' data by label.
fn stale_question(env: &Env) -> Option<(TranscriptEntry, Vec<(String, String)>)> {
    let m = bot_messages(env)
        .into_iter()
        .find(|m| says(m, |t| t.starts_with("⏳")))?;
    let buttons = m
        .reply_markup
        .as_ref()
        .and_then(|r| r["inline_keyboard"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .filter_map(|b| {
            Some((
                b["text"].as_str()?.to_owned(),
                b["callback_data"].as_str()?.to_owned(),
            ))
        })
        .collect();
    Some((m, buttons))
}

fn press(env: &Env, m: &TranscriptEntry, buttons: &[(String, String)], label: &str) {
    let data = buttons
        .iter()
        .find(|(l, _)| l.contains(label))
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("no {label} button in {buttons:?}"));
    env.fake
        .control()
        .press(Press {
            message_id: m.message_id,
            data,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

#[test]
fn messages_written_while_the_hub_was_away_are_asked_about_once_and_run_in_order() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    let mut hub = start(&s);
    let dir = project(&s.pi, "web");
    let pi = pi_in(&s, &dir);
    wait_for("pi to connect", 30, || live(env) == 1);
    assert_eq!(hub.stop(), Some(0));
    // Written two hours ago while the hub was stopped (Telegram keeps them, dated).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let two_hours_ago = now - 2 * 3600;
    for (i, words) in ["deploy the site", "then email the client", "and tidy up"]
        .iter()
        .enumerate()
    {
        env.fake
            .control()
            .send_text(SendText {
                text: (*words).into(),
                date: Some(two_hours_ago + i as i64 * 60),
                ..SendText::default()
            })
            .unwrap();
    }
    let mut hub = start(&s);
    wait_for("the question", 60, || stale_question(env).is_some());
    let (question, _) = stale_question(env).unwrap();
    let text = question.text.clone().unwrap();
    assert!(
        text.starts_with("⏳ 3 messages waited while pi was away, the first 2 h"),
        "{text}"
    );
    assert!(text.contains("1. \"deploy the site\"") && text.contains("3. \"and tidy up\""));
    assert_eq!(prompts_containing(&s.llm, "deploy the site"), 0, "held");
    // A kill between question and tap changes nothing.
    hub.kill();
    let mut hub = start(&s);
    wait_for("pi to reconnect", 30, || live(env) == 1);
    std::thread::sleep(Duration::from_millis(1500));
    let questions = bot_messages(env)
        .iter()
        .filter(|m| says(m, |t| t.starts_with("⏳")))
        .count();
    assert_eq!(questions, 1, "one question for the three");
    for words in ["deploy the site", "then email the client", "and tidy up"] {
        assert_eq!(prompts_containing(&s.llm, words), 0, "{words} held");
    }
    let (question, buttons) = stale_question(env).unwrap();
    press(env, &question, &buttons, "Run now");
    wait_message(env, "the last answer", |m| {
        says(m, |t| t == "echo: and tidy up")
    });
    let texts: Vec<String> = bot_messages(env)
        .into_iter()
        .filter_map(|m| m.text)
        .collect();
    let at = |w: &str| {
        texts
            .iter()
            .position(|t| t == &format!("echo: {w}"))
            .unwrap()
    };
    assert!(at("deploy the site") < at("then email the client"));
    assert!(at("then email the client") < at("and tidy up"));
    for words in ["deploy the site", "then email the client", "and tidy up"] {
        assert_eq!(prompts_containing(&s.llm, words), 1, "{words} once");
    }
    // pi is told how long it waited.
    let (_, user) = request_for(&s, "deploy the site");
    assert!(user.contains("[waited] sent "), "{user}");
    assert!(user.contains(" later\n"), "{user}");
    wait_for("the question settled", 20, || {
        stale_question(env).is_some_and(|(m, b)| {
            b.is_empty() && says(&m, |t| t.contains("3 messages sent to pi, in order"))
        })
    });
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_prompt_behind_work_the_person_saw_runs_and_one_for_a_pi_that_was_away_is_asked_about() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    // Three seconds, so that the test need not wait half an hour.
    configure(&s, |c| c["staleAfterMinutes"] = json!(0.05));
    let mut hub = start(&s);
    let dir = project(&s.pi, "web");
    let pi = pi_in(&s, &dir);
    wait_for("pi to connect", 30, || live(env) == 1);
    // Behind a turn that runs for five seconds.
    env.say("[[bash:sleep 5]] a long one");
    wait_for("the long turn to start", 30, || {
        prompts_containing(&s.llm, "a long one") == 1
    });
    env.say("queued behind it");
    wait_message(env, "the queued one's answer", |m| {
        says(m, |t| t == "echo: queued behind it")
    });
    assert!(stale_question(env).is_none(), "not asked about");
    // Its pi goes away; a message waits for it; it comes back after more than three seconds.
    let _ = pi.close(Duration::from_secs(20));
    wait_for("pi to go", 30, || live(env) == 0);
    env.say("do this while I am away");
    std::thread::sleep(Duration::from_secs(4));
    let pi = pi_in(&s, &dir);
    wait_for("the question", 60, || stale_question(env).is_some());
    let (question, buttons) = stale_question(env).unwrap();
    assert!(
        says(&question, |t| t.starts_with("⏳ This waited ")
            && t.contains("\"do this while I am away\"")),
        "{:?}",
        question.text
    );
    press(env, &question, &buttons, "Skip");
    wait_for("the question settled", 20, || {
        stale_question(env)
            .is_some_and(|(m, b)| b.is_empty() && says(&m, |t| t.contains("Skipped")))
    });
    // Skipped: it never reaches pi, and later messages do.
    env.say("and now this");
    wait_message(env, "the next answer", |m| {
        says(m, |t| t == "echo: and now this")
    });
    assert_eq!(prompts_containing(&s.llm, "do this while I am away"), 0);
    assert_eq!(
        env.status()["turns"]["cancelled"],
        json!(1),
        "{}",
        env.status()
    );
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}
