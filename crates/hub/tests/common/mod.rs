//! An in-process hub against an in-process tg-fake, and a scriptable fake of the extension's
//! side of `hub.sock`, for protocol and conductor tests without pi.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use hub::paths::{AgentDir, ProfileName, ProfilePaths};
use hub::serve::{ServeOptions, Tuning, serve};
use serde_json::{Value, json};
use tg_fake::{FakeConfig, FakeServer};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;
use wire::LineReader;

pub const OWNER: i64 = tg_fake::DEFAULT_USER_ID;

/// Waits (15 s at most) until `probe` returns something.
pub async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub struct TestHub {
    pub fake: FakeServer,
    pub dir: tempfile::TempDir,
    pub paths: ProfilePaths,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), hub::HubError>>>,
}

pub fn tuning() -> Tuning {
    Tuning {
        poll_timeout: Duration::from_secs(2),
        conflict_grace: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
        write_timeout: Duration::from_millis(800),
        probe_every: Duration::from_millis(300),
        retention_every: Duration::from_secs(600),
        retention_age: None,
        profile_check_every: Duration::from_millis(200),
        client_timeout: Duration::from_secs(30),
        remote_log_every: Duration::from_secs(60),
    }
}

impl TestHub {
    pub async fn start() -> Self {
        Self::start_with(FakeConfig::default()).await
    }

    /// With the bot's Threaded Mode on.
    pub async fn threaded() -> Self {
        Self::start_with(FakeConfig {
            has_topics_enabled: true,
            ..FakeConfig::default()
        })
        .await
    }

    pub async fn start_with(config: FakeConfig) -> Self {
        let mut hub = Self::prepare(config, json!({})).await;
        hub.launch().await;
        hub
    }

    /// A fake and a profile (with `extra` merged into it) but no hub yet: a test can arm
    /// faults or set the fake up before the hub's first call, then [`TestHub::launch`].
    pub async fn prepare(config: FakeConfig, extra: Value) -> Self {
        let fake = FakeServer::start(config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut profile = json!({ "botToken": tg_fake::DEFAULT_TOKEN, "allowedUserId": OWNER,
            "apiBase": fake.base_url(),
            "pacing": { "perChatPerSec": 1000.0, "perChatBurst": 1000, "globalPerSec": 1000.0, "globalBurst": 1000 } });
        if let (Some(p), Some(e)) = (profile.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                p.insert(k.clone(), v.clone());
            }
        }
        let cfg = json!({ "profiles": { "default": profile } });
        std::fs::write(dir.path().join("telegram.json"), cfg.to_string()).unwrap();
        let agent = AgentDir::at(dir.path());
        let paths = agent.profile(&ProfileName::default_profile());
        Self {
            fake,
            dir,
            paths,
            stop: None,
            task: None,
        }
    }

    /// (Re)starts the hub on the same agent dir.
    pub async fn launch(&mut self) {
        self.launch_tuned(tuning()).await;
    }

