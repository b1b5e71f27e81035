//! The phone as an operator panel, end to end with real pi against the fake LLM: queue lanes by
//! reaction, skips that never reach pi, edits of waiting prompts, `/abort`, `/stop`, `/next`,
//! `/continue`, `/compact`, the model and thinking menus, pi's prompt templates as Telegram
//! commands, both transports (headless `pi --mode rpc` and the extension), Threaded Mode, and
//! crashes between journaling a reaction or a button press and its effect.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::chat::{bot_messages, buttons, message, press, wait_message, wait_text};
use common::pi::{PiSetup, project, prompts_containing, setup, setup_threaded};
use common::{Env, OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::control::{EditText, Press, React, SendText};

/// A prompt that streams long enough (60 words, 150 ms apart: 9 s) for the test to queue,
/// react and edit behind it; it is always cut short by a control.
fn slow(tag: &str) -> String {
    let words: Vec<String> = (1..=60).map(|i| format!("w{i}")).collect();
    format!("[[slow]] {tag} {}", words.join(" "))
}

/// Waits until pi has streamed a few words of the slow prompt tagged `tag` (seen in the live
/// preview), so that an abort has a partial answer to deliver.
fn wait_streaming(env: &Env, tag: &str) {
    wait_for("pi to stream a few words", 60, || {
        env.fake.control().requests(0, None).iter().any(|r| {
            let p = r.params.to_string();
            r.method.ends_with("Draft") && p.contains(tag) && p.contains("w3")
        })
    });
}

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    // Listening, not only there: a crashed hub leaves its socket file behind.
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(s.env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
}

/// One of the person's messages, as tg-fake shows it (with the bot's reactions on it).
fn person_message(env: &Env, id: i64) -> tg_fake::control::TranscriptEntry {
    env.fake
        .control()
        .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .find(|m| !m.from_bot && m.message_id == id)
        .unwrap()
}

fn react(env: &Env, message_id: i64, emoji: Option<&str>) {
    env.fake
        .control()
        .react(React {
            message_id,
            emoji: emoji.map(str::to_owned),
            user_id: None,
            token: None,
        })
        .unwrap();
}

fn say_in(env: &Env, thread: Option<i64>, text: &str) -> i64 {
    env.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            thread_id: thread,
            ..SendText::default()
        })
        .unwrap()
        .message_id
}

/// The model requests' last user texts, in order.
fn prompts(s: &PiSetup) -> Vec<String> {
    s.llm
        .requests()
        .iter()
        .filter_map(|r| {
            let m = r["messages"].as_array()?;
            let user = m.iter().rev().find(|m| m["role"] == "user")?;
            Some(match &user["content"] {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            })
        })
        .collect()
}

/// Index of the first model request whose prompt contains `needle`.
fn first_request(s: &PiSetup, needle: &str) -> usize {
    prompts(s)
        .iter()
        .position(|p| p.contains(needle))
        .unwrap_or_else(|| panic!("no request with {needle:?}"))
}

/// A stored turn's lane and skip flag, by the person's message.
/// (`("none", false)` while the message is not a turn yet).
fn lane_of(env: &Env, message_id: i64) -> (String, bool) {
    env.open_store()
        .read(|c| store::turns::by_message(c, OWNER, message_id))
        .unwrap()
        .map_or(("none".into(), false), |t| {
            (t.lane.as_str().to_owned(), t.skip)
        })
}

fn text_of(env: &Env, message_id: i64) -> String {
    env.open_store()
        .read(|c| store::turns::by_message(c, OWNER, message_id))
        .unwrap()
        .map(|t| t.text)
        .unwrap_or_default()
}

