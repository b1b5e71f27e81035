//! pi's questions on the phone, end to end with real pi against the fake model: a test
//! extension's tool asks (confirm, select of three, input, a confirm with a timeout) and
//! returns what it got, which the fake model's next request carries. A headless pi's dialogs
//! are questions the person answers with a tap or a reply; a stranger's or a replayed tap does
//! nothing; a timed-out one says so; a hub killed while one waits leaves it saying its pi is
//! gone; a question notifies and is pinned until it is settled. A pi with the extension
//! waiting at its terminal is told, until it stops waiting.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, project, setup};
use common::{Env, OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::control::{Press, SendText, ThreadFilter, TranscriptEntry};

/// A tool that asks the person what `kind` says and returns `ANSWER=<json of the result>`.
const ASK_EXTENSION: &str = r#"
export default function (pi) {
  pi.registerTool({
    name: "ask_person",
    label: "Ask",
    description: "Asks the person something",
    parameters: { type: "object", properties: { kind: { type: "string" }, timeout: { type: "number" } } },
    async execute(_id, params, _signal, _update, ctx) {
      const opts = params.timeout ? { timeout: params.timeout } : undefined;
      let r;
      if (params.kind === "confirm") r = await ctx.ui.confirm("Deploy now?", "It goes live at once.", opts);
      else if (params.kind === "select") r = await ctx.ui.select("Which colour?", ["red", "green", "blue"], opts);
      else if (params.kind === "input") r = await ctx.ui.input("Your name?", "a name", opts);
      else r = await ctx.ui.editor("Edit the note", "line one");
      return { content: [{ type: "text", text: "ANSWER=" + JSON.stringify(r ?? null) }], details: {} };
    },
  });
}
"#;

fn with_ask_extension(s: &PiSetup) {
    let dir = s.pi.agent_dir().join("extensions");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ask.js"), ASK_EXTENSION).unwrap();
}

fn start(env: &Env) -> common::Hub {
    let hub = env.serve();
    wait_for("the hub", 20, || {
        std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
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
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let all = bot_messages(env);
        if let Some(m) = all.iter().find(|m| pred(m)) {
            return m.clone();
        }
        let texts: Vec<&str> = all.iter().map(text).collect();
        assert!(
            std::time::Instant::now() < deadline,
            "no {what} among {texts:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn text(m: &TranscriptEntry) -> &str {
    m.text.as_deref().unwrap_or_default()
}

/// The message `id` as it reads now.
fn now_reads(env: &Env, id: i64) -> TranscriptEntry {
    bot_messages(env)
        .into_iter()
        .find(|m| m.message_id == id)
        .unwrap()
}

fn buttons(m: &TranscriptEntry) -> Vec<(String, String)> {
    m.reply_markup
        .as_ref()
        .and_then(|k| k["inline_keyboard"].as_array().cloned())
        .into_iter()
        .flatten()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .filter_map(|b| {
            Some((
                b["text"].as_str()?.to_owned(),
                b["callback_data"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// Presses a button of `m` as `user` (the owner by default). `false` when tg-fake shows no
/// such button any more (as Telegram would not: the message lost its buttons).
fn press_as(env: &Env, m: &TranscriptEntry, data: &str, user: Option<i64>) -> bool {
    env.fake
        .control()
        .press(Press {
            message_id: m.message_id,
            data: data.to_owned(),
            user_id: user,
            token: None,
            chat_id: None,
        })
        .is_ok()
}

/// A press tg-fake makes whether or not the message shows the button, from anyone (what a
/// stranger's or a replaying client could send).
fn forge(env: &Env, m: &TranscriptEntry, data: &str, user: Option<i64>) {
    env.fake
        .control()
        .forge_press(Press {
            message_id: m.message_id,
            data: data.to_owned(),
            user_id: user,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

fn data_of(m: &TranscriptEntry, label: &str) -> String {
    buttons(m)
        .into_iter()
        .find(|(l, _)| l.contains(label))
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("no {label} button on {:?}", m.text))
}

/// How many tool results holding `needle` the model was given (each request carries the
/// session so far: the most any request holds).
fn tool_results_with(s: &PiSetup, needle: &str) -> usize {
    s.llm
        .requests()
        .iter()
        .map(|r| {
            r["messages"].as_array().map_or(0, |m| {
                m.iter()
                    .filter(|m| m["role"] == "tool" && m["content"].to_string().contains(needle))
                    .count()
            })
        })
        .max()
        .unwrap_or(0)
}

/// The tool result the model got last for `ask_person` (the last request that has one).
fn last_answer(s: &PiSetup) -> Option<String> {
    s.llm.requests().iter().rev().find_map(|r| {
        r["messages"].as_array()?.iter().rev().find_map(|m| {
            let c = m["content"].to_string();
            (m["role"] == "tool" && c.contains("ANSWER="))
                .then(|| c.split("ANSWER=").nth(1).unwrap_or_default().to_owned())
        })
    })
}

/// The parameters of every `method` call the hub made.
fn calls(env: &Env, method: &str) -> Vec<Value> {
    env.fake
        .control()
        .requests(0, Some(method))
        .into_iter()
        .map(|r| r.params)
        .collect()
}

fn ask(env: &Env, kind: &str, timeout: Option<u64>) {
    let args = match timeout {
        Some(t) => json!({ "kind": kind, "timeout": t }),
        None => json!({ "kind": kind }),
    };
    env.say(&format!("[[tool:ask_person:{args}]]"));
}

fn headless(s: &PiSetup) -> common::Hub {
    with_ask_extension(s);
    let env = &s.env;
    let hub = start(env);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_message(env, "the connected notice", |m| {
        text(m).starts_with("pi connected: web")
    });
    hub
}

#[test]
fn a_headless_pis_dialogs_are_answered_from_telegram() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = headless(&s);

    // confirm: buttons; a stranger's tap does nothing; the owner's Yes reaches pi.
    ask(env, "confirm", None);
    let q = wait_message(env, "the confirm question", |m| {
        text(m).starts_with("❓ pi web asks: Deploy now?")
    });
    assert!(text(&q).contains("It goes live at once."), "{:?}", q.text);
    let labels: Vec<String> = buttons(&q).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["✅ Yes", "❌ No", "✖️ Cancel"]);
    // It waits for the person: it notified, and it is pinned until it is settled.
    wait_for("the question pinned", 30, || {
        now_reads(env, q.message_id).pinned
    });
    let asked = calls(env, "sendMessage")
        .into_iter()
        .find(|p| {
            p["text"]
                .as_str()
                .is_some_and(|t| t.contains("asks: Deploy now?"))
        })
        .unwrap();
    assert_eq!(asked.get("disable_notification"), None, "{asked}");
    let yes = data_of(&q, "Yes");
    let no = data_of(&q, "No");
    // A stranger's tap (forged: Telegram shows nobody else the owner's private chat) is
    // answered and does nothing.
    let answers = || calls(env, "answerCallbackQuery").len();
    let before = answers();
    forge(env, &q, &yes, Some(OWNER + 1));
    wait_for("the stranger's tap answered", 20, || {
        answers() == before + 1
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        tool_results_with(&s, "ANSWER="),
        0,
        "a stranger's tap answered pi"
    );
    assert!(!buttons(&now_reads(env, q.message_id)).is_empty());
    // The owner's Yes, and a No tapped right after it (a double tap, before the edit).
    assert!(press_as(env, &q, &yes, None));
    // Every tap is answered; the double tap's answer may come late (a full run saw it land after the
    // count below was taken), so the count waits for it first.
    let taps = 2 + usize::from(press_as(env, &q, &no, None));
    wait_for("every tap so far answered", 20, || {
        answers() == before + taps
    });
    wait_for("the answer in the model's next request", 30, || {
        last_answer(&s).is_some()
    });
    assert_eq!(
        last_answer(&s)
            .unwrap()
            .trim_end_matches(['"', '}', ']', '\\']),
        "true"
    );
    // The question's edit is its own delivery: pi may have the answer before the edit lands.
    wait_for("the question settled", 30, || {
        text(&now_reads(env, q.message_id)).contains("→ ✅ Yes")
    });
    wait_for("the question unpinned", 30, || {
        !now_reads(env, q.message_id).pinned
    });
    let settled = now_reads(env, q.message_id);
    assert!(buttons(&settled).is_empty(), "{:?}", settled.reply_markup);
    // The question lost its buttons; a second tap, and the Yes replayed by a client that kept
    // it, change nothing: pi got one answer.
    assert!(!press_as(env, &q, &yes, None));
    let before = answers();
    forge(env, &q, &yes, None);
    forge(env, &q, &no, None);
    wait_for("the replays answered", 20, || answers() == before + 2);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(tool_results_with(&s, "ANSWER=true"), 1);
    assert_eq!(tool_results_with(&s, "ANSWER=false"), 0);

    // select of three: one button each.
    ask(env, "select", None);
    let q = wait_message(env, "the select question", |m| {
        text(m).starts_with("❓ pi web asks: Which colour?")
    });
    let labels: Vec<String> = buttons(&q).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["red", "green", "blue", "✖️ Cancel"]);
    assert!(press_as(env, &q, &data_of(&q, "green"), None));
    wait_for("green", 30, || {
        tool_results_with(&s, r#"ANSWER=\"green\""#) == 1
    });

    // input: answered by a reply to the question.
    ask(env, "input", None);
    let q = wait_message(env, "the input question", |m| {
        text(m).starts_with("❓ pi web asks: Your name?")
    });
    assert!(text(&q).contains("Reply to this message"), "{:?}", q.text);
    env.fake
        .control()
        .send_text(SendText {
            text: "Ada Lovelace".into(),
            thread_id: None,
            user_id: None,
            reply_to_message_id: Some(q.message_id),
            entities: None,
            forward: None,
            token: None,
            date: None,
            ..Default::default()
        })
        .unwrap();
    wait_for("the name", 30, || {
        tool_results_with(&s, r#"ANSWER=\"Ada Lovelace\""#) == 1
    });
    wait_for("the input question settled", 30, || {
        text(&now_reads(env, q.message_id)).contains("→ ✅ Ada Lovelace")
    });
    // The reply was an answer, not a prompt.
    assert_eq!(common::pi::prompts_containing(&s.llm, "Ada Lovelace"), 0);

    // A timeout: shown, honoured, and the question says so.
    ask(env, "confirm", Some(2_000));
    let q = wait_message(env, "the timed question", |m| {
        text(m).starts_with("❓ pi web asks: Deploy now?") && text(m).contains("⏱ pi waits 2 s")
    });
    wait_for("the time-out edit", 30, || {
        text(&now_reads(env, q.message_id)).contains("No answer within 2 s")
    });
    wait_for("pi's default", 30, || {
        tool_results_with(&s, "ANSWER=false") == 1
    });
    wait_for("the timed-out question unpinned", 30, || {
        !now_reads(env, q.message_id).pinned
    });
    assert!(
        !press_as(env, &q, &data_of(&q, "Yes"), None),
        "the buttons are gone after the timeout"
    );
    let before = answers();
    forge(env, &q, &data_of(&q, "Yes"), None);
    wait_for("the late tap answered", 20, || answers() == before + 1);
    std::thread::sleep(Duration::from_millis(500));
    assert!(text(&now_reads(env, q.message_id)).contains("No answer within 2 s"));
    assert_eq!(
        tool_results_with(&s, "ANSWER=true"),
        1,
        "a tap after the timeout answered"
    );

    // A hub killed while a question waits: after the restart the question says its pi is
    // gone (the headless pi died with its hub), and its buttons do nothing.
    ask(env, "editor", None);
    let q = wait_message(env, "the editor question", |m| {
        text(m).starts_with("❓ pi web asks: Edit the note")
    });
    assert!(text(&q).contains("line one"), "{:?}", q.text);
    hub.kill();
    let mut hub = start(env);
    wait_for("the question voided", 30, || {
        text(&now_reads(env, q.message_id)).contains("The pi that asked is gone")
    });
    assert!(
        !press_as(env, &q, &data_of(&q, "Cancel"), None),
        "the buttons are gone after the restart"
    );
    let before = answers();
    forge(env, &q, &data_of(&q, "Cancel"), None);
    wait_for("the tap into the void answered", 20, || {
        answers() == before + 1
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(text(&now_reads(env, q.message_id)).contains("The pi that asked is gone"));
    let st = env.status();
    assert_eq!(st["dialogs_open"], json!(0), "{st}");
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_hub_killed_between_the_answer_and_pi_leaves_the_question_saying_so() {
    let Some(s) = setup() else { return };
    with_ask_extension(&s);
    let env = &s.env;
    let q = env.crash_at("control.before_effect", || {
        wait_for("the hub", 20, || {
            std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
        });
        env.spawn_pi(&project(&s.pi, "web"));
        wait_message(env, "the connected notice", |m| {
            text(m).starts_with("pi connected: web")
        });
        ask(env, "confirm", None);
        let q = wait_message(env, "the question", |m| {
            text(m).contains("asks: Deploy now?")
        });
        // The answer commits with its control; the hub dies before pi is told.
        assert!(press_as(env, &q, &data_of(&q, "Yes"), None));
        q
    });
    let mut hub = start(env);
    wait_for("the question voided", 30, || {
        text(&now_reads(env, q.message_id)).contains("The pi that asked is gone")
    });
    assert_eq!(
        tool_results_with(&s, "ANSWER="),
        0,
        "pi never had the answer"
    );
    assert_eq!(env.status()["dialogs_open"], json!(0));
    assert_eq!(hub.stop(), Some(0));
}

/// pi with the extension in `dir` (an RPC host plays the terminal), connected.
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
fn a_pi_waiting_at_its_terminal_is_told_until_it_stops_waiting() {
    let Some(s) = setup() else { return };
    with_ask_extension(&s);
    let env = &s.env;
    let out = env.run(&["install-extension"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut hub = start(env);
    let dir = project(&s.pi, "desk");
    let mut pi = pi_in(&s, &dir);
    wait_message(env, "the connected notice", |m| {
        text(m).starts_with("pi connected: desk")
    });
    // Typed at the terminal: the dialog is the terminal's (this RPC host's) to answer.
    pi.send(&json!({ "id": "p1", "type": "prompt",
                     "message": "[[tool:ask_person:{\"kind\":\"confirm\"}]]" }))
        .unwrap();
    let request = pi
        .read_until(
            Duration::from_secs(60),
            "the dialog at the terminal",
            |v: &Value| v["type"] == "extension_ui_request" && v["method"] == "confirm",
        )
        .unwrap()
        .pop()
        .unwrap();
    let notice = wait_message(env, "the notice", |m| {
        text(m).contains("waits for you at the terminal: Deploy now?")
    });
    assert!(
        buttons(&notice).is_empty(),
        "nothing to answer from the phone"
    );
    pi.send(&json!({ "type": "extension_ui_response", "id": request["id"], "confirmed": true }))
        .unwrap();
    wait_for("the notice ended", 30, || {
        text(&now_reads(env, notice.message_id)).contains("Not any more")
    });
    wait_for("pi got the terminal's answer", 30, || {
        tool_results_with(&s, "ANSWER=true") == 1
    });
    drop(pi);
    assert_eq!(hub.stop(), Some(0));
}
