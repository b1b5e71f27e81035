//! Sessions from the phone, with real headless pi: `/new <folder>` starts pi under a workspace
//! root (its own topic at once in Threaded Mode) and refuses `../` escapes and folders outside
//! the roots; `/sessions` lists pi's saved sessions, `🆕 New session` starts a fresh one and
//! `▶` resumes an earlier one (the model sees its history again); `/close` ends the pi.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::setup_threaded;
use common::{Env, OWNER, wait_for};
use serde_json::{Value, json};
use tg_fake::control::{Press, SendText, ThreadFilter, TranscriptEntry};

fn bot_messages(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

/// The newest bot message whose text satisfies `pred` (waits for it).
fn wait_message(env: &Env, what: &str, pred: impl Fn(&str) -> bool) -> TranscriptEntry {
    let mut found = None;
    wait_for(what, 60, || {
        found = bot_messages(env)
            .into_iter()
            .rev()
            .find(|m| m.text.as_deref().is_some_and(&pred));
        found.is_some()
    });
    found.unwrap()
}

fn buttons(m: &TranscriptEntry) -> Vec<(String, String)> {
    m.reply_markup
        .as_ref()
        .and_then(|r| r["inline_keyboard"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .filter_map(|b| {
            Some((
                b["text"].as_str()?.to_owned(),
                b["callback_data"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn press(env: &Env, m: &TranscriptEntry, label: impl Fn(&str) -> bool) {
    let (_, data) = buttons(m)
        .into_iter()
        .find(|(l, _)| label(l))
        .unwrap_or_else(|| panic!("no such button on {:?}: {:?}", m.text, buttons(m)));
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

fn say(env: &Env, thread: Option<i64>, text: &str) {
    env.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            thread_id: thread,
            ..Default::default()
        })
        .unwrap();
}

/// The last model request whose messages mention `needle`.
fn request_with(s: &common::pi::PiSetup, needle: &str) -> Value {
    s.llm
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["messages"].to_string().contains(needle))
        .unwrap()
}

#[test]
fn new_sessions_resume_and_close_from_the_phone() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let root = s.pi.root().join("code");
    std::fs::create_dir_all(root.join("web")).unwrap();
    std::fs::create_dir_all(root.join("api")).unwrap();
    std::fs::create_dir_all(s.pi.root().join("secret")).unwrap();
    let web = root
        .join("web")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    cfg["workspaces"] = json!([root.display().to_string()]);
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
    let _hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });

    // Folders outside the roots are refused, however they are written.
    for (typed, why) in [
        ("/new ../secret", "outside the workspaces"),
        ("/new web/../../secret", "outside the workspaces"),
        ("/new /", "outside the workspaces"),
        ("/new nowhere", "is not a folder"),
    ] {
        say(env, None, typed);
        wait_message(env, &format!("the refusal of {typed}"), |t| {
            t.starts_with("Not started:") && t.contains(why)
        });
    }
    assert_eq!(env.status()["instances"].as_array().unwrap().len(), 0);

    // /new offers the folders; a tap starts pi there, in its own topic.
    say(env, None, "/new");
    let picker = wait_message(env, "the folder picker", |t| {
        t.starts_with("Start pi in a folder")
    });
    let labels: Vec<String> = buttons(&picker).into_iter().map(|(l, _)| l).collect();
    assert!(
        labels.iter().any(|l| l.ends_with("/code/api")),
        "{labels:?}"
    );
    assert!(!labels.iter().any(|l| l.contains("secret")), "{labels:?}");
    press(env, &picker, |l| l == format!("📁 {web}"));
    wait_message(env, "pi started", |t| {
        t == format!("Started pi in {web}. Write to it here (or in its topic in Threaded Mode).")
    });
    let topic = env.bound_topic("web", 60);
    say(env, Some(topic), "remember the word kiwi");
    wait_message(env, "the first answer", |t| {
        t == "echo: remember the word kiwi"
    });

    // /sessions: the one session, current; a new session forgets it.
    say(env, Some(topic), "/sessions");
    let list = wait_message(env, "the sessions", |t| {
        t.starts_with("Saved sessions of pi web")
    });
    let dump = || {
        std::fs::read_dir(s.pi.session_dir())
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let head = std::fs::read_to_string(&p).unwrap_or_default();
                format!("{}: {}", p.display(), head.lines().next().unwrap_or(""))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        list.text.as_deref().unwrap().contains("kiwi"),
        "{:?}\n{}",
        list.text,
        dump()
    );
    assert!(
        list.text.as_deref().unwrap().contains("(current)"),
        "{:?}",
        list.text
    );
    press(env, &list, |l| l == "🆕 New session");
    wait_message(env, "the new session", |t| {
        t.starts_with("pi web started a new session")
    });
    say(env, Some(topic), "which word was it?");
    wait_message(env, "the answer in the new session", |t| {
        t == "echo: which word was it?"
    });
    assert!(
        !request_with(&s, "which word was it?")["messages"]
            .to_string()
            .contains("kiwi"),
        "a new session starts empty"
    );

    // Resume the first one: the model sees it again.
    say(env, Some(topic), "/sessions");
    let list = wait_message(env, "two sessions", |t| {
        t.starts_with("Saved sessions of pi web") && t.matches('•').count() == 2
    });
    press(env, &list, |l| l.starts_with('▶') && l.contains("kiwi"));
    wait_message(env, "resumed", |t| {
        t.starts_with("pi web resumed the session you chose")
    });
    say(env, Some(topic), "and now?");
    wait_message(env, "the answer in the resumed session", |t| {
        t == "echo: and now?"
    });
    assert!(
        request_with(&s, "and now?")["messages"]
            .to_string()
            .contains("remember the word kiwi"),
        "the resumed session has its history"
    );

    // /close ends it.
    say(env, Some(topic), "/close");
    wait_message(env, "closed", |t| t.starts_with("Closed pi web"));
    wait_for("the instance gone", 30, || {
        env.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["state"] == "gone")
    });
    let _ = Duration::ZERO;
}

/// The same with a pi that runs the extension (here hosted in RPC mode, as a terminal pi would
/// run it): the extension lists its sessions and replaces its own session on request.
#[test]
fn sessions_of_a_pi_with_the_extension() {
    let Some(s) = common::pi::setup() else { return };
    let env = &s.env;
    let out = env.run(&["install-extension"]);
    assert!(out.status.success());
    // Sessions are kept (no --no-session).
    let mut pi = pi_testkit::PiRpc::spawn(s.pi.command(["--mode", "rpc"])).unwrap();
    pi.send(&json!({ "id": "c", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi.read_until(Duration::from_secs(60), "connect", |v: &Value| {
        v["type"] == "response" && v["id"] == "c"
    })
    .unwrap();
    let live = || {
        env.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["state"] != "gone")
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    wait_for("pi to connect", 30, || live().len() == 1);
    say(env, None, "remember the word plum");
    wait_message(env, "the first answer", |t| {
        t.ends_with("echo: remember the word plum")
    });

    say(env, None, "/sessions");
    let list = wait_message(env, "the sessions", |t| {
        t.starts_with("Saved sessions of pi")
    });
    let text = list.text.clone().unwrap();
    assert!(
        text.contains("plum") && text.contains("(current)"),
        "{text}"
    );
    let before = live();
    press(env, &list, |l| l == "🆕 New session");
    wait_message(env, "the new session", |t| {
        t.contains("started a new session")
    });
    // pi replaced its session: the extension connects again.
    wait_for("pi to reconnect", 30, || {
        let now = live();
        now.len() == 1 && now != before
    });
    say(env, None, "which fruit was it?");
    wait_message(env, "the answer in the new session", |t| {
        t.ends_with("echo: which fruit was it?")
    });
    assert!(
        !request_with(&s, "which fruit was it?")["messages"]
            .to_string()
            .contains("plum"),
        "a new session starts empty"
    );

    say(env, None, "/sessions");
    let list = wait_message(env, "two sessions", |t| {
        t.starts_with("Saved sessions of pi") && t.matches('•').count() == 2
    });
    let before = live();
    press(env, &list, |l| l.starts_with('▶') && l.contains("plum"));
    wait_message(env, "resumed", |t| {
        t.contains("resumed the session you chose")
    });
    wait_for("pi to reconnect", 30, || {
        let now = live();
        now.len() == 1 && now != before
    });
    say(env, None, "and the fruit now?");
    wait_message(env, "the answer in the resumed session", |t| {
        t.ends_with("echo: and the fruit now?")
    });
    assert!(
        request_with(&s, "and the fruit now?")["messages"]
            .to_string()
            .contains("remember the word plum"),
        "the resumed session has its history"
    );
    // /close does not close a pi that runs in a terminal.
    say(env, None, "/close");
    wait_message(env, "refused", |t| t.contains("runs in a terminal"));
    let _ = pi.close(Duration::from_secs(20));
}

/// A FIFO named like a session file (`x.jsonl`) in pi's session folder: opening it for reading
/// waits for a writer for ever. `/sessions` of a headless pi (whose list the hub reads from
/// disk) still answers, and pi, the hub's own commands and another `/sessions` go on.
#[test]
fn a_fifo_among_the_session_files_holds_up_nothing() {
    let Some(s) = common::pi::setup() else { return };
    let env = &s.env;
    let _hub = env.serve();
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
    });
    env.spawn_pi(&common::pi::project(&s.pi, "web"));
    wait_message(env, "connected", |t| t.starts_with("pi connected: web"));
    say(env, None, "remember the word fig");
    wait_message(env, "the first answer", |t| {
        t.ends_with("echo: remember the word fig")
    });
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        s.pi.session_dir().join("x.jsonl"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();

    say(env, None, "/sessions");
    let list = wait_message(env, "the sessions", |t| {
        t.starts_with("Saved sessions of pi")
    });
    let text = list.text.clone().unwrap();
    assert!(
        text.contains("fig") && text.matches('•').count() == 1,
        "{text}"
    );
    // Meanwhile and after: pi answers, the hub's own commands answer, so does /sessions.
    say(env, None, "and a date?");
    wait_message(env, "the next answer", |t| t.ends_with("echo: and a date?"));
    say(env, None, "/help");
    wait_message(env, "the help", |t| {
        t.starts_with("pi-telegram is running for @")
    });
    let before = bot_messages(env).len();
    say(env, None, "/sessions");
    wait_for("the second list", 60, || {
        bot_messages(env).iter().skip(before).any(|m| {
            m.text
                .as_deref()
                .is_some_and(|t| t.starts_with("Saved sessions of pi"))
        })
    });
}

/// Copies the one session file of `dir` 199 times, each asking for its own word
/// (`w000`…`w198`, the newest first), with ids of their own and a second apart; returns the
/// words, the newest first, the original's (`fig`) last.
fn two_hundred_sessions(dir: &std::path::Path) -> Vec<String> {
    let original = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&original).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(header).unwrap();
    let now = std::time::SystemTime::now();
    std::fs::File::options()
        .write(true)
        .open(&original)
        .unwrap()
        .set_modified(now - Duration::from_secs(1000))
        .unwrap();
    let mut words = Vec::new();
    for k in 0..199 {
        let word = format!("w{k:03}");
        header["id"] = json!(format!("00000000-0000-4000-8000-{k:012}"));
        let path = dir.join(format!("copy-{k:03}.jsonl"));
        let body = rest.replace(
            "remember the word fig",
            &format!("remember the word {word}"),
        );
        std::fs::write(&path, format!("{header}\n{body}")).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(now - Duration::from_secs(k + 1))
            .unwrap();
        words.push(word);
    }
    words.push("fig".into());
    words
}

/// 200 saved sessions of a headless pi: `/sessions` pages them (every page accepted by
/// tg-fake, which refuses texts over 4096 characters and keyboards over 100 buttons), each
/// session on exactly one of 25 pages, and one from page 20 resumes with its history.
#[test]
fn two_hundred_saved_sessions_page_and_one_from_page_20_resumes() {
    let Some(s) = common::pi::setup() else { return };
    let env = &s.env;
    let _hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    env.spawn_pi(&common::pi::project(&s.pi, "web"));
    wait_message(env, "connected", |t| t.starts_with("pi connected: web"));
    say(env, None, "remember the word fig");
    wait_message(env, "the first answer", |t| {
        t.ends_with("echo: remember the word fig")
    });
    let words = two_hundred_sessions(s.pi.session_dir());

    say(env, None, "/sessions");
    let list = wait_message(env, "the sessions", |t| {
        t.starts_with("Saved sessions of pi") && t.contains("Page 1 of 25.")
    });
    let id = list.message_id;
    let mut listed = Vec::new();
    let mut pages = Vec::new();
    for page in 1..=25 {
        let shown = common::chat::message(env, id);
        let text = shown.text.clone().unwrap();
        assert!(text.contains(&format!("Page {page} of 25.")), "{text}");
        listed.extend(
            words
                .iter()
                .filter(|w| text.contains(&format!("remember the word {w}")))
                .cloned(),
        );
        pages.push(shown);
        common::chat::press(env, id, "▶");
        let next = format!("Page {} of 25.", page % 25 + 1);
        wait_for(&next, 30, || {
            common::chat::message(env, id)
                .text
                .is_some_and(|t| t.contains(&next))
        });
    }
    listed.sort();
    let mut all = words.clone();
    all.sort();
    assert_eq!(listed, all, "every session once in 25 pages");
    let refused = common::chat::refused(env);
    assert!(refused.is_empty(), "tg-fake refused {refused:?}");
    // Newest first: page 20 lists the 153rd..160th, w152..w159; resume w155's.
    for page in 2..=20 {
        common::chat::press(env, id, "▶");
        let next = format!("Page {page} of 25.");
        wait_for(&next, 30, || {
            common::chat::message(env, id)
                .text
                .is_some_and(|t| t.contains(&next))
        });
    }
    press(env, &common::chat::message(env, id), |l| {
        l.starts_with('▶') && l.contains("w155")
    });
    wait_message(env, "resumed", |t| {
        t.starts_with("pi web resumed the session you chose")
    });
    say(env, None, "and which word?");
    wait_message(env, "the answer in the resumed session", |t| {
        t.ends_with("echo: and which word?")
    });
    assert!(
        request_with(&s, "and which word?")["messages"]
            .to_string()
            .contains("remember the word w155"),
        "the resumed session has its history"
    );
}
