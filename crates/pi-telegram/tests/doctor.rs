//! `pi-telegram doctor` against tg-fake: a healthy profile passes; every check that can fail
//! is made to fail once (exit code 1, the check's outcome in `--json`); warnings leave the
//! exit code at 0.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::{Env, OWNER, TOKEN, wait_for};
use serde_json::{Value, json};

/// Fake `pi` and `node` in a folder of their own, and a PATH that has them (and sh).
struct Tools {
    dir: tempfile::TempDir,
}

impl Tools {
    fn new(node_version: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, out: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\necho {out}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        script("pi", "1.6.0");
        script("node", node_version);
        Self { dir }
    }

    fn path(&self) -> String {
        format!("{}:/usr/bin:/bin", self.dir.path().display())
    }
}

/// Runs `doctor --json` with `env` added; returns the exit code and the report.
fn doctor(env: &Env, tools: &Tools, extra: &[(&str, &str)]) -> (i32, Value) {
    let mut cmd = doctor_cmd(env, tools);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    report_of(cmd)
}

fn doctor_cmd(env: &Env, tools: &Tools) -> std::process::Command {
    let mut cmd = env.cmd(&["doctor", "--json"]);
    cmd.env("PATH", tools.path())
        .env("PI_TELEGRAM_DOCTOR_POLL_SECS", "1")
        .env_remove("PI_TELEGRAM_PI_BIN");
    cmd
}

/// The user permissions apply to: root (a container's CI) may write anything, so a test of
/// permissions gives the files to `nobody` and runs `doctor` as that user.
const UNPRIVILEGED: u32 = 65534;

fn chown_all(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_all(&e.unwrap().path(), uid);
        }
    }
}

/// `doctor --json` as a user whom file permissions bind: this one, or (as root) `nobody`,
/// owning the agent dir and the tools.
fn doctor_bound_by_permissions(env: &Env, tools: &Tools) -> (i32, Value) {
    use std::os::unix::process::CommandExt;
    let mut cmd = doctor_cmd(env, tools);
    if rustix::process::geteuid().is_root() {
        chown_all(env.dir.path(), UNPRIVILEGED);
        chown_all(tools.dir.path(), UNPRIVILEGED);
        cmd.uid(UNPRIVILEGED).gid(UNPRIVILEGED);
    }
    report_of(cmd)
}

