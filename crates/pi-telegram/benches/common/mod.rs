//! What the benches share: reading a process's RSS and CPU from /proc, percentiles, and a
//! scripted instance on `hub.sock`.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// `name` from the environment, or `default` when unset or unreadable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes `telegram.json` with `profile` as the `default` profile into `agent_dir`, starts the
/// hub binary's `serve` there (warnings only, no output) and waits until its socket is there.
/// Returns the process and the profile's directory.
pub fn start_hub(agent_dir: &Path, profile: Value) -> (Child, PathBuf) {
    let cfg = json!({ "profiles": { "default": profile } });
    std::fs::write(agent_dir.join("telegram.json"), cfg.to_string()).unwrap();
    let hub = Command::new(env!("CARGO_BIN_EXE_pi-telegram"))
        .arg("serve")
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .env("PI_TELEGRAM_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dir = agent_dir.join("telegram/default");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("hub.sock").exists() {
        assert!(Instant::now() < deadline, "the hub did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (hub, dir)
}

/// A `/proc/<pid>/status` field in kB (`VmRSS:`, `VmHWM:`).
pub fn proc_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident kB per mapped file (`/proc/<pid>/smaps`), largest first; anonymous memory under
/// `[anon]`.
pub fn rss_by_mapping(pid: u32) -> Vec<(String, u64)> {
    let Ok(smaps) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return Vec::new();
    };
    let mut by: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let mut current = String::from("[anon]");
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields
            .first()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
        {
            current = fields
                .get(5)
                .map_or("[anon]", |p| {
                    if p.starts_with('/') {
                        p.rsplit('/').next().unwrap_or(p)
                    } else {
                        p
                    }
                })
                .to_owned();
        } else if fields.first() == Some(&"Rss:") {
            *by.entry(current.clone()).or_default() += fields
                .get(1)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    let mut v: Vec<(String, u64)> = by.into_iter().collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    v
}

/// utime + stime in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

pub fn clk_tck() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// The `p` quantile of sorted samples.
pub fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The hub's own counters (`stats` on `hub.sock`, as the CLI asks): `store_transactions`.
pub fn hub_stats(profile: &Path) -> Value {
    let secret = std::fs::read_to_string(profile.join("hub.secret")).unwrap();
    let mut stream = UnixStream::connect(profile.join("hub.sock")).unwrap();
    let hello = json!({ "type": "hello", "protocol": 1, "role": "control",
        "secret": secret.trim(), "received_turns": [], "completed_turns": [] });
    stream
        .write_all(format!("{hello}\n{}\n", json!({ "type": "stats", "id": "s" })).as_bytes())
        .unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "hub closed");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "response" && v["id"] == "s" {
            return v["data"].clone();
        }
    }
}

/// A scripted pi on `hub.sock` that answers every prompt at once (`echo: <text>`).
pub struct Shim {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Shim {
    /// Connects and says hello as a pi in `cwd`.
    pub fn connect(profile: &Path, pid: u32, cwd: &str) -> Self {
        let secret = std::fs::read_to_string(profile.join("hub.secret")).unwrap();
        let stream = UnixStream::connect(profile.join("hub.sock")).unwrap();
        let mut shim = Self {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        shim.send(&json!({ "type": "hello", "protocol": 1, "role": "instance",
            "secret": secret.trim(), "pid": pid, "cwd": cwd, "mode": "tui",
            "reason": "startup", "idle": true, "pending": false, "received_turns": [],
            "completed_turns": [] }));
        shim.recv_type("welcome");
        shim
    }

    pub fn send(&mut self, v: &Value) {
        self.writer.write_all(format!("{v}\n").as_bytes()).unwrap();
    }

    /// The next message of type `ty`; others are skipped.
    pub fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let mut line = String::new();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "hub closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == ty {
                return v;
            }
        }
    }

    /// Answers prompts until the hub closes the connection; returns how many.
    pub fn serve(mut self) -> usize {
        let mut answered = 0;
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return answered,
                Ok(_) => {}
            }
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // pi lists its commands when asked (at attach): a scripted one has none.
            if v["type"] == "get_commands" {
                self.send(&json!({ "type": "response", "id": v["id"], "ok": true,
                    "data": { "commands": [] } }));
                continue;
            }
            if v["type"] != "prompt" {
                continue;
            }
            let turn = v["turn_id"].clone();
            let text = v["text"].as_str().unwrap_or_default().to_owned();
            self.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }));
            self.send(&json!({ "type": "turn_done", "turn_id": turn,
                "text": format!("echo: {text}"), "aborted": false, "error": null }));
            self.send(&json!({ "type": "state", "idle": true, "pending": false }));
            answered += 1;
        }
    }
}
