//! A team's forum group as the workspace, end to end with two real pi (headless, against the
//! fake LLM) and tg-fake's supergroup: the owner links the group (`/link` there, confirmed in
//! private), each pi gets a topic there, each member's prompt reaches the pi of the topic they
//! write in and is answered there as a reply to them; a stranger and a viewer reach nothing; a
//! member's `/abort` is refused; chatter in General is not a prompt; the owner's private chat
//! keeps working; a removed member's next message does nothing; the bot removed from the
//! group un-links it.
#![allow(clippy::unwrap_used)]

mod common;

use common::chat::{buttons, wait_message};
use common::pi::{PiSetup, project, prompts_containing, setup};
use common::{Env, OWNER, TOKEN, wait_for};
use serde_json::json;
use tg_fake::control::{NewGroup, Press, SendText, ThreadFilter, TranscriptEntry};
use tg_fake::world::TopicState;

const GROUP: i64 = -100_777;
const ANN: i64 = OWNER + 1_000;
const BO: i64 = OWNER + 2_000;
const VIEWER: i64 = OWNER + 3_000;
const STRANGER: i64 = OWNER + 4_000;

fn configure(env: &Env) {
    let cfg = json!({ "profiles": { "default": {
        "botToken": TOKEN, "allowedUserId": OWNER, "apiBase": env.fake.base_url(),
        "people": { ANN.to_string(): "member", BO.to_string(): "member", VIEWER.to_string(): "viewer" },
        "pacing": { "perChatPerSec": 1000.0, "perChatBurst": 1000, "globalPerSec": 1000.0, "globalBurst": 1000 } } } });
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
}

fn in_group(env: &Env, user: i64, thread: Option<i64>, text: &str) -> tg_fake::control::Sent {
    env.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            user_id: Some(user),
            chat_id: Some(GROUP),
            thread_id: thread,
            ..SendText::default()
        })
        .unwrap()
}

