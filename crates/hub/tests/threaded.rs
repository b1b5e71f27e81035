//! Threaded Mode through the extension socket, with a scripted extension and tg-fake's
//! private-chat topics: one topic per instance, routing by topic, the main-chat chooser, "move
//! here", offline topics, `/telegram-disconnect`, deleted-topic recovery, ambiguous creation
//! with both resolutions, and switching the mode either way.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{OWNER, Shim, TestHub, eventually};
use serde_json::{Value, json};
use tg_fake::control::{NewTopic, Press, SendText, SettingsChange, ThreadFilter, TranscriptEntry};
use tg_fake::world::{Topic, TopicState};
use tg_fake::{FaultKind, FaultSpec};

fn live_topics(hub: &TestHub) -> Vec<Topic> {
    hub.fake
        .control()
        .topics(Some(OWNER), None)
        .unwrap()
        .into_iter()
        .filter(|t| t.state != TopicState::Deleted)
        .collect()
}

fn transcript(hub: &TestHub) -> Vec<TranscriptEntry> {
    hub.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::All, None)
        .unwrap()
}

/// Bot texts in one topic (`None`: the main chat).
fn bot_texts_in(hub: &TestHub, thread: Option<i64>) -> Vec<String> {
    transcript(hub)
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted && m.thread_id == thread)
        .filter_map(|m| m.text)
        .collect()
}

/// The live topic whose name ends with `project`.
/// The topic of `project`'s pi once it exists at Telegram and its binding is committed: a
/// message written into it before the commit belongs to no pi yet (the hub offers a chooser).
async fn topic_of(hub: &TestHub, project: &str) -> i64 {
    eventually(&format!("a bound topic for {project}"), || {
        let thread = live_topics(hub)
            .into_iter()
            .find(|t| t.name.ends_with(&format!("· {project}")))
            .map(|t| t.thread_id)?;
        status(hub)
            .threads
            .iter()
            .any(|b| b.thread_id == thread && b.state == "active")
            .then_some(thread)
    })
    .await
}

fn say_in(hub: &TestHub, thread: Option<i64>, text: &str) -> tg_fake::control::Sent {
    hub.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            thread_id: thread,
            ..Default::default()
        })
        .unwrap()
}

/// The newest bot message with a button labelled `label`: (message id, callback data).
async fn button_data(hub: &TestHub, label: &str) -> (i64, String) {
    eventually(&format!("a button {label:?}"), || {
        transcript(hub).into_iter().rev().find_map(|m| {
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
        })
    })
    .await
}

