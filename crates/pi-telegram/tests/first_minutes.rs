//! The first ten minutes with `setup`: the token is not shown while it is typed, running setup
//! again reuses the saved token (also with `--json`) and says that the new pairing code
//! replaces the earlier one, and the steps come in the order the README gives.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{Env, TOKEN};
use serde_json::Value;

#[test]
fn the_token_typed_is_not_shown() {
    let env = Env::new();
    if !std::path::Path::new("/usr/bin/script").exists() {
        eprintln!("no `script` (util-linux) for a terminal: skipped");
        return;
    }
    // `script` gives setup a terminal, as a person has.
    let cmd = format!(
        "{} setup --api-base {}",
        env!("CARGO_BIN_EXE_pi-telegram"),
        env.fake.base_url()
    );
    let mut script = std::process::Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .env("PI_CODING_AGENT_DIR", env.agent_dir())
        .env_remove("TELEGRAM_BOT_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = script.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    writeln!(child.stdin.take().unwrap(), "{TOKEN}").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("it is not shown"), "{text}");
    assert!(!text.contains(TOKEN), "the token was echoed: {text}");
    assert!(text.contains("/start "), "{text}");
}

#[test]
fn setup_again_reuses_the_token_and_says_the_code_is_new() {
    let env = Env::new();
    let first = env.setup();
    let code1 = first["pairing_code"].as_str().unwrap().to_owned();
    assert_eq!(first["replaces_previous_code"], false);
    // No --token, no variable, no terminal: the saved token is used.
    let out = env.run(&["setup", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(second["pairing_code"].as_str().unwrap(), code1);
    assert_eq!(second["replaces_previous_code"], true);
    let out = env.run(&["setup"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        text.contains("token from telegram.json (saved earlier)"),
        "{text}"
    );
    assert!(
        text.contains("replaces the one setup printed before"),
        "{text}"
    );
    let serve = text.find("1. Start the hub: `pi-telegram serve`").unwrap();
    let start = text.find("    /start ").unwrap();
    assert!(
        serve < start,
        "serve first, then /start CODE, as the README says: {text}"
    );
}
