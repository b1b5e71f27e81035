//! End-to-end round trip (`cargo bench -p pi-telegram --bench roundtrip`): the real hub binary,
//! tg-fake, and the real pi with the extension against the fake model (which answers at once).
//! The person's message goes in at the fake; the answer is taken when tg-fake handles the
//! `sendRichMessage` that carries it. Turns run one at a time.
//!
//! The breakdown lines up three clocks on one machine, all wall-clock microseconds: the bench's
//! own (the message is created at the fake), the hub's `hub::latency` marks (its JSON log, with
//! `PI_TELEGRAM_LOG=info,hub::latency=debug`), the fake model's request arrivals, and tg-fake's
//! request log. Per-chat pacing is raised in the bench's telegram.json so that the figures are
//! the hub's, not Telegram's one-message-a-second limit (the backlog bench covers pacing).
//!
//! Targets: hub time per direction <= 1 ms p50; round trip <= 15 ms p50. `ROUNDTRIP_TURNS`
//! (default 60) sets the number of turns measured; `ROUNDTRIP_STATE_ON=/dev/shm` puts the
//! hub's state on tmpfs (the same run without the disk's flushes). `ROUNDTRIP_GAP_MS` (default
//! 100) is the pause between turns: a person's messages meet an idle hub, and on a virtual
//! machine the first steps after a pause run several times slower than back to back.
//! `ROUNDTRIP_KEEP_LOG=<file>` keeps the hub's marks (and `<file>.windows`, each turn's start
//! and end) for a closer look (marks added for the purpose, with any step name, show there).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{env_or, pct};
use fake_llm::{FakeLlm, FakeLlmConfig};
use pi_testkit::{PiEnv, PiRpc};
use serde_json::{Value, json};
use tg_fake::control::SendText;
use tg_fake::{FakeConfig, FakeServer};

const TOKEN: &str = "1000:fake-token";

fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One `hub::latency` mark from the hub's JSON log.
struct Mark {
    step: String,
    us: u64,
}

fn marks(log: &str) -> Vec<Mark> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "hub::latency")
        .filter_map(|v| {
            Some(Mark {
                step: v["fields"]["step"].as_str()?.to_owned(),
                us: v["fields"]["us"].as_u64()?,
            })
        })
        .collect()
}

