//! The first conversation through the extension socket, with a scripted fake of the extension:
//! prompts, queueing, answers, several instances, instances leaving, no instance at all.
#![allow(clippy::unwrap_used)]

mod common;

use common::{OWNER, TestHub};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_reaches_pi_and_the_answer_comes_back_as_a_reply() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    let sent = hub.say("what is 2+2?");
    let prompt = pi.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("what is 2+2?"));
    assert_eq!(prompt["turn_id"], json!("t1"));
    pi.answer(&prompt, "4").await;
    let msgs = hub
        .wait_for_bot("the answer", |m| m.iter().any(|(_, t, _)| t == "4"))
        .await;
    let answer = msgs.iter().find(|(_, t, _)| t == "4").unwrap();
    assert_eq!(
        answer.2,
        Some(sent.message_id),
        "the answer replies to the question"
    );
    let ack = pi.recv_type("done_ack").await;
    assert_eq!(ack["turn_id"], json!("t1"));
    hub.stop().await;
    let st = hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap();
    assert_eq!(st.turns["done"], 1);
    assert_eq!(st.instances[0].transport, "shim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_message_waits_while_pi_is_busy_and_long_answers_are_split() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.say("first");
    let p1 = pi.recv_type("prompt").await;
    pi.start(&p1).await;
    hub.say("second");
    // Nothing for the busy instance until the first turn is done.
    let early = tokio::time::timeout(
        std::time::Duration::from_millis(400),
        pi.recv_type("prompt"),
    )
    .await;
    assert!(
        early.is_err(),
        "a prompt was dispatched to a busy instance: {early:?}"
    );
    let long = "word ".repeat(1800);
    pi.send(&json!({ "type": "event", "turn_id": p1["turn_id"], "event": { "type": "agent_settled", "aborted": false } })).await;
    pi.send(
        &json!({ "type": "turn_done", "turn_id": p1["turn_id"], "text": long, "aborted": false }),
    )
    .await;
    let p2 = pi.recv_type("prompt").await;
    assert_eq!(p2["text"], json!("second"));
    pi.answer(&p2, "done second").await;
    let msgs = hub
        .wait_for_bot("both answers", |m| {
            m.iter().any(|(_, t, _)| t == "done second")
        })
        .await;
    // Rich rendering (the default): 9000 characters are one rich message.
    let pieces: Vec<_> = msgs
        .iter()
        .filter(|(_, t, _)| t.starts_with("word"))
        .collect();
    assert_eq!(pieces.len(), 1, "one rich message");
    assert_eq!(pieces[0].1.len(), long.trim().len());
    // HTML rendering, switched on in telegram.json while the hub runs: pieces under 4096.
    let cfg_path = hub.dir.path().join("telegram.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["assistant"] = json!({ "rendering": "html" });
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    hub.say("third");
    let p3 = pi.recv_type("prompt").await;
    let long3 = "verse ".repeat(1500);
    pi.answer(&p3, &long3).await;
    let msgs = hub
        .wait_for_bot("the html pieces", |m| {
            m.iter().filter(|(_, t, _)| t.starts_with("verse")).count() >= 3
        })
        .await;
    let pieces: Vec<_> = msgs
        .iter()
        .filter(|(_, t, _)| t.starts_with("verse"))
        .collect();
    assert_eq!(pieces.len(), 3, "9000 characters in pieces under 4096");
    assert!(
        pieces
            .iter()
            .all(|(_, t, _)| t.encode_utf16().count() <= 4096)
    );
    let joined: Vec<&str> = pieces.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(joined.join(" "), long3.trim());
    let sends = hub.fake.control().requests(0, Some("sendMessage"));
    assert!(
        sends
            .iter()
            .filter(|r| r.params["parse_mode"] == json!("HTML"))
            .count()
            >= 3,
        "sent as HTML"
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_instance_means_one_helpful_notice_and_the_messages_wait_for_the_first_one() {
    let mut hub = TestHub::start().await;
    hub.say("are you there?");
    hub.say("hello?");
    let msgs = hub.wait_for_bot("the notice", |m| !m.is_empty()).await;
    assert!(
        msgs[0].1.contains("No pi instance is connected")
            && msgs[0].1.contains("/telegram-connect")
    );
    let mut pi = hub.shim("/work/api", 7).await;
    let p1 = pi.recv_type("prompt").await;
    assert_eq!(p1["text"], json!("are you there?"));
    pi.answer(&p1, "yes").await;
    let p2 = pi.recv_type("prompt").await;
    assert_eq!(p2["text"], json!("hello?"));
    pi.answer(&p2, "hello!").await;
    let msgs = hub
        .wait_for_bot("the answers", |m| m.iter().any(|(_, t, _)| t == "hello!"))
        .await;
    assert_eq!(
        msgs.iter()
            .filter(|(_, t, _)| t.contains("No pi instance"))
            .count(),
        1
    );
    assert!(
        msgs.iter()
            .any(|(_, t, _)| t.contains("Handing over 2 waiting message(s)"))
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_each_answer_their_own_and_the_owner_switches_with_a_button() {
    let mut hub = TestHub::start().await;
    let mut web = hub.shim("/work/web", 100).await;
    let mut api = hub.shim("/work/api", 200).await;
    // The first instance is selected.
    hub.say("to web");
    let p = web.recv_type("prompt").await;
    web.answer(&p, "web here").await;
    let msgs = hub
        .wait_for_bot("web's answer", |m| {
            m.iter().any(|(_, t, _)| t.contains("web here"))
        })
        .await;
    let web_answer = msgs
        .iter()
        .find(|(_, t, _)| t.contains("web here"))
        .unwrap()
        .clone();
    assert_eq!(
        web_answer.1, "[web]\nweb here",
        "labelled while several instances are connected"
    );
    // /start lists both with buttons; the owner picks api.
    hub.say("/start");
    let msgs = hub
        .wait_for_bot("the chooser", |m| {
            m.iter()
                .any(|(_, t, _)| t.contains("Connected pi instances"))
        })
        .await;
    let chooser = msgs
        .iter()
        .find(|(_, t, _)| t.contains("Connected pi instances"))
        .unwrap();
    let transcript = hub
        .fake
        .control()
        .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
        .unwrap();
    let keyboard = transcript
        .iter()
        .find(|m| m.message_id == chooser.0)
        .unwrap()
        .reply_markup
        .clone()
        .unwrap();
    let api_button = keyboard["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| &row[0])
        .find(|b| b["text"].as_str().unwrap().contains("api"))
        .unwrap()
        .clone();
    assert!(api_button["callback_data"].as_str().unwrap().len() <= 64);
    hub.fake
        .control()
        .press(tg_fake::control::Press {
            message_id: chooser.0,
            data: api_button["callback_data"].as_str().unwrap().into(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    common::eventually("the toast", || {
        hub.fake
            .control()
            .chat(None, None)
            .unwrap()
            .callback_answers
            .iter()
            .any(|a| a.text.as_deref() == Some("New messages go to api"))
            .then_some(())
    })
    .await;
    hub.say("to api");
    let p = api.recv_type("prompt").await;
    assert_eq!(p["text"], json!("to api"));
    api.answer(&p, "api here").await;
    // A reply to web's answer still goes to web.
    hub.reply_to(web_answer.0, "back to web");
    let p = web.recv_type("prompt").await;
    // With what it replies to, for pi.
    assert_eq!(
        p["text"],
        json!("back to web\n\n[reply|from:pi]\n[web]\nweb here")
    );
    web.answer(&p, "web again").await;
    hub.wait_for_bot("both", |m| {
        m.iter().any(|(_, t, _)| t == "[api]\napi here")
            && m.iter().any(|(_, t, _)| t == "[web]\nweb again")
    })
    .await;
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_exits_is_noticed_and_the_owner_is_told() {
    let mut hub = TestHub::start().await;
    let mut web = hub.shim("/work/web", 100).await;
    let mut api = hub.shim("/work/api", 200).await;
    hub.say("long job");
    let p = web.recv_type("prompt").await;
    web.send(&json!({ "type": "ack", "turn_id": p["turn_id"], "disposition": "started" }))
        .await;
    // pi exits mid-turn.
    web.send(&json!({ "type": "bye", "reason": "shutdown" }))
        .await;
    let msgs = hub
        .wait_for_bot("the exit notices", |m| {
            m.iter().any(|(_, t, _)| t.contains("pi web is gone"))
                && m.iter()
                    .any(|(_, t, _)| t.contains("stopped before answering"))
        })
        .await;
    let gone = msgs
        .iter()
        .find(|(_, t, _)| t.contains("pi web is gone"))
        .unwrap();
    assert!(gone.1.contains("New messages now go to api"), "{}", gone.1);
    // New messages go to the other instance.
    hub.say("next");
    let p = api.recv_type("prompt").await;
    assert_eq!(p["text"], json!("next"));
    // An instance whose connection just drops (no goodbye) is noticed too.
    drop(api);
    hub.wait_for_bot("the lost connection", |m| {
        m.iter().any(|(_, t, _)| {
            t.contains("pi api is gone") && t.contains("connection to the hub was lost")
        })
    })
    .await;
    hub.stop().await;
    let st = hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap();
    assert_eq!(st.turns["interrupted"], 1);
    assert!(st.instances.iter().all(|i| i.state == "gone"));
}

/// pi's busy and idle reach `status` without a store call of their own in front of the
/// answer: idle right before an answer goes into the answer's commit, a change with nothing
/// behind it is written once the conductor has nothing else to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_and_idle_reach_status_with_or_without_an_answer_behind_them() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    let state = |hub: &TestHub| {
        hub::status::status(
            &hub::paths::AgentDir::at(hub.dir.path()),
            &hub::paths::ProfileName::default_profile(),
        )
        .ok()
        .and_then(|st| st.instances.first().map(|i| i.state.clone()))
    };
    async fn until(hub: &TestHub, state: impl Fn(&TestHub) -> Option<String>, want: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let now = state(hub);
            if now.as_deref() == Some(want) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "status still shows {now:?}, not {want}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    hub.say("first");
    let p = pi.recv_type("prompt").await;
    pi.start(&p).await;
    // Busy with nothing behind it.
    until(&hub, state, "busy").await;
    // Idle right before the answer.
    pi.send(&json!({ "type": "event", "turn_id": p["turn_id"], "event": { "type": "agent_settled", "aborted": false } }))
        .await;
    pi.send(&json!({ "type": "turn_done", "turn_id": p["turn_id"], "text": "one", "aborted": false, "error": null }))
        .await;
    hub.wait_for_bot("the answer", |m| m.iter().any(|(_, t, _)| t == "one"))
        .await;
    until(&hub, state, "idle").await;
    // Busy and idle again without a Telegram turn (work pi did on its own).
    pi.send(&json!({ "type": "event", "event": { "type": "agent_start" } }))
        .await;
    until(&hub, state, "busy").await;
    pi.send(&json!({ "type": "event", "event": { "type": "agent_settled", "aborted": false } }))
        .await;
    until(&hub, state, "idle").await;
    hub.stop().await;
}

const REPEAT_MARK: &str = "↻ Sent again: an earlier copy may have arrived too.";

/// The next `sendMessage` reaches Telegram, but its answer is lost on the way back.
fn lose_the_next_answer(hub: &TestHub) {
    hub.fake
        .control()
        .add_fault(tg_fake::FaultSpec {
            method: "sendMessage".into(),
            kind: tg_fake::FaultKind::CommitThenDrop,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: None,
        })
        .unwrap();
}

fn resent_in_status(hub: &TestHub) -> i64 {
    hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap()
    .outbox["resent"]
}

/// The notice that pi stopped before answering is the only trace of that prompt: when
/// Telegram's answer to its send is lost, it is sent again, marked, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notice_of_an_unanswered_prompt_is_sent_again_when_its_send_is_unknown() {
    let mut hub = TestHub::start().await;
    let mut web = hub.shim("/work/web", 100).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    hub.say("long job");
    let p = web.recv_type("prompt").await;
    web.send(&json!({ "type": "ack", "turn_id": p["turn_id"], "disposition": "started" }))
        .await;
    lose_the_next_answer(&hub);
    web.send(&json!({ "type": "bye", "reason": "shutdown" }))
        .await;
    let notice = "pi web stopped before answering \"long job\"";
    let msgs = hub
        .wait_for_bot("the notice sent again", |m| {
            m.iter()
                .any(|(_, t, _)| t.starts_with(REPEAT_MARK) && t.contains(notice))
        })
        .await;
    let copies: Vec<&String> = msgs
        .iter()
        .map(|(_, t, _)| t)
        .filter(|t| t.contains(notice))
        .collect();
    assert_eq!(
        copies.len(),
        2,
        "the lost one and its marked repeat: {copies:#?}"
    );
    assert!(copies[0].starts_with("pi web stopped"), "{copies:#?}");
    hub.stop().await;
    assert_eq!(resent_in_status(&hub), 1);
}

/// After a restart, the notice that the hub restarted while pi was working is the only trace
/// of that prompt (its headless pi died with the hub): sent again, marked, when its send's
/// outcome is unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_restart_notice_of_an_interrupted_prompt_is_sent_again_when_its_send_is_unknown() {
    let mut hub = TestHub::start().await;
    hub.stop().await;
    // A turn a hub-started pi was working on when the hub died.
    let store = store::Store::open(&hub.paths.state_db()).unwrap();
    store
        .write(|tx| {
            let t = store::turns::create(
                tx,
                &store::turns::NewTurn {
                    source_update_id: None,
                    chat_id: OWNER,
                    thread_id: None,
                    message_id: None,
                    target: store::turns::Target::Identity("/work/web"),
                    text: "build it",
                    lane: store::turns::Lane::Normal,
                    prepare: None,
                    sent_ms: None,
                    from_user: None,
                    from_name: None,
                },
                1,
            )?
            .unwrap();
            store::turns::mark_dispatched(
                tx,
                t,
                "gone-1",
                Some(4_000_000),
                store::instances::Transport::Rpc,
                2,
            )?;
            Ok::<_, store::StoreError>(())
        })
        .unwrap();
    drop(store);
    lose_the_next_answer(&hub);
    hub.launch().await;
    let notice = "The hub restarted while pi was working on \"build it\"";
    let msgs = hub
        .wait_for_bot("the notice sent again", |m| {
            m.iter()
                .any(|(_, t, _)| t.starts_with(REPEAT_MARK) && t.contains(notice))
        })
        .await;
    let copies = msgs.iter().filter(|(_, t, _)| t.contains(notice)).count();
    assert_eq!(copies, 2, "{msgs:#?}");
    hub.stop().await;
    assert_eq!(resent_in_status(&hub), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_shows_nothing_once_formatted_still_reaches_the_person() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    let sent = hub.say("define foo");
    let prompt = pi.recv_type("prompt").await;
    // CommonMark example 207: a link reference definition alone renders to nothing.
    pi.answer(&prompt, "[foo]: /url\n").await;
    let msgs = hub
        .wait_for_bot("the answer", |m| {
            m.iter().any(|(_, t, _)| t.contains("shows nothing"))
        })
        .await;
    let answer = msgs
        .iter()
        .find(|(_, t, _)| t.contains("shows nothing"))
        .unwrap();
    assert!(answer.1.contains("[foo]: /url"), "{answer:?}");
    assert_eq!(answer.2, Some(sent.message_id));
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comments_never_reach_the_person_and_refused_actions_reach_status() {
    let mut hub = TestHub::start().await;
    let mut pi = hub.shim("/work/web", 4242).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    // An answer of comments only, one of them a button comment with an unknown style.
    hub.say("first");
    let prompt = pi.recv_type("prompt").await;
    pi.answer(
        &prompt,
        "<!-- just a note -->\n<!-- telegram_button [{a}{b|c|secret-nope}] -->\n",
    )
    .await;
    let ack = pi.recv_type("done_ack").await;
    assert_eq!(ack["turn_id"], json!("t1"));
    // A comment mid-line and one in a list item go; the one in code stays.
    hub.say("second");
    let prompt = pi.recv_type("prompt").await;
    pi.answer(
        &prompt,
        "Done <!-- hidden --> here.\n\n- item <!-- also hidden -->\n\n`<!-- shown -->`",
    )
    .await;
    let msgs = hub
        .wait_for_bot("the second answer", |m| {
            m.iter().any(|(_, t, _)| t.starts_with("Done here."))
        })
        .await;
    pi.recv_type("done_ack").await;
    let after_notice: Vec<&String> = msgs
        .iter()
        .map(|(_, t, _)| t)
        .filter(|t| !t.contains("pi connected"))
        .collect();
    assert_eq!(
        after_notice,
        [&"Done here.\n- item\n<!-- shown -->".to_owned()],
        "the comment-only answer sends nothing: {msgs:#?}"
    );
    // Text with a matrix whose second cell is bad and a matrix-shaped voice comment: the text
    // arrives, with no button of the matrix and no voice.
    hub.say("third");
    let prompt = pi.recv_type("prompt").await;
    pi.answer(
        &prompt,
        "The text.\n\n<!-- telegram_button [{ok|fine}{bad|x|nope}] -->\n<!-- telegram_voice [{no}] -->",
    )
    .await;
    hub.wait_for_bot("the third answer", |m| {
        m.iter().any(|(_, t, _)| t == "The text.")
    })
    .await;
    pi.recv_type("done_ack").await;
    let third = hub
        .fake
        .control()
        .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .find(|m| m.from_bot && m.text.as_deref() == Some("The text."))
        .unwrap();
    assert!(
        third
            .reply_markup
            .as_ref()
            .is_none_or(|r| r["inline_keyboard"].as_array().is_none_or(Vec::is_empty)),
        "no button of a refused matrix: {:?}",
        third.reply_markup
    );
    assert!(
        hub.bot_messages()
            .iter()
            .all(|(_, t, _)| !t.contains("telegram_")),
        "never shown raw"
    );
    hub.stop().await;
    let st = hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap();
    assert_eq!(st.turns["done"], 3);
    assert_eq!(st.refused_comments.len(), 3, "{:?}", st.refused_comments);
    let kinds: Vec<&str> = st
        .refused_comments
        .iter()
        .map(|r| r.kind.as_str())
        .collect();
    assert!(
        kinds.contains(&"telegram_voice") && kinds.contains(&"telegram_button"),
        "{kinds:?}"
    );
    let refused = st
        .refused_comments
        .iter()
        .find(|r| r.turn == Some(1))
        .unwrap();
    assert_eq!(
        (
            refused.source.as_str(),
            refused.turn,
            refused.line,
            refused.kind.as_str(),
            refused.reason.as_str()
        ),
        ("answer", Some(1), 2, "telegram_button", "unknown style")
    );
    let json = serde_json::to_string(&st).unwrap();
    assert!(!json.contains("secret-nope"), "{json}");
}