fn report_of(mut cmd: std::process::Command) -> (i32, Value) {
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn outcome<'a>(report: &'a Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .and_then(|c| c["outcome"].as_str())
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

fn detail(report: &Value, id: &str) -> String {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .map(|c| format!("{} / fix: {}", c["detail"], c["fix"]))
        .unwrap_or_default()
}

/// Asserts the outcomes of the named checks, showing the report when one differs.
fn expect(report: &Value, want: &[(&str, &str)]) {
    for (id, o) in want {
        assert_eq!(
            outcome(report, id),
            *o,
            "{id}: {}\n{report:#}",
            detail(report, id)
        );
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn write_config(env: &Env, profile: Value) {
    std::fs::write(
        env.config_path(),
        serde_json::to_string_pretty(&json!({ "profiles": { "default": profile } })).unwrap(),
    )
    .unwrap();
    chmod(&env.config_path(), 0o600);
}

#[test]
fn a_healthy_profile_passes_with_and_without_its_hub_and_broken_permissions_fail() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    env.preset_owner();
    chmod(&env.config_path(), 0o600);
    assert!(env.run(&["install-extension"]).status.success());
    // No hub yet: the probe for another poller runs and finds none.
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    expect(
        &report,
        &[
            ("config", "pass"),
            ("state", "pass"),
            ("telegram", "pass"),
            ("token", "pass"),
            ("webhook", "pass"),
            ("poller", "pass"),
            ("clock", "pass"),
            ("threaded_mode", "pass"),
            ("owner", "pass"),
            ("hub", "warn"),
            ("socket", "skip"),
            ("disk", "pass"),
            ("flood_waits", "pass"),
            ("intents", "pass"),
            ("pi", "pass"),
            ("node", "pass"),
            ("extension", "pass"),
        ],
    );
    assert!(detail(&report, "token").contains("@fake_1000_bot"));
    // The probe confirmed nothing: no offset, and the hub's allowed_updates untouched.
    let probes = env.fake.control().requests(0, Some("getUpdates"));
    assert_eq!(probes.len(), 1);
    assert!(probes[0].params.get("offset").is_none());
    assert!(probes[0].params.get("allowed_updates").is_none());

    // With the hub running: no probe (it would interrupt the hub's poll), the socket checked.
    let mut hub = env.serve();
    wait_for("the hub's socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let polls_before = env.fake.control().requests(0, Some("getUpdates")).len();
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 0, "{report:#}");
    expect(
        &report,
        &[
            ("hub", "pass"),
            ("socket", "pass"),
            ("poller", "pass"),
            ("state", "pass"),
        ],
    );
    assert!(detail(&report, "poller").contains("our hub"));
    let doctor_polls = env
        .fake
        .control()
        .requests(0, Some("getUpdates"))
        .into_iter()
        .skip(polls_before)
        .filter(|r| r.params.get("allowed_updates").is_none())
        .count();
    assert_eq!(doctor_polls, 0, "doctor polled while the hub ran");

    // A socket others can use fails.
    let sock = env.profile_dir().join("hub.sock");
    chmod(&sock, 0o666);
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["ok"], false);
    expect(&report, &[("socket", "fail"), ("permissions", "fail")]);
    chmod(&sock, 0o600);

    // So does a profile folder others can read, and a state file others can read.
    chmod(&env.profile_dir(), 0o755);
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("permissions", "fail")]);
    assert!(detail(&report, "permissions").contains("chmod 700"));
    chmod(&env.profile_dir(), 0o700);
    chmod(&env.state_db(), 0o644);
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    assert!(detail(&report, "permissions").contains("chmod 600"));
    chmod(&env.state_db(), 0o600);

    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(hub.stop(), Some(0), "{}", hub.log_text());
    assert!(
        !hub.log_text().contains("conflict"),
        "doctor disturbed the hub: {}",
        hub.log_text()
    );

    // The text form: a line per check, fixes indented.
    let out = env
        .cmd(&["doctor"])
        .env("PATH", tools.path())
        .env("PI_TELEGRAM_DOCTOR_POLL_SECS", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[ok]") && text.contains("[warn] Hub process"),
        "{text}"
    );
    assert!(
        text.contains("         → start it: `pi-telegram serve`"),
        "{text}"
    );
}

#[test]
fn config_and_token_failures() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    // No config and no token anywhere.
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(
        &report,
        &[("config", "warn"), ("token", "fail"), ("telegram", "skip")],
    );

    // A malformed file.
    std::fs::write(env.config_path(), "{ \"profiles\": { ").unwrap();
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(
        &report,
        &[("config", "fail"), ("token", "skip"), ("owner", "skip")],
    );
    assert!(detail(&report, "config").contains("line 1"));

    // A token Telegram does not know.
    write_config(
        &env,
        json!({ "botToken": "2000:not-a-known-token", "apiBase": env.fake.base_url() }),
    );
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(
        &report,
        &[
            ("config", "pass"),
            ("telegram", "pass"),
            ("token", "fail"),
            ("poller", "skip"),
        ],
    );
    assert!(detail(&report, "token").contains("@BotFather"));
    assert!(
        !report.to_string().contains("not-a-known-token"),
        "the token leaked"
    );

    // A config others can read is a warning only.
    write_config(
        &env,
        json!({ "botToken": TOKEN, "apiBase": env.fake.base_url(), "allowedUserId": OWNER }),
    );
    chmod(&env.config_path(), 0o644);
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 0, "{report:#}");
    expect(&report, &[("config", "warn"), ("token", "pass")]);
    assert!(
        !report.to_string().contains("fake-token"),
        "the token leaked"
    );
}

#[test]
fn a_token_for_another_bot_than_the_state_fails() {
    let env = Env::with(tg_fake::FakeConfig {
        tokens: vec![TOKEN.into(), "2000:second-bot".into()],
        ..tg_fake::FakeConfig::default()
    });
    let tools = Tools::new("v22.20.0");
    env.setup();
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 0, "{report:#}");
    expect(&report, &[("token", "pass"), ("owner", "warn")]);
    assert!(detail(&report, "owner").contains("/start CODE"));
    write_config(
        &env,
        json!({ "botToken": "2000:second-bot", "apiBase": env.fake.base_url() }),
    );
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("token", "fail")]);
    assert!(detail(&report, "token").contains("belongs to bot 1000"));
}

