//! The `tg-fake` binary: `--port 0` prints the base URL (and writes it to a file), serves the
//! Bot API and the control API, and stops cleanly on SIGTERM.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

#[tokio::test]
async fn binary_prints_its_url_serves_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("tg-fake-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url_file = dir.join("url");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tg-fake"))
        .args([
            "--port",
            "0",
            "--topics",
            "--token",
            "1000:fake-token",
            "--token",
            "2000:second",
        ])
        .arg("--url-file")
        .arg(&url_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.trim().to_owned();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    // The URL file is written once listening.
    let mut from_file = String::new();
    for _ in 0..100 {
        from_file = std::fs::read_to_string(&url_file).unwrap_or_default();
        if !from_file.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(from_file.trim(), base);

    // reqwest is built without a rustls crypto provider (`rustls-no-provider`): ring first.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let me: Value = http
        .get(format!("{base}/bot2000:second/getMe"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["result"]["has_topics_enabled"], json!(true));
    assert_eq!(me["result"]["id"], json!(2000));
    let sent: Value = http
        .post(format!("{base}/__control/send"))
        .json(&json!({ "text": "hi" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let updates: Value = http
        .get(format!("{base}/bot1000:fake-token/getUpdates"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(updates["result"][0]["update_id"], sent["update_id"]);

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
