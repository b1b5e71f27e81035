//! The install a person does, end to end through a real npm registry: the packages
//! `scripts/package.sh` builds are published to verdaccio on loopback, `pi install
//! npm:pi-telegram` brings the extension and this machine's hub, and inside pi (RPC)
//! `/telegram-setup` takes the token, the fake person pairs with `/start CODE`,
//! `/telegram-connect` starts the packaged hub and pi answers. Then `pi update` to the next
//! release: the running hub is replaced by the new one without losing the message that waited
//! for pi; and `pi remove` leaves the person's state, which the hub names as it stops.
//!
//! No Rust toolchain is on PATH for pi, npm or the hub in these tests (`no_rust_path`).
//!
//! Needs `.cache/test-deps/bin/verdaccio` (scripts/install-test-deps.sh) and, for the update,
//! the next release's hub in `PI_TELEGRAM_NEXT_HUB` (scripts/test.sh builds it).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::pi::prompts_containing;
use common::{Env, OWNER, TOKEN, wait_for};
use fake_llm::{FakeLlm, FakeLlmConfig};
use pi_testkit::{PiEnv, PiRpc};
use serde_json::{Value, json};

/// The platform package npm picks on this machine (the only one these tests build).
const PLATFORM: &str = "linux-x64-gnu";

fn workspace() -> PathBuf {
    pi_testkit::workspace_root()
}

/// verdaccio, npm's registry server, on a loopback port of its own; stopped on drop.
struct Registry {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Self {
        let bin = workspace().join(".cache/test-deps/bin/verdaccio");
        assert!(
            bin.exists(),
            "{} is missing: run scripts/install-test-deps.sh (scripts/test.sh does)",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "storage: {storage}\n\
                 auth:\n  htpasswd:\n    file: {htpasswd}\n\
                 uplinks: {{}}\n\
                 packages:\n  '**':\n    access: $all\n    publish: $all\n    unpublish: $all\n\
                 max_body_size: 500mb\n\
                 log: {{ type: stdout, format: pretty, level: warn }}\n",
                storage = dir.path().join("storage").display(),
                htpasswd = dir.path().join("htpasswd").display(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("verdaccio.log")).unwrap();
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/");
        let registry = Self {
            child,
            url,
            _dir: dir,
        };
        wait_for("verdaccio to answer", 60, || {
            http_get_status(port, "/-/ping") == Some(200)
        });
        registry
    }

    /// The `.npmrc` every npm of a test reads: this registry, and a token for publishing
    /// (verdaccio here lets anyone publish; npm insists on sending something).
    fn npmrc(&self, dir: &Path) -> PathBuf {
        let host = self.url.trim_start_matches("http:");
        let path = dir.join("npmrc");
        std::fs::write(
            &path,
            format!("registry={}\n{host}:_authToken=test-token\n", self.url),
        )
        .unwrap();
        path
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The HTTP status of `GET path` on the loopback `port`, or `None` when nothing answers.
fn http_get_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// PATH without any folder holding `cargo` or `rustc`: what a person without Rust has.
fn no_rust_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    let kept: Vec<&str> = path
        .split(':')
        .filter(|d| {
            !d.is_empty()
                && !Path::new(d).join("cargo").exists()
                && !Path::new(d).join("rustc").exists()
        })
        .collect();
    kept.join(":")
}

/// The two packages of one release, built by `scripts/package.sh` from `binary`.
struct Release {
    version: String,
    main: PathBuf,
    platform: PathBuf,
}

fn package(binary: &Path, out: &Path) -> Release {
    let said = Command::new(binary).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&said.stdout)
        .trim()
        .strip_prefix("pi-telegram ")
        .unwrap_or_else(|| panic!("{} --version: {said:?}", binary.display()))
        .to_owned();
    let out = out.join(&version);
    let run = Command::new("bash")
        .arg(workspace().join("scripts/package.sh"))
        .arg("--binary")
        .arg(binary)
        .args(["--platform", PLATFORM, "--version", &version, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "package.sh failed: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    Release {
        main: out.join(format!("pi-telegram-{version}.tgz")),
        platform: out.join(format!("pi-telegram-{PLATFORM}-{version}.tgz")),
        version,
    }
}

/// Everything one test needs: tg-fake with no owner yet, the fake LLM, a pi environment
/// whose agent dir the hub shares, the registry and the npm settings pointing at it.
struct World {
    env: Env,
    llm: FakeLlm,
    pi: PiEnv,
    registry: Registry,
    npmrc: PathBuf,
    scratch: tempfile::TempDir,
}

impl World {
    fn new() -> Option<Self> {
        let pi_bin = pi_testkit::require_pi()?;
        let llm = FakeLlm::start_background(FakeLlmConfig {
            slow_delay: Duration::from_millis(300),
            ..Default::default()
        })
        .unwrap();
        let pi = PiEnv::with_pi(pi_bin, llm.base_url()).unwrap();
        let mut env = Env::new();
        env.agent = pi.agent_dir().to_owned();
        let registry = Registry::start();
        let scratch = tempfile::tempdir().unwrap();
        let npmrc = registry.npmrc(scratch.path());
        Some(Self {
            env,
            llm,
            pi,
            registry,
            npmrc,
            scratch,
        })
    }

