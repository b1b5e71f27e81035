//! Starting and stopping `serve` in conditions a person meets: a webhook left on the bot, an
//! unreachable Telegram, a config saved with a byte-order mark or readable by others, the
//! modes of the files that hold message text, and a state database from a newer version.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{Env, OWNER, TOKEN, wait_for};
use serde_json::{Value, json};

fn wait_socket(env: &Env) {
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
}

/// Calls the fake's Bot API directly, as another tool would.
fn bot_call(env: &Env, method: &str, params: Value) -> Value {
    let url = format!("{}/bot{TOKEN}/{method}", env.fake.base_url());
    env.rt.block_on(async {
        common::http()
            .post(url)
            .json(&params)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    })
}

#[test]
fn a_webhook_left_on_the_bot_is_removed_and_nothing_waiting_is_lost() {
    let env = Env::new();
    env.preset_owner();
    for i in 0..3 {
        env.say(&format!("waiting {i}"));
    }
    let set = bot_call(
        &env,
        "setWebhook",
        json!({ "url": "https://hooks.example.org/secret-path" }),
    );
    assert_eq!(set["ok"], json!(true), "{set}");
    assert_eq!(
        bot_call(&env, "getUpdates", json!({}))["error_code"],
        json!(409),
        "the webhook blocks polling"
    );
    let mut hub = env.serve();
    // The three messages are handled (each waits for a pi: one notice).
    wait_for("the messages handled", 20, || {
        env.status()["journal"]["handled"] == json!(3)
    });
    let requests = env.fake.control().requests(0, None);
    let first_get_me = requests.iter().find(|r| r.method == "getMe").unwrap().at_ms;
    let first_poll = requests
        .iter()
        .find(|r| r.method == "getUpdates" && r.status == Some(200) && r.seq > 2)
        .unwrap()
        .at_ms;
    let conflicts = requests
        .iter()
        .filter(|r| r.method == "getUpdates" && r.status == Some(409))
        .count();
    eprintln!(
        "polling {} ms after the hub's first call; {conflicts} conflict(s) after the test's own",
        first_poll - first_get_me
    );
    assert!(first_poll - first_get_me < 2000);
    assert_eq!(conflicts, 1, "only the test's own poll met the webhook");
    assert_eq!(
        bot_call(&env, "getWebhookInfo", json!({}))["result"]["url"],
        json!("")
    );
    let st = env.status();
    assert_eq!(st["webhook_removed"]["host"], json!("hooks.example.org"));
    assert_eq!(st["webhook_removed"]["pending_updates"], json!(3));
    assert!(
        !st.to_string().contains("secret-path"),
        "status never shows the webhook's path"
    );
    // A webhook set while the hub runs is removed too, and polling goes on.
    bot_call(
        &env,
        "setWebhook",
        json!({ "url": "https://other.example.org/x" }),
    );
    env.say("after the second webhook");
    wait_for("the new message handled", 20, || {
        env.status()["journal"]["handled"] == json!(4)
    });
    assert_eq!(
        env.status()["webhook_removed"]["host"],
        json!("other.example.org")
    );
    assert_eq!(hub.stop(), Some(0), "not an exit 4: no other program polls");
}

/// Writes the preset config with `api_base` instead of the fake's.
fn config_with_api_base(env: &Env, api_base: &str) {
    let cfg = json!({ "profiles": { "default": {
        "botToken": TOKEN, "allowedUserId": OWNER, "apiBase": api_base } } });
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
}

fn stop_during_start_up(env: &Env, why: &str) {
    let mut hub = env.serve();
    wait_for(&format!("the start-up retry ({why})"), 20, || {
        hub.log_text().contains("Telegram is not reachable")
    });
    assert_eq!(env.status()["hub"]["running"], json!(true));
    let t = Instant::now();
    hub.signal("TERM");
    assert_eq!(
        hub.wait(Duration::from_secs(2)),
        Some(0),
        "{why}: SIGTERM ends the start-up; log:\n{}",
        hub.log_text()
    );
    eprintln!(
        "{why}: stopped {} ms after SIGTERM",
        t.elapsed().as_millis()
    );
    assert_eq!(
        env.status()["hub"]["running"],
        json!(false),
        "{why}: the lock is free"
    );
}

