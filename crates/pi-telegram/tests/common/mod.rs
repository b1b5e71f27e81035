//! Runs the real `pi-telegram` binary against an in-process tg-fake, in a temporary agent dir.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tg_fake::{FakeConfig, FakeServer};

pub mod chat;

pub const TOKEN: &str = "1000:fake-token";
pub const OWNER: i64 = tg_fake::DEFAULT_USER_ID;

/// An HTTP client for a test's own calls to the fake. reqwest is built without a rustls crypto
/// provider (`rustls-no-provider` in the workspace's Cargo.toml): ring is installed first, as
/// the Telegram client does.
pub fn http() -> reqwest::Client {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// A temporary agent dir and a fake Telegram running on its own runtime, so tests can block
/// on child processes freely.
pub struct Env {
    pub fake: FakeServer,
    pub rt: tokio::runtime::Runtime,
    pub dir: tempfile::TempDir,
    /// The agent dir (the temp dir unless a pi environment provides one).
    pub agent: PathBuf,
    /// Extra environment for every command (pi's, in end-to-end tests).
    pub extra_env: Vec<(String, String)>,
}

impl Env {
    pub fn new() -> Self {
        Self::with(FakeConfig::default())
    }

    pub fn with(config: FakeConfig) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let fake = rt.block_on(FakeServer::start(config)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        Self {
            fake,
            rt,
            agent: dir.path().to_owned(),
            dir,
            extra_env: Vec::new(),
        }
    }

    pub fn agent_dir(&self) -> &Path {
        &self.agent
    }

    pub fn config_path(&self) -> PathBuf {
        self.agent.join("telegram.json")
    }

    pub fn state_db(&self) -> PathBuf {
        self.agent.join("telegram/default/state.db")
    }

    pub fn profile_dir(&self) -> PathBuf {
        self.agent.join("telegram/default")
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_of(Path::new(env!("CARGO_BIN_EXE_pi-telegram")), args)
    }

    /// [`Env::cmd`] running the binary at `bin` (a copy of this build, say).
    pub fn cmd_of(&self, bin: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("PI_TELEGRAM_POLL_TIMEOUT_SECS", "2")
            .env("PI_TELEGRAM_LOG", "info")
            .env_remove("TELEGRAM_API_BASE")
            .stdin(Stdio::null());
        for var in [
            "TELEGRAM_BOT_TOKEN",
            "TELEGRAM_BOT_KEY",
            "TELEGRAM_TOKEN",
            "TELEGRAM_KEY",
            "PI_TELEGRAM_CRASH_AT",
            "PI_TELEGRAM_TEST_NO_POLL_SYNC",
            // The way to the fake is the test's to choose (tests/network.rs), never the
            // shell's: a proxy set there would carry every test's calls.
            "PI_TELEGRAM_NETWORK_FAMILY",
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            c.env_remove(var);
        }
        c.envs(self.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// `setup --json` against the fake; returns the parsed JSON.
    pub fn setup(&self) -> Value {
        let out = self.run(&[
            "setup",
            "--token",
            TOKEN,
            "--api-base",
            self.fake.base_url(),
            "--json",
        ]);
        assert!(
            out.status.success(),
            "setup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Writes a config with the owner preset (no pairing needed).
    pub fn preset_owner(&self) {
        let cfg = json!({ "profiles": { "default": {
            "botToken": TOKEN, "allowedUserId": OWNER, "apiBase": self.fake.base_url(),
            "pacing": { "perChatPerSec": 1000.0, "perChatBurst": 1000, "globalPerSec": 1000.0, "globalBurst": 1000 } } } });
        std::fs::write(
            self.config_path(),
            serde_json::to_string_pretty(&cfg).unwrap(),
        )
        .unwrap();
    }

    pub fn serve(&self) -> Hub {
        self.serve_with(&[])
    }

    /// A hub for another profile of the same agent dir.
    pub fn serve_profile(&self, profile: &str) -> Hub {
        let log = self.dir.path().join(format!("serve-{profile}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let child = self
            .cmd(&["serve", "--profile", profile])
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap();
        Hub {
            child: Some(child),
            log,
        }
    }

    pub fn serve_with(&self, env: &[(&str, &str)]) -> Hub {
        let log = self
            .dir
            .path()
            .join(format!("serve-{}.log", Instant::now().elapsed().as_nanos()));
        let log_file = std::fs::File::create(&log).unwrap();
        let mut c = self.cmd(&["serve"]);
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.stdout(Stdio::null()).stderr(log_file).spawn().unwrap();
        Hub {
            child: Some(child),
            log,
        }
    }

    /// Runs a hub that aborts at crash point `point`, does `act` meanwhile, and waits for the
    /// abort. Returns what `act` returned (a connection to drop after the crash, say).
    pub fn crash_at<T>(&self, point: &str, act: impl FnOnce() -> T) -> T {
        let mut hub = self.serve_with(&[("PI_TELEGRAM_CRASH_AT", point)]);
        let out = act();
        assert_eq!(
            hub.wait(Duration::from_secs(20)),
            None,
            "{point}: the hub should abort; log:\n{}",
            hub.log_text()
        );
        assert!(
            hub.log_text()
                .contains(&format!("crash point {point} reached")),
            "{point}"
        );
        out
    }

    /// `pi-telegram spawn --cwd <cwd>`: the running hub starts a headless pi there.
    pub fn spawn_pi(&self, cwd: &str) {
        let out = self.run(&["spawn", "--cwd", cwd]);
        assert!(
            out.status.success(),
            "spawn failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn status(&self) -> Value {
        let out = self.run(&["status", "--json"]);
        assert!(
            out.status.success(),
            "status failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The live topic named for `project` (`… · project`), once the hub has bound it to its
    /// pi. Found at Telegram only, a message written into it at once could reach the hub in
    /// the instant between the creation and the binding's commit, when the topic is nobody's
    /// yet (the hub then offers to move a pi there): a person never writes that fast, a test
    /// does (`operator` failed so in CI once).
    pub fn bound_topic(&self, project: &str, secs: u64) -> i64 {
        let suffix = format!("· {project}");
        let mut found = None;
        wait_for(&format!("the {project} topic, bound"), secs, || {
            found = self
                .fake
                .control()
                .topics(Some(OWNER), None)
                .unwrap()
                .into_iter()
                .find(|t| {
                    t.state != tg_fake::world::TopicState::Deleted && t.name.ends_with(&suffix)
                })
                .map(|t| t.thread_id);
            let Some(thread) = found else {
                return false;
            };
            self.status()["threads"].as_array().is_some_and(|bs| {
                bs.iter()
                    .any(|b| b["thread_id"] == json!(thread) && b["state"] == json!("active"))
            })
        });
        found.unwrap()
    }

    pub fn say(&self, text: &str) -> tg_fake::control::Sent {
        self.say_as(OWNER, text)
    }

    pub fn say_as(&self, user: i64, text: &str) -> tg_fake::control::Sent {
        self.fake
            .control()
            .send_text(tg_fake::control::SendText {
                text: text.into(),
                user_id: Some(user),
                ..Default::default()
            })
            .unwrap()
    }

    /// Messages the bot sent to `chat` (not deleted), in order.
    pub fn bot_texts(&self, chat: i64) -> Vec<String> {
        self.fake
            .control()
            .transcript(Some(chat), tg_fake::control::ThreadFilter::All, None)
            .map(|t| {
                t.into_iter()
                    .filter(|m| m.from_bot && !m.deleted)
                    .filter_map(|m| m.text)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn open_store(&self) -> store::Store {
        store::Store::open_for_reading(&self.state_db())
            .unwrap()
            .unwrap()
    }
}

/// A pi's extension starts a hub (detached) when none runs: at the end of a test, passed or
/// failed, that hub would outlive the test and its deleted folder.
impl Drop for Env {
    fn drop(&mut self) {
        stop_hubs_of(&self.agent);
    }
}

/// The `pi-telegram serve` processes of agent dir `agent`: those holding one of its profiles'
/// locks and (where `/proc` tells) those whose environment names it, which catches a hub still
/// starting up.
pub fn hubs_of(agent: &Path) -> Vec<u32> {
    let mut pids = std::collections::BTreeSet::new();
    if let Ok(profiles) = std::fs::read_dir(agent.join("telegram")) {
        for p in profiles.flatten() {
            if let Ok(Some(pid)) = hub::lock::ProfileLock::holder(&p.path().join("hub.lock"))
                && is_serve(pid)
            {
                pids.insert(pid);
            }
        }
    }
    let wanted = format!("PI_CODING_AGENT_DIR={}", agent.display());
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            // Only our own processes' environments are readable.
            let Ok(environ) = std::fs::read(p.path().join("environ")) else {
                continue;
            };
            if environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()) && is_serve(pid) {
                pids.insert(pid);
            }
        }
    }
    pids.into_iter().collect()
}

/// Whether `pid` runs `pi-telegram serve` (a pid alone may be someone else's by now).
pub fn is_serve(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        // No /proc (macOS): the lock's holder is trusted.
        return !Path::new("/proc/self").exists();
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.first().is_some_and(|a| a.ends_with(b"pi-telegram")) && args.contains(&&b"serve"[..])
}

/// Stops the hubs of `agent` ([`hubs_of`]): SIGTERM, SIGKILL for those still there after 10 s.
pub fn stop_hubs_of(agent: &Path) {
    let pids = hubs_of(agent);
    if pids.is_empty() {
        return;
    }
    let signal = |sig: &str, pids: &[u32]| {
        for pid in pids {
            let _ = Command::new("kill")
                .args([sig, &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    };
    signal("-TERM", &pids);
    let deadline = Instant::now() + Duration::from_secs(10);
    let alive = |pids: &[u32]| -> Vec<u32> {
        let proc_fs = Path::new("/proc/self").exists();
        pids.iter()
            .copied()
            .filter(|p| {
                if proc_fs {
                    is_serve(*p)
                } else {
                    Command::new("kill")
                        .args(["-0", &p.to_string()])
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                }
            })
            .collect()
    };
    while !alive(&pids).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-KILL", &alive(&pids));
}

pub struct Hub {
    pub child: Option<Child>,
    pub log: PathBuf,
}

impl Hub {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to end; returns its exit code (None when killed by a signal).
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().unwrap();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the hub did not exit; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) -> Option<i32> {
        self.signal("TERM");
        self.wait(Duration::from_secs(20))
    }

    pub fn kill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.child = None;
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits (for at most `secs`) until `cond` holds.
pub fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Real pi against the fake LLM, sharing the hub's agent dir.
/// Faults at tg-fake on the calls a conversation takes, as the soak and the power-loss harness
/// arm them.
pub mod faults {
    use std::collections::BTreeMap;

    use tg_fake::faults::{DOWNLOAD, FaultKind, FaultSpec};

    use super::Env;

    /// The calls a person's messages and pi's answers take (topic calls are left alone).
    const FAULTED: [&str; 14] = [
        "getUpdates",
        "getFile",
        DOWNLOAD,
        "sendMessage",
        "sendRichMessage",
        "sendDocument",
        "editMessageText",
        "editMessageReplyMarkup",
        "sendMessageDraft",
        "sendRichMessageDraft",
        "sendChatAction",
        "deleteMessage",
        "setMessageReaction",
        "answerCallbackQuery",
    ];

    /// Arms tg-fake to fail `percent` % of the calls in [`FAULTED`], spread over four kinds.
    pub fn arm(env: &Env, percent: u64) {
        if percent == 0 {
            return;
        }
        let kinds = [
            FaultKind::Http500,
            FaultKind::DropBefore,
            FaultKind::CommitThenDrop,
            FaultKind::Delay,
        ];
        let each = percent as f64 / 100.0 / kinds.len() as f64;
        for method in FAULTED {
            for kind in kinds {
                env.fake
                    .control()
                    .add_fault(FaultSpec {
                        method: method.into(),
                        kind,
                        count: None,
                        probability: Some(each),
                        retry_after: None,
                        delay_ms: Some(300),
                    })
                    .unwrap();
            }
        }
    }

    /// The faults that fired so far, by kind.
    pub fn fired(env: &Env) -> BTreeMap<String, usize> {
        env.fake
            .control()
            .requests(0, None)
            .into_iter()
            .filter_map(|r| r.fault)
            .fold(BTreeMap::new(), |mut m, f| {
                *m.entry(f).or_default() += 1;
                m
            })
    }
}

pub mod pi {
    use std::time::Duration;

    use fake_llm::{FakeLlm, FakeLlmConfig};
    use pi_testkit::PiEnv;

    use super::Env;

    pub struct PiSetup {
        pub env: Env,
        pub llm: FakeLlm,
        pub pi: PiEnv,
    }

    /// tg-fake, the fake LLM and a pi environment whose agent dir is also the hub's, with the
    /// owner preset. `None` only when pi tests are explicitly skipped.
    pub fn setup() -> Option<PiSetup> {
        setup_with(tg_fake::FakeConfig::default())
    }

    /// [`setup`] with the bot's Threaded Mode on.
    pub fn setup_threaded() -> Option<PiSetup> {
        setup_with(tg_fake::FakeConfig {
            has_topics_enabled: true,
            ..tg_fake::FakeConfig::default()
        })
    }

    pub fn setup_with(config: tg_fake::FakeConfig) -> Option<PiSetup> {
        let pi_bin = pi_testkit::require_pi()?;
        let llm = FakeLlm::start_background(FakeLlmConfig {
            slow_delay: Duration::from_millis(150),
            ..Default::default()
        })
        .unwrap();
        let pi = PiEnv::with_pi(pi_bin.clone(), llm.base_url()).unwrap();
        let mut env = Env::with(config);
        env.agent = pi.agent_dir().to_owned();
        env.extra_env = pi
            .envs()
            .into_iter()
            .filter(|(k, _)| k != "PI_CODING_AGENT_DIR")
            .collect();
        env.extra_env
            .push(("PI_TELEGRAM_PI_BIN".into(), pi_bin.display().to_string()));
        env.preset_owner();
        Some(PiSetup { env, llm, pi })
    }

    /// A project folder `name` under pi's work root; its canonical path.
    pub fn project(pi: &PiEnv, name: &str) -> String {
        let dir = pi.root().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap().display().to_string()
    }

    /// `pi-telegram install-extension`: the pi the test runs load the extension.
    pub fn install_extension(s: &PiSetup) {
        let out = s.env.run(&["install-extension"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// pi with the extension in `dir` (`None`: pi's work folder), its terminal played by an
    /// RPC host, after `/telegram-connect` answered.
    pub fn connected_pi(s: &PiSetup, dir: Option<&str>) -> pi_testkit::PiRpc {
        let mut cmd = s.pi.command(["--mode", "rpc", "--no-session"]);
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        let mut pi = pi_testkit::PiRpc::spawn(cmd).unwrap();
        let connect = serde_json::json!({
            "id": "connect", "type": "prompt", "message": "/telegram-connect"
        });
        pi.send(&connect).unwrap();
        pi.read_until(
            Duration::from_secs(60),
            "the connect command",
            |v: &serde_json::Value| v["type"] == "response" && v["id"] == "connect",
        )
        .unwrap();
        pi
    }

    /// How many model requests had `needle` in their last user message.
    pub fn prompts_containing(llm: &FakeLlm, needle: &str) -> usize {
        llm.requests()
            .iter()
            .filter(|r| {
                r["messages"]
                    .as_array()
                    .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                    .is_some_and(|m| m["content"].to_string().contains(needle))
            })
            .count()
    }
}

/// A scripted stand-in for the extension on `hub.sock` (blocking), for tests that need exact
/// control over what an instance says.
pub mod shim {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::Env;

    pub struct Shim {
        pub reader: BufReader<UnixStream>,
        pub writer: UnixStream,
        pub instance_id: String,
    }

    pub fn hello(env: &Env, cwd: &str, pid: i64, received: Value, completed: Value) -> Value {
        let secret = std::fs::read_to_string(env.profile_dir().join("hub.secret")).unwrap();
        json!({ "type": "hello", "protocol": 1, "role": "instance", "secret": secret.trim(),
                "pid": pid, "cwd": cwd, "mode": "tui", "reason": "startup",
                "session_id": format!("s{pid}"), "idle": true, "pending": false,
                "received_turns": received, "completed_turns": completed })
    }

    impl Shim {
        /// Connects and says `hello`; waits for the welcome.
        pub fn connect(env: &Env, hello: &Value) -> Self {
            let stream = UnixStream::connect(env.profile_dir().join("hub.sock")).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let mut s = Self {
                reader: BufReader::new(stream.try_clone().unwrap()),
                writer: stream,
                instance_id: String::new(),
            };
            s.send(hello);
            let w = s.recv_type("welcome");
            s.instance_id = w["instance_id"].as_str().unwrap_or_default().to_owned();
            s
        }

        /// An instance in `cwd` with process id `pid` that reports nothing.
        pub fn plain(env: &Env, cwd: &str, pid: i64) -> Self {
            Self::connect(env, &hello(env, cwd, pid, json!([]), json!([])))
        }

        pub fn send(&mut self, v: &Value) {
            self.send_raw(&format!("{v}\n"));
        }

        pub fn send_raw(&mut self, s: &str) {
            let _ = self.writer.write_all(s.as_bytes());
        }

        /// The next message; `None` when the hub closed the connection.
        pub fn recv(&mut self) -> Option<Value> {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(serde_json::from_str(&line).unwrap()),
            }
        }

        /// The next message of `ty`, skipping status and notifications.
        pub fn recv_type(&mut self, ty: &str) -> Value {
            loop {
                let m = self
                    .recv()
                    .unwrap_or_else(|| panic!("closed while waiting for {ty}"));
                if m["type"] == ty {
                    return m;
                }
                // Scripted instances list no commands of their own.
                if m["type"] == "get_commands" {
                    self.send(&serde_json::json!({ "type": "response", "id": m["id"], "ok": true, "data": { "commands": [] } }));
                    continue;
                }
                assert!(
                    matches!(
                        m["type"].as_str(),
                        Some("set_status" | "notify" | "done_ack")
                    ),
                    "expected {ty}, got {m}"
                );
            }
        }

        /// Answers a prompt: ack, start, settle, then turn_done with `answer`.
        pub fn answer(&mut self, prompt: &Value, answer: &str) {
            let turn = prompt["turn_id"].clone();
            self.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }));
            self.send(
                &json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_start" } }),
            );
            self.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_settled", "aborted": false } }));
            self.send(&json!({ "type": "turn_done", "turn_id": turn, "text": answer, "aborted": false, "error": null }));
        }

        /// Leaves as `/telegram-disconnect` does.
        pub fn disconnect(mut self) {
            self.send(&json!({ "type": "bye", "reason": "disconnect" }));
        }
    }
}

/// The journal: update id -> (handled?, outcome).
pub fn journal(env: &Env) -> std::collections::BTreeMap<i64, (bool, String)> {
    let s = env.open_store();
    s.read(|c| {
        let mut stmt = c
            .prepare("SELECT update_id, handled_ms IS NOT NULL, coalesce(outcome, '') FROM journal")
            .map_err(store::StoreError::from)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    (r.get::<_, bool>(1)?, r.get::<_, String>(2)?),
                ))
            })
            .map_err(store::StoreError::from)?;
        Ok::<_, store::StoreError>(rows.map(|r| r.unwrap()).collect())
    })
    .unwrap()
}
