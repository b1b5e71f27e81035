//! The hub's log file (JSON lines, no token or message text at the default level) and
//! `pi-telegram logs` (order across rotated files, `--json`, `--since`, `-f` across a
//! rotation).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{Env, OWNER, wait_for};
use serde_json::{Value, json};

/// A token shaped like a real one, so that a pattern-based guard would have to catch it too.
const REAL_LOOKING: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
const SECRET_PART: &str = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
const MARKER: &str = "MARKER-private-words-5c1e";

fn log_dir(env: &Env) -> PathBuf {
    env.profile_dir().join("logs")
}

fn line(ts: &str, message: &str) -> String {
    json!({ "timestamp": ts, "level": "INFO", "target": "test", "message": message }).to_string()
        + "\n"
}

#[test]
fn the_hub_logs_json_lines_without_token_or_message_text() {
    let env = Env::with(tg_fake::FakeConfig {
        tokens: vec![REAL_LOOKING.into()],
        ..tg_fake::FakeConfig::default()
    });
    std::fs::write(
        env.config_path(),
        json!({ "profiles": { "default": {
            "botToken": REAL_LOOKING, "allowedUserId": OWNER, "apiBase": env.fake.base_url() } } })
        .to_string(),
    )
    .unwrap();
    let mut hub = env.serve();
    wait_for("the hub to poll", 20, || {
        !env.fake
            .control()
            .requests(0, Some("getUpdates"))
            .is_empty()
    });
    env.say(&format!("please keep {MARKER} to yourself"));
    env.say_as(4242, &format!("a stranger says {MARKER}"));
    wait_for("both handled", 20, || {
        env.status()["journal"]["handled"] == json!(2)
    });
    assert_eq!(hub.stop(), Some(0), "{}", hub.log_text());

    let file = log_dir(&env).join("hub.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(MARKER), "message text in the log:\n{text}");
    assert!(!text.contains(SECRET_PART), "the token in the log:\n{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for l in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(l[key].is_string(), "{key} missing in {l}");
        }
    }
    assert!(lines.iter().any(|l| l["message"] == "starting the hub"
        && l["level"] == "INFO"
        && l["target"] == "hub::serve"
        && l["fields"]["bot"] == "123456789:<redacted>"));
    assert!(lines.iter().any(|l| l["message"]
        == "ignored an update from someone who is not the owner"
        && l["fields"]["user_id"] == 4242));
    // The foreground's stderr keeps its human lines.
    assert!(hub.log_text().contains("starting the hub"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // `logs` shows it for people, `--json` as it is.
    let out = env.run(&["logs"]);
    assert!(out.status.success());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown
            .lines()
            .any(|l| l.contains(" INFO hub::serve: starting the hub ")),
        "{shown}"
    );
    let out = env.run(&["logs", "--json"]);
    let raw = String::from_utf8_lossy(&out.stdout);
    assert_eq!(raw.lines().count(), lines.len());
    assert!(
        raw.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
}

#[test]
fn logs_reads_rotated_files_in_order_and_filters_by_time() {
    let env = Env::new();
    let dir = log_dir(&env);
    // Nothing yet: said, not an error.
    let out = env.run(&["logs"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no log yet"));

    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("hub.2.jsonl"),
        line("2020-01-01T00:00:00.000Z", "oldest"),
    )
    .unwrap();
    std::fs::write(
        dir.join("hub.1.jsonl"),
        line("2020-01-02T00:00:00.000Z", "older"),
    )
    .unwrap();
    let now = common_now();
    std::fs::write(dir.join("hub.jsonl"), line(&now, "recent")).unwrap();

    let messages = |args: &[&str]| -> Vec<String> {
        let out = env.run(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["message"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(messages(&["logs", "--json"]), ["oldest", "older", "recent"]);
    assert_eq!(messages(&["logs", "--json", "--since", "1h"]), ["recent"]);
    assert_eq!(
        messages(&["logs", "--json", "--since", "2020-01-01T12:00:00Z"]),
        ["older", "recent"]
    );
    let human = env.run(&["logs", "--since", "2020-01-02"]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert_eq!(
        human.lines().next().unwrap(),
        "2020-01-02T00:00:00.000Z  INFO test: older"
    );
    let bad = env.run(&["logs", "--since", "last tuesday"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--since"));
}

#[test]
fn logs_follow_prints_new_lines_and_survives_a_rotation() {
    let env = Env::new();
    let dir = log_dir(&env);
    std::fs::create_dir_all(&dir).unwrap();
    let current = dir.join("hub.jsonl");
    std::fs::write(&current, line("2026-01-01T00:00:00.000Z", "first")).unwrap();
    let mut child = env
        .cmd(&["logs", "-f", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            let msg = serde_json::from_str::<Value>(&l).unwrap()["message"]
                .as_str()
                .unwrap()
                .to_owned();
            if tx.send(msg).is_err() {
                break;
            }
        }
    });
    let next = || rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(next(), "first");
    let append = |path: &PathBuf, text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append(&current, &line("2026-01-01T00:00:01.000Z", "second"));
    assert_eq!(next(), "second");
    // Rotated as the hub does: the last line of the old file, then the new file.
    append(&current, &line("2026-01-01T00:00:02.000Z", "third"));
    std::fs::rename(&current, dir.join("hub.1.jsonl")).unwrap();
    append(&current, &line("2026-01-01T00:00:03.000Z", "fourth"));
    assert_eq!(next(), "third");
    assert_eq!(next(), "fourth");
    append(&current, &line("2026-01-01T00:00:04.000Z", "fifth"));
    assert_eq!(next(), "fifth");
    let _ = child.kill();
    let _ = child.wait();
}

/// Now, as the log writes it.
fn common_now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    hub::logging::time::format_ms(i64::try_from(ms).unwrap())
}

/// A refused hello is logged with the reason, and so is a hello read in part; neither log line,
/// nor the one of a link closed over a malformed line, quotes what the client sent.
#[test]
fn refused_and_repaired_hellos_are_logged_with_the_reason_and_no_text() {
    use common::shim::{Shim, hello};
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    env.preset_owner();
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).is_ok()
    });
    let refused = |line: &str| {
        let mut s =
            std::os::unix::net::UnixStream::connect(env.profile_dir().join("hub.sock")).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).unwrap();
        serde_json::from_str::<Value>(&answer).unwrap()
    };
    assert_eq!(
        refused(&format!("{MARKER} is no hello\n"))["code"],
        json!("hello")
    );
    let not_hello = json!({ "type": "ack", "turn_id": MARKER }).to_string() + "\n";
    assert_eq!(refused(&not_hello)["code"], json!("hello"));
    // Read in part: fields of the wrong type (one with the marker as its value) are left out.
    let mut h = hello(&env, "/work/web", 7, json!([]), json!([]));
    h["session_name"] = json!(42);
    h["completed_turns"] = json!([{ "turn_id": "t99", "text": { "private": MARKER } }]);
    let mut s = Shim::connect(&env, &h);
    // Then a line the hub cannot read as a message, which closes the link.
    s.send(&json!({ "type": "turn_done", "turn_id": "t99", "text": "x", "aborted": MARKER }));
    assert_eq!(s.recv_type("error")["type"], json!("error"));
    wait_for("the link closed", 20, || {
        env.status()["instances"]
            .as_array()
            .is_some_and(|l| l.iter().all(|i| i["state"] == "gone"))
    });
    assert_eq!(hub.stop(), Some(0), "{}", hub.log_text());

    let text = std::fs::read_to_string(log_dir(&env).join("hub.jsonl")).unwrap();
    assert!(!text.contains(MARKER), "client text in the log:\n{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refusals: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "refused a client's hello")
        .map(|l| &l["fields"])
        .collect();
    assert_eq!(refusals.len(), 2, "{text}");
    assert_eq!(refusals[0]["code"], json!("hello"));
    assert!(
        refusals[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("the first line is not JSON")),
        "{text}"
    );
    assert_eq!(
        refusals[1]["reason"],
        json!("the first line must be a hello")
    );
    let repaired = lines
        .iter()
        .find(|l| l["message"] == "a hello had fields that could not be read; they were left out")
        .unwrap_or_else(|| panic!("no line about the hello read in part:\n{text}"));
    assert_eq!(repaired["level"], json!("WARN"));
    let fields = repaired["fields"]["fields"].as_str().unwrap_or_default();
    assert!(
        fields.contains("session_name") && fields.contains("completed_turns[0].text"),
        "{repaired}"
    );
}

/// The probe's finding: the extension's `hub.log` (the hub's stderr, appended to by every hub
/// it starts) grew by 44.6 MB under a flood, and nothing capped it. A hub whose stderr is a
/// regular file past the cap empties it, says so, and goes on.
#[test]
fn a_stderr_file_past_its_cap_is_emptied_and_goes_on() {
    let env = Env::new();
    env.preset_owner();
    let path = env.profile_dir().join("hub.log");
    std::fs::create_dir_all(env.profile_dir()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(env.profile_dir(), std::fs::Permissions::from_mode(0o700))
            .unwrap();
    }
    let cap = hub::logging::capped::STDERR_CAP;
    let mut old = "an older hub's line\n".repeat(cap as usize / 20 + 1);
    old.truncate(cap as usize);
    std::fs::write(&path, old).unwrap();
    // As the extension opens it (extension/lib/hub-process.ts): appending.
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let child = env
        .cmd(&["serve"])
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut hub = common::Hub {
        child: Some(child),
        log: path.clone(),
    };
    wait_for("the hub's socket", 30, || {
        env.profile_dir().join("hub.sock").exists()
    });
    assert_eq!(hub.stop(), Some(0));
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len < 1024 * 1024, "hub.log is {len} bytes");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(&hub::logging::capped::emptied_note(cap)),
        "{text}"
    );
    assert!(!text.contains("an older hub's line"), "{text}");
    assert!(text.contains("INFO"), "the hub's own lines follow: {text}");
}
