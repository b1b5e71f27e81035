//! A headless pi's extension may connect its tools to the hub before pi answers the hub's first
//! RPC question (on a busy machine it often does). Its token must be known then: the hello waits
//! for the attach instead of being refused for good. A stand-in for pi (a script) says the
//! tools hello first and answers `get_state` only after the hub replied to it.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Env, wait_for};

const FAKE_PI: &str = r#"#!/usr/bin/env python3
import json, os, socket, sys, threading
agent = os.environ["PI_CODING_AGENT_DIR"]
profile = os.environ.get("PI_TELEGRAM_PROFILE", "default")
d = os.path.join(agent, "telegram", profile)
secret = open(os.path.join(d, "hub.secret")).read().strip()
s = socket.socket(socket.AF_UNIX)
s.connect(os.path.join(d, "hub.sock"))
hello = {"type": "hello", "protocol": 1, "role": "tools", "secret": secret,
         "token": os.environ["PI_TELEGRAM_CHILD_TOKEN"], "pid": os.getpid(), "cwd": os.getcwd()}
s.sendall((json.dumps(hello) + "\n").encode())
# The hub answers only once pi attached, which needs the get_state answer below: answer it
# from another thread while this one waits.
def rpc():
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("type") == "get_state":
            out = {"type": "response", "id": m.get("id"), "command": "get_state", "success": True,
                   "data": {"sessionId": "s1", "isStreaming": False, "pendingMessageCount": 0}}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
t = threading.Thread(target=rpc, daemon=True)
t.start()
answer = s.makefile().readline()
with open(os.environ["TOOLS_ANSWER_FILE"], "w") as f:
    f.write(answer)
os._exit(0)  # the attach is done: nothing more to prove
"#;

#[test]
fn a_childs_tools_hello_before_its_attach_is_welcomed() {
    let env = Env::new();
    env.preset_owner();
    let script = env.dir.path().join("fake-pi");
    std::fs::write(&script, FAKE_PI).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let answer = env.dir.path().join("tools-answer.json");
    let mut c = env.cmd(&["serve"]);
    c.env("PI_TELEGRAM_PI_BIN", &script)
        .env("TOOLS_ANSWER_FILE", &answer)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Killed however the test ends (the fake pi dies with the hub's pipes).
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _hub = KillOnDrop(c.spawn().unwrap());
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let project = env.dir.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let mut spawn = env.cmd(&["spawn", "--cwd", project.to_str().unwrap()]);
    spawn
        .env("PI_TELEGRAM_PI_BIN", &script)
        .env("TOOLS_ANSWER_FILE", &answer);
    let out = spawn.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the tools hello's answer", 20, || {
        std::fs::read_to_string(&answer).is_ok_and(|a| !a.is_empty())
    });
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&answer).unwrap()).unwrap();
    assert_eq!(a["type"], "welcome", "{a}");
}
