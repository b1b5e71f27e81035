//! A final answer whose send outcome is unknown is sent again (it must arrive): every such copy
//! is counted in `status` and marked for the person, who may see the first one too. (The marks
//! are checked on rich answers, the default; `sender::marked_repeat` covers text messages.)
#![allow(clippy::unwrap_used)]

mod common;

use common::shim::Shim;
use common::{Env, OWNER, wait_for};
use serde_json::json;
use tg_fake::{FaultKind, FaultSpec};

const MARK: &str = "↻ Sent again: an earlier copy may have arrived too.";

fn fault(env: &Env, kind: FaultKind) {
    env.fake
        .control()
        .add_fault(FaultSpec {
            // Answers are rich messages (the default rendering).
            method: "sendRichMessage".into(),
            kind,
            count: Some(1),
            probability: None,
            retry_after: None,
            delay_ms: None,
        })
        .unwrap();
}

#[test]
fn answers_sent_again_are_counted_and_marked() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let mut web = Shim::plain(&env, "/work/web", 7701);
    wait_for("the connected notice", 20, || {
        !env.bot_texts(OWNER).is_empty()
    });
    // The first answer is delivered but its answer lost; the second meets a 500.
    env.say("one");
    let p = web.recv_type("prompt");
    fault(&env, FaultKind::CommitThenDrop);
    web.answer(&p, "answer one");
    wait_for("the repeat of answer one", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with(MARK) && t.ends_with("answer one"))
    });
    env.say("two");
    let p = web.recv_type("prompt");
    fault(&env, FaultKind::Http500);
    web.answer(&p, "answer two");
    wait_for("the repeat of answer two", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with(MARK) && t.ends_with("answer two"))
    });
    let texts = env.bot_texts(OWNER);
    // What the person sees: the first copy that did arrive, then the marked repeat; a 500
    // changed nothing, so only the marked copy of answer two.
    assert_eq!(
        texts.iter().filter(|t| *t == "answer one").count(),
        1,
        "{texts:#?}"
    );
    assert_eq!(
        texts.iter().filter(|t| *t == "answer two").count(),
        0,
        "{texts:#?}"
    );
    let st = env.status();
    assert_eq!(st["outbox"]["resent"], json!(2), "{st:#}");
    let resends = st["last_errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"].as_str().unwrap().contains("sending again"))
        .count();
    assert_eq!(resends, 2, "{st:#}");
    assert!(
        !st["last_errors"].to_string().contains("answer one"),
        "incidents never carry the text"
    );
    assert_eq!(hub.stop(), Some(0));
}
