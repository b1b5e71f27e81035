//! Steering and retrying from the phone, end to end with real headless pi against the fake
//! model: `/steer` while pi streams an answer reaches pi inside that run (the fake model's next
//! request of the same run carries it after the streamed answer), and is not run again as a
//! turn of its own; `/steer` while pi is idle is an ordinary message; `/retry` sends the last
//! prompt again; `/close` says how to go on with the session in a terminal.
#![allow(clippy::unwrap_used)]

mod common;

use common::pi::{project, setup};
use common::{OWNER, wait_for};

fn last_user(req: &serde_json::Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| fake_llm::plan::text_of(m.get("content")))
        .unwrap_or_default()
}

#[test]
fn steer_reaches_the_running_turn_and_retry_runs_the_last_prompt_again() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let web = project(&s.pi, "web");
    env.spawn_pi(&web);
    wait_for("the connected notice", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: web"))
    });

    // A slow answer (about 40 words, 150 ms apart), and a steer while it streams.
    let words: Vec<String> = (1..=40).map(|n| format!("w{n}")).collect();
    env.say(&format!("[[slow]] {}", words.join(" ")));
    wait_for("pi to start streaming", 30, || !s.llm.requests().is_empty());
    std::thread::sleep(std::time::Duration::from_millis(600));
    env.say("/steer use the staging database");
    wait_for("the steered answer", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: use the staging database")
    });
    let texts = env.bot_texts(OWNER);
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("↪ pi web takes this into the work")),
        "{texts:?}"
    );
    // What pi had answered before it took the steer in is not lost under the last answer:
    // it arrives first.
    let earlier = texts
        .iter()
        .position(|t| t.contains("w1 w2 w3") && t.contains("w40"))
        .unwrap_or_else(|| panic!("the answer before the steer is lost: {texts:?}"));
    let last = texts
        .iter()
        .position(|t| t == "echo: use the staging database")
        .unwrap();
    assert!(earlier < last, "{texts:?}");
    // Inside the run: the request with the steer carries the streamed answer before it, and
    // the hub made no turn of its own of it (one prompt request for each).
    let requests = s.llm.requests();
    let steered: Vec<&serde_json::Value> = requests
        .iter()
        .filter(|r| last_user(r).contains("use the staging database"))
        .collect();
    assert_eq!(steered.len(), 1, "the steer ran once");
    let history = steered[0]["messages"].to_string();
    assert!(
        history.contains("echo: [[slow]] w1 w2") && history.contains("w40"),
        "the steer came after the streamed answer in the same session: {history}"
    );
    let st = env.status();
    assert_eq!(st["turns"]["cancelled"], serde_json::json!(1), "{st}");
    assert_eq!(st["turns"]["done"], serde_json::json!(1), "{st}");

    // Idle: /steer is an ordinary message.
    env.say("/steer quick question");
    wait_for("the ordinary answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: quick question")
    });

    // /retry: the last prompt again.
    let before = s
        .llm
        .requests()
        .iter()
        .filter(|r| last_user(r).ends_with("quick question"))
        .count();
    env.say("/retry");
    wait_for("the retried prompt", 30, || {
        s.llm
            .requests()
            .iter()
            .filter(|r| last_user(r).ends_with("quick question"))
            .count()
            == before + 1
    });
    wait_for("its answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .filter(|t| *t == "echo: quick question")
            .count()
            == 2
    });

    // /close: how to go on in a terminal.
    env.say("/close");
    wait_for("the close reply", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.contains("To go on in a terminal: cd '") && t.contains("pi --session '"))
    });
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_long_turn_shows_a_working_card_whose_stop_aborts_it() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    env.spawn_pi(&project(&s.pi, "web"));
    wait_for("the connected notice", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: web"))
    });
    // A quick answer gets no card.
    env.say("quick");
    wait_for("the quick answer", 30, || {
        env.bot_texts(OWNER).iter().any(|t| t == "echo: quick")
    });
    let cards = |env: &common::Env| {
        env.fake
            .control()
            .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .filter(|m| {
                m.from_bot
                    && m.text
                        .as_deref()
                        .is_some_and(|t| t.starts_with("✍ pi is working on it"))
            })
            .collect::<Vec<_>>()
    };
    assert!(cards(env).is_empty());
    // About 12 s of streaming: the card comes after 5 s, silent, with ⏹ Stop.
    let words: Vec<String> = (1..=80).map(|n| format!("w{n}")).collect();
    env.say(&format!("[[slow]] {}", words.join(" ")));
    wait_for("the working card", 30, || !cards(env).is_empty());
    let card = cards(env).remove(0);
    // tg-fake shows the message before its request log has the call: wait for both.
    let logged = || {
        env.fake
            .control()
            .requests(0, Some("sendMessage"))
            .into_iter()
            .find(|r| {
                r.params["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("✍ pi is working on it"))
            })
    };
    wait_for("the card's call in the request log", 10, || {
        logged().is_some()
    });
    let sent = logged().unwrap();
    assert_eq!(sent.params["disable_notification"], true);
    let stop = card.reply_markup.as_ref().unwrap()["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    env.fake
        .control()
        .press(tg_fake::control::Press {
            message_id: card.message_id,
            data: stop,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    // The run stops well before its 80 words: the answer so far comes marked aborted, and the
    // card is gone.
    wait_for("the aborted answer", 30, || {
        env.status()["turns"]["done"] == serde_json::json!(2)
    });
    let texts = env.bot_texts(OWNER);
    assert!(
        !texts.iter().any(|t| t.contains("w80")),
        "the run was not stopped: {texts:?}"
    );
    wait_for("the card deleted", 30, || {
        env.fake
            .control()
            .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .any(|m| m.message_id == card.message_id && m.deleted)
    });
    assert_eq!(hub.stop(), Some(0));
}