fn press_data(hub: &TestHub, (message_id, data): &(i64, String)) -> tg_fake::control::Pressed {
    hub.fake
        .control()
        .press(Press {
            message_id: *message_id,
            data: data.clone(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap()
}

/// Presses the button labelled `label` on the newest bot message that has one.
async fn press(hub: &TestHub, label: &str) -> tg_fake::control::Pressed {
    let button = button_data(hub, label).await;
    press_data(hub, &button)
}

/// The toasts the hub answered taps with.
fn toasts(hub: &TestHub) -> Vec<String> {
    hub.fake
        .control()
        .chat(None, None)
        .unwrap()
        .callback_answers
        .into_iter()
        .filter_map(|a| a.text)
        .collect()
}

/// The bot message `id` as the person sees it now: (text, whether it still has buttons).
fn message_now(hub: &TestHub, id: i64) -> Option<(String, bool)> {
    transcript(hub)
        .into_iter()
        .find(|m| m.message_id == id && !m.deleted)
        .map(|m| {
            let buttons = m
                .reply_markup
                .as_ref()
                .and_then(|r| r.get("inline_keyboard"))
                .and_then(Value::as_array)
                .is_some_and(|rows| {
                    rows.iter()
                        .any(|r| r.as_array().is_some_and(|r| !r.is_empty()))
                });
            (m.text.unwrap_or_default(), buttons)
        })
}

fn status(hub: &TestHub) -> hub::status::Status {
    hub::status::status(
        &hub::paths::AgentDir::at(hub.dir.path()),
        &hub::paths::ProfileName::default_profile(),
    )
    .unwrap()
}

fn create_calls(hub: &TestHub) -> usize {
    hub.fake
        .control()
        .requests(0, Some("createForumTopic"))
        .len()
}

/// Message sends (text or rich) after request `since` that targeted `thread`.
fn sends_to(hub: &TestHub, since: u64, thread: i64) -> usize {
    hub.fake
        .control()
        .requests(since, None)
        .iter()
        .filter(|r| r.method == "sendMessage" || r.method == "sendRichMessage")
        .filter(|r| r.params.get("message_thread_id").and_then(Value::as_i64) == Some(thread))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_gets_its_own_topic_and_answers_in_it() {
    let mut hub = TestHub::threaded().await;
    let mut web = hub.shim("/work/web", 4101).await;
    let mut api = hub.shim("/work/api", 4102).await;
    let web_topic = topic_of(&hub, "web").await;
    let api_topic = topic_of(&hub, "api").await;
    assert_ne!(web_topic, api_topic);
    let names: Vec<String> = live_topics(&hub).into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"A · web".to_owned()), "{names:?}");
    assert!(names.contains(&"B · api".to_owned()), "{names:?}");
    // Each topic greets with its project and cwd.
    eventually("the greetings", || {
        let w = bot_texts_in(&hub, Some(web_topic));
        let a = bot_texts_in(&hub, Some(api_topic));
        (w.iter()
            .any(|t| t.contains("web") && t.contains("/work/web"))
            && a.iter().any(|t| t.contains("/work/api")))
        .then_some(())
    })
    .await;

    // A message in a topic goes to that topic's instance; its answer comes back there.
    let q = say_in(&hub, Some(api_topic), "list the endpoints");
    let prompt = api.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("list the endpoints"));
    api.answer(&prompt, "GET /health").await;
    eventually("the answer in the api topic", || {
        transcript(&hub)
            .into_iter()
            .find(|m| m.from_bot && m.text.as_deref() == Some("GET /health"))
            .filter(|m| {
                m.thread_id == Some(api_topic) && m.reply_to_message_id == Some(q.message_id)
            })
    })
    .await;

    // A prompt in the main chat gets a one-tap chooser; the answer arrives in the topic. The
    // chooser's edit is slowed down so that a second, quick tap still finds its button.
    say_in(&hub, None, "run the tests");
    let to_web = button_data(&hub, "Send to web").await;
    let to_api = button_data(&hub, "Send to api").await;
    hub.fake
        .control()
        .add_fault(FaultSpec {
            method: "editMessageText".into(),
            kind: FaultKind::Delay,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: Some(1500),
        })
        .unwrap();
    press_data(&hub, &to_web);
    let prompt = web.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("run the tests"));
    // A second, quick tap on the same chooser does not send the message twice.
    press_data(&hub, &to_api);
    web.answer(&prompt, "all green").await;
    eventually("the answer in the web topic", || {
        bot_texts_in(&hub, Some(web_topic))
            .iter()
            .any(|t| t == "all green")
            .then_some(())
    })
    .await;
    // The second tap was told where the message went; the chooser shows the choice and has
    // no buttons left.
    eventually("the taken toast", || {
        toasts(&hub)
            .iter()
            .any(|t| t == "That message went to web already.")
            .then_some(())
    })
    .await;
    eventually("the settled chooser", || {
        let (text, buttons) = message_now(&hub, to_web.0)?;
        (text.ends_with("→ Sent to web.") && !buttons).then_some(())
    })
    .await;
    let st = status(&hub);
    assert_eq!(st.turns["done"], 2);
    assert_eq!(st.turns["queued"], 0, "the second tap queued nothing");
    assert_eq!(st.mode.as_deref(), Some("threaded"));
    assert_eq!(st.threads.len(), 2);
    assert!(
        st.threads
            .iter()
            .all(|t| t.state == "active" && t.instance.is_some())
    );
    assert!(st.intents.is_empty());
    assert_eq!(create_calls(&hub), 2, "one createForumTopic per instance");
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_instance_keeps_its_topic_and_gets_it_back() {
    let mut hub = TestHub::threaded().await;
    let web = hub.shim("/work/web", 4201).await;
    let topic = topic_of(&hub, "web").await;
    drop(web); // connection lost, no bye
    eventually("the binding offline", || {
        (status(&hub).threads.first()?.state == "offline").then_some(())
    })
    .await;
    // The topic stays; a message in it says pi is offline and waits.
    say_in(&hub, Some(topic), "are you there?");
    eventually("the offline notice", || {
        bot_texts_in(&hub, Some(topic))
            .iter()
            .any(|t| t.contains("offline") && t.contains("/work/web"))
            .then_some(())
    })
    .await;
    assert_eq!(
        live_topics(&hub).len(),
        1,
        "nothing deleted for a lost connection"
    );
    // The same project comes back (another process): same topic, and the message is delivered.
    let mut web = hub.shim("/work/web", 4202).await;
    let prompt = web.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("are you there?"));
    web.answer(&prompt, "yes").await;
    eventually("the answer in the old topic", || {
        bot_texts_in(&hub, Some(topic))
            .iter()
            .any(|t| t == "yes")
            .then_some(())
    })
    .await;
    assert_eq!(live_topics(&hub).len(), 1);
    assert_eq!(
        create_calls(&hub),
        1,
        "the topic was reused, not created again"
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_disconnect_deletes_the_topic() {
    let mut hub = TestHub::threaded().await;
    let mut web = hub.shim("/work/web", 4301).await;
    let _api = hub.shim("/work/api", 4302).await;
    let topic = topic_of(&hub, "web").await;
    topic_of(&hub, "api").await;
    web.send(&json!({ "type": "bye", "reason": "disconnect" }))
        .await;
    eventually("the web topic deleted", || {
        live_topics(&hub)
            .iter()
            .all(|t| t.thread_id != topic)
            .then_some(())
    })
    .await;
    let st = status(&hub);
    assert_eq!(st.threads.len(), 1, "{:?}", st.threads);
    assert!(st.threads[0].identity.ends_with("api"));
    assert_eq!(live_topics(&hub).len(), 1, "the api topic is untouched");
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_a_topic_nobody_owns_offers_move_here() {
    let mut hub = TestHub::threaded().await;
    let mut web = hub.shim("/work/web", 4401).await;
    let old = topic_of(&hub, "web").await;
    let made = hub
        .fake
        .control()
        .create_topic(NewTopic {
            name: "my web thread".into(),
            user_id: None,
            token: None,
        })
        .unwrap();
    let q = say_in(&hub, Some(made.thread_id), "deploy it");
    eventually("the chooser in the new topic", || {
        bot_texts_in(&hub, Some(made.thread_id))
            .iter()
            .any(|t| t.contains("No pi instance uses this thread"))
            .then_some(())
    })
    .await;
    press(&hub, "Move web here").await;
    let prompt = web.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("deploy it"));
    // The old topic goes (the person's choice is the proof), the new one is the binding.
    eventually("the old topic deleted", || {
        live_topics(&hub)
            .iter()
            .all(|t| t.thread_id != old)
            .then_some(())
    })
    .await;
    web.answer(&prompt, "deployed").await;
    eventually("the answer in the chosen topic", || {
        transcript(&hub)
            .into_iter()
            .find(|m| m.from_bot && m.text.as_deref() == Some("deployed"))
            .filter(|m| {
                m.thread_id == Some(made.thread_id) && m.reply_to_message_id == Some(q.message_id)
            })
    })
    .await;
    let st = status(&hub);
    assert_eq!(st.threads.len(), 1);
    assert_eq!(st.threads[0].thread_id, made.thread_id);
    assert_eq!(create_calls(&hub), 1);
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_is_replaced_once_and_the_answer_arrives_there() {
    let mut hub = TestHub::threaded().await;
    let mut web = hub.shim("/work/web", 4501).await;
    let old = topic_of(&hub, "web").await;
    say_in(&hub, Some(old), "think long");
    let prompt = web.recv_type("prompt").await;
    // The person deletes the topic while pi works; Telegram sends no update for that.
    let since = hub
        .fake
        .control()
        .requests(0, None)
        .last()
        .map_or(0, |r| r.seq);
    hub.fake.control().delete_topic(old, None, None).unwrap();
    web.answer(&prompt, "the long answer").await;
    let new = eventually("a new topic", || {
        live_topics(&hub)
            .into_iter()
            .find(|t| t.thread_id != old && t.name.ends_with("· web"))
            .map(|t| t.thread_id)
    })
    .await;
    eventually("the answer in the new topic", || {
        bot_texts_in(&hub, Some(new))
            .iter()
            .any(|t| t == "the long answer")
            .then_some(())
    })
    .await;
    // Give a retry loop the chance to show itself, then count.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sends_to(&hub, since, old),
        1,
        "exactly one send hit the dead topic"
    );
    let answers = transcript(&hub)
        .into_iter()
        .filter(|m| m.from_bot && m.text.as_deref() == Some("the long answer"))
        .count();
    assert_eq!(answers, 1, "the answer arrived once");
    let st = status(&hub);
    assert_eq!(st.threads.len(), 1);
    assert_eq!(st.threads[0].thread_id, new);
    assert_eq!(st.threads[0].slot, "A", "the same letter again");
    assert_eq!(create_calls(&hub), 2);
    // The owner is told what happened.
    assert!(
        bot_texts_in(&hub, Some(new))
            .iter()
            .any(|t| t.contains("previous thread was deleted")),
        "{:?}",
        bot_texts_in(&hub, Some(new))
    );
    // After a restart nothing is sent to the dead topic again.
    hub.stop().await;
    hub.launch().await;
    let _web = hub.shim("/work/web", 4501).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(sends_to(&hub, since, old), 1);
    assert_eq!(
        create_calls(&hub),
        2,
        "the new topic is reused after the restart"
    );
    hub.stop().await;
}

async fn ambiguous_start() -> (TestHub, Shim) {
    let hub = TestHub::threaded().await;
    hub.fake
        .control()
        .add_fault(FaultSpec {
            method: "createForumTopic".into(),
            kind: FaultKind::CommitThenDrop,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: None,
        })
        .unwrap();
    let web = hub.shim("/work/web", 4601).await;
    eventually("the ambiguous intent", || {
        let st = status(&hub);
        (st.intents.len() == 1 && st.intents[0].state == "ambiguous").then_some(())
    })
    .await;
    eventually("the question to the owner", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t.contains("cannot tell whether it was made"))
            .then_some(())
    })
    .await;
    (hub, web)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_creation_is_not_repeated_and_create_anyway_works() {
    let (mut hub, mut web) = ambiguous_start().await;
    // The topic was made but the answer lost: one topic, and no second call on its own.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(create_calls(&hub), 1);
    assert_eq!(live_topics(&hub).len(), 1);
    let st = status(&hub);
    assert!(st.threads.is_empty());
    assert_eq!(st.intents[0].slot, "A", "the intent keeps its slot");

    let create = button_data(&hub, "Create a new thread").await;
    press_data(&hub, &create);
    let topic = eventually("the new binding", || {
        status(&hub).threads.first().map(|t| t.thread_id)
    })
    .await;
    assert_eq!(create_calls(&hub), 2);
    assert!(status(&hub).intents.is_empty());
    say_in(&hub, Some(topic), "hello");
    let prompt = web.recv_type("prompt").await;
    web.answer(&prompt, "hi").await;
    eventually("the answer in the topic", || {
        bot_texts_in(&hub, Some(topic))
            .iter()
            .any(|t| t == "hi")
            .then_some(())
    })
    .await;
    // The question says how it was settled and keeps no buttons to press again.
    eventually("the settled question", || {
        let (text, buttons) = message_now(&hub, create.0)?;
        (text.ends_with("→ Creating a new thread.") && !buttons).then_some(())
    })
    .await;
    assert_eq!(create_calls(&hub), 2);
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_an_ambiguous_creation_keeps_the_instance_in_the_main_chat() {
    let (mut hub, mut web) = ambiguous_start().await;
    let orphan = live_topics(&hub)[0].thread_id;
    press(&hub, "Forget it").await;
    eventually("the intent gone", || {
        status(&hub).intents.is_empty().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(create_calls(&hub), 1, "forget creates nothing");
    assert!(status(&hub).threads.is_empty());
    // The person finds the topic that was made after all and binds it with "move here".
    say_in(&hub, Some(orphan), "use this one");
    press(&hub, "Move web here").await;
    let prompt = web.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("use this one"));
    let st = status(&hub);
    assert_eq!(st.threads.len(), 1);
    assert_eq!(st.threads[0].thread_id, orphan);
    web.answer(&prompt, "ok").await;
    eventually("the answer in the found topic", || {
        bot_texts_in(&hub, Some(orphan))
            .iter()
            .any(|t| t == "ok")
            .then_some(())
    })
    .await;
    assert_eq!(create_calls(&hub), 1);
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_threaded_mode_keeps_bindings_and_queued_work() {
    let mut hub = TestHub::start().await;
    let mut web = hub.shim("/work/web", 4701).await;
    hub.wait_for_bot("the connected notice", |m| {
        m.iter().any(|(_, t, _)| t.contains("pi connected: web"))
    })
    .await;
    assert_eq!(status(&hub).mode.as_deref(), Some("classic"));
    assert!(live_topics(&hub).is_empty());
    // /start in classic mode says where the switch is.
    say_in(&hub, None, "/start");
    eventually("the tip", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t.contains("BotFather") && t.contains("Threaded Mode"))
            .then_some(())
    })
    .await;

    let on = |on: bool| SettingsChange {
        has_topics_enabled: Some(on),
        ..Default::default()
    };
    hub.fake.control().settings(on(true)).unwrap();
    let topic = topic_of(&hub, "web").await;
    assert_eq!(status(&hub).mode.as_deref(), Some("threaded"));
    eventually("the mode notice", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t.contains("Threaded Mode is on"))
            .then_some(())
    })
    .await;

    // Off again: the binding is kept, messages in the main chat go to the selected instance.
    hub.fake.control().settings(on(false)).unwrap();
    eventually("classic mode", || {
        (status(&hub).mode.as_deref() == Some("classic")).then_some(())
    })
    .await;
    say_in(&hub, None, "classic again");
    let prompt = web.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("classic again"));
    web.answer(&prompt, "fine").await;
    eventually("the answer in the main chat", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t == "fine")
            .then_some(())
    })
    .await;
    let st = status(&hub);
    assert_eq!(st.threads.len(), 1, "the binding survives classic mode");
    assert_eq!(st.threads[0].thread_id, topic);

    // And on again: the same topic, no new creation.
    hub.fake.control().settings(on(true)).unwrap();
    eventually("threaded mode", || {
        (status(&hub).mode.as_deref() == Some("threaded")).then_some(())
    })
    .await;
    say_in(&hub, Some(topic), "threaded again");
    let prompt = web.recv_type("prompt").await;
    web.answer(&prompt, "back").await;
    eventually("the answer in the topic", || {
        bot_texts_in(&hub, Some(topic))
            .iter()
            .any(|t| t == "back")
            .then_some(())
    })
    .await;
    assert_eq!(create_calls(&hub), 1);
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_for_a_closed_topic_arrives_in_the_main_chat() {
    let mut hub = TestHub::threaded().await;
    let mut web = hub.shim("/work/web", 4801).await;
    let topic = topic_of(&hub, "web").await;
    say_in(&hub, Some(topic), "work on it");
    let prompt = web.recv_type("prompt").await;
    hub.fake
        .control()
        .set_topic_state(topic, true, None, None)
        .unwrap();
    web.answer(&prompt, "done working").await;
    eventually("the answer in the main chat", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t == "done working")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answers = transcript(&hub)
        .into_iter()
        .filter(|m| m.from_bot && m.text.as_deref() == Some("done working"))
        .count();
    assert_eq!(answers, 1);
    let st = status(&hub);
    assert_eq!(st.outbox["failed"], 0, "nothing dropped");
    assert_eq!(
        st.threads[0].thread_id, topic,
        "a closed topic keeps its binding"
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_send_that_meets_threaded_mode_switched_off_arrives_in_the_main_chat() {
    let mut hub = TestHub::threaded().await;
    // The greeting is on the wire when the person switches Threaded Mode off.
    hub.fake
        .control()
        .add_fault(FaultSpec {
            method: "sendMessage".into(),
            kind: FaultKind::Delay,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: Some(600),
        })
        .unwrap();
    let mut web = hub.shim("/work/web", 4901).await;
    let topic = topic_of(&hub, "web").await;
    hub.fake
        .control()
        .settings(SettingsChange {
            has_topics_enabled: Some(false),
            ..Default::default()
        })
        .unwrap();
    eventually("the greeting in the main chat", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t.contains("/work/web"))
            .then_some(())
    })
    .await;
    let st = status(&hub);
    assert_eq!(
        st.mode.as_deref(),
        Some("classic"),
        "the sender asked getMe"
    );
    assert_eq!(
        st.threads[0].state, "active",
        "a hidden topic is not a lost one"
    );
    assert_eq!(st.threads[0].thread_id, topic);
    // Nothing waits behind it: the main chat works.
    say_in(&hub, None, "still here?");
    let prompt = web.recv_type("prompt").await;
    web.answer(&prompt, "yes").await;
    eventually("the answer in the main chat", || {
        bot_texts_in(&hub, None)
            .iter()
            .any(|t| t == "yes")
            .then_some(())
    })
    .await;
    assert_eq!(status(&hub).outbox["pending"], 0);
    assert_eq!(create_calls(&hub), 1);
    hub.stop().await;
}

