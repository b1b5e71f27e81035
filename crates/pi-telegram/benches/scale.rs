//! Many pi on one hub (`cargo bench -p pi-telegram --bench scale`): the real hub binary against
//! tg-fake with 1, 10, 50, 100 and 200 scripted pi on `hub.sock` (answering at once), in
//! Threaded Mode and in classic mode. For each: the time to attach them all and to have every
//! topic, idle RSS and CPU, then one message into each topic at once (classic: as many
//! messages to the selected pi) and 50 one at a time: hub CPU, store transactions (the hub's
//! own count, `stats` on `hub.sock`) and Bot API calls per answer, and the latency. Every
//! answer is checked to arrive once, in its place; 429s are counted.
//!
//! `SCALE_SIZES` (default `1,10,50,100,200`), `SCALE_MODES` (`threaded,classic`),
//! `SCALE_IDLE_SECS` (default 5), `SCALE_LIMITS=1`: tg-fake's flood limits on and the hub's
//! own pacing (Telegram's figures: 200 topics take minutes then), otherwise both raised.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Shim, clk_tck, cpu_ticks, env_or, hub_stats, pct, proc_field, start_hub};
use serde_json::json;
use tg_fake::control::SendText;
use tg_fake::world::TopicState;
use tg_fake::{FakeConfig, FakeServer, FloodConfig};

const TOKEN: &str = "1000:fake-token";
const ONE_AT_A_TIME: usize = 50;

struct Row {
    mode: &'static str,
    n: usize,
    attach_ms: u128,
    topics_ms: Option<u128>,
    rss_mb: f64,
    idle_cpu: f64,
    burst_ms: u128,
    burst_cpu_ms: f64,
    burst_tx: f64,
    burst_calls: f64,
    single_p50_ms: u64,
    single_max_ms: u64,
    single_cpu_ms: f64,
    single_tx: f64,
    single_calls: f64,
    too_many: usize,
}

fn main() {
    let sizes: Vec<usize> = std::env::var("SCALE_SIZES")
        .unwrap_or_else(|_| "1,10,50,100,200".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let modes = std::env::var("SCALE_MODES").unwrap_or_else(|_| "threaded,classic".into());
    let limits = env_or("SCALE_LIMITS", 0u8) == 1;
    let idle = Duration::from_secs(env_or("SCALE_IDLE_SECS", 5u64));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for mode in ["threaded", "classic"] {
        if !modes.contains(mode) {
            continue;
        }
        for &n in &sizes {
            let row = run(&rt, mode, n, limits, idle);
            eprintln!("{mode} {n}: done");
            rows.push(row);
        }
    }
    println!(
        "\nscripted pi answering at once; {}",
        if limits {
            "tg-fake's flood limits on, the hub's own pacing"
        } else {
            "pacing raised on both sides"
        }
    );
    println!(
        "| mode | pi | attach | every topic | idle RSS | idle CPU | N at once: all answered | CPU/answer | tx/answer | calls/answer | one at a time: p50 | max | CPU/answer | tx/answer | calls/answer | 429s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} ms | {} | {:.1} MB | {:.2} % | {} ms | {:.2} ms | {:.1} | {:.1} | {} ms | {} ms | {:.2} ms | {:.1} | {:.1} | {} |",
            r.mode,
            r.n,
            r.attach_ms,
            r.topics_ms.map_or("-".into(), |t| format!("{t} ms")),
            r.rss_mb,
            r.idle_cpu,
            r.burst_ms,
            r.burst_cpu_ms,
            r.burst_tx,
            r.burst_calls,
            r.single_p50_ms,
            r.single_max_ms,
            r.single_cpu_ms,
            r.single_tx,
            r.single_calls,
            r.too_many,
        );
    }
}