    /// The environment of pi and what it runs (npm, the hub) in these tests.
    fn apply(&self, cmd: &mut Command) {
        cmd.env("PATH", no_rust_path())
            .env("npm_config_userconfig", &self.npmrc)
            .env("npm_config_registry", &self.registry.url)
            .env("npm_config_cache", self.scratch.path().join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .env("npm_config_audit", "false")
            .env("npm_config_fund", "false")
            // Only the hub the package brings: nothing from the test's own build.
            .env_remove("PI_TELEGRAM_BIN")
            .env("TELEGRAM_API_BASE", self.env.fake.base_url())
            .env("PI_TELEGRAM_POLL_TIMEOUT_SECS", "2")
            .env("PI_TELEGRAM_PROFILE_CHECK_SECS", "1")
            .env("PI_TELEGRAM_LOG", "info");
        for var in [
            "TELEGRAM_BOT_TOKEN",
            "TELEGRAM_TOKEN",
            "PI_TELEGRAM_CRASH_AT",
        ] {
            cmd.env_remove(var);
        }
    }

    fn publish(&self, release: &Release) {
        // The platform package first: the pi package's optionalDependencies name it.
        for tgz in [&release.platform, &release.main] {
            let mut cmd = Command::new("npm");
            self.apply(&mut cmd);
            let out = cmd
                .arg("publish")
                .arg(tgz)
                .args(["--registry", &self.registry.url])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "npm publish {}: {}",
                tgz.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// `pi ARGS` (a package command), its output.
    fn pi_cli(&self, args: &[&str]) -> Output {
        let mut cmd = self.pi.command(args);
        self.apply(&mut cmd);
        cmd.stdin(Stdio::null()).output().unwrap()
    }

    fn spawn_pi(&self) -> PiRpc {
        let mut cmd = self.pi.command(["--mode", "rpc", "--no-session"]);
        self.apply(&mut cmd);
        PiRpc::spawn(cmd).unwrap()
    }

    /// The hub binary pi's npm installed, found under the agent dir.
    fn installed_binary(&self) -> Option<PathBuf> {
        find_file(
            self.pi.agent_dir(),
            &format!("pi-telegram-{PLATFORM}/bin/pi-telegram"),
        )
    }

    fn installed_version(&self) -> Option<String> {
        let manifest = find_file(self.pi.agent_dir(), "node_modules/pi-telegram/package.json")?;
        let v: Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
        v["version"].as_str().map(str::to_owned)
    }

    /// The hub's pid and release, as `pi-telegram status` reports them.
    fn hub(&self) -> (Option<i64>, Option<String>, Option<String>) {
        let st = self.env.status();
        (
            st["hub"]["pid"].as_i64(),
            st["hub"]["version"].as_str().map(str::to_owned),
            st["hub"]["binary"].as_str().map(str::to_owned),
        )
    }
}

/// The first file under `root` whose path ends with `suffix`.
fn find_file(root: &Path, suffix: &str) -> Option<PathBuf> {
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                return Some(path);
            }
        }
    }
    None
}

/// What pi's notifications said while `records` were read (of level `level` only, if given).
fn said(records: &[Value], level: Option<&str>) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] == "notify")
        .filter(|r| level.is_none_or(|l| r["notifyType"] == l))
        .filter_map(|r| r["message"].as_str().map(str::to_owned))
        .collect()
}