/// `n` pi that were here before and are offline now, each holding a slot and a topic that
/// exists at Telegram: written into the store before the hub starts, as an earlier hub left
/// them.
fn seed_offline_topics(hub: &TestHub, n: usize) {
    let db = hub.paths.state_db();
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(db.parent().unwrap(), std::fs::Permissions::from_mode(0o700))
            .unwrap();
    }
    let store = store::Store::open(&db).unwrap();
    let mut rows = Vec::new();
    for k in 0..n {
        let slot = threads::slots::Slot::nth(k).unwrap().to_string();
        let title = format!("{slot} · old{k}");
        let topic = hub
            .fake
            .control()
            .create_topic(NewTopic {
                name: title.clone(),
                user_id: Some(OWNER),
                token: None,
            })
            .unwrap();
        rows.push((slot, title, topic.thread_id));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    store
        .write(|tx| {
            for (k, (slot, title, thread)) in rows.iter().enumerate() {
                store::threads::insert_binding(
                    tx,
                    &store::threads::Binding {
                        identity: format!("/old/{k}"),
                        chat_id: OWNER,
                        thread_id: *thread,
                        slot: slot.clone(),
                        title: title.clone(),
                        state: store::threads::BindingState::Offline,
                        instance_id: None,
                        cwd: format!("/old/{k}"),
                        epoch: 1,
                        created_ms: now,
                        updated_ms: now,
                        offline_since_ms: Some(now),
                    },
                )?;
            }
            Ok::<_, store::StoreError>(())
        })
        .unwrap();
}

