//! The real pi, offline, against fake-llm: the path every pi-driven test of the project uses.
//! These fail when pi is missing (run scripts/install-test-deps.sh), unless
//! PI_TELEGRAM_SKIP_PI_TESTS=1.
#![allow(clippy::unwrap_used)]

use fake_llm::{FakeLlm, FakeLlmConfig};
use pi_testkit::{DEFAULT_TIMEOUT, PiEnv, PiRpc, message_text, require_pi};
use serde_json::{Value, json};

/// The fake LLM and a pi environment pointing at it; `None` when pi tests are skipped.
fn setup() -> Option<(FakeLlm, PiEnv)> {
    let pi = require_pi()?;
    let llm = FakeLlm::start_background(FakeLlmConfig::default()).unwrap();
    let env = PiEnv::with_pi(pi, llm.base_url()).unwrap();
    Some((llm, env))
}

fn of_type<'a>(records: &'a [Value], ty: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == ty).collect()
}

/// The text of the last assistant `message_end` in `records`.
fn last_assistant_text(records: &[Value]) -> String {
    let ends = of_type(records, "message_end");
    let last = ends
        .iter()
        .rev()
        .find(|r| r["message"]["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant message_end in {records:#?}"));
    message_text(&last["message"])
}

fn spawn_rpc(env: &PiEnv) -> PiRpc {
    env.spawn_rpc(["--no-session"]).unwrap()
}

#[test]
fn print_mode_echoes() {
    let Some((llm, env)) = setup() else { return };
    let out = env
        .command(["--no-session", "-p", "hello"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\nstderr:\n{stderr}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "echo: hello");

    // what pi sent: the configured model, streaming, a system prompt, our text last
    let requests = llm.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request["model"], "fake-model");
    assert_eq!(request["stream"], true);
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
}

#[test]
fn print_mode_model_error_exits_non_zero() {
    let Some((_llm, env)) = setup() else { return };
    let out = env
        .command(["--no-session", "-p", "[[error:400]]"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fake error 400"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rpc_prompt_runs_to_agent_settled() {
    let Some((_llm, env)) = setup() else { return };
    let mut rpc = spawn_rpc(&env);
    rpc.send(&json!({ "id": "1", "type": "prompt", "message": "hi rpc" }))
        .unwrap();
    let records = rpc
        .read_until_event("agent_settled", DEFAULT_TIMEOUT)
        .unwrap();

    let responses = of_type(&records, "response");
    assert_eq!(responses.len(), 1, "{records:#?}");
    let response = responses[0];
    assert_eq!(response["id"], "1");
    assert_eq!(response["command"], "prompt");
    assert_eq!(response["success"], true);
    assert_eq!(response["data"]["disposition"], "started");

    assert_eq!(last_assistant_text(&records), "echo: hi rpc");
    assert_eq!(records.last().unwrap()["aborted"], false);
    // the wire carries deltas, so a bridge can preview the reply while it streams
    let deltas: String = of_type(&records, "message_update")
        .iter()
        .filter(|r| r["assistantMessageEvent"]["type"] == "text_delta")
        .map(|r| r["assistantMessageEvent"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "echo: hi rpc");

    assert!(rpc.close(DEFAULT_TIMEOUT).unwrap().success());
}

#[test]
fn rpc_bash_tool_call_round_trip() {
    let Some((llm, env)) = setup() else { return };
    let mut rpc = spawn_rpc(&env);
    rpc.send(&json!({ "id": "t", "type": "prompt", "message": "[[bash:echo tool-works]]" }))
        .unwrap();
    let records = rpc
        .read_until_event("agent_settled", DEFAULT_TIMEOUT)
        .unwrap();

    let starts = of_type(&records, "tool_execution_start");
    assert_eq!(starts.len(), 1, "{records:#?}");
    assert_eq!(starts[0]["toolName"], "bash");
    assert_eq!(starts[0]["args"], json!({ "command": "echo tool-works" }));
    let ends = of_type(&records, "tool_execution_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["isError"], false);
    assert_eq!(message_text(&ends[0]["result"]).trim(), "tool-works");

    assert_eq!(last_assistant_text(&records), "tool said: tool-works");
    // two LLM calls: the tool call, then the answer to its result
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");

    assert!(rpc.close(DEFAULT_TIMEOUT).unwrap().success());
}

#[test]
fn rpc_get_state() {
    let Some((_llm, env)) = setup() else { return };
    let mut rpc = spawn_rpc(&env);
    let records = rpc
        .request("s", json!({ "type": "get_state" }), DEFAULT_TIMEOUT)
        .unwrap();
    let response = records.last().unwrap();
    assert_eq!(response["command"], "get_state");
    assert_eq!(response["success"], true);
    let data = response["data"].as_object().unwrap();
    for key in [
        "model",
        "thinkingLevel",
        "isStreaming",
        "isCompacting",
        "steeringMode",
        "followUpMode",
        "sessionId",
        "autoCompactionEnabled",
        "messageCount",
        "pendingMessageCount",
    ] {
        assert!(data.contains_key(key), "get_state lacks {key:?}: {data:#?}");
    }
    assert_eq!(data["model"]["id"], "fake-model");
    assert_eq!(data["model"]["provider"], "fake");
    assert_eq!(data["isStreaming"], false);
    assert_eq!(data["thinkingLevel"], "off");

    assert!(rpc.close(DEFAULT_TIMEOUT).unwrap().success());
}