fn notices(records: &[Value]) -> Vec<String> {
    said(records, None)
}

/// The error notifications among `records`.
fn errors(records: &[Value]) -> Vec<String> {
    said(records, Some("error"))
}

/// Runs the pi command `line` (an extension's slash command) and returns every record up to
/// its response; `token` answers an input dialog if one is asked.
fn command(pi: &mut PiRpc, id: &str, line: &str, token: Option<&str>) -> Vec<Value> {
    pi.send(&json!({ "id": id, "type": "prompt", "message": line }))
        .unwrap();
    let mut all = Vec::new();
    loop {
        let got = pi
            .read_until(Duration::from_secs(90), &format!("{line} to finish"), |v| {
                (v["type"] == "response" && v["id"] == id)
                    || (v["type"] == "extension_ui_request" && v["method"] == "input")
            })
            .unwrap();
        let last = got.last().cloned().unwrap_or(Value::Null);
        all.extend(got);
        if last["type"] == "response" {
            return all;
        }
        let answer = match token {
            Some(t) => json!({ "type": "extension_ui_response", "id": last["id"], "value": t }),
            None => json!({ "type": "extension_ui_response", "id": last["id"], "cancelled": true }),
        };
        pi.send(&answer).unwrap();
    }
}

/// Reads pi's records until a notification containing `needle`; returns it.
fn notice_containing(pi: &mut PiRpc, needle: &str, secs: u64) -> String {
    let got = pi
        .read_until(
            Duration::from_secs(secs),
            &format!("a notice with {needle:?}"),
            |v| {
                v["type"] == "extension_ui_request"
                    && v["method"] == "notify"
                    && v["message"].as_str().is_some_and(|m| m.contains(needle))
            },
        )
        .unwrap();
    got.last().unwrap()["message"].as_str().unwrap().to_owned()
}

fn count(texts: &[String], wanted: &str) -> usize {
    texts.iter().filter(|t| *t == wanted).count()
}

fn next_hub() -> PathBuf {
    let next = std::env::var_os("PI_TELEGRAM_NEXT_HUB").map(PathBuf::from);
    match next {
        Some(p) if p.exists() => p,
        _ => panic!(
            "PI_TELEGRAM_NEXT_HUB must name the next release's hub binary: scripts/test.sh builds \
             it (PI_TELEGRAM_BUILD_VERSION=<next> cargo build -p pi-telegram) and sets it"
        ),
    }
}

