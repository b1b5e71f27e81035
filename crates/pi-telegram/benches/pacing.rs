//! Answers to a backlog, paced (`cargo bench -p pi-telegram --bench pacing`): 10,000 messages
//! reach the real hub binary at once, a scripted pi on `hub.sock` answers each at once, and the
//! 10,000 answers must leave at the configured pace with not one `429` from tg-fake, whose
//! flood model enforces the same limits.
//!
//! Telegram's limits (about one message a second per chat, 30 a second overall) would make
//! 10,000 answers in one chat take three hours, so both sides scale them by `PACING_SCALE`
//! (default 50): the fake allows `1 × scale` per chat (burst 3) and `30 × scale` overall
//! (burst 30); the hub's `pacing` is its default scaled the same way (`1 × scale` per chat,
//! burst 3; `25 × scale` overall, burst 25). What is measured is whether the hub's pacing keeps
//! under a limit it is configured for, at any scale. `PACING_UPDATES` changes the count.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Shim, env_or, start_hub};
use serde_json::json;
use tg_fake::{FakeConfig, FakeServer, FloodConfig};

const TOKEN: &str = "1000:fake-token";

/// The most items of `sorted` (microseconds) inside any window of `width` microseconds.
fn densest(sorted: &[u64], width: u64) -> usize {
    let mut best = 0;
    let mut start = 0;
    for end in 0..sorted.len() {
        while sorted[end] - sorted[start] >= width {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

/// What the bench counts of tg-fake's request log.
#[derive(Default)]
struct Tally {
    /// Every call.
    calls: usize,
    /// `429` answers.
    refused: usize,
    /// When each message that reached the chat was taken (tg-fake's microseconds).
    sends_us: Vec<u64>,
    /// Calls by method and HTTP status.
    by_method: BTreeMap<(String, Option<u16>), usize>,
    /// The last few counted calls, printed when one is refused.
    recent: VecDeque<(u64, String, Option<u16>)>,
}

impl Tally {
    fn add(&mut self, r: &tg_fake::log::RequestEntry) {
        self.calls += 1;
        *self
            .by_method
            .entry((r.method.clone(), r.status))
            .or_default() += 1;
        if tg_fake::counts_for_flood(&r.method) || tg_fake::is_draft(&r.method) {
            self.recent.push_back((r.at_us, r.method.clone(), r.status));
            if self.recent.len() > 8 {
                self.recent.pop_front();
            }
        }
        if r.status == Some(429) {
            self.refused += 1;
            let base = self.recent.front().map_or(0, |x| x.0);
            eprintln!("429 on {} ({:?}); the calls before it:", r.method, r.error);
            for (us, m, st) in &self.recent {
                eprintln!("  +{:.2} ms {m} {st:?}", (us - base) as f64 / 1000.0);
            }
        }
        if tg_fake::counts_for_flood(&r.method) && r.status == Some(200) {
            self.sends_us.push(r.at_us);
        }
    }
}

fn main() {
    let scale: f64 = env_or("PACING_SCALE", 50.0);
    let updates: i64 = env_or("PACING_UPDATES", 10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig {
            flood: FloodConfig {
                enabled: true,
                per_chat_per_sec: scale,
                per_chat_burst: 3,
                global_per_sec: 30.0 * scale,
                global_burst: 30,
                ..FloodConfig::default()
            },
            ..FakeConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut hub, profile) = start_hub(
        dir.path(),
        json!({ "botToken": TOKEN, "allowedUserId": tg_fake::DEFAULT_USER_ID,
            "apiBase": fake.base_url(),
            "pacing": { "perChatPerSec": scale, "perChatBurst": 3,
                        "globalPerSec": 25.0 * scale, "globalBurst": 25 } }),
    );
    let pid = hub.id();
    let shim = Shim::connect(&profile, 700_001, "/bench/p0");
    let pi = std::thread::spawn(move || shim.serve());

    let started = Instant::now();
    for i in 0..updates {
        fake.control()
            .send_text(tg_fake::control::SendText {
                text: format!("backlog {i}"),
                ..Default::default()
            })
            .unwrap();
    }
    let written = started.elapsed();

    // The request log is bounded: read it as it grows.
    let db = profile.join("state.db");
    let mut since = 0;
    let mut tally = Tally::default();
    let mut handled_at = None;
    let timeout = Duration::from_secs_f64(updates as f64 / scale * 2.0 + 120.0);
    loop {
        for r in fake.control().requests(since, None) {
            since = r.seq;
            tally.add(&r);
        }
        let store = store::Store::open_for_reading(&db).ok().flatten();
        let (handled, answered) = store
            .and_then(|s| {
                s.read(|c| {
                    let handled = store::journal::counts(c)?.1;
                    let answered: i64 = c.query_row(
                        "SELECT COUNT(*) FROM outbox WHERE state = 'sent' AND purpose LIKE 'answer:%'",
                        [],
                        |r| r.get(0),
                    )?;
                    Ok::<_, store::StoreError>((handled, answered))
                })
                .ok()
            })
            .unwrap_or((0, 0));
        if handled_at.is_none() && handled >= updates {
            handled_at = Some(started.elapsed());
        }
        if answered >= updates {
            break;
        }
        assert!(
            started.elapsed() < timeout,
            "only {answered} of {updates} answers sent in {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let sending_took = started.elapsed();
    for r in fake.control().requests(since, None) {
        tally.add(&r);
    }
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exit = hub.wait().unwrap();
    let answered_by_pi = pi.join().unwrap_or(0);

    let Tally {
        calls,
        refused,
        mut sends_us,
        by_method,
        ..
    } = tally;
    sends_us.sort_unstable();
    let span_s = match (sends_us.first(), sends_us.last()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e6,
        _ => f64::NAN,
    };
    let rate = sends_us.len().saturating_sub(1) as f64 / span_s;
    // Telegram counts a burst and then a rate: in any one second at most burst + rate.
    let allowed_per_sec = 3 + scale as usize;
    let densest_sec = densest(&sends_us, 1_000_000);
    let mut gaps: Vec<u64> = sends_us.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let gap_p50 = gaps.get(gaps.len() / 2).copied().unwrap_or(0);

    println!(
        "pacing: {updates} messages at once, a scripted pi answering each at once; limits scaled by {scale}"
    );
    println!();
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| messages written to tg-fake | {:.1} s | |",
        written.as_secs_f64()
    );
    println!(
        "| all handled by the hub | {:.1} s after the first | |",
        handled_at.unwrap_or_default().as_secs_f64()
    );
    println!("| prompts answered by pi | {answered_by_pi} | {updates} |");
    println!(
        "| messages delivered to the chat | {} in {:.1} s | {updates} answers |",
        sends_us.len(),
        sending_took.as_secs_f64()
    );
    println!(
        "| pace of the answers | {rate:.1}/s (gap p50 {:.2} ms) | ≤ {scale}/s, the configured {:.1}/s |",
        gap_p50 as f64 / 1000.0,
        scale * (1.0 - telegram::RATE_SLACK)
    );
    println!("| most answers in any one second | {densest_sec} | ≤ {allowed_per_sec} |");
    println!("| 429 answers from tg-fake | {refused} | 0 |");
    println!("| Bot API calls in all | {calls} | |");
    println!("| clean exit on SIGTERM | {} | yes |", exit.success());
    println!();
    println!("Calls by method and HTTP status:");
    for ((method, status), n) in &by_method {
        println!(
            "- {method} {}: {n}",
            status.map_or("dropped".into(), |s| s.to_string())
        );
    }
}
