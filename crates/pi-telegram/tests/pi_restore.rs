//! Headless pi instances survive the hub: killed (SIGKILL) with three hub-started pi, the hub
//! starts them again on their pi sessions (a follow-up question sees the earlier turn), tells
//! the person which came back, and reports the one whose folder vanished once, without trying
//! it again.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::{PiSetup, project, setup_threaded};
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

/// A hub (with `extra` in its environment) and one headless pi it started in project `name`,
/// bound to its topic: the hub, the project's folder, the topic.
fn one_headless(s: &PiSetup, name: &str, extra: &[(&str, &str)]) -> (common::Hub, String, i64) {
    let env = &s.env;
    let hub = env.serve_with(extra);
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let dir = project(&s.pi, name);
    env.spawn_pi(&dir);
    let topic = env.bound_topic(name, 60);
    (hub, dir, topic)
}

/// The hub killed while its headless pi streams an answer (no tool started): after the restart
/// the turn runs again on the same session, the person is told so and gets one answer; pi is
/// told it sees the message a second time.
#[test]
fn a_turn_cut_off_before_any_tool_runs_again_after_the_hub_restarts() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let (mut hub, _, topic) = one_headless(&s, "delta", &[]);
    let words = "[[slow]] one two three four five six seven eight nine ten eleven twelve";
    say_in(env, topic, words);
    wait_for("pi to ask the model", 60, || {
        common::pi::prompts_containing(&s.llm, "eleven twelve") == 1
    });
    hub.kill();
    // The next hub dies as it commits what became of that turn: nothing of it was committed,
    // and the one after judges again from the same file.
    let mut dying = env.serve_with(&[("PI_TELEGRAM_CRASH_AT", "recover.before_commit")]);
    assert_eq!(
        dying.wait(Duration::from_secs(60)),
        None,
        "the hub aborts at recover.before_commit"
    );

    let _hub = env.serve();
    wait_for("the run-again notice", 60, || {
        texts_in(env, ThreadFilter::Thread(topic))
            .iter()
            .any(|t| t.contains("pi had not started any tool, so it runs again"))
    });
    let answered = |env: &Env| {
        texts_in(env, ThreadFilter::Thread(topic))
            .into_iter()
            .filter(|t| t.starts_with("echo:") && t.contains("eleven twelve"))
            .count()
    };
    wait_for("the answer", 60, || answered(env) == 1);
    let again = s
        .llm
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.to_string().contains("eleven twelve"))
        .unwrap();
    assert!(
        again.to_string().contains("it is sent again"),
        "pi was not told it sees the message again: {again}"
    );
    // Nothing else comes for it: no interrupted notice, no second answer.
    // Absence needs a wait: long enough for a second answer or run to show.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(answered(env), 1);
    assert!(
        !texts_in(env, ThreadFilter::Thread(topic))
            .iter()
            .any(|t| t.contains("send it again if you still need it")),
        "{:#?}",
        texts_in(env, ThreadFilter::Thread(topic))
    );
}

/// The hub killed while its headless pi runs a tool: the turn is not run a second time (the
/// tool ran once), and the person is told it was interrupted.
#[test]
fn a_turn_cut_off_while_a_tool_runs_is_never_run_again() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let (mut hub, dir, topic) = one_headless(&s, "epsilon", &[]);
    let ran = std::path::Path::new(&dir).join("ran.txt");
    say_in(env, topic, "[[bash:echo ran >> ran.txt && sleep 3]]");
    wait_for("the tool to start", 60, || ran.exists());
    hub.kill();

    let _hub = env.serve();
    wait_for("the interrupted notice", 60, || {
        texts_in(env, ThreadFilter::Thread(topic))
            .iter()
            .any(|t| t.contains("send it again if you still need it"))
    });
    // Absence needs a wait: long enough for a second answer or run to show.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");
    // Judged from pi's session file, not for want of it.
    let why: Vec<String> = store::Store::open(&env.state_db())
        .unwrap()
        .read(|c| {
            let mut q = c
                .prepare("SELECT error FROM turns WHERE state = 'interrupted'")
                .map_err(store::StoreError::from)?;
            let rows = q
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(store::StoreError::from)?;
            Ok::<_, store::StoreError>(rows.map(|r| r.unwrap()).collect())
        })
        .unwrap();
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("pi had started bash"), "{why:?}");
    assert!(
        !texts_in(env, ThreadFilter::Thread(topic))
            .iter()
            .any(|t| t.contains("runs again")),
        "{:#?}",
        texts_in(env, ThreadFilter::Thread(topic))
    );
}

/// The hub dies as its headless pi's answer reaches it (`turn_done.before_commit`): the answer
/// is in pi's session file, and after the restart it is delivered from there, once, without
/// asking the model again.
#[test]
fn an_answer_the_hub_died_receiving_is_taken_from_pi_s_session_file() {
    let Some(s) = setup_threaded() else { return };
    let env = &s.env;
    let (mut hub, _, topic) = one_headless(
        &s,
        "zeta",
        &[("PI_TELEGRAM_CRASH_AT", "turn_done.before_commit")],
    );
    say_in(env, topic, "tell me about zeta");
    assert_eq!(
        hub.wait(Duration::from_secs(60)),
        None,
        "the hub aborts at the crash point"
    );

    let _hub = env.serve();
    let answered = |env: &Env| {
        texts_in(env, ThreadFilter::Thread(topic))
            .into_iter()
            .filter(|t| t == "echo: tell me about zeta")
            .count()
    };
    wait_for("the answer", 60, || answered(env) == 1);
    // Absence needs a wait: long enough for a second answer to show.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(answered(env), 1);
    assert_eq!(
        common::pi::prompts_containing(&s.llm, "tell me about zeta"),
        1,
        "the model was asked again"
    );
}
