//! Preview and render benchmark (`cargo bench -p pi-telegram --bench previews`): the real hub
//! binary against tg-fake with Telegram-like rate limits, and a scripted pi on `hub.sock` that
//! streams an answer. Prints:
//!
//! - first visible preview after pi's first token: from the instance writing its first text
//!   delta to tg-fake receiving the draft that shows it (p50, p90; target p50 <= 100 ms);
//! - preview updates per second in one chat during a 30 s stream, and 429s (target >= 2/s, 0);
//! - render time of a 12,000-character answer, rich and HTML (target <= 1 ms).
//!
//! `PREVIEW_BENCH_QUICK=1` shortens the stream to 5 s.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::start_hub;
use serde_json::{Value, json};
use tg_fake::{FakeConfig, FakeServer, FloodConfig};
use tg_format::markdown::{self, RichBudget};

const TOKEN: &str = "1000:fake-token";

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Shim {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Shim {
    fn send(&mut self, v: &Value) {
        self.writer.write_all(format!("{v}\n").as_bytes()).unwrap();
    }

    fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let mut line = String::new();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "hub closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == ty {
                return v;
            }
        }
    }

    fn event(&mut self, turn: &Value, event: Value) {
        self.send(&json!({ "type": "event", "turn_id": turn, "event": event }));
    }

    fn delta(&mut self, turn: &Value, text: &str) {
        self.event(
            turn,
            json!({ "type": "message_update", "assistantMessageEvent": { "type": "text_delta", "delta": text } }),
        );
    }

    fn finish(&mut self, turn: &Value, text: &str) {
        self.event(turn, json!({ "type": "agent_settled", "aborted": false }));
        self.send(
            &json!({ "type": "turn_done", "turn_id": turn, "text": text, "aborted": false, "error": null }),
        );
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let quick = std::env::var("PREVIEW_BENCH_QUICK").is_ok();
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
        "pid": 424242, "cwd": "/bench/web", "mode": "tui", "reason": "startup", "idle": true,
        "pending": false, "received_turns": [], "completed_turns": [] }),
    );
    pi.recv_type("welcome");
    let say = |text: &str| {
        fake.control()
            .send_text(tg_fake::control::SendText {
                text: text.into(),
                ..Default::default()
            })
            .unwrap();
    };
    let drafts_of = |turn: i64, since_seq: u64| -> Vec<tg_fake::log::RequestEntry> {
        fake.control()
            .requests(since_seq, Some("sendRichMessageDraft"))
            .into_iter()
            .filter(|r| r.params["draft_id"] == json!(turn) && r.status == Some(200))
            .collect()
    };

    // First visible preview after the first token.
    let mut latencies = Vec::new();
    for i in 0..20 {
        say(&format!("question {i}"));
        let p = pi.recv_type("prompt");
        let turn = p["turn_id"].clone();
        let n: i64 = turn.as_str().unwrap()[1..].parse().unwrap();
        pi.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }));
        pi.event(&turn, json!({ "type": "agent_start" }));
        // pi thinks for a moment (the "Thinking…" placeholder goes out meanwhile).
        std::thread::sleep(Duration::from_millis(400));
        let since = fake.control().requests(0, None).last().map_or(0, |r| r.seq);
        let token = format!("Token{i}");
        let t0 = unix_ms();
        pi.delta(&turn, &token);
        let deadline = Instant::now() + Duration::from_secs(5);
        let shown = loop {
            if let Some(r) = drafts_of(n, since)
                .into_iter()
                .find(|r| r.params.to_string().contains(&token))
            {
                break r.at_ms;
            }
            assert!(Instant::now() < deadline, "no preview for turn {n}");
            std::thread::sleep(Duration::from_millis(1));
        };
        latencies.push(shown.saturating_sub(t0));
        pi.finish(&turn, &token);
        std::thread::sleep(Duration::from_millis(300));
    }
    latencies.sort_unstable();

    // A long stream: a word every 50 ms.
    let secs = if quick { 5 } else { 30 };
    say("stream for a while");
    let p = pi.recv_type("prompt");
    let turn = p["turn_id"].clone();
    let n: i64 = turn.as_str().unwrap()[1..].parse().unwrap();
    pi.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }));
    pi.event(&turn, json!({ "type": "agent_start" }));
    let since = fake.control().requests(0, None).last().map_or(0, |r| r.seq);
    let start = Instant::now();
    let mut words = 0;
    let mut text = String::new();
    while start.elapsed() < Duration::from_secs(secs) {
        let w = format!("word{words} ");
        text.push_str(&w);
        pi.delta(&turn, &w);
        words += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let drafts = drafts_of(n, since).len();
    pi.finish(&turn, &text);
    std::thread::sleep(Duration::from_millis(500));
    let flood_list: Vec<String> = fake
        .control()
        .requests(0, None)
        .iter()
        .filter(|r| r.status == Some(429))
        .map(|r| format!("{} at {}", r.method, r.at_ms))
        .collect();
    let floods = flood_list.len();
    if floods > 0 {
        eprintln!("429s: {flood_list:?}");
    }
    let _ = Command::new("kill").arg(hub.id().to_string()).status();
    let _ = hub.wait();

    // Render time of a 12,000-character answer.
    let long = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tg-model/tests/corpus/40-long-answer.md"),
    )
    .unwrap();
    let time = |f: &dyn Fn()| {
        let mut runs: Vec<u128> = (0..200)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_micros()
            })
            .collect();
        runs.sort_unstable();
        runs[runs.len() / 2]
    };
    let rich_us = time(&|| {
        std::hint::black_box(markdown::render_rich(&long, 4000, &RichBudget::default()));
    });
    let html_us = time(&|| {
        std::hint::black_box(markdown::render_html(&long, 4000));
    });

    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| first visible preview after pi's first token, p50 / p90 (20 turns) | {} ms / {} ms | p50 <= 100 ms |",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9)
    );
    println!(
        "| preview updates per second, one chat, {secs} s stream ({words} deltas) | {:.1} | >= 2 |",
        drafts as f64 / secs as f64
    );
    println!("| 429 answers from tg-fake (rate limits on) | {floods} | 0 |");
    println!(
        "| render {} characters: rich / HTML (median of 200) | {:.2} ms / {:.2} ms | <= 1 ms |",
        long.chars().count(),
        rich_us as f64 / 1000.0,
        html_us as f64 / 1000.0
    );
}