#[test]
fn a_stop_during_start_up_is_a_stop() {
    let env = Env::new();
    // Nothing listens there: every attempt is refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    config_with_api_base(&env, &format!("http://127.0.0.1:{port}"));
    stop_during_start_up(&env, "connection refused");
    // Something accepts but never answers: the call itself hangs.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    config_with_api_base(&env, &format!("http://{}", silent.local_addr().unwrap()));
    let mut hub = env.serve();
    wait_for("the hub to take the lock", 20, || {
        env.status()["hub"]["running"] == json!(true)
    });
    std::thread::sleep(Duration::from_millis(300));
    hub.signal("INT");
    assert_eq!(
        hub.wait(Duration::from_secs(2)),
        Some(0),
        "SIGINT ends a call that hangs; log:\n{}",
        hub.log_text()
    );
    assert_eq!(env.status()["hub"]["running"], json!(false));
    drop(silent);
}

#[test]
fn the_files_that_hold_messages_are_private_and_the_config_is_checked() {
    let env = Env::new();
    env.preset_owner();
    // An editor saved the config with a byte-order mark, readable by everyone.
    let text = std::fs::read_to_string(env.config_path()).unwrap();
    std::fs::write(env.config_path(), format!("\u{feff}{text}")).unwrap();
    std::fs::set_permissions(env.config_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let st = env.status();
    assert_eq!(st["token_configured"], json!(true));
    let warnings = st["warnings"].to_string();
    assert!(
        warnings.contains("others can read it") && warnings.contains("chmod 600"),
        "{warnings}"
    );
    let human = env.run(&["status"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("warning      "));
    let mut hub = env.serve();
    wait_socket(&env);
    env.say("hello");
    wait_for("the message handled", 20, || {
        env.status()["journal"]["handled"] == json!(1)
    });
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = env.profile_dir();
    assert_eq!(mode(&dir), 0o700);
    for f in ["state.db", "state.db-wal", "state.db-shm"] {
        let p = dir.join(f);
        assert!(p.exists(), "{f}");
        assert_eq!(mode(&p), 0o600, "{f}");
    }
    // A control connection that sends an over-long line is told why before the close.
    let secret = std::fs::read_to_string(dir.join("hub.secret")).unwrap();
    let mut sock = UnixStream::connect(dir.join("hub.sock")).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let hello =
        json!({ "type": "hello", "protocol": 1, "role": "control", "secret": secret.trim() });
    sock.write_all(format!("{hello}\n").as_bytes()).unwrap();
    let mut reader = BufReader::new(sock.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("welcome"), "{line}");
    let long = format!("{}\n", "x".repeat(3 << 20));
    let _ = sock.write_all(long.as_bytes());
    line.clear();
    reader.read_line(&mut line).unwrap();
    let msg: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(msg["type"], json!("error"), "{line}");
    assert!(
        msg["message"].as_str().unwrap().contains("longer than"),
        "{line}"
    );
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn a_state_database_from_a_newer_version_is_refused_and_left_untouched() {
    let env = Env::new();
    env.preset_owner();
    // A newer pi-telegram wrote this profile's state.
    std::fs::create_dir_all(env.profile_dir()).unwrap();
    std::fs::set_permissions(env.profile_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let newer = store::schema::CURRENT + 1;
    {
        let s = store::Store::open(&env.state_db()).unwrap();
        s.write(|tx| store::kv::set(tx, store::kv::OWNER, &OWNER.to_string()))
            .unwrap();
        s.write(|tx| {
            tx.execute_batch(&format!("PRAGMA user_version = {newer}"))
                .map_err(store::StoreError::from)
        })
        .unwrap();
    }
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(env.profile_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("state.db"))
            .collect();
        names.sort();
        names
    };
    let before = (std::fs::read(env.state_db()).unwrap(), listing());
    let expected = format!(
        "is from a newer pi-telegram (schema {newer}, this binary knows {}); upgrade pi-telegram or use a matching version",
        store::schema::CURRENT
    );
    for args in [&["serve"][..], &["status"][..]] {
        let out = env.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
        assert_eq!(
            (std::fs::read(env.state_db()).unwrap(), listing()),
            before,
            "{args:?} left the state as it was"
        );
    }
    // Nothing was asked of Telegram either.
    assert!(
        env.fake
            .control()
            .requests(0, Some("getUpdates"))
            .is_empty()
    );
}
