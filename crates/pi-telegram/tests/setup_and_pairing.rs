//! `setup` and pairing, with the real binary against tg-fake.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Env, OWNER, TOKEN, wait_for};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

#[test]
fn setup_validates_saves_and_prints_a_pairing_code() {
    let env = Env::new();
    let out = env.setup();
    assert_eq!(out["bot_username"], json!("fake_1000_bot"));
    assert_eq!(out["has_topics_enabled"], json!(false));
    let code = out["pairing_code"].as_str().unwrap();
    assert_eq!(code.len(), 8);
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    assert_eq!(cfg["profiles"]["default"]["botToken"], json!(TOKEN));
    assert_eq!(
        cfg["profiles"]["default"]["apiBase"],
        json!(env.fake.base_url())
    );
    let mode = std::fs::metadata(env.config_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(env.agent_dir().join("telegram/default"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    // The human form explains Threaded Mode and the pairing step.
    let text = env.run(&["setup", "--token", TOKEN]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("Threaded Mode: off")
            && stdout.contains("BotFather")
            && stdout.contains("/start "),
        "{stdout}"
    );
    // With Threaded Mode on, setup says so.
    env.fake
        .control()
        .settings(tg_fake::control::SettingsChange {
            has_topics_enabled: Some(true),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(env.setup()["has_topics_enabled"], json!(true));
}

#[test]
fn setup_refuses_bad_tokens_clearly() {
    let env = Env::new();
    let out = env.run(&[
        "setup",
        "--token",
        "1000:not-the-token",
        "--api-base",
        env.fake.base_url(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401") && err.contains("BotFather"), "{err}");
    assert!(!err.contains("not-the-token"), "the token leaked: {err}");
    assert!(
        !env.config_path().exists(),
        "nothing saved for a rejected token"
    );
    let out = env.run(&["setup", "--token", "garbage", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("123456789:AA"));
    // No token at all, non-interactive.
    let out = env.run(&["setup", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));
    // Unreachable API.
    let out = env.run(&[
        "setup",
        "--token",
        TOKEN,
        "--api-base",
        "http://127.0.0.1:9",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not reach Telegram"));
    // The token can also come from the environment.
    let out = env
        .cmd(&["setup", "--api-base", env.fake.base_url(), "--json"])
        .env("TELEGRAM_BOT_KEY", TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_round_trip_keeps_unknown_keys_and_malformed_files_are_never_overwritten() {
    let env = Env::new();
    let original = json!({
        "someFutureSetting": { "nested": [1, 2, 3] },
        "profiles": {
            "default": { "botToken": "1000:old", "myNote": "keep me" },
            "work": { "botToken": "2000:other", "allowedUserId": 77 }
        },
        "zLast": true
    });
    std::fs::write(
        env.config_path(),
        serde_json::to_string_pretty(&original).unwrap(),
    )
    .unwrap();
    env.setup();
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    assert_eq!(after["someFutureSetting"], original["someFutureSetting"]);
    assert_eq!(after["profiles"]["default"]["myNote"], json!("keep me"));
    assert_eq!(after["profiles"]["default"]["botToken"], json!(TOKEN));
    assert_eq!(after["profiles"]["work"], original["profiles"]["work"]);
    assert_eq!(after["zLast"], json!(true));
    let keys: Vec<_> = after.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        vec!["someFutureSetting", "profiles", "zLast"],
        "key order kept"
    );

    let broken = "{\n  \"profiles\": {\n    \"default\": { \"botToken\": \"1000:x\", }\n  }\n}\n";
    std::fs::write(env.config_path(), broken).unwrap();
    for args in [
        vec!["setup", "--token", TOKEN, "--json"],
        vec!["status"],
        vec!["serve"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("telegram.json line 3"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(env.config_path()).unwrap(), broken);
    std::fs::write(
        env.config_path(),
        r#"{"profiles":{"default":{"allowedUserId":"me"}}}"#,
    )
    .unwrap();
    let err = String::from_utf8_lossy(&env.run(&["status"]).stderr).to_string();
    assert!(err.contains("profiles.default.allowedUserId"), "{err}");
}

fn outcomes(env: &Env) -> Vec<String> {
    let s = env.open_store();
    s.read(|c| {
        let mut stmt = c
            .prepare("SELECT outcome FROM journal ORDER BY update_id")
            .map_err(store::StoreError::from)?;
        let rows = stmt
            .query_map([], |r| r.get::<_, Option<String>>(0))
            .map_err(store::StoreError::from)?;
        Ok::<_, store::StoreError>(rows.map(|r| r.unwrap().unwrap_or_default()).collect())
    })
    .unwrap()
}

#[test]
fn pairing_with_wrong_codes_the_right_code_and_strangers_ignored() {
    let env = Env::new();
    let code = env.setup()["pairing_code"].as_str().unwrap().to_owned();
    let mut hub = env.serve();
    // A stranger's chatter is ignored silently; a wrong code is counted and answered.
    env.say_as(555, "hello?");
    env.say_as(555, "/start WRONGCOD");
    wait_for("the wrong-code reply", 10, || env.bot_texts(555).len() == 1);
    assert!(
        env.bot_texts(555)[0].contains("4 attempt(s) left"),
        "{:?}",
        env.bot_texts(555)
    );
    // The right code, typed in lower case with a space, pairs.
    env.say(&format!("/start {}", code.to_lowercase()));
    wait_for("the pairing reply", 10, || {
        env.bot_texts(OWNER).iter().any(|t| t.contains("Paired"))
    });
    wait_for("the owner in the config", 10, || {
        std::fs::read_to_string(env.config_path())
            .unwrap()
            .contains(&format!("\"allowedUserId\": {OWNER}"))
    });
    // Now the stranger is ignored even with the code.
    env.say_as(555, &format!("/start {code}"));
    env.say("/help");
    wait_for("the help reply", 10, || env.bot_texts(OWNER).len() == 2);
    assert_eq!(
        env.bot_texts(555).len(),
        1,
        "nothing more was said to the stranger"
    );
    assert_eq!(hub.stop(), Some(0));
    assert_eq!(
        outcomes(&env),
        vec![
            "ignored:unpaired",
            "pairing:wrong-code",
            "paired:code",
            "ignored:not-owner",
            "menu:help"
        ]
    );
    let st = env.status();
    assert_eq!(st["owner_user_id"], json!(OWNER));
    assert_eq!(st["pairing"]["state"], json!("used"));
    // The stranger's content never reached the log.
    assert!(
        !hub.log_text().contains("hello?"),
        "message content in the log"
    );
}

#[test]
fn a_stranger_with_twenty_wrong_codes_leaves_the_owner_the_code() {
    let env = Env::new();
    let code = env.setup()["pairing_code"].as_str().unwrap().to_owned();
    let mut hub = env.serve();
    // A stranger sends 20 wrong codes, then the right one: each of their own five attempts is
    // answered, the last with the refusal, and after it nothing (not even to the right code).
    for i in 0..20 {
        env.say_as(777, &format!("/start BAD{i:02}CODE"));
    }
    env.say_as(777, &format!("/start {code}"));
    wait_for("the stranger's updates handled", 20, || {
        let o = outcomes(&env);
        o.len() == 21 && o.iter().all(|o| !o.is_empty())
    });
    let st = env.status();
    assert_eq!(st["pairing"]["state"], json!("open"), "{st:#}");
    assert_eq!(st["pairing"]["attempts_left"], json!(5), "{st:#}");
    assert_eq!(st["pairing"]["wrong_attempts"], json!(5), "{st:#}");
    assert_eq!(st["pairing"]["refused_senders"], json!(1), "{st:#}");
    // The owner then pairs with the code `setup` printed.
    env.say(&format!("/start {code}"));
    wait_for("the pairing reply", 10, || {
        env.bot_texts(OWNER).iter().any(|t| t.contains("Paired"))
    });
    // The replies to the stranger go at their chat's pace.
    wait_for("the stranger's five replies", 20, || {
        env.bot_texts(777).len() >= 5
    });
    assert_eq!(hub.stop(), Some(0));
    let texts = env.bot_texts(777);
    assert_eq!(texts.len(), 5, "{texts:?}");
    assert!(texts[3].contains("1 attempt(s) left"), "{texts:?}");
    assert!(texts[4].contains("last attempt"), "{texts:?}");
    assert_eq!(
        env.status()["outbox"]["pending"],
        json!(0),
        "nothing more waits to be said"
    );
    let outcomes = outcomes(&env);
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| *o == "ignored:pairing-refused")
            .count(),
        16,
        "{outcomes:?}"
    );
    assert_eq!(outcomes.last().map(String::as_str), Some("paired:code"));
    let st = env.status();
    assert_eq!(st["owner_user_id"], json!(OWNER));
    assert_eq!(st["pairing"]["state"], json!("used"));
}

#[test]
fn a_code_expires_after_ten_minutes() {
    let env = Env::new();
    let code = env.setup()["pairing_code"].as_str().unwrap().to_owned();
    {
        let s = store::Store::open(&env.state_db()).unwrap();
        s.write(|tx| {
            tx.execute("UPDATE pairing SET expires_ms = 1", [])
                .map(drop)
                .map_err(store::StoreError::from)
        })
        .unwrap();
    }
    assert_eq!(env.status()["pairing"]["state"], json!("expired"));
    let mut hub = env.serve();
    env.say(&format!("/start {code}"));
    wait_for("the reply", 10, || !env.bot_texts(OWNER).is_empty());
    assert!(env.bot_texts(OWNER)[0].contains("not paired with anyone"));
    assert_eq!(hub.stop(), Some(0));
    assert_eq!(env.status()["owner_user_id"], json!(null));
}

#[test]
fn first_contact_mode_makes_the_first_writer_the_owner() {
    let env = Env::new();
    env.setup();
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config_path()).unwrap()).unwrap();
    cfg["pairing"] = json!("first-contact");
    std::fs::write(env.config_path(), cfg.to_string()).unwrap();
    let mut hub = env.serve();
    env.say_as(4242, "hi, is this thing on");
    env.say_as(9999, "/start");
    wait_for("the welcome", 10, || !env.bot_texts(4242).is_empty());
    assert!(env.bot_texts(4242)[0].contains("You are the owner"));
    assert_eq!(hub.stop(), Some(0));
    assert!(env.bot_texts(9999).is_empty());
    assert_eq!(env.status()["owner_user_id"], json!(4242));
}

/// People keep dotfiles in a repository and link them: every writer of telegram.json (setup,
/// pairing's `allowedUserId`, the settings menu) writes the file the link leads to, and the
/// link stays a link.
#[test]
fn a_linked_telegram_json_stays_a_link_through_setup_pairing_and_the_settings_menu() {
    let env = Env::new();
    let dotfiles = env.dir.path().join("dotfiles");
    std::fs::create_dir(&dotfiles).unwrap();
    let target = dotfiles.join("telegram.json");
    std::fs::write(&target, r#"{ "mine": "kept" }"#).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&target, env.config_path()).unwrap();
    let still_linked = |what: &str| {
        let meta = std::fs::symlink_metadata(env.config_path()).unwrap();
        assert!(
            meta.file_type().is_symlink(),
            "{what}: the link was replaced"
        );
        let cfg: Value = serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{what}");
        assert_eq!(cfg["mine"], json!("kept"), "{what}");
        cfg
    };

    let code = env.setup()["pairing_code"].as_str().unwrap().to_owned();
    assert_eq!(
        still_linked("setup")["profiles"]["default"]["botToken"],
        json!(TOKEN)
    );

    let mut hub = env.serve();
    env.say(&format!("/start {code}"));
    wait_for("the owner in the linked file", 20, || {
        std::fs::read_to_string(&target)
            .unwrap()
            .contains(&format!("\"allowedUserId\": {OWNER}"))
    });
    still_linked("pairing");

    env.say("/settings");
    let mut menu = None;
    wait_for("the settings menu", 20, || {
        menu = env
            .fake
            .control()
            .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .find(|m| m.from_bot && m.text.as_deref().is_some_and(|t| t.starts_with("Settings")));
        menu.is_some()
    });
    let menu = menu.unwrap();
    let previews = menu.reply_markup.as_ref().unwrap()["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().clone())
        .find(|b| {
            b["text"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("preview")
        })
        .unwrap();
    env.fake
        .control()
        .press(tg_fake::control::Press {
            message_id: menu.message_id,
            data: previews["callback_data"].as_str().unwrap().to_owned(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("the setting in the linked file", 20, || {
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("draftPreviews")
    });
    let cfg = still_linked("the settings menu");
    assert_eq!(cfg["profiles"]["default"]["allowedUserId"], json!(OWNER));
    assert_eq!(hub.stop(), Some(0));
    let left: Vec<_> = std::fs::read_dir(&dotfiles)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
}