#[test]
fn an_unreachable_telegram_fails() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    write_config(
        &env,
        json!({ "botToken": TOKEN, "allowedUserId": OWNER, "apiBase": format!("http://127.0.0.1:{port}") }),
    );
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(
        &report,
        &[
            ("telegram", "fail"),
            ("token", "skip"),
            ("webhook", "skip"),
            ("clock", "skip"),
        ],
    );
}

#[test]
fn another_poller_fails_and_a_webhook_warns() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    env.preset_owner();
    // Another program polls the bot, as the reference extension or a second hub would.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let url = env.fake.method_url(TOKEN, "getUpdates");
        let stop = stop.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let client = common::http();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = rt.block_on(client.post(&url).json(&json!({ "timeout": 1 })).send());
            }
        })
    };
    let (code, report) = doctor(&env, &tools, &[("PI_TELEGRAM_DOCTOR_POLL_SECS", "3")]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    other.join().unwrap();
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("poller", "fail"), ("token", "pass")]);
    assert!(detail(&report, "poller").contains("another program"));

    // A webhook: polling cannot work while it is set, but the hub removes it at start.
    env.say("waiting for the hub");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = rt
        .block_on(
            common::http()
                .post(env.fake.method_url(TOKEN, "setWebhook"))
                .json(&json!({ "url": "https://hooks.example.org/bot/SECRET-PATH" }))
                .send(),
        )
        .unwrap()
        .status();
    assert!(status.is_success());
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 0, "{report:#}");
    expect(&report, &[("webhook", "warn"), ("poller", "skip")]);
    let webhook = detail(&report, "webhook");
    assert!(webhook.contains("hooks.example.org") && !webhook.contains("SECRET-PATH"));
    assert!(webhook.contains("1 update(s) waiting"), "{webhook}");
}

#[test]
fn local_failures_lock_state_and_disk() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    env.preset_owner();
    std::fs::create_dir_all(env.profile_dir()).unwrap();
    chmod(&env.profile_dir(), 0o700);

    // Almost no free space (by the threshold).
    let (code, report) = doctor(
        &env,
        &tools,
        &[("PI_TELEGRAM_DOCTOR_MIN_FREE_MB", "1000000000")],
    );
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("disk", "fail")]);

    // A lock that is not a file.
    std::fs::create_dir(env.profile_dir().join("hub.lock")).unwrap();
    chmod(&env.profile_dir().join("hub.lock"), 0o700);
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("hub", "fail"), ("disk", "pass")]);
    std::fs::remove_dir(env.profile_dir().join("hub.lock")).unwrap();

    // A state file that is not a database.
    std::fs::write(env.state_db(), "not a database, not at all, no").unwrap();
    chmod(&env.state_db(), 0o600);
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("state", "fail"), ("hub", "warn")]);
}

