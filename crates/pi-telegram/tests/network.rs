//! Networks that are not perfect: the real binary reaching tg-fake through real proxies
//! (`proxy`, an HTTP proxy with CONNECT, and `simple-socks`, from the npm registry, started on
//! loopback by `.cache/test-deps/bin/http-proxy` and `socks-proxy`: scripts/install-test-deps.sh),
//! `NO_PROXY` going around them, a proxy that goes down and comes back, and the address family
//! (`PI_TELEGRAM_NETWORK_FAMILY`) against a fake listening on one family only.
//!
//! That traffic went through a proxy is read from the proxy's own log: `proxy` logs every
//! request it takes (its `DEBUG=proxy:request` output: `CONNECT 127.0.0.1:<port>` for a tunnel,
//! `POST http://…` for a forwarded request), the SOCKS launcher every connection the package
//! made. With an `https://` base the fake serves TLS from an authority it made
//! (`FakeConfig::tls`), which the hub is told to trust by `SSL_CERT_FILE` as an operator would:
//! the CONNECT tunnel carries real TLS, checked end to end by the hub.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use common::shim::Shim;
use common::{Env, OWNER, TOKEN, wait_for};
use serde_json::{Value, json};
use tg_fake::FakeConfig;

/// A proxy from .cache/test-deps on a loopback port, its log in a file; killed on drop.
struct Proxy {
    bin: &'static str,
    child: Option<Child>,
    _stdout: Option<BufReader<ChildStdout>>,
    port: u16,
    log: PathBuf,
}

impl Proxy {
    /// `bin` (`http-proxy` or `socks-proxy`) on a free port.
    fn start(env: &Env, bin: &'static str) -> Self {
        let mut p = Self {
            bin,
            child: None,
            _stdout: None,
            port: 0,
            log: env.dir.path().join(format!("{bin}.log")),
        };
        p.run();
        p
    }

    fn run(&mut self) {
        let path = pi_testkit::workspace_root().join(format!(".cache/test-deps/bin/{}", self.bin));
        assert!(
            path.is_file(),
            "{} is missing: run scripts/install-test-deps.sh",
            path.display()
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(&path)
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("listening 127.0.0.1 ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}: {line:?}; log: {}", self.bin, self.log_text()));
        self.port = port;
        self.child = Some(child);
        self._stdout = Some(out);
    }