#[test]
fn installed_from_a_registry_set_up_inside_pi_answers_and_is_replaced_on_update() {
    let Some(w) = World::new() else { return };
    let next = next_hub();
    let v1 = package(
        Path::new(env!("CARGO_BIN_EXE_pi-telegram")),
        w.scratch.path(),
    );
    let v2 = package(&next, w.scratch.path());
    assert_ne!(
        v1.version, v2.version,
        "the next hub must be another release"
    );
    w.publish(&v1);

    // From here on the clock runs as it does for a person: install, set up, pair, connect.
    let started = Instant::now();
    let out = w.pi_cli(&["install", "npm:pi-telegram"]);
    assert!(
        out.status.success(),
        "pi install: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let installed_in = started.elapsed();
    let binary = w
        .installed_binary()
        .expect("pi install brought no hub binary");
    assert_eq!(w.installed_version().as_deref(), Some(v1.version.as_str()));

    let mut pi = w.spawn_pi();
    let said = notices(&command(&mut pi, "setup", "/telegram-setup", Some(TOKEN)));
    let pairing = said
        .iter()
        .find(|m| m.contains("Pair with it"))
        .unwrap_or_else(|| panic!("no pairing code shown: {said:?}"));
    let code = pairing
        .split("/start ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    assert!(
        !said.iter().any(|m| m.contains(TOKEN)),
        "the token was echoed: {said:?}"
    );
    w.env.say(&format!("/start {code}"));
    command(&mut pi, "connect", "/telegram-connect", None);
    w.env.say("hello from the phone");
    wait_for("pi's first answer", 60, || {
        count(&w.env.bot_texts(OWNER), "echo: hello from the phone") == 1
    });
    let first_answer_in = started.elapsed();
    eprintln!(
        "npm_install: pi install {:.1} s; install to first answer {:.1} s",
        installed_in.as_secs_f64(),
        first_answer_in.as_secs_f64()
    );

    // The hub runs the packaged binary, and both pi and the hub say so.
    let (pid1, version, running) = w.hub();
    let pid1 = pid1.expect("no hub running");
    assert_eq!(version.as_deref(), Some(v1.version.as_str()));
    assert_eq!(running.as_deref(), Some(binary.to_str().unwrap()));
    let status = notices(&command(&mut pi, "status", "/telegram-status", None)).join("\n");
    assert!(
        status.contains(&format!("hub binary: {}", binary.display()))
            && status.contains(&format!("the pi-telegram-{PLATFORM} package"))
            && status.contains(&format!("release {}", v1.version))
            && status.contains(&format!("extension: pi-telegram {}", v1.version)),
        "{status}"
    );

    // pi goes away; the person writes meanwhile; pi-telegram is updated; pi comes back.
    let _ = pi.close(Duration::from_secs(20));
    wait_for("the hub to see pi go", 30, || {
        w.env
            .bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi work is gone"))
    });
    w.env.say("kept while pi was away");
    wait_for("the hub to keep it", 30, || {
        w.env
            .bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("No pi instance is connected, so I am keeping"))
    });
    w.publish(&v2);
    // Without PI_OFFLINE (the tests' pi otherwise runs with it): offline, pi updates nothing.
    let mut cmd = w.pi.command(["update", "npm:pi-telegram"]);
    w.apply(&mut cmd);
    let out = cmd
        .env_remove("PI_OFFLINE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pi update: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(w.installed_version().as_deref(), Some(v2.version.as_str()));
    assert_eq!(
        w.hub().0,
        Some(pid1),
        "the old hub runs on until a pi of the new release comes"
    );

    let mut pi = w.spawn_pi();
    let said = notice_containing(&mut pi, "replacing the running hub", 60);
    assert!(
        said.contains(&v1.version) && said.contains(&v2.version),
        "{said}"
    );
    wait_for("the new hub", 60, || {
        let (pid, version, _) = w.hub();
        pid.is_some_and(|p| p != pid1) && version.as_deref() == Some(v2.version.as_str())
    });
    wait_for("the kept message's answer", 60, || {
        count(&w.env.bot_texts(OWNER), "echo: kept while pi was away") >= 1
    });
    w.env.say("and after the update");
    wait_for("an answer from the new hub", 60, || {
        count(&w.env.bot_texts(OWNER), "echo: and after the update") == 1
    });
    let texts = w.env.bot_texts(OWNER);
    assert_eq!(
        count(&texts, "echo: kept while pi was away"),
        1,
        "{texts:?}"
    );
    assert_eq!(prompts_containing(&w.llm, "kept while pi was away"), 1);
    assert_eq!(prompts_containing(&w.llm, "hello from the phone"), 1);

    // pi remove: the package goes, the person's setup and history stay, and the hub, whose
    // binary went with the package, stops and says where they are.
    let _ = pi.close(Duration::from_secs(20));
    let (pid2, _, _) = w.hub();
    let out = w.pi_cli(&["remove", "npm:pi-telegram"]);
    assert!(
        out.status.success(),
        "pi remove: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(w.installed_binary().is_none());
    wait_for("the hub to stop", 30, || {
        pid2.is_some_and(|p| !common::is_serve(p as u32))
    });
    assert!(w.env.config_path().exists(), "telegram.json was removed");
    assert!(w.env.state_db().exists(), "state.db was removed");
    let texts = w.env.bot_texts(OWNER);
    let farewell = texts
        .iter()
        .find(|t| t.contains("was removed"))
        .unwrap_or_else(|| panic!("the hub said nothing as it stopped: {texts:?}"));
    assert!(
        farewell.contains(&w.env.config_path().display().to_string()),
        "{farewell}"
    );
}

#[test]
fn bad_input_at_install_and_setup_gets_one_sentence_and_changes_nothing() {
    let Some(w) = World::new() else { return };
    let settings = w.pi.agent_dir().join("settings.json");
    let settings_before = std::fs::read(&settings).unwrap();

    // A registry that is down.
    let mut cmd = w.pi.command(["install", "npm:pi-telegram"]);
    w.apply(&mut cmd);
    let out = cmd
        .env(
            "npm_config_registry",
            format!("http://127.0.0.1:{}/", free_port()),
        )
        .env("npm_config_fetch_retries", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "pi install with the registry down succeeded"
    );
    // pi's and npm's words (none of ours runs before the package is there): they name the
    // registry that did not answer.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("ECONNREFUSED 127.0.0.1:"), "{said}");
    assert_eq!(std::fs::read(&settings).unwrap(), settings_before);
    assert!(w.installed_binary().is_none());

    let v1 = package(
        Path::new(env!("CARGO_BIN_EXE_pi-telegram")),
        w.scratch.path(),
    );
    w.publish(&v1);
    let out = w.pi_cli(&["install", "npm:pi-telegram"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let binary = w.installed_binary().unwrap();

    // A token Telegram refuses: said, and no telegram.json written.
    let mut pi = w.spawn_pi();
    let said = notices(&command(
        &mut pi,
        "bad",
        "/telegram-setup",
        Some("1234:not-a-token"),
    ));
    eprintln!("npm_install: a refused token: {said:?}");
    let refusal: Vec<&String> = said
        .iter()
        .filter(|m| m.contains("telegram-setup"))
        .collect();
    assert_eq!(refusal.len(), 1, "{said:?}");
    assert!(
        refusal[0].contains("refused this token")
            && refusal[0].contains("nothing was saved")
            && refusal[0].contains("/telegram-setup again")
            && !refusal[0].contains("not-a-token"),
        "{refusal:?}"
    );
    assert!(!w.env.config_path().exists());

    // The packaged binary not executable, then missing: one sentence naming it and the fix,
    // nothing started.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&binary).unwrap().permissions();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o644)).unwrap();
    let said = errors(&command(&mut pi, "noexec", "/telegram-connect", None));
    assert!(
        said.len() == 1
            && said[0].contains("is not executable")
            && said[0].contains("`pi remove npm:pi-telegram`, then `pi install npm:pi-telegram`"),
        "{said:?}"
    );
    eprintln!("npm_install: not executable: {said:?}");
    std::fs::set_permissions(&binary, mode).unwrap();
    let kept = w.scratch.path().join("kept-binary");
    std::fs::rename(&binary, &kept).unwrap();
    let said = errors(&command(&mut pi, "missing", "/telegram-setup", Some(TOKEN)));
    assert!(
        said.len() == 1 && said[0].contains("is missing") && said[0].contains("pi install"),
        "{said:?}"
    );
    eprintln!("npm_install: missing: {said:?}");
    // The advice works: removing and installing again brings the binary back, and what
    // the person set up (nothing yet here but pi's settings) is as it was.
    for args in [
        ["remove", "npm:pi-telegram"],
        ["install", "npm:pi-telegram"],
    ] {
        let out = w.pi_cli(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        binary.exists(),
        "pi install again did not bring the hub back"
    );
    assert!(!w.env.config_path().exists());
    assert!(w.hub().0.is_none(), "a hub was started");
    let _ = pi.close(Duration::from_secs(20));

    // A platform with no prebuilt hub (faked for Node: process.arch), with no pi-telegram on
    // PATH: the message names `cargo install`.
    let fake = w.scratch.path().join("riscv.mjs");
    std::fs::write(
        &fake,
        "Object.defineProperty(process, 'arch', { value: 'riscv64' });\n",
    )
    .unwrap();
    let mut cmd = w.pi.command(["--mode", "rpc", "--no-session"]);
    w.apply(&mut cmd);
    cmd.env("NODE_OPTIONS", format!("--import={}", fake.display()));
    let mut pi = PiRpc::spawn(cmd).unwrap();
    let said = errors(&command(&mut pi, "other", "/telegram-setup", Some(TOKEN)));
    assert!(
        said.len() == 1
            && said[0].contains("no prebuilt hub for linux riscv64")
            && said[0].contains("cargo install pi-telegram"),
        "{said:?}"
    );
    eprintln!("npm_install: another platform: {said:?}");
    let _ = pi.close(Duration::from_secs(20));
    assert!(!w.env.config_path().exists());
}
