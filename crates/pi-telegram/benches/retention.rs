//! Retention benchmark (`cargo bench -p pi-telegram --bench retention`): 200,000 owner messages
//! go through the real hub (in this process: poller, worker, handlers, conductor, the built-in
//! echo agent as the pi, sender, and the retention task) against tg-fake, at a steady rate.
//! Each message becomes an update in the journal, a turn, an answer in the outbox, a sent
//! message and a reply route. Retention keeps 60 s of history (the smallest age it honours) and
//! runs every second. Every 20,000 messages, once they are all answered, the size of the state
//! database (file + WAL) is printed with its row counts: it levels off once the first 60 s of
//! traffic have aged out.
//!
//! The state lives on /dev/shm when there is one: every commit is an fsync (`synchronous=FULL`),
//! and at ~3 ms per fsync on a shared disk a million commits would take an hour. tmpfs changes
//! the time each commit takes, not what is written, so the sizes are the same.
//!
//! `RETENTION_BENCH_UPDATES` (default 200000), `RETENTION_BENCH_RATE` (messages per second,
//! default 1000) and `RETENTION_BENCH_AGE_SECS` (default 60) change the run.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hub::paths::{AgentDir, ProfileName};
use hub::serve::{ServeOptions, StartInstance, Tuning, serve};
use serde_json::json;
use tg_fake::{FakeConfig, FakeServer};

const STEP: usize = 20_000;

fn env_num(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Rows and pages as the hub sees them.
struct Counts {
    handled: i64,
    answered: i64,
    unsent: i64,
    journal: i64,
    turns: i64,
    outbox: i64,
    routes: i64,
    pages: i64,
    free: i64,
}

fn counts(s: &store::Store) -> Option<Counts> {
    s.read(|c| {
        let n = |sql: &str| -> Result<i64, store::StoreError> {
            c.query_row(sql, [], |r| r.get(0))
                .map_err(store::StoreError::from)
        };
        let (_, handled) = store::journal::counts(c)?;
        let outbox = store::outbox::counts(c)?;
        Ok::<_, store::StoreError>(Counts {
            handled,
            answered: outbox
                .get(&store::outbox::State::Sent)
                .copied()
                .unwrap_or(0),
            unsent: n("SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')")?,
            journal: n("SELECT count(*) FROM journal")?,
            turns: n("SELECT count(*) FROM turns")?,
            outbox: n("SELECT count(*) FROM outbox")?,
            routes: n("SELECT count(*) FROM message_routes")?,
            pages: n("PRAGMA page_count")?,
            free: n("PRAGMA freelist_count")?,
        })
    })
    .ok()
}

fn main() {
    let total = env_num("RETENTION_BENCH_UPDATES", 200_000) as usize;
    let rate = env_num("RETENTION_BENCH_RATE", 1000).max(1);
    let age = Duration::from_secs(env_num("RETENTION_BENCH_AGE_SECS", 60));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig::default()))
        .unwrap();
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let agent = dir.path().join("agent");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let cfg = json!({ "profiles": { "default": {
        "botToken": tg_fake::DEFAULT_TOKEN, "allowedUserId": tg_fake::DEFAULT_USER_ID,
        "apiBase": fake.base_url(),
        "pacing": { "perChatPerSec": 100000.0, "perChatBurst": 100000,
                    "globalPerSec": 100000.0, "globalBurst": 100000 },
        "assistant": { "draftPreviews": false, "activity": "quiet" } } } });
    std::fs::write(agent.join("telegram.json"), cfg.to_string()).unwrap();
    let tuning = Tuning {
        poll_timeout: Duration::from_secs(1),
        retention_every: Duration::from_secs(1),
        retention_age: Some(age),
        ..Tuning::from_env()
    };
    let opts = ServeOptions {
        agent_dir: AgentDir::at(&agent),
        profile: ProfileName::default_profile(),
        tuning,
        instances_at_start: vec![StartInstance::Echo(project.display().to_string())],
        child_extension: None,
        version: env!("CARGO_PKG_VERSION"),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let hub = rt.spawn(serve(opts, async move {
        let _ = stop_rx.await;
    }));
    let db = agent.join("telegram/default/state.db");
    let wal = with_suffix(&db, "-wal");

    // The echo agent attaches first: its connection notice is the first answer. One reading
    // connection for the whole run: a new one would read every page again each time.
    let started = Instant::now();
    let reader = loop {
        if let Ok(Some(s)) = store::Store::open_for_reading(&db)
            && counts(&s).is_some_and(|c| c.answered >= 1)
        {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the hub did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let base = counts(&reader).map_or(0, |c| c.answered);

    println!(
        "retention: {total} owner messages through the hub at {rate}/s; history kept {} s, pruned every 1 s; state on {}",
        age.as_secs(),
        dir.path()
            .parent()
            .map_or("?".into(), |p| p.display().to_string())
    );
    println!(
        "| messages | elapsed | state.db | -wal | db + wal | pages (free) | journal rows | turns | outbox rows | routes |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let control = fake.control().clone();
    let t0 = Instant::now();
    let mut sent = 0usize;
    while sent < total {
        let step = STEP.min(total - sent);
        for i in 0..step {
            // A steady rate: message n leaves at n / rate seconds.
            let due = Duration::from_secs_f64((sent + i) as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
            control
                .send_text(tg_fake::control::SendText {
                    text: format!("message {}", sent + i),
                    ..Default::default()
                })
                .unwrap();
        }
        sent += step;
        // Every message of the step handled and answered (echo), every answer sent.
        let waited = Instant::now();
        let c = loop {
            if let Some(c) = counts(&reader)
                && c.handled >= sent as i64
                && c.answered - base >= sent as i64
                && c.unsent == 0
            {
                break c;
            }
            assert!(
                waited.elapsed() < Duration::from_secs(600),
                "messages were not answered"
            );
            std::thread::sleep(Duration::from_millis(250));
        };
        let (f, w) = (size(&db), size(&wal));
        println!(
            "| {sent} | {:.0} s | {:.1} MB | {:.1} MB | {:.1} MB | {} ({}) | {} | {} | {} | {} |",
            t0.elapsed().as_secs_f64(),
            f as f64 / 1e6,
            w as f64 / 1e6,
            (f + w) as f64 / 1e6,
            c.pages,
            c.free,
            c.journal,
            c.turns,
            c.outbox,
            c.routes
        );
    }
    let _ = stop_tx.send(());
    let r = rt.block_on(hub).unwrap();
    assert!(r.is_ok(), "{r:?}");
}