struct HubProcess(Child);

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let Some(pi_bin) = pi_testkit::require_pi() else {
        println!("roundtrip: skipped, no pi (run scripts/install-test-deps.sh)");
        return;
    };
    let turns: usize = env_or("ROUNDTRIP_TURNS", 60);
    let llm = FakeLlm::start_background(FakeLlmConfig::default()).unwrap();
    let pi = PiEnv::with_pi(pi_bin.clone(), llm.base_url()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig::default()))
        .unwrap();
    let agent = pi.agent_dir().to_owned();
    let cfg = json!({ "profiles": { "default": { "botToken": TOKEN,
        "allowedUserId": tg_fake::DEFAULT_USER_ID, "apiBase": fake.base_url(),
        "pacing": { "perChatPerSec": 1000.0, "perChatBurst": 1000,
                    "globalPerSec": 1000.0, "globalBurst": 1000 } } } });
    std::fs::write(agent.join("telegram.json"), cfg.to_string()).unwrap();
    // ROUNDTRIP_STATE_ON=/dev/shm: the hub's state on tmpfs, to tell the hub's own time from
    // the disk's (every durable commit waits for a flush).
    let _state_dir = std::env::var("ROUNDTRIP_STATE_ON").ok().map(|base| {
        let dir = tempfile::tempdir_in(base).unwrap();
        std::os::unix::fs::symlink(dir.path(), agent.join("telegram")).unwrap();
        dir
    });
    let hub_cmd = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pi-telegram"));
        c.args(args)
            .envs(pi.envs())
            .env("PI_TELEGRAM_PI_BIN", &pi_bin)
            .env("PI_TELEGRAM_LOG", "info,hub::latency=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let installed = hub_cmd(&["install-extension"]).status().unwrap();
    assert!(installed.success(), "install-extension failed");
    let hub = HubProcess(hub_cmd(&["serve"]).spawn().unwrap());
    let profile = agent.join("telegram/default");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !profile.join("hub.sock").exists() {
        assert!(Instant::now() < deadline, "the hub did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut pi_proc: PiRpc = pi.spawn_rpc(["--no-session"]).unwrap();
    pi_proc
        .send(&json!({ "id": "connect", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi_proc
        .read_until(
            Duration::from_secs(60),
            "the connect command",
            |v: &Value| v["type"] == "response" && v["id"] == "connect",
        )
        .unwrap();

    let say = |text: &str| {
        fake.control()
            .send_text(SendText {
                text: text.into(),
                ..Default::default()
            })
            .unwrap();
    };
    // The moment tg-fake handled the send carrying `needle`.
    let answered = |needle: &str| -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(r) = fake.control().requests(0, None).into_iter().find(|r| {
                r.status == Some(200)
                    && matches!(r.method.as_str(), "sendRichMessage" | "sendMessage")
                    && r.params.to_string().contains(needle)
            }) {
                return r.at_us;
            }
            assert!(Instant::now() < deadline, "no answer with {needle:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // Warm-up: pi's first turn loads what it loads lazily; the hub's caches fill.
    for i in 0..5 {
        say(&format!("warm {i}"));
        answered(&format!("echo: warm {i}"));
    }
    std::thread::sleep(Duration::from_millis(300));

    let gap = Duration::from_millis(env_or("ROUNDTRIP_GAP_MS", 100));
    // In one run, blocks of turns with the default settings (a "Thinking…" draft each turn)
    // and with `draftPreviews` off, alternating, so that the machine's drift weighs on both:
    // an answer must never wait on a draft's call.
    let block = env_or("ROUNDTRIP_BLOCK", 10).max(1);
    let config = agent.join("telegram.json");
    let set_previews = |on: bool| {
        let mut cfg: Value =
            serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
        cfg["assistant"] = json!({ "draftPreviews": on });
        std::fs::write(&config, cfg.to_string()).unwrap();
        // The hub re-reads telegram.json when it changes; a turn or two of margin.
        std::thread::sleep(Duration::from_millis(1500));
    };
    let mut windows: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
    let mut i = 0;
    while i < turns * 2 {
        let previews = (i / block).is_multiple_of(2);
        if i.is_multiple_of(block) {
            set_previews(previews);
        }
        let text = format!("ping {i}");
        let t0 = wall_us();
        say(&text);
        let t1 = answered(&format!("echo: {text}"));
        windows[usize::from(!previews)].push((t0, t1));
        // Previews and typing of this turn settle before the next one starts; a person's next
        // message comes later still, so each turn meets a hub that was idle.
        std::thread::sleep(gap);
        i += 1;
    }
    let drafts: usize = ["sendMessageDraft", "sendRichMessageDraft"]
        .iter()
        .map(|m| fake.control().requests(0, Some(m)).len())
        .sum();
    drop(hub);
    let log = std::fs::read_to_string(profile.join("logs/hub.jsonl")).unwrap_or_default();
    if let Ok(keep) = std::env::var("ROUNDTRIP_KEEP_LOG") {
        let _ = std::fs::write(&keep, &log);
        let lines: Vec<String> = windows
            .iter()
            .flatten()
            .map(|(a, b)| format!("{a} {b}"))
            .collect();
        let _ = std::fs::write(format!("{keep}.windows"), lines.join("\n"));
    }
    let marks = marks(&log);
    assert!(
        !marks.is_empty(),
        "the hub wrote no hub::latency marks (PI_TELEGRAM_LOG)"
    );
    let arrivals = llm.arrivals_us();

    let on = steps(&windows[0], &marks, &arrivals);
    let off = steps(&windows[1], &marks, &arrivals);
    let ms = |us: u64| format!("{:.2} ms", us as f64 / 1000.0);
    println!(
        "round trip (pi {}, the extension over hub.sock), state on {}: {} + {} turns with every mark, previews on / off in blocks of {block}; {drafts} draft calls",
        pi_version(&pi_bin),
        std::env::var("ROUNDTRIP_STATE_ON").unwrap_or_else(|_| "the temp dir's disk".into()),
        on.0,
        off.0,
    );
    println!();
    println!("| step | previews on p50 | p90 | previews off p50 | p90 |");
    println!("|---|---|---|---|---|");
    for (i, name) in STEP_NAMES.iter().enumerate() {
        println!(
            "| {name} | {} | {} | {} | {} |",
            ms(pct(&on.1[i], 0.5)),
            ms(pct(&on.1[i], 0.9)),
            ms(pct(&off.1[i], 0.5)),
            ms(pct(&off.1[i], 0.9))
        );
    }
    let _ = pi_proc.close(Duration::from_secs(5));
    // The disk's own share, measured now: this virtual disk's flush latency drifts by half
    // over hours, and every answer's way out contains one flush.
    let flush = bare_flush_us(&agent.join("telegram"), gap.min(Duration::from_millis(20)));
    println!(
        "| for comparison: a bare flush on the same file system just after (16 KiB over written blocks, fdatasync) | {} | {} |",
        ms(pct(&flush, 0.5)),
        ms(pct(&flush, 0.9))
    );
}

/// The steps of the way, from one mark (or `t0`, `t1`, `model`) to the next.
const ROWS: [(&str, &str, &str); 11] = [
    ("message at Telegram -> getUpdates returned", "t0", "polled"),
    (
        "journal commit (update + offset + its handling)",
        "polled",
        "journaled",
    ),
    (
        "handling marked (the worker's commit when the poller leaves it one)",
        "journaled",
        "handled",
    ),
    ("conductor: prompt to the link", "handled", "dispatched"),
    (
        "socket, extension, pi -> model request",
        "dispatched",
        "model",
    ),
    ("model, pi, extension -> turn_done read", "model", "settled"),
    ("conductor: answer committed", "settled", "queued"),
    ("sender picks the row", "queued", "picked"),
    ("sender: row marked sending", "picked", "calling"),
    ("Bot API call until tg-fake handles it", "calling", "t1"),
    ("round trip", "t0", "t1"),
];

/// [`ROWS`], then the hub's own time in and out.
const STEP_NAMES: [&str; 13] = [
    ROWS[0].0,
    ROWS[1].0,
    ROWS[2].0,
    ROWS[3].0,
    ROWS[4].0,
    ROWS[5].0,
    ROWS[6].0,
    ROWS[7].0,
    ROWS[8].0,
    ROWS[9].0,
    ROWS[10].0,
    "hub time in (getUpdates returned -> prompt to the link)",
    "hub time out (turn_done read -> Bot API call starts)",
];

/// Per step, the sorted durations (us) over the turns of `windows` that have every mark; and
/// how many those were.
fn steps(windows: &[(u64, u64)], marks: &[Mark], arrivals: &[u64]) -> (usize, Vec<Vec<u64>>) {
    // Per turn: the first mark of each step inside its window, in path order.
    let first = |step: &str, from: u64, to: u64| {
        marks
            .iter()
            .find(|m| m.step == step && m.us >= from && m.us <= to)
            .map(|m| m.us)
    };
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); STEP_NAMES.len()];
    let mut complete = 0;
    for &(t0, t1) in windows {
        let model = arrivals.iter().copied().find(|&a| a >= t0 && a <= t1);
        let at = |name: &str| -> Option<u64> {
            match name {
                "t0" => Some(t0),
                "t1" => Some(t1),
                "model" => model,
                step => first(step, t0, t1),
            }
        };
        let spans: Option<Vec<u64>> = ROWS
            .iter()
            .map(|(_, a, b)| Some(at(b)?.saturating_sub(at(a)?)))
            .collect();
        let (Some(spans), Some(polled), Some(dispatched), Some(settled), Some(calling)) = (
            spans,
            at("polled"),
            at("dispatched"),
            at("settled"),
            at("calling"),
        ) else {
            continue;
        };
        complete += 1;
        for (i, s) in spans.into_iter().enumerate() {
            samples[i].push(s);
        }
        samples[ROWS.len()].push(dispatched - polled);
        samples[ROWS.len() + 1].push(calling - settled);
    }
    for s in &mut samples {
        s.sort_unstable();
    }
    (complete, samples)
}

/// `fdatasync` of 16 KiB written over blocks already written (as the hub's preallocated log),
/// 60 times with `gap` between them, in microseconds, sorted.
fn bare_flush_us(dir: &std::path::Path, gap: Duration) -> Vec<u64> {
    use std::io::{Seek, SeekFrom, Write};
    const CHUNK: usize = 16 * 1024;
    const ROUNDS: usize = 60;
    let path = dir.join("bench-flush.tmp");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&vec![0u8; CHUNK * ROUNDS]).unwrap();
    f.sync_all().unwrap();
    let data = vec![7u8; CHUNK];
    let mut out = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        f.seek(SeekFrom::Start((i * CHUNK) as u64)).unwrap();
        f.write_all(&data).unwrap();
        let t = Instant::now();
        f.sync_data().unwrap();
        out.push(t.elapsed().as_micros() as u64);
        std::thread::sleep(gap);
    }
    let _ = std::fs::remove_file(&path);
    out.sort_unstable();
    out
}

fn pi_version(pi: &std::path::Path) -> String {
    Command::new(pi)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "?".into(), |s| s.trim().to_owned())
}