    /// `http://127.0.0.1:<port>` (`socks5://` for the SOCKS one).
    fn url(&self) -> String {
        let scheme = if self.bin == "socks-proxy" {
            "socks5"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self._stdout = None;
    }

    /// The same proxy again, on the same port.
    fn restart(&mut self) {
        self.stop();
        self.run();
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Lines of its log that contain `needle`.
    fn seen(&self, needle: &str) -> usize {
        self.log_text()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An Env whose fake serves HTTPS, the hub trusting the fake's authority (`SSL_CERT_FILE`).
fn tls_env() -> Env {
    let mut env = Env::with(FakeConfig {
        tls: true,
        ..FakeConfig::default()
    });
    let ca = env.dir.path().join("ca.pem");
    std::fs::write(&ca, env.fake.ca_pem().unwrap()).unwrap();
    env.extra_env
        .push(("SSL_CERT_FILE".into(), ca.display().to_string()));
    env.extra_env
        .push(("PI_TELEGRAM_DOCTOR_POLL_SECS".into(), "1".into()));
    env
}

fn set(env: &mut Env, k: &str, v: &str) {
    env.extra_env.retain(|(name, _)| name != k);
    env.extra_env.push((k.into(), v.into()));
}

fn doctor(env: &Env) -> Value {
    let out = env.run(&["doctor", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn check(report: &Value, id: &str) -> Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

fn poll_state(env: &Env, state: &str, secs: u64) -> Value {
    let mut last = Value::Null;
    wait_for(&format!("poll state {state}"), secs, || {
        last = env.status()["poll"].clone();
        last["state"] == state
    });
    last
}

/// Writes the config with the owner preset and `api_base`.
fn preset(env: &Env, api_base: &str) {
    let cfg = json!({ "profiles": { "default": {
        "botToken": TOKEN, "allowedUserId": OWNER, "apiBase": api_base } } });
    std::fs::write(
        env.config_path(),
        serde_json::to_string_pretty(&cfg).unwrap(),
    )
    .unwrap();
}

/// A scripted pi attached and idle, the hub polling.
fn attached(env: &Env) -> Shim {
    wait_for("the hub socket", 30, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let shim = Shim::plain(env, "/tmp/net-project", 4343);
    poll_state(env, "polling", 30);
    shim
}

/// Reads prompts until `n` have come, answering each; returns their texts.
fn prompts(shim: &mut Shim, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    while got.len() < n {
        let m = shim
            .recv()
            .expect("the hub closed the instance's connection");
        match m["type"].as_str() {
            Some("prompt") => {
                let text = m["text"].as_str().unwrap_or_default().to_owned();
                shim.answer(&m, &format!("answer to {text}"));
                got.push(text);
            }
            Some("get_commands") => shim.send(
                &json!({ "type": "response", "id": m["id"], "ok": true, "data": { "commands": [] } }),
            ),
            _ => {}
        }
    }
    got
}

fn answers(env: &Env) -> Vec<String> {
    env.bot_texts(OWNER)
        .into_iter()
        .filter(|t| t.starts_with("answer to "))
        .collect()
}

/// (a) and (c): an https:// base through a CONNECT proxy, which then goes down and comes back.
#[test]
fn https_through_a_connect_proxy_which_goes_down_and_comes_back() {
    let mut env = tls_env();
    let mut proxy = Proxy::start(&env, "http-proxy");
    set(&mut env, "HTTPS_PROXY", &proxy.url());
    preset(&env, env.fake.base_url());
    let fake_port = env.fake.addr().port();
    let tunnel = format!("CONNECT 127.0.0.1:{fake_port}");
    let shown = format!("through the proxy {} (from HTTPS_PROXY)", proxy.url());

    let hub = env.serve();
    let mut shim = attached(&env);
    env.say("first");
    assert_eq!(prompts(&mut shim, 1), ["first"]);
    wait_for("the first answer", 20, || answers(&env).len() == 1);
    assert!(proxy.seen(&tunnel) >= 1, "{}", proxy.log_text());
    // The token never shows in a tunnel: the proxy saw only the host.
    assert!(!proxy.log_text().contains(TOKEN), "{}", proxy.log_text());

    let status = env.status();
    let network = &status["hub"]["network"];
    assert_eq!(network["route"], "proxy", "{network}");
    assert_eq!(network["proxy"], proxy.url(), "{network}");
    assert_eq!(network["proxy_var"], "HTTPS_PROXY", "{network}");
    assert_eq!(network["family"], "auto", "{network}");
    let text = String::from_utf8_lossy(&env.run(&["status"]).stdout).to_string();
    assert!(
        text.contains(&format!("network      {shown}; address family auto")),
        "{text}"
    );
    let report = doctor(&env);
    let net = check(&report, "network");
    assert_eq!(net["outcome"], "pass", "{net}");
    assert!(net["detail"].as_str().unwrap().contains(&shown), "{net}");
    assert_eq!(check(&report, "telegram")["outcome"], "pass", "{report:#}");

    // The proxy goes down: polls fail, and every reading says it is the proxy.
    proxy.stop();
    let p = poll_state(&env, "backing_off", 30);
    assert_eq!(p["error_class"], "network", "{p}");
    let why = p["last_error"].as_str().unwrap_or_default();
    assert!(why.contains(&shown), "{p}");
    let text = String::from_utf8_lossy(&env.run(&["status"]).stdout).to_string();
    assert!(text.contains("telegram     polls fail since"), "{text}");
    assert!(text.contains(&shown), "{text}");
    let report = doctor(&env);
    let reach = check(&report, "telegram");
    assert_eq!(reach["outcome"], "fail", "{reach}");
    assert!(
        reach["detail"].as_str().unwrap().contains(&shown),
        "{reach}"
    );
    assert!(
        reach["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("check that the proxy {} runs", proxy.url())),
        "{reach}"
    );
    assert!(hub.log_text().contains(&shown), "{}", hub.log_text());
    // Meanwhile the person writes.
    env.say("second");
    env.say("third");

    // Back: both reach pi once, their answers go out once, through the proxy.
    let before = proxy.seen(&tunnel);
    proxy.restart();
    poll_state(&env, "polling", 30);
    assert_eq!(prompts(&mut shim, 2), ["second", "third"]);
    wait_for("three answers", 30, || answers(&env).len() == 3);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        answers(&env),
        ["answer to first", "answer to second", "answer to third"],
        "{:?}",
        env.bot_texts(OWNER)
    );
    assert!(proxy.seen(&tunnel) > before, "{}", proxy.log_text());
    let reach = check(&doctor(&env), "telegram");
    assert_eq!(reach["outcome"], "pass", "{reach}");
}

/// (a) for http://: the request handed to the proxy; (b) NO_PROXY going around it.
#[test]
fn plain_http_through_a_forwarding_proxy_and_no_proxy_around_it() {
    let mut env = Env::new();
    set(&mut env, "PI_TELEGRAM_DOCTOR_POLL_SECS", "1");
    let proxy = Proxy::start(&env, "http-proxy");
    set(&mut env, "HTTP_PROXY", &proxy.url());
    env.preset_owner();
    let forwarded = format!("POST {}/bot", env.fake.base_url());

    let mut hub = env.serve();
    let mut shim = attached(&env);
    env.say("via the proxy");
    assert_eq!(prompts(&mut shim, 1), ["via the proxy"]);
    wait_for("the answer", 20, || answers(&env).len() == 1);
    assert!(proxy.seen(&forwarded) >= 2, "{}", proxy.log_text());
    assert!(
        proxy.seen(&format!("{forwarded}{TOKEN}/sendMessage")) >= 1,
        "{}",
        proxy.log_text()
    );
    drop(shim);
    assert_eq!(hub.stop(), Some(0));

    // NO_PROXY names the fake's address: direct, and the proxy sees nothing more.
    set(&mut env, "NO_PROXY", "localhost,127.0.0.1");
    let seen = proxy.seen(&forwarded);
    let report = doctor(&env);
    let net = check(&report, "network");
    assert_eq!(net["outcome"], "pass", "{net}");
    assert!(
        net["detail"].as_str().unwrap().contains(&format!(
            "direct: NO_PROXY exempts it from the proxy {} (from HTTP_PROXY)",
            proxy.url()
        )),
        "{net}"
    );
    let _hub = env.serve();
    let mut shim = attached(&env);
    assert_eq!(env.status()["hub"]["network"]["route"], "exempt");
    env.say("around the proxy");
    assert_eq!(prompts(&mut shim, 1), ["around the proxy"]);
    wait_for("the answer", 20, || answers(&env).len() == 2);
    assert_eq!(proxy.seen(&forwarded), seen, "{}", proxy.log_text());
}

/// ALL_PROXY=socks5://…: TLS to the fake through a real SOCKS5 proxy.
#[test]
fn all_proxy_socks5_carries_tls() {
    let mut env = tls_env();
    let proxy = Proxy::start(&env, "socks-proxy");
    set(&mut env, "ALL_PROXY", &proxy.url());
    preset(&env, env.fake.base_url());
    let fake_port = env.fake.addr().port();

    let _hub = env.serve();
    let mut shim = attached(&env);
    env.say("socks");
    assert_eq!(prompts(&mut shim, 1), ["socks"]);
    wait_for("the answer", 20, || answers(&env).len() == 1);
    assert!(
        proxy.seen(&format!("socks CONNECT 127.0.0.1:{fake_port}")) >= 1,
        "{}",
        proxy.log_text()
    );
    let network = &env.status()["hub"]["network"];
    assert_eq!(network["proxy"], proxy.url(), "{network}");
    assert_eq!(network["proxy_var"], "ALL_PROXY", "{network}");
}

/// A proxy variable nobody can use, and a family nobody knows: said, never silently dropped.
#[test]
fn unusable_settings_are_said_once() {
    let mut env = Env::new();
    set(&mut env, "PI_TELEGRAM_DOCTOR_POLL_SECS", "1");
    set(&mut env, "HTTP_PROXY", "ftp://127.0.0.1:21");
    set(&mut env, "PI_TELEGRAM_NETWORK_FAMILY", "ipv5");
    env.preset_owner();
    let report = doctor(&env);
    let net = check(&report, "network");
    assert_eq!(net["outcome"], "warn", "{net}");
    let detail = net["detail"].as_str().unwrap();
    assert!(
        detail.contains("HTTP_PROXY is set but is not a proxy URL this client can use"),
        "{net}"
    );
    assert!(
        detail.contains(
            "PI_TELEGRAM_NETWORK_FAMILY=\"ipv5\" is not one of auto, ipv4, ipv6, ipv4-fallback: using auto"
        ),
        "{net}"
    );
    assert_eq!(check(&report, "telegram")["outcome"], "pass", "{report:#}");

    let mut hub = env.serve();
    poll_state(&env, "polling", 30);
    assert_eq!(hub.stop(), Some(0));
    let log = hub.log_text();
    assert_eq!(log.matches("\"ipv5\" is not one of").count(), 1, "{log}");
    assert_eq!(
        log.matches("HTTP_PROXY is set but is not a proxy URL")
            .count(),
        1,
        "{log}"
    );
}

/// A loopback name the system resolves to `want` (and which of the usual names it is).
fn name_for(want: IpAddr) -> Option<(&'static str, Vec<IpAddr>)> {
    ["localhost", "ip6-localhost", "ip6-loopback", "localhost6"]
        .into_iter()
        .find_map(|name| {
            let ips: Vec<IpAddr> = (name, 80).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
            ips.contains(&want).then_some((name, ips))
        })
}

/// `doctor`'s `telegram` check with `family` against `base`.
fn reach_with(env: &mut Env, family: &str) -> Value {
    set(env, "PI_TELEGRAM_NETWORK_FAMILY", family);
    let report = doctor(env);
    let net = check(&report, "network");
    assert!(
        net["detail"]
            .as_str()
            .unwrap()
            .ends_with(&format!("address family {family}")),
        "{net}"
    );
    check(&report, "telegram")
}

/// The family against a fake listening on one family only, by a name the system resolves.
#[test]
fn the_address_family_against_a_fake_on_one_family() {
    for (listen, other) in [
        (IpAddr::V4(Ipv4Addr::LOCALHOST), "ipv6"),
        (IpAddr::V6(Ipv6Addr::LOCALHOST), "ipv4"),
    ] {
        let Some((name, ips)) = name_for(listen) else {
            println!("skipped the fake on {listen}: no loopback name resolves to it here");
            continue;
        };
        if let Err(e) = std::net::TcpListener::bind((listen, 0)) {
            println!("skipped the fake on {listen}: cannot listen there ({e})");
            continue;
        }
        let mut env = Env::with(FakeConfig {
            host: listen,
            ..FakeConfig::default()
        });
        println!("the fake on {listen}, reached as {name} ({ips:?})");
        set(&mut env, "PI_TELEGRAM_DOCTOR_POLL_SECS", "1");
        let base = format!("http://{name}:{}", env.fake.addr().port());
        preset(&env, &base);
        let own = if listen.is_ipv4() { "ipv4" } else { "ipv6" };
        for family in ["auto", own, "ipv4-fallback"] {
            let reach = reach_with(&mut env, family);
            assert_eq!(reach["outcome"], "pass", "{family}: {reach}");
        }
        // The other family only: it fails, saying why and which setting made it so.
        let reach = reach_with(&mut env, other);
        assert_eq!(reach["outcome"], "fail", "{other}: {reach}");
        let detail = reach["detail"].as_str().unwrap();
        let has_other = ips.iter().any(|ip| ip.is_ipv4() != listen.is_ipv4());
        if has_other {
            assert!(detail.contains("refused"), "{reach}");
        } else {
            let which = if other == "ipv6" { "IPv6" } else { "IPv4" };
            assert!(
                detail.contains(&format!(
                    "{name} has no {which} address (it resolves to {listen}); PI_TELEGRAM_NETWORK_FAMILY={other}"
                )),
                "{reach}"
            );
        }
        assert!(
            reach["fix"]
                .as_str()
                .unwrap()
                .contains(&format!("PI_TELEGRAM_NETWORK_FAMILY={other} limits")),
            "{reach}"
        );
        // The hub with its own family: it polls, and status says which.
        set(&mut env, "PI_TELEGRAM_NETWORK_FAMILY", own);
        let _hub = env.serve();
        poll_state(&env, "polling", 30);
        assert_eq!(env.status()["hub"]["network"]["family"], own);
    }
}
