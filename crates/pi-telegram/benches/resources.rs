//! Resources over time (`cargo bench -p pi-telegram --bench resources`): the real hub binary
//! against tg-fake with scripted pi on `hub.sock` that answer at once. Prints the hub's RSS idle
//! with one instance, after 10,000 turns, and with 26 live instances; its CPU and the Bot API
//! requests it makes while idle (1 and 26 instances); and the turn rate on the way.
//!
//! The turns go in windows of 100 (a person's 10,000 turns come over days; the backlog bench
//! measures 10,000 updates waiting at once). Per-chat pacing is raised in the bench's telegram.json so that 10,000 answers take seconds,
//! not Telegram's one message a second in one chat. `RESOURCES_TURNS` (default 10,000) and
//! `RESOURCES_IDLE_SECS` (default 60: the idle windows) change the run.
//!
//! Targets: RSS < 20 MB and flat; idle CPU ~ 0 %; <= 2 Bot API requests a minute while idle.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Shim, clk_tck, cpu_ticks, env_or, proc_field, rss_by_mapping, start_hub};
use serde_json::json;
use tg_fake::{FakeConfig, FakeServer};

const TOKEN: &str = "1000:fake-token";

fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

fn main() {
    let turns = env_or("RESOURCES_TURNS", 10_000i64);
    let idle = Duration::from_secs(env_or("RESOURCES_IDLE_SECS", 60u64));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig::default()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut hub, profile) = start_hub(
        dir.path(),
        json!({ "botToken": TOKEN, "allowedUserId": tg_fake::DEFAULT_USER_ID,
            "apiBase": fake.base_url(),
            "pacing": { "perChatPerSec": 100000.0, "perChatBurst": 100000,
                        "globalPerSec": 100000.0, "globalBurst": 100000 } }),
    );
    let pid = hub.id();
    let first = Shim::connect(&profile, 700_001, "/bench/p0");
    let first = std::thread::spawn(move || first.serve());

    // Idle with one instance: RSS, CPU and Bot API calls over the window.
    let idle_window = |label: &str| -> (u64, f64, f64) {
        std::thread::sleep(Duration::from_secs(3));
        let since = fake.control().requests(0, None).last().map_or(0, |r| r.seq);
        let t0 = cpu_ticks(pid).unwrap_or(0);
        std::thread::sleep(idle);
        let t1 = cpu_ticks(pid).unwrap_or(0);
        let calls = fake.control().requests(since, None);
        let rss = proc_field(pid, "VmRSS:").unwrap_or(0);
        let cpu = (t1 - t0) as f64 / clk_tck() as f64 / idle.as_secs_f64() * 100.0;
        let per_min = calls.len() as f64 * 60.0 / idle.as_secs_f64();
        let methods: Vec<&str> = calls.iter().map(|r| r.method.as_str()).collect();
        eprintln!("{label}: idle calls {methods:?}");
        (rss, cpu, per_min)
    };
    let (rss_idle_1, cpu_1, calls_1) = idle_window("1 instance");

    // 10,000 turns through the one instance, a window of WINDOW at a time: a person's turns
    // arrive over days, not all at once (the backlog bench measures 10,000 waiting updates).
    const WINDOW: i64 = 100;
    let db = profile.join("state.db");
    let answers = || -> i64 {
        store::Store::open_for_reading(&db)
            .ok()
            .flatten()
            .and_then(|s| {
                s.read(|c| {
                    Ok(c.query_row(
                        "SELECT COUNT(*) FROM outbox WHERE state = 'sent' AND purpose LIKE 'answer:%'",
                        [],
                        |r| r.get::<_, i64>(0),
                    )?)
                })
                .map_err(|e: store::StoreError| e)
                .ok()
            })
            .unwrap_or(0)
    };
    let started = Instant::now();
    let mut rss_max_during = 0;
    let mut sent = 0;
    // RSS every 2,000 turns: a leak grows with them, a cache levels off.
    let mut curve = Vec::new();
    while sent < turns {
        let upto = (sent + WINDOW).min(turns);
        for i in sent..upto {
            fake.control()
                .send_text(tg_fake::control::SendText {
                    text: format!("turn {i}"),
                    ..Default::default()
                })
                .unwrap();
        }
        sent = upto;
        if sent % 2000 == 0 {
            curve.push((sent, proc_field(pid, "VmRSS:").unwrap_or(0)));
        }
        loop {
            rss_max_during = rss_max_during.max(proc_field(pid, "VmRSS:").unwrap_or(0));
            let done = answers();
            if done >= sent {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(900),
                "only {done} of {sent} answers were sent"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let turns_took = started.elapsed();
    let (rss_after, cpu_after, calls_after) = idle_window("after the turns");

    // 25 more instances.
    let mut others = Vec::new();
    for i in 1..26u32 {
        let shim = Shim::connect(&profile, 700_001 + i, &format!("/bench/p{i}"));
        others.push(std::thread::spawn(move || shim.serve()));
    }
    let (rss_26, cpu_26, calls_26) = idle_window("26 instances");
    let hwm = proc_field(pid, "VmHWM:").unwrap_or(0);
    // What the RSS is made of: heap and stacks, or the binary's own pages.
    let anon = proc_field(pid, "RssAnon:").unwrap_or(0);
    let file = proc_field(pid, "RssFile:").unwrap_or(0);
    let threads = proc_field(pid, "Threads:").unwrap_or(0);
    let mappings: Vec<String> = rss_by_mapping(pid)
        .into_iter()
        .take(4)
        .map(|(name, kb)| format!("{name} {}", mb(kb)))
        .collect();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = hub.wait();
    let answered = first.join().unwrap_or(0);
    for o in others {
        let _ = o.join();
    }

    println!(
        "resources: the hub binary, scripted instances, {turns} turns, idle windows of {} s",
        idle.as_secs()
    );
    println!();
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!("| RSS idle, 1 instance | {} | < 20 MB |", mb(rss_idle_1));
    println!(
        "| {turns} turns (answered by the instance: {answered}) | {:.1} s, {:.0} turns/s | |",
        turns_took.as_secs_f64(),
        turns as f64 / turns_took.as_secs_f64()
    );
    println!(
        "| RSS highest while they ran | {} | < 20 MB |",
        mb(rss_max_during)
    );
    let curve: Vec<String> = curve
        .iter()
        .map(|(n, kb)| format!("{n}: {}", mb(*kb)))
        .collect();
    println!(
        "| RSS along the way (turns: RSS) | {} | flat |",
        curve.join(", ")
    );
    println!(
        "| RSS idle after them | {} | < 20 MB, flat |",
        mb(rss_after)
    );
    println!("| RSS idle, 26 instances | {} | < 20 MB |", mb(rss_26));
    println!("| peak RSS (VmHWM) over the run | {} | |", mb(hwm));
    println!(
        "| RSS, 26 instances: heap and stacks / the binary's pages / threads | {} / {} / {threads} | |",
        mb(anon),
        mb(file)
    );
    println!(
        "| RSS, 26 instances, by mapping (largest four) | {} | |",
        mappings.join(", ")
    );
    println!("| idle CPU, 1 instance | {cpu_1:.2} % | ≈ 0 % |");
    println!("| idle CPU after the turns | {cpu_after:.2} % | ≈ 0 % |");
    println!("| idle CPU, 26 instances | {cpu_26:.2} % | ≈ 0 % |");
    println!("| Bot API requests/min idle, 1 instance | {calls_1:.1} | ≤ 2 |");
    println!("| Bot API requests/min idle after the turns | {calls_after:.1} | ≤ 2 |");
    println!("| Bot API requests/min idle, 26 instances | {calls_26:.1} | ≤ 2 |");
}