    /// Starts the hub with `tuning`; panics when it stops instead of opening its socket. The
    /// deadline is only against a hang: sixteen hubs starting at once on a loaded machine (the
    /// fault matrix) took more than 10 s.
    pub async fn launch_tuned(&mut self, tuning: Tuning) {
        self.spawn(tuning);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.paths.socket().exists() {
            if self.task.as_ref().is_some_and(|t| t.is_finished()) {
                let task = self.task.take().unwrap();
                panic!("the hub stopped while starting: {:?}", task.await);
            }
            assert!(Instant::now() < deadline, "the hub did not open its socket");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Starts the hub and waits for it to stop on its own (start-up refused): its error.
    pub async fn launch_expecting_failure(&mut self) -> hub::HubError {
        self.spawn(tuning());
        let task = self.task.take().unwrap();
        let r = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the hub kept running")
            .unwrap();
        self.stop = None;
        r.expect_err("the hub stopped without an error")
    }

    fn spawn(&mut self, tuning: Tuning) {
        let _ = std::fs::remove_file(self.paths.socket());
        let opts = ServeOptions {
            agent_dir: AgentDir::at(self.dir.path()),
            profile: ProfileName::default_profile(),
            tuning,
            instances_at_start: Vec::new(),
            child_extension: None,
            version: env!("CARGO_PKG_VERSION"),
        };
        let (tx, rx) = oneshot::channel::<()>();
        self.stop = Some(tx);
        self.task = Some(tokio::spawn(serve(opts, async move {
            let _ = rx.await;
        })));
    }

    pub async fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }

    pub fn say(&self, text: &str) -> tg_fake::control::Sent {
        self.fake
            .control()
            .send_text(tg_fake::control::SendText {
                text: text.into(),
                ..Default::default()
            })
            .unwrap()
    }

    pub fn reply_to(&self, message_id: i64, text: &str) -> tg_fake::control::Sent {
        self.fake
            .control()
            .send_text(tg_fake::control::SendText {
                text: text.into(),
                reply_to_message_id: Some(message_id),
                ..Default::default()
            })
            .unwrap()
    }

    /// Bot messages in the owner's chat: (message id, text, replied-to id).
    pub fn bot_messages(&self) -> Vec<(i64, String, Option<i64>)> {
        self.fake
            .control()
            .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .filter(|m| m.from_bot && !m.deleted)
            .map(|m| {
                (
                    m.message_id,
                    m.text.unwrap_or_default(),
                    m.reply_to_message_id,
                )
            })
            .collect()
    }

    pub async fn wait_for_bot(
        &self,
        what: &str,
        mut cond: impl FnMut(&[(i64, String, Option<i64>)]) -> bool,
    ) -> Vec<(i64, String, Option<i64>)> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let msgs = self.bot_messages();
            if cond(&msgs) {
                return msgs;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; bot said: {msgs:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn secret(&self) -> String {
        std::fs::read_to_string(self.paths.secret())
            .unwrap()
            .trim()
            .to_owned()
    }

    pub async fn shim(&self, cwd: &str, pid: i64) -> Shim {
        let mut s = Shim::connect(&self.paths).await;
        s.send(&hello(&self.secret(), cwd, pid, json!([]), json!([])))
            .await;
        let w = s.recv_type("welcome").await;
        s.instance_id = w["instance_id"].as_str().unwrap().to_owned();
        s
    }
}

pub fn hello(secret: &str, cwd: &str, pid: i64, received: Value, completed: Value) -> Value {
    json!({ "type": "hello", "protocol": 1, "role": "instance", "secret": secret, "pid": pid, "cwd": cwd,
            "mode": "tui", "reason": "startup", "session_id": format!("s{pid}"), "idle": true, "pending": false,
            "received_turns": received, "completed_turns": completed })
}

pub struct Shim {
    pub lines: LineReader<BufReader<OwnedReadHalf>>,
    pub wr: OwnedWriteHalf,
    pub instance_id: String,
}

impl Shim {
    pub async fn connect(paths: &ProfilePaths) -> Self {
        let stream = UnixStream::connect(paths.socket()).await.unwrap();
        let (rd, wr) = stream.into_split();
        Self {
            lines: LineReader::new(BufReader::new(rd)),
            wr,
            instance_id: String::new(),
        }
    }

    pub async fn send(&mut self, v: &Value) {
        self.send_raw(&format!("{v}\n")).await;
    }

    pub async fn send_raw(&mut self, s: &str) {
        self.wr.write_all(s.as_bytes()).await.unwrap();
    }

    /// Writes what the hub lets through (it may close mid-way, as it should for oversized lines).
    pub async fn send_raw_lossy(&mut self, s: &str) {
        let _ = self.wr.write_all(s.as_bytes()).await;
    }

    /// The next message; `None` when the hub closed the connection.
    pub async fn recv(&mut self) -> Option<Value> {
        match tokio::time::timeout(Duration::from_secs(15), self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Some(serde_json::from_str(&line).unwrap()),
            Ok(Ok(None)) | Ok(Err(_)) => None,
            Err(_) => panic!("no message from the hub within 15 s"),
        }
    }

    /// The next message of `ty`, skipping status and notifications.
    pub async fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let m = self
                .recv()
                .await
                .unwrap_or_else(|| panic!("closed while waiting for {ty}"));
            if m["type"] == ty {
                return m;
            }
            // Scripted instances list no commands of their own.
            if m["type"] == "get_commands" {
                let answer = serde_json::json!({ "type": "response", "id": m["id"], "ok": true, "data": { "commands": [] } });
                self.send_raw_lossy(&format!("{answer}\n")).await;
                continue;
            }
            assert!(
                matches!(
                    m["type"].as_str(),
                    Some("set_status" | "notify" | "done_ack" | "get_commands")
                ),
                "expected {ty}, got {m}"
            );
        }
    }

    /// Starts work on a prompt: ack, then pi's `agent_start` (busy).
    pub async fn start(&mut self, prompt: &Value) {
        let turn = prompt["turn_id"].clone();
        self.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }))
            .await;
        self.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_start" } }))
            .await;
    }

    /// Answers a prompt: ack, a couple of events, then turn_done with `answer`.
    pub async fn answer(&mut self, prompt: &Value, answer: &str) {
        self.start(prompt).await;
        let turn = prompt["turn_id"].clone();
        self.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "message_end",
            "message": { "role": "assistant", "content": [{ "type": "text", "text": answer }], "stopReason": "stop" } } })).await;
        self.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_settled", "aborted": false } })).await;
        self.send(&json!({ "type": "turn_done", "turn_id": turn, "text": answer, "aborted": false, "error": null })).await;
    }
}
