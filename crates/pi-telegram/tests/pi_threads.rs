//! End to end with real pi in Threaded Mode: three headless pi instances in three folders each
//! get their own topic and answer in it; a pi restarted in the same folder gets its topic back.
#![allow(clippy::unwrap_used)]

mod common;

use common::pi::{project, setup_threaded};
use common::{Env, OWNER, wait_for};
use serde_json::{Value, json};
use tg_fake::control::{SendText, ThreadFilter};
use tg_fake::world::TopicState;

/// The live topic named for `project`.
fn topic_of(env: &Env, project: &str) -> Option<i64> {
    env.fake
        .control()
        .topics(Some(OWNER), None)
        .unwrap()
        .into_iter()
        .find(|t| t.state != TopicState::Deleted && t.name.ends_with(&format!("· {project}")))
        .map(|t| t.thread_id)
}

fn texts_in(env: &Env, thread: i64) -> Vec<String> {
    env.fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::Thread(thread), None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .filter_map(|m| m.text)
        .collect()
}

fn say_in(env: &Env, thread: i64, text: &str) {
    env.fake
        .control()
        .send_text(SendText {
            text: text.into(),
            thread_id: Some(thread),
            ..Default::default()
        })
        .unwrap();
}

fn binding_state(env: &Env, cwd: &str) -> Option<Value> {
    env.status()["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["identity"] == json!(cwd))
        .map(|t| t["state"].clone())
}

#[test]
fn three_pi_instances_each_answer_in_their_own_topic_and_a_restart_keeps_it() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let names = ["web", "api", "docs"];
    let dirs: Vec<String> = names.iter().map(|n| project(&s.pi, n)).collect();
    for d in &dirs {
        env.spawn_pi(d);
    }
    let mut topics = Vec::new();
    for n in names {
        topics.push(env.bound_topic(n, 60));
    }
    let mut distinct = topics.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "three different topics: {topics:?}");
    // Each pi answers in its own topic.
    for (n, t) in names.iter().zip(&topics) {
        say_in(env, *t, &format!("hello {n}"));
    }
    for (n, t) in names.iter().zip(&topics) {
        let want = format!("echo: hello {n}");
        wait_for(&format!("{n}'s answer"), 60, || {
            texts_in(env, *t).contains(&want)
        });
        for (other, ot) in names.iter().zip(&topics) {
            if other != n {
                assert!(
                    !texts_in(env, *ot).contains(&want),
                    "{n}'s answer leaked into {other}'s topic"
                );
            }
        }
    }
    // No answer in the main chat in Threaded Mode.
    let main: Vec<String> = env
        .fake
        .control()
        .transcript(Some(OWNER), ThreadFilter::Main, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot)
        .filter_map(|m| m.text)
        .collect();
    assert!(
        main.iter().all(|t| !t.starts_with("echo:")),
        "answers in the main chat: {main:?}"
    );

    // Restart the api pi: its binding goes offline (the topic stays), then comes back.
    let pid = env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["cwd"] == json!(dirs[1]) && i["state"] != "gone")
        .unwrap()["pid"]
        .as_i64()
        .unwrap();
    assert!(
        std::process::Command::new("kill")
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success()
    );
    wait_for("the api binding offline", 30, || {
        binding_state(env, &dirs[1]) == Some(json!("offline"))
    });
    assert_eq!(topic_of(env, "api"), Some(topics[1]), "the topic is kept");
    env.spawn_pi(&dirs[1]);
    wait_for("the api binding active again", 60, || {
        binding_state(env, &dirs[1]) == Some(json!("active"))
    });
    assert_eq!(topic_of(env, "api"), Some(topics[1]), "the same topic");
    say_in(env, topics[1], "still there?");
    wait_for("the answer after the restart", 60, || {
        texts_in(env, topics[1]).contains(&"echo: still there?".to_owned())
    });
    assert_eq!(
        env.fake
            .control()
            .requests(0, Some("createForumTopic"))
            .len(),
        3,
        "one topic per folder, none for the restart"
    );
    assert!(
        s.llm.requests().len() >= 4,
        "every answer came from pi's model"
    );
    let problems = threads::invariants::check(&env.open_store(), None).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(hub.stop(), Some(0), "{}", hub.log_text());
}