/// The command names of the last `setMyCommands` the bot made.
fn published_commands(env: &Env) -> Vec<String> {
    env.fake
        .control()
        .requests(0, Some("setMyCommands"))
        .into_iter()
        .rfind(|r| r.status == Some(200))
        .map(|r| {
            r.params["commands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["command"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const ABORTED: &str = "⏹ Aborted.";

#[test]
fn reactions_reorder_and_skip_edits_change_the_prompt_and_abort_stops_pi() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say(&slow("first"));
    wait_for("pi to start the slow turn", 30, || {
        prompts_containing(&s.llm, "first w1") == 1
    });
    wait_streaming(env, "first");
    let bravo = env.say("prompt bravo").message_id;
    let charlie = env.say("prompt charlie").message_id;
    let delta = env.say("prompt delta").message_id;
    let echo = env.say("prompt echo as first written").message_id;
    // 👍 on the third waiting prompt, 👎 on the first, a 👎 on the second taken back, and the
    // fourth edited: all while they wait.
    react(env, delta, Some("👍"));
    react(env, bravo, Some("👎"));
    react(env, charlie, Some("👎"));
    wait_for("the reactions", 20, || {
        lane_of(env, delta).0 == "priority" && lane_of(env, bravo).1 && lane_of(env, charlie).1
    });
    react(env, charlie, None);
    env.fake
        .control()
        .edit_text(EditText {
            message_id: echo,
            text: "prompt echo as edited".into(),
            user_id: None,
            token: None,
        })
        .unwrap();
    wait_for("the un-skip and the edit", 20, || {
        !lane_of(env, charlie).1 && text_of(env, echo) == "prompt echo as edited"
    });
    assert_eq!(lane_of(env, bravo), ("normal".into(), true));
    // /abort: the slow answer stops where it was, marked. What waits goes to pi with the next
    // message, as said before it (the reference's folding): nothing runs until then.
    env.say("/abort");
    let reply = wait_text(env, "the abort reply", |t| t.starts_with("⏹ Aborting web"));
    assert!(
        reply.ends_with(
            "3 waiting message(s) go to pi with your next message, as said before it (/next \
             runs them one by one instead)."
        ),
        "{reply}"
    );
    let aborted = wait_text(env, "the aborted answer", |t| t.contains("first w1"));
    assert!(aborted.ends_with(ABORTED), "{aborted}");
    assert!(!aborted.contains("w60"), "pi stopped streaming: {aborted}");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        prompts_containing(&s.llm, "prompt delta"),
        0,
        "the queue waits"
    );
    let foxtrot = env.say("prompt foxtrot after the abort").message_id;
    wait_text(env, "the answer to all of them", |t| {
        t.contains("prompt delta") && t.contains("prompt foxtrot after the abort")
    });
    wait_text(env, "the skip notice", |t| {
        t.starts_with("⏭ Skipped \"prompt bravo\"")
    });
    // One prompt: the waiting ones in the queue's new order, then the new message.
    let folded = prompts(&s)
        .into_iter()
        .find(|p| p.contains("prompt foxtrot after the abort"))
        .unwrap();
    let at = |w: &str| {
        folded
            .find(w)
            .unwrap_or_else(|| panic!("{w:?} not in {folded}"))
    };
    assert!(
        at("1. prompt delta") < at("2. prompt charlie")
            && at("2. prompt charlie") < at("3. prompt echo as edited")
            && at("3. prompt echo as edited") < at("This message:")
            && at("This message:") < at("prompt foxtrot"),
        "{folded}"
    );
    for one in ["prompt delta", "prompt charlie", "prompt echo as edited"] {
        assert_eq!(prompts_containing(&s.llm, one), 1, "{one}: once, folded");
    }
    assert_eq!(prompts_containing(&s.llm, "prompt bravo"), 0, "skipped");
    assert_eq!(prompts_containing(&s.llm, "as first written"), 0, "edited");
    assert_eq!(prompts_containing(&s.llm, "first w1"), 1, "not run again");
    // The folded messages show the fate of the message they went with: answered.
    wait_for("the folded messages' reactions", 20, || {
        [delta, charlie, echo, foxtrot].iter().all(|m| {
            person_message(env, *m)
                .bot_reactions
                .iter()
                .any(|r| r.to_string().contains('👌'))
        })
    });
    // A reaction on a prompt that is done changes nothing and says nothing.
    let before = bot_messages(env).len();
    react(env, delta, None);
    react(env, delta, Some("👎"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(bot_messages(env).len(), before);
    // Editing a prompt pi has had gets a short reply.
    env.fake
        .control()
        .edit_text(EditText {
            message_id: delta,
            text: "prompt delta changed".into(),
            user_id: None,
            token: None,
        })
        .unwrap();
    wait_text(env, "the too-late reply", |t| {
        t.starts_with("pi has this message already")
    });
    assert_eq!(prompts_containing(&s.llm, "prompt delta changed"), 0);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn stop_next_continue_and_compact() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    // /stop: abort, and everything waiting is dropped (and counted).
    env.say(&slow("stopme"));
    wait_for("the slow turn", 30, || {
        prompts_containing(&s.llm, "stopme w1") == 1
    });
    wait_streaming(env, "stopme");
    env.say("prompt foxtrot");
    env.say("prompt golf");
    wait_for("both to wait", 20, || {
        env.status()["turns"]["queued"] == json!(2)
    });
    env.say("/stop");
    wait_text(env, "the stop reply", |t| {
        t.starts_with("⏹ Aborting web") && t.contains("Dropped 2 waiting message(s).")
    });
    let aborted = wait_text(env, "the aborted answer", |t| t.contains("stopme w1"));
    assert!(aborted.ends_with(ABORTED), "{aborted}");
    // /next: abort, and the next waiting one runs.
    env.say(&slow("nextme"));
    wait_for("the slow turn", 30, || {
        prompts_containing(&s.llm, "nextme w1") == 1
    });
    wait_streaming(env, "nextme");
    env.say("prompt hotel");
    wait_for("hotel to wait", 20, || {
        env.status()["turns"]["queued"] == json!(1)
    });
    env.say("/next");
    wait_text(env, "the next reply", |t| {
        t.contains("Its next waiting message goes next (1 waiting)")
    });
    wait_text(env, "hotel's answer", |t| t == "echo: prompt hotel");
    let aborted = wait_text(env, "the aborted answer", |t| t.contains("nextme w1"));
    assert!(aborted.ends_with(ABORTED), "{aborted}");
    assert_eq!(prompts_containing(&s.llm, "prompt foxtrot"), 0);
    assert_eq!(prompts_containing(&s.llm, "prompt golf"), 0);
    // /abort and /next with nothing running say so.
    env.say("/abort");
    wait_text(env, "the idle abort", |t| {
        t.starts_with("Nothing is running on web")
    });
    // /continue: a prompt "continue", ahead of anything waiting.
    env.say("/continue");
    wait_text(env, "continue's answer", |t| t == "echo: continue");
    // /compact asks first; the button compacts; pi's outcome is told.
    env.say("/compact");
    let question = wait_message(env, "the compact question", |t| {
        t.starts_with("Compact web's session?")
    });
    let requests_before = s.llm.requests().len();
    press(env, question.message_id, "Compact");
    let done = wait_text(env, "the compaction outcome", |t| {
        t.starts_with("✓ web's session is compacted")
    });
    assert!(done.contains("tokens of context"), "{done}");
    assert!(
        s.llm.requests().len() > requests_before,
        "the compaction asked the model for a summary"
    );
    // The question lost its buttons and says what happened.
    let q = message(env, question.message_id);
    assert!(buttons(&q).is_empty());
    assert!(q.text.unwrap().ends_with("→ Compacting…"));
    // After compaction pi still answers.
    env.say("after compaction");
    wait_text(env, "an answer after compaction", |t| {
        t == "echo: after compaction"
    });
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn the_model_and_thinking_menus_switch_what_pi_uses() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of web"));
    let labels: Vec<String> = buttons(&menu).into_iter().map(|(l, _)| l).collect();
    assert!(labels.contains(&"✓ Fake Model".to_owned()), "{labels:?}");
    assert!(labels.contains(&"Fake Reasoner".to_owned()), "{labels:?}");
    press(env, menu.message_id, "Fake Reasoner");
    wait_for("the switch", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using fake/fake-reasoner."))
    });
    let edited = message(env, menu.message_id);
    assert!(
        buttons(&edited).iter().any(|(l, _)| l == "✓ Fake Reasoner"),
        "{:?}",
        buttons(&edited)
    );
    env.say("which model now");
    wait_text(env, "the answer", |t| t == "echo: which model now");
    let req = s
        .llm
        .requests()
        .into_iter()
        .rfind(|r| r.to_string().contains("which model now"))
        .unwrap();
    assert_eq!(req["model"], json!(fake_llm::REASONING_MODEL_ID));
    // Thinking: the reasoner's levels; choosing one reaches the model request.
    env.say("/thinking");
    let menu = wait_message(env, "the thinking menu", |t| {
        t.starts_with("Thinking level of web")
    });
    let levels: Vec<String> = buttons(&menu)
        .into_iter()
        .map(|(l, _)| l.trim_start_matches("✓ ").to_owned())
        .collect();
    assert!(
        levels.starts_with(&["off".to_owned(), "minimal".to_owned(), "low".to_owned()]),
        "{levels:?}"
    );
    press(env, menu.message_id, "high");
    wait_for("the level", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Thinking level: high."))
    });
    env.say("think about it");
    wait_text(env, "the answer", |t| t == "echo: think about it");
    let req = s
        .llm
        .requests()
        .into_iter()
        .rfind(|r| r.to_string().contains("think about it"))
        .unwrap();
    assert_eq!(req["reasoning_effort"], json!("high"), "{req}");
    // pi's "idle" may follow its answer (under load it did, once): status is asked once it
    // is idle, and must then say so.
    wait_for("pi to be idle", 30, || {
        env.status()["instances"]
            .as_array()
            .is_some_and(|is| is.iter().any(|i| i["state"] == "idle"))
    });
    // Status shows both, and context use.
    env.say("/status");
    let status = wait_text(env, "the status", |t| t.starts_with("Status of web"));
    assert!(status.contains("Model: fake/fake-reasoner"), "{status}");
    assert!(status.contains("Thinking: high"), "{status}");
    assert!(status.contains("State: idle"), "{status}");
    assert!(status.contains("Context: "), "{status}");
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn the_menu_navigates_in_one_message_and_settings_write_telegram_json() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say("/start");
    let menu = wait_message(env, "the menu", |t| t.starts_with("pi-telegram for @")).message_id;
    let count = bot_messages(env).len();
    for (button, heading) in [
        ("Status", "Status of web"),
        ("« Menu", ""),
        ("Queue", ""),
        ("« Menu", ""),
        ("Settings", ""),
    ] {
        press(env, menu, button);
        if heading.is_empty() {
            std::thread::sleep(Duration::from_millis(300));
        } else {
            wait_for(heading, 30, || {
                message(env, menu)
                    .text
                    .is_some_and(|t| t.starts_with(heading))
            });
        }
    }
    assert_eq!(
        bot_messages(env).len(),
        count,
        "edited in place, nothing new"
    );
    let settings = message(env, menu);
    let labels: Vec<String> = buttons(&settings).into_iter().map(|(l, _)| l).collect();
    let previews = labels
        .iter()
        .find(|l| l.to_lowercase().contains("preview"))
        .unwrap_or_else(|| panic!("no previews toggle in {labels:?}"))
        .clone();
    press(env, menu, &previews);
    wait_for("telegram.json to change", 20, || {
        let cfg: Value =
            serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
        cfg.pointer("/assistant/draftPreviews").is_some()
    });
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    assert_eq!(
        cfg.pointer("/profiles/default/botToken"),
        Some(&json!(common::TOKEN)),
        "other keys kept: {cfg}"
    );
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn prompt_templates_are_telegram_commands_and_unknown_commands_are_not_sent() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let prompts_dir = s.pi.agent_dir().join("prompts");
    std::fs::create_dir_all(&prompts_dir).unwrap();
    std::fs::write(
        prompts_dir.join("review-pr.md"),
        "---\ndescription: Review a pull request\n---\nReview pull request $1 with care.\n",
    )
    .unwrap();
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_for("the template in the bot's commands", 30, || {
        published_commands(env).contains(&"review_pr".to_owned())
    });
    let published = published_commands(env);
    for ours in [
        "start", "abort", "stop", "next", "continue", "compact", "model", "thinking", "queue",
        "status", "settings", "help",
    ] {
        assert!(
            published.contains(&ours.to_owned()),
            "{ours} in {published:?}"
        );
    }
    env.say("/review_pr 42");
    wait_text(env, "the template's answer", |t| {
        t.contains("Review pull request 42 with care.")
    });
    assert_eq!(prompts_containing(&s.llm, "Review pull request 42"), 1);
    let before = s.llm.requests().len();
    env.say("/nonsense please");
    wait_text(env, "the unknown-command reply", |t| {
        t.starts_with("/nonsense is not a command")
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.llm.requests().len(), before, "not sent to pi");
    // pi leaves: its commands leave the list, ours stay.
    let _ = env.run(&["stop-instance", "--all"]);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn in_threaded_mode_abort_in_one_topic_stops_only_that_pi() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    env.spawn_pi(&project(&s.pi, "api"));
    let topic = |name: &str| env.bound_topic(name, 30);
    let (web, api) = (topic("web"), topic("api"));
    say_in(env, Some(web), &slow("webslow"));
    say_in(env, Some(api), "[[slow]] api keeps going to the end");
    // Both prompts reach their pi. `>= 1`, not `== 1`: pi itself repeats a model request it
    // retries, which is not a second delivery; a second delivery by the hub would put the prompt
    // in pi's history twice, which the end of the test checks.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (w, a) = (
            prompts_containing(&s.llm, "webslow w1"),
            prompts_containing(&s.llm, "api keeps going"),
        );
        if w >= 1 && a >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "both running: web {w}, api {a}; status {}\nhub log:\n{}",
            env.status(),
            hub.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_streaming(env, "webslow");
    say_in(env, Some(web), "/abort");
    let aborted = wait_text(env, "web's aborted answer", |t| t.contains("webslow w1"));
    assert!(aborted.ends_with(ABORTED), "{aborted}");
    let api_answer = wait_message(env, "api's answer", |t| {
        t == "echo: [[slow]] api keeps going to the end"
    });
    assert_eq!(api_answer.thread_id, Some(api));
    let web_answer = wait_message(env, "web's answer", |t| t.contains("webslow w1"));
    assert_eq!(web_answer.thread_id, Some(web));
    for needle in ["webslow w1", "api keeps going"] {
        assert_eq!(
            in_history_twice(&s.llm, needle),
            0,
            "{needle} delivered twice"
        );
    }
    assert_eq!(hub.stop(), Some(0));
}

/// How many model requests carry `needle` in more than one user message: a prompt the hub
/// delivered twice into the same pi session.
fn in_history_twice(llm: &fake_llm::FakeLlm, needle: &str) -> usize {
    llm.requests()
        .iter()
        .filter(|r| {
            r["messages"].as_array().is_some_and(|m| {
                m.iter()
                    .filter(|m| m["role"] == "user" && m["content"].to_string().contains(needle))
                    .count()
                    > 1
            })
        })
        .count()
}

// ------------------------------------------------------------------ the extension transport

fn install(s: &PiSetup) {
    let out = s.env.run(&["install-extension"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

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

fn live_shims(env: &Env) -> usize {
    env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["transport"] == "shim" && i["state"] != "gone")
        .count()
}

#[test]
fn with_the_extension_abort_model_and_compact_work_too() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    let mut hub = start(&s);
    let mut pi = s.pi.spawn_rpc(["--no-session"]).unwrap();
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(env) == 1);
    env.say(&slow("extslow"));
    wait_for("the slow turn", 30, || {
        prompts_containing(&s.llm, "extslow w1") == 1
    });
    wait_streaming(env, "extslow");
    env.say("prompt after abort");
    env.say("/abort");
    let aborted = wait_text(env, "the aborted answer", |t| t.contains("extslow w1"));
    assert!(aborted.ends_with(ABORTED), "{aborted}");
    // The waiting prompt goes with the next message.
    env.say("and the next one");
    wait_text(env, "the next answer", |t| {
        t.contains("prompt after abort") && t.contains("and the next one")
    });
    assert_eq!(prompts_containing(&s.llm, "prompt after abort"), 1);
    // The model menu lists the registry's models; a switch takes.
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of work"));
    press(env, menu.message_id, "Fake Reasoner");
    wait_for("the switch", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using fake/fake-reasoner."))
    });
    env.say("which model now");
    wait_text(env, "the answer", |t| t == "echo: which model now");
    let req = s
        .llm
        .requests()
        .into_iter()
        .rfind(|r| r.to_string().contains("which model now"))
        .unwrap();
    assert_eq!(req["model"], json!(fake_llm::REASONING_MODEL_ID));
    // Compaction through ctx.compact(), with a session worth compacting.
    let long: Vec<String> = (1..=120).map(|i| format!("word{i}")).collect();
    let long = format!("remember these: {}", long.join(" "));
    env.say(&long);
    wait_text(env, "the long answer", |t| {
        t.starts_with("echo: remember these")
    });
    env.say("and one more");
    wait_text(env, "one more answer", |t| t == "echo: and one more");
    env.say("/compact");
    let question = wait_message(env, "the compact question", |t| {
        t.starts_with("Compact work's session?")
    });
    press(env, question.message_id, "Compact");
    wait_text(env, "the compaction outcome", |t| {
        t.starts_with("✓ work's session is compacted")
    });
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn with_the_extension_reactions_thinking_and_templates_work_too() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    let prompts_dir = s.pi.agent_dir().join("prompts");
    std::fs::create_dir_all(&prompts_dir).unwrap();
    std::fs::write(
        prompts_dir.join("explain-it.md"),
        "---\ndescription: Explain something\n---\nExplain $1 simply.\n",
    )
    .unwrap();
    let mut hub = start(&s);
    let mut pi = s.pi.spawn_rpc(["--no-session"]).unwrap();
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(env) == 1);
    wait_for("the template in the bot's commands", 30, || {
        published_commands(env).contains(&"explain_it".to_owned())
    });
    // 👍 and 👎 behind a slow turn.
    env.say(&slow("extlanes"));
    wait_for("the slow turn", 30, || {
        prompts_containing(&s.llm, "extlanes w1") == 1
    });
    wait_streaming(env, "extlanes");
    let one = env.say("prompt one").message_id;
    let two = env.say("prompt two").message_id;
    let three = env.say("prompt three").message_id;
    react(env, three, Some("🔥"));
    react(env, one, Some("👎"));
    wait_for("the reactions", 20, || {
        lane_of(env, three).0 == "priority" && lane_of(env, one).1
    });
    env.say("/abort");
    wait_text(env, "the abort reply", |t| t.starts_with("⏹ Aborting work"));
    env.say("prompt four");
    wait_text(env, "the answer to all", |t| {
        t.contains("prompt two") && t.contains("prompt four")
    });
    wait_text(env, "the skip notice", |t| {
        t.starts_with("⏭ Skipped \"prompt one\"")
    });
    let folded = prompts(&s)
        .into_iter()
        .find(|p| p.contains("prompt four"))
        .unwrap();
    assert!(
        folded.find("1. prompt three").unwrap() < folded.find("2. prompt two").unwrap(),
        "{folded}"
    );
    assert_eq!(prompts_containing(&s.llm, "prompt one"), 0);
    let _ = two;
    // The template runs in pi.
    env.say("/explain_it recursion");
    wait_text(env, "the template's answer", |t| {
        t.contains("Explain recursion simply.")
    });
    // Thinking, after switching to the reasoning model.
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of work"));
    press(env, menu.message_id, "Fake Reasoner");
    wait_for("the switch", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using fake/fake-reasoner."))
    });
    env.say("/thinking");
    let menu = wait_message(env, "the thinking menu", |t| {
        t.starts_with("Thinking level of work")
    });
    press(env, menu.message_id, "medium");
    wait_for("the level", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Thinking level: medium."))
    });
    env.say("think a little");
    wait_text(env, "the answer", |t| t == "echo: think a little");
    let req = s
        .llm
        .requests()
        .into_iter()
        .rfind(|r| r.to_string().contains("think a little"))
        .unwrap();
    assert_eq!(req["reasoning_effort"], json!("medium"), "{req}");
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn in_threaded_mode_reactions_and_menus_act_on_the_topics_pi() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    env.spawn_pi(&project(&s.pi, "api"));
    let topic = |name: &str| env.bound_topic(name, 30);
    let (web, api) = (topic("web"), topic("api"));
    say_in(env, Some(api), &slow("apislow"));
    wait_for("api's slow turn", 30, || {
        prompts_containing(&s.llm, "apislow w1") == 1
    });
    wait_streaming(env, "apislow");
    let first = say_in(env, Some(api), "api first");
    let second = say_in(env, Some(api), "api second");
    react(env, second, Some("👍"));
    wait_for("the reaction", 20, || lane_of(env, second).0 == "priority");
    // The model menu in web's topic is about web, and switches only web.
    say_in(env, Some(web), "/model");
    let menu = wait_message(env, "web's model menu", |t| t.starts_with("Model of web"));
    assert_eq!(menu.thread_id, Some(web));
    press(env, menu.message_id, "Fake Reasoner");
    wait_for("the switch", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using fake/fake-reasoner."))
    });
    // /next in api's topic: api's slow turn stops, its priority message runs next.
    say_in(env, Some(api), "/next");
    wait_text(env, "api's last answer", |t| t == "echo: api first");
    assert!(first_request(&s, "api second") < first_request(&s, "api first"));
    say_in(env, Some(web), "web after the switch");
    wait_text(env, "web's answer", |t| t == "echo: web after the switch");
    let model_of = |needle: &str| {
        s.llm
            .requests()
            .into_iter()
            .rfind(|r| r.to_string().contains(needle))
            .unwrap()["model"]
            .clone()
    };
    assert_eq!(
        model_of("web after the switch"),
        json!(fake_llm::REASONING_MODEL_ID)
    );
    assert_eq!(
        model_of("api first"),
        json!(fake_llm::MODEL_ID),
        "api kept its model"
    );
    let _ = first;
    assert_eq!(hub.stop(), Some(0));
}