#[test]
fn warnings_leave_the_exit_code_at_zero() {
    let env = Env::new();
    let tools = Tools::new("v18.0.0");
    env.preset_owner();
    chmod(&env.config_path(), 0o600);
    // A hub run leaves a state behind; then a flood wait and an ambiguous topic creation.
    let mut hub = env.serve();
    wait_for("the hub's socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    assert_eq!(hub.stop(), Some(0));
    {
        let store = store::Store::open(&env.state_db()).unwrap();
        let now = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        store
            .write(|tx| {
                store::flood::record(tx, "chat:1001", now + 600_000, 600, now)?;
                let id = store::threads::insert_intent(
                    tx,
                    &store::threads::NewIntent {
                        identity: "ident-1",
                        instance_id: None,
                        chat_id: OWNER,
                        cwd: "/tmp/web",
                        slot: "A",
                        title: "A · web",
                        epoch: 1,
                    },
                    now,
                )?;
                store::threads::set_intent_ambiguous(tx, id, "the answer was lost")
            })
            .unwrap();
    }
    // An extension installed, then changed; the fake's clock ten minutes ahead.
    assert!(env.run(&["install-extension"]).status.success());
    std::fs::write(
        env.agent_dir().join("telegram/extension/dist/index.js"),
        "// old\n",
    )
    .unwrap();
    env.fake.control().advance_clock(Duration::from_secs(600));
    let missing_pi = env.agent_dir().join("no-pi-here");
    let (code, report) = doctor(
        &env,
        &tools,
        &[("PI_TELEGRAM_PI_BIN", missing_pi.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    expect(
        &report,
        &[
            ("flood_waits", "warn"),
            ("intents", "warn"),
            ("extension", "warn"),
            ("clock", "warn"),
            ("pi", "warn"),
            ("node", "warn"),
        ],
    );
    assert!(detail(&report, "intents").contains("threads resolve 1 --create"));
    assert!(detail(&report, "clock").contains("behind"));
    assert!(detail(&report, "node").contains("v18.0.0"));
    assert!(detail(&report, "extension").contains("differ"));

    // Threaded Mode: off is fine, on is reported.
    env.fake
        .control()
        .settings(tg_fake::control::SettingsChange {
            has_topics_enabled: Some(true),
            ..Default::default()
        })
        .unwrap();
    let (_, report) = doctor(&env, &tools, &[]);
    assert!(
        detail(&report, "threaded_mode").starts_with("\"on:"),
        "{report:#}"
    );
}

/// A state with a few hundred pages of rows, closed (so its pages are in the file).
fn state_with_pages(env: &Env) {
    std::fs::create_dir_all(env.profile_dir()).unwrap();
    chmod(&env.profile_dir(), 0o700);
    let store = store::Store::open(&env.state_db()).unwrap();
    store
        .write(|tx| {
            for i in 0..3000 {
                store::kv::set(tx, &format!("filler.{i:05}"), &"x".repeat(200))?;
            }
            Ok::<_, store::StoreError>(())
        })
        .unwrap();
}

#[test]
fn a_damaged_state_fails_with_what_is_lost_and_how_to_keep_a_copy() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    env.preset_owner();
    chmod(&env.config_path(), 0o600);
    state_with_pages(&env);
    let (_, report) = doctor(&env, &tools, &[]);
    expect(&report, &[("state", "pass")]);

    // 200 bytes overwritten in the middle of a page in the middle of the file: SQLite still
    // opens it (the header and the schema are intact), only a check of the pages sees it.
    let mut bytes = std::fs::read(env.state_db()).unwrap();
    let page = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    let at = (bytes.len() / page / 2) * page + page / 2 - 100;
    bytes[at..at + 200].fill(0xff);
    std::fs::write(env.state_db(), &bytes).unwrap();
    let (code, report) = doctor(&env, &tools, &[]);
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("state", "fail")]);
    let state = detail(&report, "state");
    assert!(state.contains("is damaged"), "{state}");
    for needle in [
        "mkdir state.db.broken",
        "pairing",
        "queue",
        ".recover",
        "loses",
    ] {
        assert!(state.contains(needle), "{needle}: {state}");
    }
    assert_eq!(
        std::fs::read(env.state_db()).unwrap(),
        bytes,
        "doctor changed nothing"
    );
}

#[test]
fn a_read_only_profile_folder_is_fixed_with_chmod_not_by_discarding_the_state() {
    let env = Env::new();
    let tools = Tools::new("v22.20.0");
    env.preset_owner();
    chmod(&env.config_path(), 0o600);
    state_with_pages(&env);
    let before = std::fs::read(env.state_db()).unwrap();
    chmod(&env.profile_dir(), 0o500);
    let (code, report) = doctor_bound_by_permissions(&env, &tools);
    chmod(&env.profile_dir(), 0o700);
    assert_eq!(code, 1, "{report:#}");
    expect(&report, &[("state", "fail"), ("permissions", "fail")]);
    let state = detail(&report, "state");
    let dir = env.profile_dir().display().to_string();
    assert!(state.contains(&format!("chmod u+wx {dir}")), "{state}");
    assert!(state.contains("nothing is lost"), "{state}");
    for discard in ["move", "mv ", "start over", "lost)"] {
        assert!(!state.contains(discard), "{discard}: {state}");
    }
    assert_eq!(std::fs::read(env.state_db()).unwrap(), before);
}
