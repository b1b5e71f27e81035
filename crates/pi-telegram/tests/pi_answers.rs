//! Answers a person can read, end to end with real pi against the fake LLM: live previews that
//! grow while pi streams and stop at the answer, tools and commentary before the final answer,
//! work typed into pi (not Telegram) pushed to Telegram, both renderings with a table and a
//! code block, the fallback chain when Telegram refuses, and Threaded Mode.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, project, prompts_containing, setup_with};
use common::{Env, OWNER, TOKEN, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::control::{SendText, ThreadFilter, TranscriptEntry};
use tg_fake::{FakeConfig, FaultKind, FaultSpec, FloodConfig};

/// tg-fake with Telegram-like rate limits, and the hub with its real pacing (the test helpers
/// otherwise let it send as fast as it likes).
fn setup(topics: bool) -> Option<PiSetup> {
    let s = setup_with(FakeConfig {
        has_topics_enabled: topics,
        flood: FloodConfig {
            enabled: true,
            ..FloodConfig::default()
        },
        ..FakeConfig::default()
    })?;
    write_config(&s.env, json!({}));
    Some(s)
}

fn write_config(env: &Env, assistant: Value) {
    let cfg = json!({ "profiles": { "default": {
        "botToken": TOKEN, "allowedUserId": OWNER, "apiBase": env.fake.base_url() } },
        "assistant": assistant });
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
}

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    wait_for("the hub socket", 20, || {
        s.env.profile_dir().join("hub.sock").exists()
    });
    hub
}

