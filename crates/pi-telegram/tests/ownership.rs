//! A pi can only report its own turns: results, receipts and acks that name a turn another
//! instance has (or that was never dispatched) change nothing and send nothing. Through the
//! real binary, with scripted instances on `hub.sock`.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::shim::{Shim, hello};
use common::{Env, OWNER, wait_for};
use serde_json::json;

fn turn_number(prompt: &serde_json::Value) -> i64 {
    prompt["turn_id"]
        .as_str()
        .unwrap()
        .trim_start_matches('t')
        .parse()
        .unwrap()
}

#[test]
fn forged_results_receipts_and_acks_from_another_instance_change_nothing() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let mut web = Shim::plain(&env, "/work/web", 7601);
    env.say("first");
    let first = web.recv_type("prompt");
    let n = turn_number(&first);
    web.send(&json!({ "type": "ack", "turn_id": first["turn_id"], "disposition": "started" }));
    web.send(&json!({ "type": "event", "turn_id": first["turn_id"], "event": { "type": "agent_start" } }));
    // A second message waits for web, which is busy.
    env.say("second");
    wait_for("the second turn queued", 20, || {
        env.status()["turns"]["queued"] == json!(1)
    });
    let second = format!("t{}", n + 1);
    // Another pi, in another folder, claims to have finished the queued turn and to have
    // received web's turn; then acks and finishes them over its link.
    let forged = hello(
        &env,
        "/work/evil",
        7602,
        json!([first["turn_id"]]),
        json!([{ "turn_id": second, "text": "FORGED ANSWER", "aborted": false, "error": null },
               { "turn_id": "t999", "text": "FORGED TOO", "aborted": false, "error": null }]),
    );
    let mut evil = Shim::connect(&env, &forged);
    evil.send(&json!({ "type": "ack", "turn_id": second, "disposition": "started" }));
    evil.send(&json!({ "type": "turn_done", "turn_id": first["turn_id"], "text": "FORGED DONE", "aborted": false, "error": null }));
    evil.send(&json!({ "type": "turn_done", "turn_id": second, "text": "FORGED AGAIN", "aborted": false, "error": null }));
    std::thread::sleep(Duration::from_millis(700));
    let st = env.status();
    assert_eq!(st["turns"]["queued"], json!(1), "{st:#}");
    assert_eq!(st["turns"]["acked"], json!(1), "{st:#}");
    assert_eq!(st["turns"]["done"], json!(0), "{st:#}");
    let forged_text = |env: &Env| env.bot_texts(OWNER).iter().any(|t| t.contains("FORGED"));
    assert!(!forged_text(&env), "{:?}", env.bot_texts(OWNER));
    // web's own answer is the one the person gets, then the second turn goes to web.
    web.send(&json!({ "type": "event", "turn_id": first["turn_id"], "event": { "type": "agent_settled", "aborted": false } }));
    web.send(&json!({ "type": "turn_done", "turn_id": first["turn_id"], "text": "real first", "aborted": false, "error": null }));
    let p = web.recv_type("prompt");
    assert_eq!(p["turn_id"], json!(second));
    web.answer(&p, "real second");
    wait_for("both real answers", 20, || {
        let t = env.bot_texts(OWNER);
        t.iter().any(|t| t.ends_with("real first")) && t.iter().any(|t| t.ends_with("real second"))
    });
    assert!(!forged_text(&env), "{:?}", env.bot_texts(OWNER));
    assert_eq!(env.status()["turns"]["done"], json!(2));
    // The forger never got a prompt.
    drop(evil);
    assert_eq!(hub.stop(), Some(0));
}