// ------------------------------------------------------------------ crashes

#[test]
fn a_reaction_journaled_before_a_crash_takes_effect_once() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    // Two prompts wait (no pi yet); the hub stops; a 👍 arrives while it is down.
    let mut hub = start(&s);
    let first = env.say("prompt kilo").message_id;
    let second = env.say("prompt lima").message_id;
    wait_for("both journaled", 20, || {
        env.status()["turns"]["queued"] == json!(2)
    });
    assert_eq!(hub.stop(), Some(0));
    react(env, second, Some("👍"));
    // The next hub journals the reaction (and, nothing older waiting, handles it in the same
    // commit) and dies before anything else learns of it: nothing woken, nothing synced.
    env.crash_at("journal.after_commit", || ());
    assert_eq!(lane_of(env, second), ("priority".into(), false));
    let mut hub = start(&s);
    wait_for("the reaction handled", 20, || {
        lane_of(env, second).0 == "priority"
    });
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the first answer", |t| t == "echo: prompt kilo");
    assert!(
        first_request(&s, "prompt lima") < first_request(&s, "prompt kilo"),
        "the reaction moved lima first"
    );
    let outcomes: Vec<String> = env
        .open_store()
        .read(|c| {
            let mut stmt = c
                .prepare("SELECT outcome FROM journal WHERE kind = 'message_reaction'")
                .map_err(store::StoreError::from)?;
            let rows = stmt
                .query_map([], |r| r.get::<_, Option<String>>(0))
                .map_err(store::StoreError::from)?;
            Ok::<_, store::StoreError>(rows.map(|r| r.unwrap().unwrap_or_default()).collect())
        })
        .unwrap();
    assert_eq!(
        outcomes,
        vec!["reaction:priority".to_owned()],
        "handled once"
    );
    let _ = first;
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_model_switch_pressed_before_a_crash_happens_once_after_the_restart() {
    let Some(s) = setup() else { return };
    install(&s);
    let env = &s.env;
    // The first control is the model menu, the second the switch: the hub dies before it.
    let mut hub = env.serve_with(&[("PI_TELEGRAM_CRASH_AT", "control.before_effect:2")]);
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let mut pi = s.pi.spawn_rpc(["--no-session"]).unwrap();
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(env) == 1);
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of work"));
    press(env, menu.message_id, "Fake Reasoner");
    assert_eq!(
        hub.wait(Duration::from_secs(30)),
        None,
        "the hub should abort:\n{}",
        hub.log_text()
    );
    // The extension reconnects to the new hub, which carries the switch out.
    let mut hub = env.serve();
    wait_for("the switch after the restart", 60, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using fake/fake-reasoner."))
    });
    env.say("which model now");
    wait_text(env, "the answer", |t| t == "echo: which model now");
    let req = s
        .llm
        .requests()
        .into_iter()
        .rfind(|r| r.to_string().contains("which model now"))
        .unwrap();
    assert_eq!(req["model"], json!(fake_llm::REASONING_MODEL_ID));
    // Once: one control row, done; the menu was edited to "Now using" by one call.
    let switches = env
        .fake
        .control()
        .requests(0, Some("editMessageText"))
        .into_iter()
        .filter(|r| {
            r.status == Some(200)
                && r.params["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("✓ Now using"))
        })
        .count();
    assert_eq!(switches, 1);
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

// ------------------------------------------------------------------ forged buttons

#[test]
fn forged_replayed_and_strangers_buttons_do_nothing_and_are_answered() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say("/compact");
    let question = wait_message(env, "the compact question", |t| {
        t.starts_with("Compact web's session?")
    });
    let data = buttons(&question)
        .into_iter()
        .find(|(l, _)| l == "Compact")
        .unwrap()
        .1;
    let answers_before = answered(env);
    let mut presses = 0;
    for (data, user) in [
        ("forged-token".to_owned(), None),
        ("{\"compact\":{\"identity\":\"x\"}}".to_owned(), None),
        (data.clone(), Some(OWNER + 1)),
    ] {
        env.fake
            .control()
            .forge_press(Press {
                message_id: question.message_id,
                data,
                user_id: user,
                token: None,
                chat_id: None,
            })
            .unwrap();
        presses += 1;
    }
    wait_for("every press answered", 20, || {
        answered(env) == answers_before + presses
    });
    assert!(
        buttons(&message(env, question.message_id))
            .iter()
            .any(|(l, _)| l == "Compact"),
        "the question is untouched"
    );
    // The real press works once; pressing the same token again is answered and does nothing.
    press_data(env, question.message_id, &data);
    wait_text(env, "the compaction outcome", |t| {
        t.contains("session is compacted") || t.contains("was not compacted")
    });
    let compactions = || {
        bot_messages(env)
            .iter()
            .filter(|m| {
                m.text
                    .as_deref()
                    .is_some_and(|t| t.contains("compacted") && !t.starts_with("Compact"))
            })
            .count()
    };
    let answered_now = answered(env);
    // Sent again by a client that kept it: no button carries it any more.
    env.fake
        .control()
        .forge_press(Press {
            message_id: question.message_id,
            data: data.clone(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("the replay answered", 20, || {
        answered(env) == answered_now + 1
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(compactions(), 1, "the replay did nothing");
    assert_eq!(hub.stop(), Some(0));
}

fn press_data(env: &Env, message_id: i64, data: &str) {
    env.fake
        .control()
        .press(Press {
            message_id,
            data: data.to_owned(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

/// `answerCallbackQuery` calls Telegram accepted.
fn answered(env: &Env) -> usize {
    env.fake
        .control()
        .requests(0, Some("answerCallbackQuery"))
        .iter()
        .filter(|r| r.status == Some(200))
        .count()
}

// ------------------------------------------------ extension commands and skills as commands

/// An extension in pi's agent dir with the commands `greet-me` (it appends its arguments to
/// `greeted.txt` in pi's folder and shows a notification) and `ask-model` (it starts a run of
/// the model), and the skill `lint-rules`.
fn commands_and_skill(s: &PiSetup) {
    let extensions = s.pi.agent_dir().join("extensions");
    std::fs::create_dir_all(&extensions).unwrap();
    std::fs::write(
        extensions.join("greet.js"),
        r#"import * as fs from "node:fs";
import * as path from "node:path";

export default function (pi) {
	pi.registerCommand("greet-me", {
		description: "Greet someone (a test command)",
		handler: async (args, ctx) => {
			fs.appendFileSync(path.join(ctx.cwd, "greeted.txt"), `${args}\n`);
			ctx.ui.notify(`greeted ${args}`, "info");
		},
	});
	pi.registerCommand("ask-model", {
		description: "Ask the model on the person's behalf (a test command)",
		handler: async (args) => {
			pi.sendUserMessage(`asked by a command: ${args}`);
		},
	});
}
"#,
    )
    .unwrap();
    let skill = s.pi.agent_dir().join("skills").join("lint-rules");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: lint-rules\ndescription: How this project lints. Use before any commit.\n---\n\nRun the linter twice, then SKILL-BODY-7f3a.\n",
    )
    .unwrap();
}

/// They are published under Telegram-safe names, and running them from Telegram does what pi
/// does for them: the command's handler runs (and the person is told it ran; a command that
/// starts a run answers with that run's answer), the skill's instructions reach the model with
/// the arguments.
fn commands_and_skill_run_from_telegram(s: &PiSetup, folder: &std::path::Path) {
    let env = &s.env;
    wait_for("pi's commands in the bot's commands", 30, || {
        let published = published_commands(env);
        published.contains(&"greet_me".to_owned())
            && published.contains(&"skill_lint_rules".to_owned())
    });
    env.say("/greet_me Ada Lovelace");
    wait_for("the command's handler", 30, || {
        std::fs::read_to_string(folder.join("greeted.txt")).is_ok_and(|t| t == "Ada Lovelace\n")
    });
    wait_text(env, "the command's outcome", |t| {
        t == "✓ pi ran /greet-me (a command: what it shows, it shows in pi)"
    });
    env.say("/ask_model what time is it");
    wait_text(env, "the answer of the command's run", |t| {
        t == "echo: asked by a command: what time is it"
    });
    let asked = s.llm.requests().len();
    env.say("/skill_lint_rules check main.rs");
    let answer = wait_text(env, "the skill's answer", |t| t.contains("SKILL-BODY-7f3a"));
    assert!(answer.contains("check main.rs"), "{answer}");
    let request = s
        .llm
        .requests()
        .into_iter()
        .skip(asked)
        .find(|r| r.to_string().contains("SKILL-BODY-7f3a"))
        .unwrap();
    assert!(
        request
            .to_string()
            .contains("<skill name=\\\"lint-rules\\\""),
        "{request}"
    );
    // Each command ran once; greet-me asked the model nothing.
    assert_eq!(
        std::fs::read_to_string(folder.join("greeted.txt")).unwrap(),
        "Ada Lovelace\n"
    );
    assert_eq!(prompts_containing(&s.llm, "greet"), 0);
    assert_eq!(prompts_containing(&s.llm, "asked by a command"), 1);
    let said = bot_messages(env);
    let said: Vec<&str> = said.iter().filter_map(|m| m.text.as_deref()).collect();
    assert!(
        !said
            .iter()
            .any(|t| t.contains("/ask-model") || t.contains("From the terminal")),
        "the run's answer is the command's: {said:#?}"
    );
}

#[test]
fn extension_commands_and_skills_are_telegram_commands() {
    let Some(s) = setup() else { return };
    commands_and_skill(&s);
    let mut hub = start(&s);
    let folder = project(&s.pi, "web");
    s.env.spawn_pi(&folder);
    commands_and_skill_run_from_telegram(&s, std::path::Path::new(&folder));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn with_the_extension_extension_commands_and_skills_are_telegram_commands_too() {
    let Some(s) = setup() else { return };
    commands_and_skill(&s);
    install(&s);
    let mut hub = start(&s);
    let mut pi = s.pi.spawn_rpc(["--no-session"]).unwrap();
    connect(&mut pi);
    wait_for("pi to connect", 30, || live_shims(&s.env) == 1);
    commands_and_skill_run_from_telegram(&s, s.pi.work_dir());
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}
