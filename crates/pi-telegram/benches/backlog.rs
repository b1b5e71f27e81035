//! Backlog drain benchmark (`cargo bench -p pi-telegram --bench backlog`): 10,000 owner updates
//! wait at tg-fake when the hub starts; the hub must journal and handle them in order with one
//! coalesced notice. Prints updates/s, the hub's peak RSS and its idle CPU.
//!
//! Targets (2-core machine): >= 5,000 updates/s handled, idle CPU ~ 0, RSS < 20 MB.
//!
//! The bench watches the drain through the store: `BACKLOG_POLL_MS` (default 20) between
//! looks, one read connection kept. `BACKLOG_REOPEN=1` opens the store again at every look,
//! as this bench did before 2026-12-04 (with `BACKLOG_POLL_MS=2`): its own reading then
//! competes with the hub on two cores (see docs/benchmarks.md). The hub's CPU time during the
//! drain is printed beside the wall rate. `BACKLOG_REACTIONS=0` turns the bot's reactions on the
//! person's messages off (each waiting message gets one when on).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{clk_tck, cpu_ticks, env_or, proc_field};
use serde_json::json;
use tg_fake::{FakeConfig, FakeServer};

const UPDATES: usize = 10_000;
const TOKEN: &str = "1000:fake-token";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig::default()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = json!({ "profiles": { "default": { "botToken": TOKEN, "allowedUserId": tg_fake::DEFAULT_USER_ID,
        "apiBase": fake.base_url() } } });
    // BACKLOG_REACTIONS=0: without the bot's reaction on each waiting message (what it costs).
    let reactions = std::env::var("BACKLOG_REACTIONS").map_or(true, |v| v != "0");
    if !reactions {
        cfg["assistant"] = json!({ "reactions": false });
    }
    std::fs::write(dir.path().join("telegram.json"), cfg.to_string()).unwrap();
    for i in 0..UPDATES {
        fake.control()
            .send_text(tg_fake::control::SendText {
                text: format!("backlog message {i}"),
                ..Default::default()
            })
            .unwrap();
    }
    let started = Instant::now();
    let mut hub = Command::new(env!("CARGO_BIN_EXE_pi-telegram"))
        .arg("serve")
        .env("PI_CODING_AGENT_DIR", dir.path())
        .env("PI_TELEGRAM_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = hub.id();
    let db = dir.path().join("telegram/default/state.db");
    let poll = Duration::from_millis(env_or("BACKLOG_POLL_MS", 20));
    let reopen = std::env::var("BACKLOG_REOPEN").is_ok_and(|v| v == "1");
    let mut first_poll = None;
    let mut cpu_at_first_poll = 0;
    let mut journaled_at = None;
    let handled_at;
    let mut kept: Option<store::Store> = None;
    loop {
        if first_poll.is_none() && !fake.control().requests(0, Some("getUpdates")).is_empty() {
            first_poll = Some(started.elapsed());
            cpu_at_first_poll = cpu_ticks(pid).unwrap_or(0);
        }
        if kept.is_none() || reopen {
            kept = store::Store::open_for_reading(&db).ok().flatten();
        }
        if let Some(store) = &kept {
            let (pending, handled) = store.read(store::journal::counts).unwrap_or((0, 0));
            if journaled_at.is_none() && pending + handled >= UPDATES as i64 {
                journaled_at = Some(started.elapsed());
            }
            if handled >= UPDATES as i64 {
                handled_at = started.elapsed();
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the backlog did not drain"
        );
        std::thread::sleep(poll);
    }
    let drain_cpu_ms = cpu_ticks(pid)
        .unwrap_or(0)
        .saturating_sub(cpu_at_first_poll)
        * 1000
        / clk_tck().max(1);
    drop(kept);
    let first_poll = first_poll.unwrap_or_default();
    // Let the notice go out, then measure idle.
    std::thread::sleep(Duration::from_millis(500));
    let notices = fake
        .control()
        .transcript(None, tg_fake::control::ThreadFilter::All, None)
        .unwrap()
        .iter()
        .filter(|m| m.from_bot)
        .count();
    let rss_peak_kb = proc_field(pid, "VmHWM:").unwrap_or(0);
    let rss_now_kb = proc_field(pid, "VmRSS:").unwrap_or(0);
    let idle_window = Duration::from_secs(10);
    let t0 = cpu_ticks(pid).unwrap_or(0);
    std::thread::sleep(idle_window);
    let t1 = cpu_ticks(pid).unwrap_or(0);
    let idle_cpu = (t1 - t0) as f64 / clk_tck() as f64 / idle_window.as_secs_f64() * 100.0;
    let polls = fake.control().requests(0, Some("getUpdates")).len();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exit = hub.wait().unwrap();

    let drain = handled_at.saturating_sub(first_poll);
    let rate = UPDATES as f64 / drain.as_secs_f64();
    println!("backlog drain: {UPDATES} owner updates waiting at tg-fake when the hub starts");
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| hub start to first getUpdates | {:.0} ms | |",
        first_poll.as_secs_f64() * 1000.0
    );
    println!(
        "| all journaled | {:.0} ms after the first poll | |",
        journaled_at
            .unwrap_or_default()
            .saturating_sub(first_poll)
            .as_secs_f64()
            * 1000.0
    );
    println!(
        "| all handled | {:.0} ms after the first poll | |",
        drain.as_secs_f64() * 1000.0
    );
    println!("| handled updates/s | {rate:.0} | >= 5000 |");
    println!("| the hub's CPU time during the drain | {drain_cpu_ms} ms | |");
    println!(
        "| the bot's reactions on waiting messages | {} | |",
        if reactions { "on" } else { "off" }
    );
    println!(
        "| the bench's look at the store | every {} ms, {} | |",
        poll.as_millis(),
        if reopen {
            "opened each time"
        } else {
            "one connection"
        }
    );
    println!("| notices sent | {notices} | 1 |");
    println!("| getUpdates calls | {polls} | |");
    println!(
        "| peak RSS | {:.1} MB | < 20 MB |",
        rss_peak_kb as f64 / 1024.0
    );
    println!(
        "| RSS after drain | {:.1} MB | |",
        rss_now_kb as f64 / 1024.0
    );
    println!(
        "| idle CPU over {} s | {idle_cpu:.2} % | ~ 0 |",
        idle_window.as_secs()
    );
    println!("| clean exit on SIGTERM | {} | yes |", exit.success());
}
