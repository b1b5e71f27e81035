//! Operator-panel benchmark (`cargo bench -p pi-telegram --bench controls`): the real hub binary
//! against tg-fake with Telegram-like rate limits, and a scripted pi on `hub.sock`. Prints:
//!
//! - `/abort` to pi: from tg-fake taking the person's `/abort` to the instance reading the
//!   hub's `abort` (p50, p90 of 20; target p90 <= 1 s: "an abort reaches pi within 1 s");
//! - `/status` to the menu on screen: from the command to tg-fake receiving the message with
//!   what pi reported (the instance answers `get_stats` at once; p50, p90 of 20);
//! - a menu button to its edit: from the tap to tg-fake receiving the edited menu (p50, p90).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{pct, start_hub};
use serde_json::{Value, json};
use tg_fake::control::{Press, SendText};
use tg_fake::{FakeConfig, FakeServer, FloodConfig};

const TOKEN: &str = "1000:fake-token";

struct Shim {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Shim {
    fn send(&mut self, v: &Value) {
        self.writer.write_all(format!("{v}\n").as_bytes()).unwrap();
    }

    /// The next message of type `ty`; requests on the way are answered as pi would.
    fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let mut line = String::new();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "hub closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == ty {
                return v;
            }
            self.answer(&v);
        }
    }

    fn answer(&mut self, v: &Value) {
        let data = match v["type"].as_str() {
            Some("get_commands") => json!({ "commands": [] }),
            Some("get_stats") => json!({
                "model": { "provider": "fake", "id": "fake-model" }, "thinking_level": "off",
                "context": { "tokens": 1200, "contextWindow": 32000, "percent": 3.75 },
                "cost": null }),
            _ => return,
        };
        self.send(&json!({ "type": "response", "id": v["id"], "ok": true, "data": data }));
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig {
            flood: FloodConfig {
                enabled: true,
                ..FloodConfig::default()
            },
            ..FakeConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut hub, profile) = start_hub(
        dir.path(),
        json!({ "botToken": TOKEN, "allowedUserId": tg_fake::DEFAULT_USER_ID,
            "apiBase": fake.base_url() }),
    );
    let secret = std::fs::read_to_string(profile.join("hub.secret")).unwrap();
    let stream = UnixStream::connect(profile.join("hub.sock")).unwrap();
    let mut pi = Shim {
        reader: BufReader::new(stream.try_clone().unwrap()),
        writer: stream,
    };
    pi.send(
        &json!({ "type": "hello", "protocol": 1, "role": "instance", "secret": secret.trim(),
        "pid": 424243, "cwd": "/bench/web", "mode": "tui", "reason": "startup", "idle": true,
        "pending": false, "received_turns": [], "completed_turns": [] }),
    );
    pi.recv_type("welcome");
    let say = |text: &str| {
        fake.control()
            .send_text(SendText {
                text: text.into(),
                ..Default::default()
            })
            .unwrap();
    };
    let last_seq = || fake.control().requests(0, None).last().map_or(0, |r| r.seq);
    // The first request after `since` of `method` whose text starts with `prefix`: its time.
    let wait_sent = |since: u64, method: &str, prefix: &str| -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(r) = fake
                .control()
                .requests(since, Some(method))
                .into_iter()
                .find(|r| {
                    r.status == Some(200)
                        && r.params["text"]
                            .as_str()
                            .is_some_and(|t| t.starts_with(prefix))
                })
            {
                return r.at_ms;
            }
            assert!(
                Instant::now() < deadline,
                "no {method} {prefix:?} in {:#?}",
                fake.control()
                    .requests(since, None)
                    .iter()
                    .map(|r| format!("{} {}", r.method, r.params))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // tg-fake stamps its log with its clock, the wall clock unless a test advances it.
    let fake_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };

    // /abort while a turn runs.
    let mut aborts = Vec::new();
    for i in 0..20 {
        say(&format!("long job {i}"));
        let p = pi.recv_type("prompt");
        let turn = p["turn_id"].clone();
        pi.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }));
        pi.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_start" } }));
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        say("/abort");
        pi.recv_type("abort");
        aborts.push(t0.elapsed().as_millis() as u64);
        pi.send(&json!({ "type": "event", "turn_id": turn,
            "event": { "type": "agent_settled", "aborted": true } }));
        pi.send(
            &json!({ "type": "turn_done", "turn_id": turn, "text": "partial",
            "aborted": true, "error": null }),
        );
        pi.send(&json!({ "type": "state", "idle": true, "pending": false }));
        std::thread::sleep(Duration::from_millis(200));
    }
    aborts.sort_unstable();
    // The replies wait for Telegram's per-chat pace; the menus below should not queue behind
    // them (that would measure pacing, not the hub).
    let deadline = Instant::now() + Duration::from_secs(120);
    while fake
        .control()
        .requests(0, Some("sendMessage"))
        .iter()
        .filter(|r| r.status == Some(200) && r.params.to_string().contains("Aborting"))
        .count()
        < 20
    {
        assert!(Instant::now() < deadline, "the abort replies were not sent");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));

    // /status (pi is asked) and a menu button (the store answers).
    let mut status = Vec::new();
    let mut taps = Vec::new();
    for _ in 0..20 {
        let since = last_seq();
        let t0 = fake_now();
        say("/status");
        // The hub asks pi for its stats; the shim answers as it reads.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let v = pi.recv_type("get_stats");
                pi.answer(&v);
                let _ = tx.send(());
            });
            let shown = wait_sent(since, "sendMessage", "Status of web");
            status.push(shown.saturating_sub(t0));
        });
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        let menu = fake
            .control()
            .transcript(None, tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .rfind(|m| {
                m.from_bot
                    && m.text
                        .as_deref()
                        .is_some_and(|t| t.starts_with("Status of web"))
            })
            .unwrap();
        let message_id = menu.message_id;
        let data = menu.reply_markup.unwrap()["inline_keyboard"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().cloned().unwrap_or_default())
            .find(|b| b["text"] == "« Menu")
            .unwrap()["callback_data"]
            .as_str()
            .unwrap()
            .to_owned();
        let since = last_seq();
        let t0 = fake_now();
        fake.control()
            .press(Press {
                message_id,
                data,
                user_id: None,
                token: None,
                chat_id: None,
            })
            .unwrap();
        let edited = wait_sent(since, "editMessageText", "pi-telegram for @");
        taps.push(edited.saturating_sub(t0));
        // Clear of the per-chat pace (about one message a second).
        std::thread::sleep(Duration::from_millis(1200));
    }
    status.sort_unstable();
    taps.sort_unstable();
    let _ = Command::new("kill").arg(hub.id().to_string()).status();
    let _ = hub.wait();

    println!("| measure | p50 | p90 | target |");
    println!("|---|---|---|---|");
    println!(
        "| `/abort` taken by Telegram -> pi reads `abort` (20) | {} ms | {} ms | p90 <= 1000 ms |",
        pct(&aborts, 0.5),
        pct(&aborts, 0.9)
    );
    println!(
        "| `/status` -> the menu with pi's stats sent (20) | {} ms | {} ms | - |",
        pct(&status, 0.5),
        pct(&status, 0.9)
    );
    println!(
        "| menu button -> the edited menu sent (20) | {} ms | {} ms | - |",
        pct(&taps, 0.5),
        pct(&taps, 0.9)
    );
}