/// A hub in Threaded Mode that finds `n` offline pi's topics from before.
async fn threaded_with_offline_topics(n: usize) -> TestHub {
    let mut hub = TestHub::prepare(
        tg_fake::FakeConfig {
            has_topics_enabled: true,
            ..tg_fake::FakeConfig::default()
        },
        json!({}),
    )
    .await;
    seed_offline_topics(&hub, n);
    hub.launch().await;
    hub
}

/// The bot's messages (sent, not edits) so far, with their words.
fn bot_sends(hub: &TestHub) -> Vec<String> {
    transcript(hub)
        .into_iter()
        .filter(|m| m.from_bot)
        .filter_map(|m| m.text)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_pi_get_thirty_topics_single_letters_first() {
    let mut hub = TestHub::threaded().await;
    let mut shims = Vec::new();
    for k in 0..30 {
        shims.push(hub.shim(&format!("/work/p{k}"), 5000 + k).await);
    }
    let last = topic_of(&hub, "p29").await;
    for k in 0..30 {
        topic_of(&hub, &format!("p{k}")).await;
    }
    let mut names: Vec<String> = live_topics(&hub).into_iter().map(|t| t.name).collect();
    names.sort();
    let mut slots: Vec<String> = names
        .iter()
        .map(|n| n.split(" · ").next().unwrap().to_owned())
        .collect();
    slots.sort_by_key(|s| (s.len(), s.clone()));
    let want: Vec<String> = (0..30)
        .map(|k| threads::slots::Slot::nth(k).unwrap().to_string())
        .collect();
    assert_eq!(slots, want, "A..Z, then AA..AD: {names:?}");
    assert_eq!(create_calls(&hub), 30, "one createForumTopic each");
    // The 30th pi is reached in its two-letter topic, and answers there.
    say_in(&hub, Some(last), "hello p29");
    let p29 = shims.last_mut().unwrap();
    let prompt = p29.recv_type("prompt").await;
    assert_eq!(prompt["text"], json!("hello p29"));
    p29.answer(&prompt, "p29 here").await;
    eventually("the answer in the two-letter topic", || {
        bot_texts_in(&hub, Some(last))
            .iter()
            .any(|t| t == "p29 here")
            .then_some(())
    })
    .await;
    assert!(
        !transcript(&hub)
            .iter()
            .any(|m| m.text.as_deref().is_some_and(|t| t.contains("no thread"))),
        "nobody was told of a missing thread"
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_without_a_thread_share_one_notice_edited_as_they_come_and_go() {
    let mut hub = threaded_with_offline_topics(threads::slots::COUNT).await;
    let notice = |hub: &TestHub| -> Vec<(i64, String)> {
        transcript(hub)
            .into_iter()
            .filter(|m| m.from_bot && m.thread_id.is_none() && !m.deleted)
            .filter_map(|m| Some((m.message_id, m.text?)))
            .filter(|(_, t)| t.contains("no thread"))
            .collect()
    };
    let _a = hub.shim("/work/extra-a", 6001).await;
    eventually("the notice for one", || {
        let n = notice(&hub);
        (n.len() == 1 && n[0].1.starts_with("extra-a has no thread")).then_some(())
    })
    .await;
    let mut b = hub.shim("/work/extra-b", 6002).await;
    let _c = hub.shim("/work/extra-c", 6003).await;
    eventually("the one notice, edited to name three", || {
        let n = notice(&hub);
        (n.len() == 1
            && n[0].1.starts_with("3 pi have no thread")
            && n[0].1.contains("extra-a, extra-b, extra-c"))
        .then_some(())
    })
    .await;
    // One of them leaves: the same message names the two left.
    b.send(&json!({ "type": "bye", "reason": "quit" })).await;
    drop(b);
    eventually("the notice naming two", || {
        let n = notice(&hub);
        (n.len() == 1 && n[0].1.starts_with("2 pi have no thread") && !n[0].1.contains("extra-b"))
            .then_some(())
    })
    .await;
    assert_eq!(create_calls(&hub), 0, "no slot, no topic");
    // Besides the one notice, only the word that extra-b left (it had no thread to remove).
    let sends = bot_sends(&hub);
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert_eq!(sends[1], "pi extra-b is gone: pi quit.", "{sends:?}");
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pi_connecting_among_175_offline_ones_causes_one_message() {
    let mut hub = threaded_with_offline_topics(175).await;
    let before = bot_sends(&hub).len();
    let _p = hub.shim("/work/newcomer", 6100).await;
    let topic = topic_of(&hub, "newcomer").await;
    eventually("its greeting", || {
        (!bot_texts_in(&hub, Some(topic)).is_empty()).then_some(())
    })
    .await;
    let slot = live_topics(&hub)
        .into_iter()
        .find(|t| t.thread_id == topic)
        .map(|t| t.name)
        .unwrap();
    assert!(slot.starts_with("FT · "), "the 176th slot: {slot}");
    // A few passes of the topics task (the probe every 300 ms here) add nothing.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let sends = bot_sends(&hub);
    assert_eq!(sends.len() - before, 1, "the greeting only: {sends:?}");
    assert_eq!(create_calls(&hub), 1);
    hub.stop().await;
}