fn transcript(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

fn texts(env: &Env) -> Vec<String> {
    transcript(env).into_iter().filter_map(|m| m.text).collect()
}

fn wait_text(env: &Env, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let mut found = None;
    wait_for(what, 90, || {
        found = texts(env).into_iter().find(|t| pred(t));
        found.is_some()
    });
    found.unwrap()
}

fn floods(env: &Env) -> usize {
    env.fake
        .control()
        .requests(0, None)
        .iter()
        .filter(|r| r.status == Some(429))
        .count()
}

/// Preview calls (drafts and typing) after request `seq`.
fn previews_after(env: &Env, seq: u64) -> Vec<String> {
    env.fake
        .control()
        .requests(seq, None)
        .into_iter()
        .filter(|r| r.method.ends_with("Draft") || r.method == "sendChatAction")
        .map(|r| format!("{} {}", r.method, r.params))
        .collect()
}

/// The request that sent the last message (the answer, when nothing follows it).
fn last_send(env: &Env) -> tg_fake::log::RequestEntry {
    env.fake
        .control()
        .requests(0, None)
        .into_iter()
        .rfind(|r| {
            r.status == Some(200) && (r.method == "sendRichMessage" || r.method == "sendMessage")
        })
        .unwrap()
}

#[test]
fn a_streamed_answer_grows_in_a_draft_and_the_draft_stops_at_the_answer() {
    let Some(s) = setup(false) else { return };
    let env = &s.env;
    let mut hub = start(&s);
    let dir = project(&s.pi, "web");
    env.spawn_pi(&dir);
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    let prompt = "[[slow]] tell me how previews grow while a model streams its words";
    env.say(prompt);
    let answer = format!("echo: {prompt}");
    wait_text(env, "the answer", |t| t == answer);
    // Give a stray draft the chance to show itself.
    std::thread::sleep(Duration::from_millis(1500));
    let chat = env.fake.control().chat(Some(OWNER), None).unwrap();
    let final_req = last_send(env);
    let drafts: Vec<String> = chat
        .drafts
        .iter()
        .map(|d| d.draft.text.clone())
        .filter(|t| !t.is_empty() && t != "Thinking…")
        .collect();
    let mut distinct = drafts.clone();
    distinct.dedup();
    eprintln!("{} drafts, {} distinct texts", drafts.len(), distinct.len());
    assert!(distinct.len() >= 3, "drafts: {drafts:#?}");
    // They grew towards the answer.
    assert!(
        distinct.windows(2).all(|w| w[1].len() >= w[0].len()),
        "{distinct:#?}"
    );
    assert!(answer.starts_with(distinct.last().unwrap().as_str()));
    // Nothing preview-like after the final answer, and no draft still showing.
    let after = previews_after(env, final_req.seq);
    assert!(after.is_empty(), "previews after the answer: {after:#?}");
    assert!(chat.drafts.iter().all(|d| !d.visible));
    assert_eq!(floods(env), 0, "no 429 at all");
    assert_eq!(prompts_containing(&s.llm, "tell me how previews grow"), 1);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_tool_turn_shows_commentary_and_the_tool_before_the_answer() {
    let Some(s) = setup(false) else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say("please [[bash:echo from-a-tool]]");
    wait_text(env, "the final answer", |t| {
        t.starts_with("tool said: from-a-tool")
    });
    let all = texts(env);
    let at = |pred: &dyn Fn(&str) -> bool| all.iter().position(|t| pred(t));
    let commentary = at(&|t| t == "Running echo from-a-tool.").expect("the commentary");
    let tools = at(&|t| t.starts_with("🔧 Bash ✓")).expect("the tool activity");
    let answer = at(&|t| t.starts_with("tool said:")).unwrap();
    assert!(commentary < tools && tools < answer, "{all:#?}");
    assert!(all[tools].contains("echo from-a-tool"), "{}", all[tools]);
    // The activity is a collapsed quote.
    let tools_msg = transcript(env)
        .into_iter()
        .find(|m| m.text.as_deref().is_some_and(|t| t.starts_with("🔧 Bash")))
        .unwrap();
    assert!(
        tools_msg
            .entities
            .iter()
            .any(|e| e["type"] == "expandable_blockquote"),
        "{:?}",
        tools_msg.entities
    );
    // Commentary arrived once.
    assert_eq!(
        all.iter()
            .filter(|t| *t == "Running echo from-a-tool.")
            .count(),
        1
    );
    assert_eq!(floods(env), 0);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn both_renderings_deliver_a_table_and_a_code_block_and_refusals_fall_back() {
    let Some(s) = setup(false) else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    let md = "| name | value |\n|---|---:|\n| alpha | 1 |\n\n```rust\nlet x = a < b && c;\n```";
    let ask = |tag: &str| env.say(&format!("{tag} [[reply:{md}\n\n{tag} done]]"));
    // Rich (the default): a rich message with a table and a preformatted block.
    ask("one");
    wait_text(env, "the rich answer", |t| t.contains("one done"));
    let m = transcript(env)
        .into_iter()
        .find(|m| m.text.as_deref().is_some_and(|t| t.contains("one done")))
        .unwrap();
    let rich = m.rich.unwrap().to_string();
    assert!(
        rich.contains("\"table\"") && rich.contains("let x = a < b && c;"),
        "{rich}"
    );
    // HTML, switched on while the hub runs: the table as an aligned grid in a pre block, the
    // code in a pre block with its language.
    write_config(env, json!({ "rendering": "html" }));
    ask("two");
    let text = wait_text(env, "the html answer", |t| t.contains("two done"));
    assert!(
        text.contains("name  │ value") && text.contains("alpha │     1"),
        "{text}"
    );
    let m = transcript(env)
        .into_iter()
        .find(|m| m.text.as_deref().is_some_and(|t| t.contains("two done")))
        .unwrap();
    assert!(
        m.entities.iter().filter(|e| e["type"] == "pre").count() >= 2,
        "{:?}",
        m.entities
    );
    assert!(m.entities.iter().any(|e| e["language"] == "rust"));
    // Rich refused: the same answer as HTML, nothing lost, an incident that names the reason.
    write_config(env, json!({ "rendering": "rich" }));
    let fault = |method: &str| {
        env.fake
            .control()
            .add_fault(FaultSpec {
                method: method.into(),
                kind: FaultKind::BadRequest,
                count: Some(1),
                probability: None,
                retry_after: None,
                delay_ms: None,
            })
            .unwrap();
    };
    fault("sendRichMessage");
    ask("three");
    let text = wait_text(env, "the fallback answer", |t| t.contains("three done"));
    assert!(text.contains("alpha │     1"), "sent as HTML: {text}");
    // Rich and HTML refused: plain text.
    fault("sendRichMessage");
    fault("sendMessage");
    ask("four");
    let text = wait_text(env, "the plain answer", |t| t.contains("four done"));
    assert!(text.contains("let x = a < b && c;"));
    let m = transcript(env)
        .into_iter()
        .find(|m| m.text.as_deref().is_some_and(|t| t.contains("four done")))
        .unwrap();
    assert!(m.entities.is_empty(), "plain text: {:?}", m.entities);
    let errors = env.status()["last_errors"].to_string();
    assert!(
        errors.contains("rich refused") && errors.contains("sent as html"),
        "{errors}"
    );
    assert!(
        errors.contains("html refused") && errors.contains("sent as plain"),
        "{errors}"
    );
    assert!(!errors.contains("alpha"), "incidents never carry the text");
    for tag in ["one", "two", "three", "four"] {
        assert_eq!(
            texts(env)
                .iter()
                .filter(|t| t.contains(&format!("{tag} done")))
                .count(),
            1,
            "{tag} delivered once"
        );
    }
    assert_eq!(hub.stop(), Some(0));
}

/// Runs `/telegram-connect` in a pi started with the extension in `dir`.
fn pi_with_extension(s: &PiSetup, dir: &str) -> PiRpc {
    let out = s.env.run(&["install-extension"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
fn work_typed_into_pi_is_pushed_to_telegram() {
    let Some(s) = setup(false) else { return };
    let env = &s.env;
    let mut hub = start(&s);
    let mut pi = pi_with_extension(&s, &project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    // A prompt through pi's own input (here its RPC stdin), not Telegram.
    pi.send(&json!({ "id": "local", "type": "prompt", "message": "typed in the terminal" }))
        .unwrap();
    let pushed = wait_text(env, "the pushed answer", |t| {
        t.contains("echo: typed in the terminal")
    });
    assert!(pushed.starts_with("💻 From the terminal:"), "{pushed}");
    // The prompt itself is not mirrored, and it is pushed once.
    std::thread::sleep(Duration::from_millis(800));
    let all = texts(env);
    assert_eq!(
        all.iter()
            .filter(|t| t.contains("typed in the terminal"))
            .count(),
        1,
        "{all:#?}"
    );
    // Switched off: nothing is pushed.
    write_config(env, json!({ "proactivePush": false }));
    pi.send(&json!({ "id": "local2", "type": "prompt", "message": "not for telegram" }))
        .unwrap();
    wait_for("pi's answer", 30, || {
        prompts_containing(&s.llm, "not for telegram") == 1
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!texts(env).iter().any(|t| t.contains("not for telegram")));
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn in_threaded_mode_previews_and_answers_are_in_the_instances_topic() {
    let Some(s) = setup(true) else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    let topic = env.bound_topic("web", 60);
    env.fake
        .control()
        .send_text(SendText {
            text: "[[slow]] stream this into the topic please".into(),
            thread_id: Some(topic),
            ..Default::default()
        })
        .unwrap();
    let answer = "echo: [[slow]] stream this into the topic please";
    wait_for("the answer in the topic", 60, || {
        transcript(env)
            .iter()
            .any(|m| m.thread_id == Some(topic) && m.text.as_deref() == Some(answer))
    });
    let chat = env.fake.control().chat(Some(OWNER), None).unwrap();
    let drafts: Vec<_> = chat
        .drafts
        .iter()
        .filter(|d| !d.draft.text.is_empty())
        .collect();
    assert!(drafts.len() >= 2, "{} drafts", drafts.len());
    assert!(
        chat.drafts.iter().all(|d| d.draft.thread_id == Some(topic)),
        "every draft in the topic"
    );
    assert_eq!(floods(env), 0);
    assert_eq!(hub.stop(), Some(0));
}

/// The hub is killed while a preview streams (`None`), or at a crash point; after the restart
/// the answer arrives once and no preview of the finished turn follows it.
fn crash_while_previewing(point: Option<&str>) {
    let Some(s) = setup(false) else { return };
    let env = &s.env;
    let mut hub = match point {
        Some(p) => env.serve_with(&[("PI_TELEGRAM_CRASH_AT", p)]),
        None => env.serve(),
    };
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let pi = pi_with_extension(&s, &project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    let prompt = "[[slow]] one two three four five six seven eight nine ten eleven twelve";
    env.say(prompt);
    match point {
        None => {
            // Killed while drafts stream.
            wait_for("a draft with text", 60, || {
                env.fake
                    .control()
                    .chat(Some(OWNER), None)
                    .unwrap()
                    .drafts
                    .iter()
                    .any(|d| d.draft.text.contains("three"))
            });
            hub.kill();
        }
        Some(p) => {
            assert_eq!(
                hub.wait(Duration::from_secs(60)),
                None,
                "{p}: the hub aborts"
            );
        }
    }
    let _ = std::fs::remove_file(env.profile_dir().join("hub.sock"));
    let mut hub = env.serve();
    let answer = format!("echo: {prompt}");
    // An answer claimed for the sender in its own commit (`turn_done.after_commit` comes after
    // it) is a send under way: after the crash it goes again, marked as a possible repeat.
    let mark = hub::outgoing::texts::REPEAT_MARK.trim_end();
    let is_answer = |t: &str| {
        t == answer
            || t.strip_prefix(mark)
                .is_some_and(|rest| rest.trim_start() == answer)
    };
    wait_text(env, "the answer after the restart", is_answer);
    std::thread::sleep(Duration::from_millis(1500));
    let st = env.status();
    let ambiguous = st["outbox"]["ambiguous"].as_i64().unwrap_or(0);
    let resent = st["outbox"]["resent"].as_i64().unwrap_or(0);
    let all = texts(env);
    let copies = all.iter().filter(|t| is_answer(t)).count();
    let marked_copies = all
        .iter()
        .filter(|t| is_answer(t) && t.starts_with(mark))
        .count();
    assert!(
        copies == 1 || (copies == 2 && ambiguous + resent > 0),
        "answered {copies} times, status {st:#}"
    );
    assert!(
        marked_copies == 0 || resent > 0,
        "a copy marked as sent again is a counted resend: {st:#}"
    );
    assert_eq!(
        prompts_containing(&s.llm, "eleven twelve"),
        1,
        "pi got the prompt once"
    );
    let final_req = last_send(env);
    let after = previews_after(env, final_req.seq);
    assert!(after.is_empty(), "previews after the answer: {after:#?}");
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_hub_killed_while_previews_stream_answers_once_and_previews_nothing_after() {
    crash_while_previewing(None);
}

#[test]
fn a_hub_killed_right_after_the_answer_was_queued_answers_once_and_previews_nothing_after() {
    crash_while_previewing(Some("turn_done.after_commit"));
}

#[test]
fn without_draft_previews_typing_says_pi_works_and_stops_at_the_answer() {
    let Some(s) = setup(false) else { return };
    let env = &s.env;
    write_config(env, json!({ "draftPreviews": false }));
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    let since = env
        .fake
        .control()
        .requests(0, None)
        .last()
        .map_or(0, |r| r.seq);
    let prompt = "[[slow]] answer slowly without drafts please";
    env.say(prompt);
    wait_text(env, "the answer", |t| t == format!("echo: {prompt}"));
    std::thread::sleep(Duration::from_millis(1500));
    let reqs = env.fake.control().requests(since, None);
    assert!(
        !reqs.iter().any(|r| r.method.ends_with("Draft")),
        "no drafts when they are switched off"
    );
    let typing = reqs
        .iter()
        .filter(|r| r.method == "sendChatAction" && r.params["action"] == json!("typing"))
        .count();
    assert!(typing >= 1, "typing while pi works");
    let final_req = last_send(env);
    assert!(
        previews_after(env, final_req.seq).is_empty(),
        "no typing after the answer"
    );
    assert_eq!(hub.stop(), Some(0));
}

/// Half a character from the model (a lone UTF-16 surrogate; an emoji whose two halves the
/// provider streams in separate chunks) reaches Telegram (U+FFFD for the lone half, the emoji
/// whole), and the pi stays connected: the next prompt is answered too.
fn half_characters_are_answered(s: &PiSetup, hub: &common::Hub) {
    let env = &s.env;
    env.say("[[lone-surrogate]]");
    wait_text(env, "the answer with a lone half", |t| {
        t == "lone \u{FFFD} surrogate"
    });
    env.say("[[split-emoji]]");
    wait_text(env, "the answer with the emoji", |t| t == "split 😀 emoji");
    env.say("and after that");
    wait_text(env, "the next answer", |t| t == "echo: and after that");
    let instances = env.status()["instances"].clone();
    let instances = instances.as_array().unwrap();
    assert_eq!(instances.len(), 1, "one link all along: {instances:#?}");
    assert_ne!(instances[0]["state"], json!("gone"));
    let log = hub.log_text();
    assert!(
        !log.contains("malformed") && !log.contains("not JSON"),
        "{log}"
    );
}

#[test]
fn half_a_character_from_the_model_is_answered_by_headless_pi() {
    let Some(s) = setup(false) else { return };
    let mut hub = start(&s);
    s.env.spawn_pi(&project(&s.pi, "web"));
    wait_text(&s.env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    half_characters_are_answered(&s, &hub);
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn half_a_character_from_the_model_is_answered_by_pi_with_the_extension() {
    let Some(s) = setup(false) else { return };
    let mut hub = start(&s);
    let pi = pi_with_extension(&s, &project(&s.pi, "web"));
    wait_text(&s.env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    half_characters_are_answered(&s, &hub);
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}
