//! The hub's lifecycle as a person lives it: a pi's extension starts the hub and starts it
//! again after a crash, but never after `pi-telegram stop` or Ctrl-C on `serve` until the person
//! starts it; `status` says who started the hub and where its log is; `service install` writes a
//! unit systemd accepts, and a hub the extension would start starts the service instead.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::pi::setup;
use common::{Env, OWNER, wait_for};
use pi_testkit::PiRpc;
use serde_json::{Value, json};

fn hub(s: &Env) -> Value {
    s.status()["hub"].clone()
}

fn live_shims(env: &Env) -> usize {
    live_shim_ids(env).len()
}

/// The live extension instances (ids are new per connection). Only meaningful while a hub
/// runs: the store keeps what the last hub saw.
fn live_shim_ids(env: &Env) -> Vec<String> {
    env.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["transport"] == "shim" && i["state"] != "gone")
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits for a hub started by `by` and a pi connected to it since `before`.
fn wait_reconnected(env: &Env, by: &str, before: &[String]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let h = hub(env);
        if h["running"] == json!(true) && h["started_by"] == by {
            break;
        }
        if std::time::Instant::now() > deadline {
            let log =
                std::fs::read_to_string(env.profile_dir().join("hub.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "no hub started by {by} within 60 s; status: {h}\nhub.log (newest first):\n{}",
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for("pi to connect to it", 30, || {
        live_shim_ids(env).iter().any(|id| !before.contains(id))
    });
}

/// `true` for `dur`: the hub stays down (checked every 100 ms).
fn stays_down(env: &Env, dur: Duration) -> bool {
    let end = std::time::Instant::now() + dur;
    while std::time::Instant::now() < end {
        if hub(env)["running"] == json!(true) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

#[test]
fn a_stopped_hub_stays_stopped_until_the_person_starts_it() {
    let Some(s) = setup() else { return };
    let out = s.env.run(&["install-extension"]);
    assert!(out.status.success());
    // The extension would start a missing hub again every 300 ms (30 s by default).
    let mut cmd = s.pi.command(["--mode", "rpc", "--no-session"]);
    cmd.env("PI_TELEGRAM_AUTOSTART_MS", "300");
    let mut pi = PiRpc::spawn(cmd).unwrap();
    pi.send(&json!({ "id": "c", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi.read_until(Duration::from_secs(60), "connect", |v: &Value| {
        v["type"] == "response" && v["id"] == "c"
    })
    .unwrap();
    wait_for("pi to connect", 30, || live_shims(&s.env) == 1);
    let h = hub(&s.env);
    assert_eq!(h["started_by"], "extension", "{h}");
    let log = h["log"].as_str().unwrap().to_owned();
    let json_log = log.split(' ').next().unwrap();
    assert!(
        json_log.ends_with("logs/hub.jsonl") && Path::new(json_log).exists(),
        "{log}"
    );
    assert!(
        log.ends_with("hub.log"),
        "the extension's capture of stderr: {log}"
    );
    let human = String::from_utf8(s.env.run(&["status"]).stdout).unwrap();
    assert!(human.contains("started by a pi's extension"), "{human}");

    // A crash is not a stop: the extension starts the hub again.
    let first = h["pid"].as_i64().unwrap();
    std::process::Command::new("kill")
        .args(["-KILL", &first.to_string()])
        .status()
        .unwrap();
    let before = live_shim_ids(&s.env);
    wait_for("the extension to start a new hub", 30, || {
        let h = hub(&s.env);
        h["running"] == json!(true) && h["pid"].as_i64() != Some(first)
    });
    wait_reconnected(&s.env, "extension", &before);

    // `stop` stops it, and it stays stopped while pi runs.
    let before = live_shim_ids(&s.env);
    let out = s.env.run(&["stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Stopped the hub"));
    let h = hub(&s.env);
    assert_eq!(h["running"], json!(false));
    assert_eq!(h["stopped_on_purpose"], "stop");
    assert!(
        stays_down(&s.env, Duration::from_secs(5)),
        "the extension started the hub after a stop"
    );
    let out = s.env.run(&["stop"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("No hub is running"));

    // The person starts it: pi comes back to it by itself.
    let mut serve = s.env.serve();
    wait_reconnected(&s.env, "shell", &before);
    assert_eq!(
        hub(&s.env)["stopped_on_purpose"],
        Value::Null,
        "serve clears the marker"
    );
    let before = live_shim_ids(&s.env);

    // Ctrl-C on serve is a stop on purpose too.
    serve.signal("INT");
    assert_eq!(serve.wait(Duration::from_secs(20)), Some(0));
    assert_eq!(hub(&s.env)["stopped_on_purpose"], "interrupt");
    assert!(
        stays_down(&s.env, Duration::from_secs(4)),
        "the extension started the hub after Ctrl-C"
    );

    // /telegram-connect is the person asking: it starts the hub despite the marker.
    pi.send(&json!({ "id": "c2", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    pi.read_until(Duration::from_secs(60), "connect", |v: &Value| {
        v["type"] == "response" && v["id"] == "c2"
    })
    .unwrap();
    wait_reconnected(&s.env, "extension", &before);
    let _ = pi.close(Duration::from_secs(20));
    let out = s.env.run(&["stop"]);
    assert!(out.status.success());
}

/// A stand-in for `systemctl`: records its arguments, answers `is-enabled` / `is-active`.
fn fake_systemctl(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("systemctl");
    let log = dir.join("systemctl.log");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$2\" in\n  is-enabled) echo enabled ;;\n  is-active) echo active ;;\nesac\nexit 0\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn service_install_writes_a_unit_systemd_accepts_and_the_extension_starts_the_service() {
    let env = Env::new();
    env.preset_owner();
    let home = tempfile::tempdir().unwrap();
    let systemctl = fake_systemctl(home.path());
    let run = |args: &[&str], extra: &[(&str, &str)]| {
        let mut c = env.cmd(args);
        c.env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("PI_TELEGRAM_SYSTEMCTL", &systemctl);
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let calls = || std::fs::read_to_string(home.path().join("systemctl.log")).unwrap_or_default();
    let unit = home.path().join("config/systemd/user/pi-telegram.service");

    let out = run(&["service", "install", "--dry-run"], &[]);
    assert!(out.status.success());
    let dry = String::from_utf8(out.stdout).unwrap();
    assert!(dry.starts_with(&format!("# {}\n", unit.display())), "{dry}");
    assert!(dry.contains(&format!(
        "ExecStart=\"{}\" serve --profile default\n",
        env!("CARGO_BIN_EXE_pi-telegram")
    )));
    assert!(
        dry.contains("Restart=on-failure\n") && dry.contains("RestartPreventExitStatus=2 3 4 5\n")
    );
    assert!(
        !unit.exists() && calls().is_empty(),
        "a dry run installs nothing"
    );

    let out = run(&["service", "install"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&unit).unwrap(),
        dry.split_once('\n').unwrap().1
    );
    assert_eq!(
        calls(),
        "--user daemon-reload\n--user enable --now pi-telegram.service\n"
    );
    // systemd itself accepts it, where it is available.
    if Path::new("/usr/bin/systemd-analyze").exists() {
        let runtime = tempfile::tempdir().unwrap();
        let v = std::process::Command::new("systemd-analyze")
            .args(["--user", "verify"])
            .arg(&unit)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .output()
            .unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
        assert_eq!(String::from_utf8_lossy(&v.stderr), "", "systemd warned");
    }

    let out = run(&["service", "status", "--json"], &[]);
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["installed"]["name"], "pi-telegram");
    assert_eq!(
        (st["enabled"].clone(), st["running"].clone()),
        (json!(true), json!(true))
    );

    // The extension starting a hub starts the service instead, and no second hub runs.
    let out = run(&["serve"], &[("PI_TELEGRAM_STARTED_BY", "extension")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        calls().ends_with("--user start pi-telegram.service\n"),
        "{}",
        calls()
    );
    assert_eq!(hub(&env)["running"], json!(false));

    let out = run(&["service", "uninstall"], &[]);
    assert!(out.status.success());
    assert!(calls().ends_with("--user disable --now pi-telegram.service\n--user daemon-reload\n"));
    assert!(!unit.exists() && !env.profile_dir().join("service.json").exists());
    let out = run(&["service", "status", "--json"], &[]);
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["installed"], Value::Null);
}

/// A hub whose profile folder is deleted (a test's temporary folder, a profile removed by hand)
/// serves nobody: its socket and secret went with the folder. It stops by itself and says why,
/// and so does one whose lock file alone is deleted.
#[test]
fn a_hub_whose_profile_folder_is_deleted_stops_by_itself() {
    let env = Env::new();
    env.preset_owner();
    for deleted in [env.profile_dir(), env.profile_dir().join("hub.lock")] {
        let mut hub = env.serve_with(&[("PI_TELEGRAM_PROFILE_CHECK_SECS", "1")]);
        wait_for("the hub socket", 20, || {
            std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
        });
        if deleted.is_dir() {
            std::fs::remove_dir_all(&deleted).unwrap();
        } else {
            std::fs::remove_file(&deleted).unwrap();
        }
        assert_eq!(
            hub.wait(Duration::from_secs(30)),
            Some(0),
            "{}",
            hub.log_text()
        );
        let log = hub.log_text();
        assert!(
            log.contains("stopping: this hub's profile is gone"),
            "{log}"
        );
        assert!(
            log.contains(&format!("{} was deleted", deleted.display())),
            "{log}"
        );
    }
}

/// The folder deleted long before the next check, and a message arriving then: the hub's
/// write of it cannot sync a log that went with the folder. That is the same stop, said the
/// same way, not a crash with exit code 1 (CI met this race with the check every second).
#[test]
fn a_write_that_finds_the_profile_folder_gone_stops_the_hub_the_same_way() {
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve_with(&[("PI_TELEGRAM_PROFILE_CHECK_SECS", "3600")]);
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
    });
    let dir = env.profile_dir();
    std::fs::remove_dir_all(&dir).unwrap();
    env.fake
        .control()
        .send_text(tg_fake::control::SendText {
            text: "hello".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        hub.wait(Duration::from_secs(30)),
        Some(0),
        "{}",
        hub.log_text()
    );
    let log = hub.log_text();
    assert!(
        log.contains("stopping: this hub's profile is gone"),
        "{log}"
    );
    assert!(
        log.contains(&format!("{} was deleted", dir.display())),
        "{log}"
    );
}

/// A hub whose binary is removed (`pi remove npm:pi-telegram`, `cargo uninstall`) stops by
/// itself and tells the owner where their setup and history stay; one whose binary is
/// replaced (an update writes the new file under the same name) runs on.
#[test]
fn a_hub_whose_binary_is_removed_stops_and_says_where_the_state_stays() {
    let env = Env::new();
    env.preset_owner();
    let bin_dir = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("pi-telegram");
    std::fs::copy(env!("CARGO_BIN_EXE_pi-telegram"), &bin).unwrap();
    let log = env.dir.path().join("serve-copy.log");
    let mut child = env
        .cmd_of(&bin, &["serve"])
        .env("PI_TELEGRAM_PROFILE_CHECK_SECS", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
    });
    // An update: the old file goes and the new one takes its name at once.
    let next = bin_dir.join("pi-telegram.next");
    std::fs::copy(&bin, &next).unwrap();
    std::fs::remove_file(&bin).unwrap();
    std::fs::rename(&next, &bin).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the hub stopped at an update: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // A removal.
    std::fs::remove_file(&bin).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the hub runs on without its binary"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(
        log.contains("stopping: this hub's binary was removed"),
        "{log}"
    );
    let texts = env.bot_texts(OWNER);
    let said = texts
        .iter()
        .find(|t| t.starts_with("pi-telegram was removed"))
        .unwrap_or_else(|| panic!("nothing said: {texts:?}"));
    assert!(
        said.contains(&env.config_path().display().to_string())
            && said.contains(&env.profile_dir().display().to_string()),
        "{said}"
    );
    assert!(env.config_path().exists() && env.state_db().exists());
}