fn group_messages(env: &Env) -> Vec<TranscriptEntry> {
    env.fake
        .control()
        .transcript(Some(GROUP), ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .collect()
}

fn wait_group(env: &Env, what: &str, pred: impl Fn(&TranscriptEntry) -> bool) -> TranscriptEntry {
    let mut found = None;
    wait_for(what, 60, || {
        found = group_messages(env).into_iter().find(|m| pred(m));
        found.is_some()
    });
    found.unwrap()
}

/// The live topic of `project` in the group.
fn topic_of(env: &Env, project: &str) -> Option<i64> {
    env.fake
        .control()
        .topics(Some(GROUP), None)
        .unwrap()
        .into_iter()
        .find(|t| t.state != TopicState::Deleted && t.name.ends_with(&format!("· {project}")))
        .map(|t| t.thread_id)
}

/// The owner's `/link` in the group, and their tap on **🔗 Link it** in private.
fn link_it(env: &Env) {
    in_group(env, OWNER, None, "/link");
    wait_group(env, "the group told to wait", |m| {
        m.text
            .as_deref()
            .is_some_and(|t| t.contains("asked in their private chat"))
    });
    let q = wait_message(env, "the link question", |t| {
        t.starts_with("Make the group «team»")
    });
    let (_, data) = buttons(&q)
        .into_iter()
        .find(|(l, _)| l == "🔗 Link it")
        .unwrap();
    env.fake
        .control()
        .press(Press {
            message_id: q.message_id,
            data,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
}

/// A hub with `web` and `api` connected and the group linked; their topics there.
fn linked(s: &PiSetup) -> (common::Hub, i64, i64) {
    let env = &s.env;
    configure(env);
    let hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    for name in ["web", "api"] {
        env.spawn_pi(&project(&s.pi, name));
        wait_for("the connected notice", 30, || {
            env.bot_texts(OWNER)
                .iter()
                .any(|t| t.starts_with(&format!("pi connected: {name}")))
        });
    }
    env.fake
        .control()
        .add_to_group(NewGroup {
            chat_id: GROUP,
            title: "team".into(),
            forum: true,
            members: vec![ANN, BO, VIEWER, STRANGER],
            bot_admin: true,
            can_manage_topics: true,
            ..NewGroup::default()
        })
        .unwrap();
    link_it(env);
    wait_for("a topic for each pi in the group", 60, || {
        topic_of(env, "web").is_some() && topic_of(env, "api").is_some()
    });
    let (web, api) = (topic_of(env, "web").unwrap(), topic_of(env, "api").unwrap());
    wait_for("both topics bound", 30, || {
        let st = env.status();
        st["threads"].as_array().is_some_and(|bs| {
            [web, api].iter().all(|t| {
                bs.iter()
                    .any(|b| b["thread_id"] == json!(t) && b["state"] == json!("active"))
            })
        })
    });
    let st = env.status();
    assert_eq!(st["workspace_group"], json!(GROUP));
    assert_eq!(st["people"].as_array().map(Vec::len), Some(3));
    (hub, web, api)
}

#[test]
fn members_talk_to_the_pi_of_their_topic_in_a_linked_forum_group() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let (mut hub, web, api) = linked(&s);
    assert!(
        wait_group(env, "the group told", |m| {
            m.text
                .as_deref()
                .is_some_and(|t| t.starts_with("This group is the workspace now"))
        })
        .thread_id
        .is_none()
    );

    // Each member's prompt reaches the pi of their topic, answered there, replying to them.
    let ann = in_group(env, ANN, Some(web), "ann asks web");
    let bo = in_group(env, BO, Some(api), "bo asks api");
    let a = wait_group(env, "web's answer to Ann", |m| {
        m.text.as_deref() == Some("echo: ann asks web")
    });
    assert_eq!(
        (a.thread_id, a.reply_to_message_id),
        (Some(web), Some(ann.message_id))
    );
    let b = wait_group(env, "api's answer to Bo", |m| {
        m.text.as_deref() == Some("echo: bo asks api")
    });
    assert_eq!(
        (b.thread_id, b.reply_to_message_id),
        (Some(api), Some(bo.message_id))
    );
    assert_eq!(prompts_containing(&s.llm, &format!("from:User {ANN}")), 1);

    // A member's /abort is refused; a stranger's and a viewer's messages reach nothing and
    // are not answered; chatter in General is not a prompt.
    in_group(env, ANN, Some(web), "/abort");
    wait_group(env, "the abort refused", |m| {
        m.text.as_deref() == Some("Only the owner can use /abort.") && m.thread_id == Some(web)
    });
    let before = group_messages(env).len();
    in_group(env, STRANGER, Some(web), "stranger in web");
    in_group(env, VIEWER, Some(api), "viewer in api");
    in_group(env, ANN, None, "lunch anyone?");
    in_group(env, ANN, Some(web), "ann again");
    wait_group(env, "the answer after them", |m| {
        m.text.as_deref() == Some("echo: ann again")
    });
    assert_eq!(prompts_containing(&s.llm, "stranger in web"), 0);
    assert_eq!(prompts_containing(&s.llm, "viewer in api"), 0);
    assert_eq!(prompts_containing(&s.llm, "lunch anyone?"), 0);
    assert_eq!(group_messages(env).len(), before + 1, "only the answer");

    // A member's file in a pi's topic reaches that pi; an anonymous admin is refused with the
    // reason; no draft was sent to the group (drafts are for private chats: typing there).
    use base64::Engine as _;
    env.fake
        .control()
        .send_media(tg_fake::control::SendMedia {
            item: tg_fake::control::MediaItem {
                kind: tg_fake::world::MediaKind::Document,
                data_base64: base64::engine::general_purpose::STANDARD.encode(b"build log\n"),
                filename: Some("build.log".into()),
                mime_type: Some("text/plain".into()),
                caption: Some("bo's log for api".into()),
            },
            thread_id: Some(api),
            user_id: Some(BO),
            reply_to_message_id: None,
            token: None,
            chat_id: Some(GROUP),
        })
        .unwrap();
    wait_group(env, "api's answer to the file", |m| {
        m.text
            .as_deref()
            .is_some_and(|t| t.starts_with("echo: bo's log for api"))
    });
    assert!(
        s.llm.requests().last().unwrap()["messages"]
            .to_string()
            .contains("build.log"),
        "pi was given the file"
    );
    env.fake
        .control()
        .send_text(SendText {
            text: "anonymous order".into(),
            user_id: Some(OWNER),
            chat_id: Some(GROUP),
            thread_id: Some(web),
            anonymous: true,
            ..SendText::default()
        })
        .unwrap();
    wait_group(env, "the anonymous admin refused", |m| {
        m.text
            .as_deref()
            .is_some_and(|t| t.starts_with("Messages of anonymous admins"))
    });
    assert_eq!(prompts_containing(&s.llm, "anonymous order"), 0);
    // A streamed answer: typing in the group, never a draft.
    in_group(
        env,
        ANN,
        Some(web),
        "[[slow]] one two three four five six seven eight",
    );
    wait_group(env, "the streamed answer", |m| {
        m.text.as_deref() == Some("echo: [[slow]] one two three four five six seven eight")
    });
    let typing_in_group = env
        .fake
        .control()
        .requests(0, Some("sendChatAction"))
        .into_iter()
        .filter(|r| r.params["chat_id"] == json!(GROUP))
        .count();
    assert!(typing_in_group > 0, "typing shows pi works");
    let drafts_to_group = env
        .fake
        .control()
        .requests(0, Some("sendMessageDraft"))
        .into_iter()
        .filter(|r| r.params["chat_id"] == json!(GROUP))
        .count();
    assert_eq!(drafts_to_group, 0);

    // The owner's private chat works as before (classic mode: the selected pi).
    env.say("owner in private");
    wait_message(env, "the owner's answer in private", |t| {
        t.ends_with("echo: owner in private")
    });
    assert!(!group_messages(env).iter().any(|m| {
        m.text
            .as_deref()
            .is_some_and(|t| t.contains("owner in private"))
    }));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_removed_member_and_a_group_that_unlinks_itself_reach_nothing() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let (mut hub, web, _api) = linked(&s);
    in_group(env, ANN, Some(web), "ann first");
    wait_group(env, "Ann's answer", |m| {
        m.text.as_deref() == Some("echo: ann first")
    });
    // The owner removes Ann (listed in telegram.json: taken out of the file; known by the
    // name she wrote with).
    env.say("/people");
    let list = wait_message(env, "the people list", |t| t.starts_with("People who may"));
    let (_, data) = buttons(&list)
        .into_iter()
        .find(|(l, _)| l == &format!("✖ Remove User {ANN}"))
        .unwrap_or_else(|| panic!("{:?}", buttons(&list)));
    env.fake
        .control()
        .press(Press {
            message_id: list.message_id,
            data,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("Ann out of telegram.json", 30, || {
        !std::fs::read_to_string(env.config_path())
            .unwrap()
            .contains(&ANN.to_string())
    });
    in_group(env, ANN, Some(web), "removed ann writes");
    in_group(env, BO, Some(web), "bo still here");
    wait_group(env, "Bo's answer", |m| {
        m.text.as_deref() == Some("echo: bo still here")
    });
    assert_eq!(prompts_containing(&s.llm, "removed ann writes"), 0);

    // The bot removed from the group: unlinked, the owner told; the group reaches nothing.
    env.fake.control().remove_from_group(GROUP, None).unwrap();
    wait_message(env, "the owner told", |t| {
        t.starts_with("The group is no longer the workspace (the bot was removed")
    });
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_group_where_the_bot_may_not_manage_topics_says_so_plainly() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    configure(env);
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    env.fake
        .control()
        .add_to_group(NewGroup {
            chat_id: GROUP,
            title: "team".into(),
            forum: true,
            members: vec![ANN],
            bot_admin: false,
            ..NewGroup::default()
        })
        .unwrap();
    link_it(env);
    env.spawn_pi(&project(&s.pi, "web"));
    let said = wait_group(env, "the refusal explained", |m| {
        m.text
            .as_deref()
            .is_some_and(|t| t.contains("not enough rights to create a topic"))
    });
    assert!(
        said.text
            .unwrap()
            .contains("admin of this group with the right to manage topics")
    );
    // The pi works all the same: a member's message in General, addressed to the bot, offers
    // her the live pi; her tap sends it, and the answer comes in General.
    in_group(env, ANN, None, "@fake_1000_bot hello without topics");
    let chooser = wait_group(env, "the chooser", |m| {
        buttons(m).iter().any(|(l, _)| l == "Send to web")
    });
    let (_, data) = buttons(&chooser)
        .into_iter()
        .find(|(l, _)| l == "Send to web")
        .unwrap();
    env.fake
        .control()
        .press(Press {
            message_id: chooser.message_id,
            data,
            user_id: Some(ANN),
            token: None,
            chat_id: Some(GROUP),
        })
        .unwrap();
    wait_group(env, "the answer in General", |m| {
        m.text
            .as_deref()
            .is_some_and(|t| t.ends_with("hello without topics") && t.contains("echo"))
    });
    assert_eq!(hub.stop(), Some(0));
}
