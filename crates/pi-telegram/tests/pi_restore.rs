//! Headless pi instances survive the hub: killed (SIGKILL) with three hub-started pi, the hub
//! starts them again on their pi sessions (a follow-up question sees the earlier turn), tells
//! the person which came back, and reports the one whose folder vanished once, without trying
//! it again.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{project, setup_threaded};
use common::{Env, OWNER, wait_for};
use tg_fake::control::{SendText, ThreadFilter};
use tg_fake::world::TopicState;

fn topic_of(env: &Env, project: &str) -> Option<i64> {
    env.fake
        .control()
        .topics(Some(OWNER), None)
        .unwrap()
        .into_iter()
        .find(|t| t.state != TopicState::Deleted && t.name.ends_with(&format!("· {project}")))
        .map(|t| t.thread_id)
}

fn texts_in(env: &Env, filter: ThreadFilter) -> Vec<String> {
    env.fake
        .control()
        .transcript(Some(OWNER), filter, None)
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

fn ask(env: &Env, thread: i64, text: &str) {
    say_in(env, thread, text);
    let want = format!("echo: {text}");
    wait_for(&format!("the answer to {text:?}"), 60, || {
        texts_in(env, ThreadFilter::Thread(thread)).contains(&want)
    });
}

fn restored_notices(env: &Env) -> Vec<String> {
    texts_in(env, ThreadFilter::Main)
        .into_iter()
        .filter(|t| t.starts_with("The hub restarted."))
        .collect()
}

#[test]
fn a_killed_hub_brings_its_headless_pi_back_on_their_sessions() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let names = ["alpha", "beta", "gamma"];
    let dirs: Vec<String> = names.iter().map(|n| project(&s.pi, n)).collect();
    for d in &dirs {
        env.spawn_pi(d);
    }
    let mut topics = Vec::new();
    for n in names {
        topics.push(env.bound_topic(n, 60));
    }
    for (n, t) in names.iter().zip(&topics).take(2) {
        ask(env, *t, &format!("remember the word {n}"));
    }
    let pids: Vec<i64> = env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["state"] != "gone")
        .map(|i| i["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "{:#}", env.status()["instances"]);

    std::fs::remove_dir_all(&dirs[2]).unwrap();
    hub.kill();
    // pi in RPC mode ends with its stdin: none is left behind to write its session twice.
    wait_for("the old pi processes to exit", 30, || {
        pids.iter()
            .all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
    });

    let mut hub = env.serve();
    wait_for("the restore notice", 60, || {
        !restored_notices(env).is_empty()
    });
    let notice = restored_notices(env).remove(0);
    for d in &dirs[..2] {
        assert!(
            notice.contains(&format!("• pi in {d}, on its earlier session")),
            "{notice}"
        );
    }
    assert!(
        notice.contains(&format!("• pi in {}: its folder no longer exists", dirs[2])),
        "{notice}"
    );
    // Each came back in its own topic, with its history.
    for (n, t) in names.iter().zip(&topics).take(2) {
        assert_eq!(topic_of(env, n), Some(*t));
        let q = format!("which word did I give you, {n}?");
        ask(env, *t, &q);
        let req = s
            .llm
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.to_string().contains(&q))
            .unwrap();
        assert!(
            req["messages"]
                .to_string()
                .contains(&format!("remember the word {n}")),
            "{n} lost its session: {}",
            req["messages"]
        );
    }

    // The vanished one is not tried again.
    assert_eq!(hub.stop(), Some(0));
    let _hub = env.serve();
    wait_for("the second restore notice", 60, || {
        restored_notices(env).len() == 2
    });
    let second = restored_notices(env).remove(1);
    assert!(!second.contains(&dirs[2]), "{second}");
    assert!(
        second.contains(&dirs[0]) && second.contains(&dirs[1]),
        "{second}"
    );
    let _ = Duration::from_secs(0);
}