fn run(
    rt: &tokio::runtime::Runtime,
    mode: &'static str,
    n: usize,
    limits: bool,
    idle: Duration,
) -> Row {
    let threaded = mode == "threaded";
    let fake = rt
        .block_on(FakeServer::start(FakeConfig {
            has_topics_enabled: threaded,
            flood: FloodConfig {
                enabled: limits,
                ..FloodConfig::default()
            },
            ..FakeConfig::default()
        }))
        .unwrap();
    let owner = tg_fake::DEFAULT_USER_ID;
    let dir = tempfile::tempdir().unwrap();
    let mut profile =
        json!({ "botToken": TOKEN, "allowedUserId": owner, "apiBase": fake.base_url() });
    if !limits {
        profile["pacing"] = json!({ "perChatPerSec": 100000.0, "perChatBurst": 100000,
            "globalPerSec": 100000.0, "globalBurst": 100000 });
    }
    let (mut hub, prof) = start_hub(dir.path(), profile);
    let pid = hub.id();
    let ticks = clk_tck() as f64;
    let cpu_ms = |t0: u64| (cpu_ticks(pid).unwrap_or(0) - t0) as f64 / ticks * 1000.0;

    let t = Instant::now();
    let mut servers = Vec::new();
    for k in 0..n {
        let shim = Shim::connect(&prof, 800_000 + k as u32, &format!("/bench/p{k}"));
        servers.push(std::thread::spawn(move || shim.serve()));
    }
    let attach_ms = t.elapsed().as_millis();
    let live_topics = || -> HashMap<String, i64> {
        fake.control()
            .topics(Some(owner), None)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.state != TopicState::Deleted)
            .map(|t| (t.name, t.thread_id))
            .collect()
    };
    let topics_ms = threaded.then(|| {
        let deadline = Instant::now() + Duration::from_secs(if limits { 900 } else { 120 });
        while live_topics().len() < n {
            assert!(
                Instant::now() < deadline,
                "{} of {n} topics",
                live_topics().len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t.elapsed().as_millis()
    });
    let topic_of: HashMap<usize, i64> = live_topics()
        .into_iter()
        .filter_map(|(name, id)| {
            let k = name.rsplit(" · p").next()?.parse().ok()?;
            Some((k, id))
        })
        .collect();
    if threaded {
        assert_eq!(topic_of.len(), n, "one topic per pi");
    }
    let quiet = || {
        // Until the greetings and commands are out: no request for a second.
        let mut last = 0;
        loop {
            std::thread::sleep(Duration::from_millis(1000));
            let seq = fake.control().requests(0, None).last().map_or(0, |r| r.seq);
            if seq == last {
                return seq;
            }
            last = seq;
        }
    };
    quiet();

    let t0 = cpu_ticks(pid).unwrap_or(0);
    std::thread::sleep(idle);
    let idle_cpu = cpu_ms(t0) / idle.as_millis() as f64 * 100.0;
    let rss_mb = proc_field(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;

    let say = |k: usize, text: &str| {
        fake.control()
            .send_text(SendText {
                text: text.into(),
                thread_id: if threaded {
                    topic_of.get(&k).copied()
                } else {
                    None
                },
                ..Default::default()
            })
            .unwrap();
    };
    // The answers carrying `needles` once each, in their topic; returns when tg-fake had each.
    let wait_answers = |needles: &[(usize, String)], since: u64| -> Vec<u64> {
        let deadline = Instant::now() + Duration::from_secs(if limits { 900 } else { 30 });
        loop {
            let sent: Vec<_> = fake
                .control()
                .requests(since, None)
                .into_iter()
                .filter(|r| {
                    r.status == Some(200)
                        && matches!(r.method.as_str(), "sendRichMessage" | "sendMessage")
                })
                .collect();
            let found: Vec<Option<u64>> = needles
                .iter()
                .map(|(k, needle)| {
                    let hits: Vec<_> = sent
                        .iter()
                        .filter(|r| {
                            let words = r.params["rich_message"]["markdown"]
                                .as_str()
                                .or(r.params["text"].as_str());
                            // Classic mode heads an answer with its pi's label.
                            words.is_some_and(|w| {
                                w == needle || w.ends_with(&format!("\n\n{needle}"))
                            })
                        })
                        .collect();
                    assert!(hits.len() <= 1, "{needle} sent {} times", hits.len());
                    let r = hits.first()?;
                    if threaded {
                        assert_eq!(
                            r.params["message_thread_id"].as_i64(),
                            topic_of.get(k).copied(),
                            "{needle} in its own topic"
                        );
                    }
                    Some(r.at_us)
                })
                .collect();
            if found.iter().all(Option::is_some) {
                return found.into_iter().flatten().collect();
            }
            if Instant::now() > deadline {
                let missing: Vec<_> = needles
                    .iter()
                    .zip(&found)
                    .filter(|(_, f)| f.is_none())
                    .map(|(n, _)| n.1.clone())
                    .collect();
                let texts: Vec<_> = sent.iter().map(|r| r.params.clone()).collect();
                panic!("answers missing: {missing:?}; sent {texts:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let seq_now = || fake.control().requests(0, None).last().map_or(0, |r| r.seq);
    let tx_now = || hub_stats(&prof)["store_transactions"].as_u64().unwrap();

    // One message into each topic at once (classic: n messages to the selected pi).
    let (s0, tx0, c0) = (seq_now(), tx_now(), cpu_ticks(pid).unwrap_or(0));
    let t = Instant::now();
    let needles: Vec<(usize, String)> = (0..n).map(|k| (k, format!("echo: burst {k}"))).collect();
    for k in 0..n {
        say(k, &format!("burst {k}"));
    }
    wait_answers(&needles, s0);
    let burst_ms = t.elapsed().as_millis();
    let s1 = quiet();
    // The stats request itself is one connection, no transaction.
    let burst_tx = (tx_now() - tx0) as f64 / n as f64;
    let burst_cpu_ms = cpu_ms(c0) / n as f64;
    let burst_calls = (s1 - s0) as f64 / n as f64;

    // One at a time, spread over the pi.
    let (s0, tx0, c0) = (seq_now(), tx_now(), cpu_ticks(pid).unwrap_or(0));
    let mut lat = Vec::new();
    for i in 0..ONE_AT_A_TIME {
        let k = i % n;
        let s = seq_now();
        let t = Instant::now();
        say(k, &format!("single {i}"));
        wait_answers(&[(k, format!("echo: single {i}"))], s);
        lat.push(t.elapsed().as_millis() as u64);
    }
    let single_cpu_ms = cpu_ms(c0) / ONE_AT_A_TIME as f64;
    let s1 = quiet();
    let single_tx = (tx_now() - tx0) as f64 / ONE_AT_A_TIME as f64;
    let single_calls = (s1 - s0) as f64 / ONE_AT_A_TIME as f64;
    lat.sort_unstable();
    let log = fake.control().requests(0, None);
    let too_many = log.iter().filter(|r| r.status == Some(429)).count();
    // Each 429 with the calls to its chat just before it: which caller went too fast.
    for (i, r) in log
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == Some(429))
    {
        let chat = r.params.get("chat_id").cloned();
        eprintln!(
            "429 {mode} {n}: {} chat {chat:?} thread {:?} at {} us: {:?}",
            r.method,
            r.params.get("message_thread_id"),
            r.at_us,
            r.error
        );
        let before: Vec<_> = log[..i]
            .iter()
            .rev()
            .filter(|b| b.params.get("chat_id").cloned() == chat)
            .take(6)
            .collect();
        for b in before.iter().rev() {
            eprintln!(
                "    before: {} at {} us ({} us earlier) status {:?}",
                b.method,
                b.at_us,
                r.at_us.saturating_sub(b.at_us),
                b.status
            );
        }
    }

    let _ = hub.kill();
    let _ = hub.wait();
    for s in servers {
        let _ = s.join();
    }
    Row {
        mode,
        n,
        attach_ms,
        topics_ms,
        rss_mb,
        idle_cpu,
        burst_ms,
        burst_cpu_ms,
        burst_tx,
        burst_calls,
        single_p50_ms: pct(&lat, 0.5),
        single_max_ms: lat.last().copied().unwrap_or(0),
        single_cpu_ms,
        single_tx,
        single_calls,
        too_many,
    }
}
