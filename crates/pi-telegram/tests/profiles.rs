//! Two bots at once: two hubs (`--profile`), a pi connected to the named one with
//! `/telegram-connect work`, each bot talking only to its own pi and state; and a
//! `telegram.json` in the reference's older layout (the bot's identity at the top level) is read
//! and migrated into `profiles.default`, other keys kept.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pi::setup;
use common::{OWNER, TOKEN, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};
use tg_fake::{FakeConfig, FakeServer};

const WORK_TOKEN: &str = "2000:work-token";

fn texts(fake: &FakeServer) -> Vec<String> {
    fake.control()
        .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
        .unwrap()
        .into_iter()
        .filter(|m| m.from_bot && !m.deleted)
        .filter_map(|m| m.text)
        .collect()
}

fn say(fake: &FakeServer, text: &str) {
    fake.control()
        .send_text(tg_fake::control::SendText {
            text: text.into(),
            ..Default::default()
        })
        .unwrap();
}

#[test]
fn two_bots_two_hubs_each_with_its_own_pi() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let work_fake = env
        .rt
        .block_on(FakeServer::start(FakeConfig {
            tokens: vec![WORK_TOKEN.into()],
            ..FakeConfig::default()
        }))
        .unwrap();
    // Both profiles in one file: `default` on the first fake, `work` on the second.
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    let mut work = cfg["profiles"]["default"].clone();
    work["apiBase"] = json!(work_fake.base_url());
    work["botToken"] = json!(WORK_TOKEN);
    cfg["profiles"]["work"] = work;
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
    let out = env.run(&["install-extension"]);
    assert!(out.status.success());

    let default_hub = env.serve();
    let _work_hub = env.serve_profile("work");
    let status = |profile: &str| -> Value {
        let out = env.run(&["status", "--json", "--profile", profile]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let up = (0..150).any(|_| {
        std::thread::sleep(Duration::from_millis(200));
        status("default")["hub"]["running"] == json!(true)
            && status("work")["hub"]["running"] == json!(true)
    });
    assert!(
        up,
        "default:\n{}\nwork:\n{}",
        default_hub.log_text(),
        _work_hub.log_text()
    );
    assert_ne!(
        status("default")["hub"]["pid"],
        status("work")["hub"]["pid"]
    );
    // Each hub got its own bot (the last getMe), each its own state.
    assert_eq!(status("work")["bot"]["id"], json!(2000));
    assert_eq!(status("default")["bot"]["id"], json!(1000));

    let mut pi = PiRpc::spawn(s.pi.command(["--mode", "rpc", "--no-session"])).unwrap();
    pi.send(&json!({ "id": "c", "type": "prompt", "message": "/telegram-connect work" }))
        .unwrap();
    pi.read_until(Duration::from_secs(60), "connect", |v: &Value| {
        v["type"] == "response" && v["id"] == "c"
    })
    .unwrap();
    let live = |profile: &str| {
        status(profile)["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["state"] != "gone")
            .count()
    };
    let ok = (0..150).any(|_| {
        std::thread::sleep(Duration::from_millis(200));
        live("work") == 1
    });
    assert!(
        ok,
        "pi did not connect to the work hub: {:#}\n{}\n{}",
        status("work")["instances"],
        _work_hub.log_text(),
        std::fs::read_to_string(env.agent_dir().join("telegram/work/hub.log")).unwrap_or_default()
    );
    assert_eq!(live("default"), 0, "pi connected to the named profile only");

    say(&work_fake, "hello work");
    wait_for("the work bot's answer", 30, || {
        texts(&work_fake).contains(&"echo: hello work".to_owned())
    });
    say(&env.fake, "hello default");
    wait_for("the default bot's reply", 30, || {
        !texts(&env.fake).is_empty()
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        texts(&env.fake).iter().all(|t| !t.starts_with("echo:")),
        "the default bot answered with the work pi: {:?}",
        texts(&env.fake)
    );
    assert!(
        !texts(&work_fake)
            .iter()
            .any(|t| t.contains("hello default"))
    );
    assert!(status("work")["journal"]["handled"].as_i64().unwrap() >= 1);
    assert!(env.agent_dir().join("telegram/work/state.db").exists());
    let _ = pi.close(Duration::from_secs(20));
}

#[test]
fn the_older_config_layout_is_read_and_migrated() {
    let env = common::Env::new();
    let cfg = json!({
        "botToken": TOKEN, "allowedUserId": OWNER, "lastUpdateId": 0,
        "assistant": { "rendering": "html" },
        "inboundHandlers": [],
        "keyWeDoNotKnow": { "kept": true },
        "profiles": { "default": { "apiBase": env.fake.base_url() } },
    });
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
    // status reads it without writing.
    let st = env.status();
    assert_eq!(st["token_configured"], json!(true));
    assert_eq!(st["owner_user_id"], json!(OWNER));
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    assert_eq!(on_disk, cfg, "status must not write");
    // serve migrates it and works with it.
    let mut hub = env.serve();
    wait_for("the hub", 30, || {
        env.status()["hub"]["running"] == json!(true)
    });
    env.say("hi");
    wait_for("a reply to the owner", 30, || {
        !env.bot_texts(OWNER).is_empty()
    });
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    assert_eq!(on_disk["profiles"]["default"]["botToken"], TOKEN);
    assert_eq!(on_disk["profiles"]["default"]["allowedUserId"], OWNER);
    assert_eq!(on_disk["profiles"]["default"]["lastUpdateId"], 0);
    assert_eq!(
        on_disk["profiles"]["default"]["apiBase"],
        env.fake.base_url()
    );
    assert_eq!(on_disk["keyWeDoNotKnow"], json!({ "kept": true }));
    assert_eq!(on_disk["assistant"]["rendering"], "html");
    assert!(on_disk.get("botToken").is_none() && on_disk.get("allowedUserId").is_none());
    assert_eq!(hub.stop(), Some(0));

    // A conflict is refused (exit 2) and the file left alone.
    let conflict = json!({ "allowedUserId": 1, "profiles": { "default": { "botToken": TOKEN, "allowedUserId": 2 } } });
    std::fs::write(env.config_path(), conflict.to_string()).unwrap();
    let out = env.run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allowedUserId"));
    assert_eq!(
        std::fs::read_to_string(env.config_path()).unwrap(),
        conflict.to_string()
    );
}
