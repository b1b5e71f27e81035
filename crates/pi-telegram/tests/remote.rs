//! pi on another machine: the hub also listens on TCP with TLS (`remote.listen`), and
//! `pi-telegram remote-config` prints what the other machine needs. The "other machine" is a
//! second agent dir with its own telegram.json holding only the remote config (no hub.sock, no
//! bot): a real pi with the extension there joins over TLS on loopback and answers (and through
//! a forwarded socket, the SSH way); a wrong
//! fingerprint sends nothing (not even to a server that completes the handshake); a wrong secret
//! is refused. A scripted TLS client checks the protocol over the listener without pi.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use common::pi::{PiSetup, setup};
use common::{Env, OWNER, wait_for};
use pi_testkit::{PiEnv, PiRpc};
use serde_json::{Value, json};
use tokio_rustls::rustls::{self, pki_types};

/// A port nothing listens on (the race with another process taking it is accepted).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    use std::os::unix::fs::PermissionsExt;
    let mut cfg: Value = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    edit(&mut cfg);
    std::fs::write(path, serde_json::to_string_pretty(&cfg).unwrap()).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Turns the hub's listener on for the default profile; returns its address.
fn listen(env: &Env) -> String {
    let addr = format!("127.0.0.1:{}", free_port());
    edit_json(&env.config_path(), |cfg| {
        cfg["profiles"]["default"]["remote"] = json!({ "listen": addr });
    });
    addr
}

/// `remote-config`: the snippet's `remote` object.
fn remote_config(env: &Env) -> Value {
    let out = env.run(&["remote-config"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snippet: Value = serde_json::from_slice(&out.stdout).unwrap();
    let explained = String::from_utf8_lossy(&out.stderr);
    assert!(explained.contains("0600"), "{explained}");
    snippet["profiles"]["default"]["remote"].clone()
}

/// Waits for the hub to listen on `addr` (it binds it before hub.sock).
fn wait_listening(env: &Env, hub: &common::Hub, addr: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "not listening on {addr}: {}",
            hub.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_for("the hub's socket", 30, || {
        env.profile_dir().join("hub.sock").exists()
    });
}

fn instances(env: &Env) -> Vec<Value> {
    env.status()["instances"].as_array().unwrap().clone()
}

fn live(env: &Env) -> usize {
    instances(env)
        .iter()
        .filter(|i| i["state"] != "gone")
        .count()
}

/// The other machine: its own agent dir with the extension installed and `remote` as its only
/// profile setting.
fn other_machine(s: &PiSetup, remote: &Value) -> PiEnv {
    let other = PiEnv::with_pi(s.pi.pi().to_owned(), s.llm.base_url()).unwrap();
    let out = s
        .env
        .cmd(&["install-extension"])
        .env("PI_CODING_AGENT_DIR", other.agent_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    set_remote(&other, remote);
    other
}

fn set_remote(other: &PiEnv, remote: &Value) {
    edit_json(&other.agent_dir().join("telegram.json"), |cfg| {
        cfg["profiles"] = json!({ "default": { "remote": remote } });
    });
}

/// `/telegram-connect` in pi; returns everything pi said until `needle` appeared in a record
/// (a notification), or until the command's response when `needle` is empty.
fn connect_until(pi: &mut PiRpc, needle: &str) -> Vec<Value> {
    pi.send(&json!({ "id": "connect", "type": "prompt", "message": "/telegram-connect" }))
        .unwrap();
    let mut seen = pi
        .read_until(Duration::from_secs(60), "the connect command", |v| {
            v["type"] == "response" && v["id"] == "connect"
        })
        .unwrap();
    if !needle.is_empty() && !seen.iter().any(|v| v.to_string().contains(needle)) {
        seen.extend(
            pi.read_until(Duration::from_secs(30), needle, |v| {
                v.to_string().contains(needle)
            })
            .unwrap(),
        );
    }
    seen
}

/// Asks the pi for `telegram_attach out.txt` and waits for the `n`-th refusal as its answer;
/// no file reaches Telegram for it.
fn attach_is_refused(env: &Env, n: usize) {
    let bot_files = || {
        env.fake
            .control()
            .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .filter(|m| m.from_bot && m.media.is_some())
            .count()
    };
    let before = bot_files();
    env.say(r#"[[tool:telegram_attach:{"paths":["out.txt"]}]]"#);
    wait_for("the attach refusal", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .filter(|t| t.starts_with("tool said:") && t.contains("another machine"))
            .count()
            == n
    });
    assert_eq!(bot_files(), before);
}

/// The `file_id` of the file the bot sent as `name`, if it did.
fn bot_file(env: &Env, name: &str) -> Option<String> {
    env.fake
        .control()
        .uploads(None)
        .unwrap()
        .into_iter()
        .find(|u| u.from_bot && u.file_name.as_deref() == Some(name))
        .map(|u| u.file_id)
}

/// The path of the attachment whose name ends in `name`, as the prompt names it (its folder
/// after `[attachments]`, then `- <file> (...)` per file).
fn path_in(text: &str, name: &str) -> Option<String> {
    let folder = text
        .lines()
        .find_map(|l| l.strip_prefix("[attachments] "))?;
    let file = text.lines().find_map(|l| {
        let f = l.strip_prefix("- ")?.split(" (").next()?;
        f.ends_with(name).then_some(f)
    })?;
    Some(format!("{folder}/{file}"))
}

/// The other machine started no hub of its own and has no socket.
fn assert_no_local_hub(other: &PiEnv) {
    let dir = other.agent_dir().join("telegram/default");
    assert!(!dir.join("hub.sock").exists());
    assert!(
        !dir.join("hub.log").exists(),
        "the extension started a hub on the other machine"
    );
}

#[test]
fn a_pi_on_another_machine_joins_over_tls_and_answers() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let addr = listen(env);
    // Printed before the hub ever ran: the certificate is made here, and the hub serves it.
    let remote = remote_config(env);
    assert_eq!(remote["connect"], addr.as_str());
    let hub = env.serve();
    wait_listening(env, &hub, &addr);

    let other = other_machine(&s, &remote);
    let mut pi = other.spawn_rpc(["--no-session"]).unwrap();
    connect_until(&mut pi, "connected to the hub");
    wait_for("the remote pi to attach", 30, || live(env) == 1);
    let inst = instances(env).remove(0);
    assert_eq!(inst["transport"], "shim");
    // Its folder exists only on the other machine.
    assert_eq!(
        inst["cwd"].as_str().unwrap(),
        other.work_dir().canonicalize().unwrap().to_str().unwrap()
    );
    assert!(hub.log_text().contains("a pi on another machine connected"));

    env.say("hello from afar");
    wait_for("the remote pi's answer", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: hello from afar")
    });
    // Files cross the connection as bytes, both ways. Out: a file only the other machine has
    // reaches Telegram, named as it was there.
    std::fs::write(other.work_dir().join("out.txt"), "on the other machine").unwrap();
    env.say(r#"[[tool:telegram_attach:{"paths":["out.txt"]}]]"#);
    wait_for("the remote pi's file", 60, || {
        bot_file(env, "out.txt").is_some()
    });
    let sent = bot_file(env, "out.txt").unwrap();
    assert_eq!(
        env.fake.control().file_bytes(&sent, None).unwrap().as_ref(),
        b"on the other machine"
    );
    // In: a document the person sends is on the other machine when pi reads its prompt, at a
    // path there (the fake model echoes the prompt, path included).
    let doc = b"%PDF-1.4 for the other machine".to_vec();
    env.fake
        .control()
        .send_media(tg_fake::control::SendMedia {
            item: tg_fake::control::MediaItem {
                kind: tg_fake::world::MediaKind::Document,
                data_base64: base64::engine::general_purpose::STANDARD.encode(&doc),
                filename: Some("brief.pdf".into()),
                mime_type: Some("application/pdf".into()),
                caption: Some("read the brief".into()),
            },
            thread_id: None,
            user_id: None,
            reply_to_message_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("the answer about the brief", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("echo: read the brief"))
    });
    let echo = env
        .bot_texts(OWNER)
        .into_iter()
        .find(|t| t.starts_with("echo: read the brief"))
        .unwrap();
    let local = path_in(&echo, "brief.pdf").unwrap_or_else(|| panic!("no path in {echo:?}"));
    assert!(
        !local.starts_with(env.agent.to_str().unwrap()),
        "pi was given the hub's path: {echo}"
    );
    assert_eq!(std::fs::read(&local).unwrap(), doc);
    assert_no_local_hub(&other);
    let _ = pi.close(Duration::from_secs(20));
    wait_for("the remote pi to leave", 30, || live(env) == 0);

    // The SSH way: `remote.socket` names a forwarded hub.sock (here the hub's own socket
    // stands in for what `ssh -L` would make), with the secret from the config.
    set_remote(
        &other,
        &json!({ "socket": env.profile_dir().join("hub.sock"), "secret": remote["secret"] }),
    );
    let mut pi = other.spawn_rpc(["--no-session"]).unwrap();
    connect_until(&mut pi, "connected to the hub");
    wait_for("the forwarded pi to attach", 30, || live(env) == 1);
    env.say("through the tunnel");
    wait_for("the forwarded pi's answer", 60, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: through the tunnel")
    });
    // Here the forwarded socket's pi is on the hub's own machine (the hello's machine says so),
    // so the hub takes paths, which a pi behind a forwarded socket cannot know to be the
    // hub's: the extension refuses itself. (On a real other machine the hub says bytes, and
    // files go as they do over TLS.)
    attach_is_refused(env, 1);
    assert_no_local_hub(&other);
    let _ = pi.close(Duration::from_secs(20));
}

/// A TLS server with a certificate of its own that records what a client sends after the
/// handshake: `Some(bytes)` once the client closed, `None` when no handshake completed.
fn impostor(env: &Env, dir: &Path) -> (u16, std::sync::mpsc::Receiver<Option<usize>>) {
    let identity = hub::remote::Identity::load_or_create(&dir.join("impostor.pem")).unwrap();
    let acceptor = identity.acceptor().unwrap();
    let listener = env
        .rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    env.rt.spawn(async move {
        use tokio::io::AsyncReadExt;
        while let Ok((stream, _)) = listener.accept().await {
            let got = match acceptor.accept(stream).await {
                Ok(mut tls) => {
                    let mut buf = Vec::new();
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut buf))
                            .await;
                    Some(buf.len())
                }
                Err(_) => None,
            };
            let _ = tx.send(got);
        }
    });
    (port, rx)
}

#[test]
fn a_wrong_fingerprint_sends_nothing() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let addr = listen(env);
    let hub = env.serve();
    wait_listening(env, &hub, &addr);
    let mut remote = remote_config(env);
    let real = remote["fingerprint"].as_str().unwrap().to_owned();
    // One hex digit off.
    let last = real.chars().last().unwrap();
    let wrong = format!(
        "{}{}",
        &real[..real.len() - 1],
        if last == '0' { '1' } else { '0' }
    );
    remote["fingerprint"] = json!(wrong);
    let other = other_machine(&s, &remote);
    let mut pi = other.spawn_rpc(["--no-session"]).unwrap();
    connect_until(&mut pi, "Nothing was sent");
    std::thread::sleep(Duration::from_millis(500));
    assert!(instances(env).is_empty(), "{:#?}", instances(env));
    let log = hub.log_text();
    assert!(log.contains("closed before its hello"), "{log}");
    assert!(!log.contains("wrong hub secret"), "{log}");

    // Proof at the byte level: a server with another certificate completes the handshake and
    // reads what follows; the pi, pinning the real hub, writes not one byte.
    let (port, seen) = impostor(env, env.dir.path());
    remote["connect"] = json!(format!("127.0.0.1:{port}"));
    remote["fingerprint"] = json!(real);
    set_remote(&other, &remote);
    connect_until(&mut pi, "Nothing was sent");
    assert_eq!(
        seen.recv_timeout(Duration::from_secs(20)).unwrap(),
        Some(0),
        "the handshake completed and the pi sent nothing after it"
    );
    assert_no_local_hub(&other);
    let _ = pi.close(Duration::from_secs(20));
}

#[test]
fn a_wrong_secret_is_refused() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let addr = listen(env);
    let hub = env.serve();
    wait_listening(env, &hub, &addr);
    let mut remote = remote_config(env);
    remote["secret"] = json!("0".repeat(64));
    let other = other_machine(&s, &remote);
    let mut pi = other.spawn_rpc(["--no-session"]).unwrap();
    connect_until(&mut pi, "wrong hub secret");
    std::thread::sleep(Duration::from_millis(500));
    assert!(instances(env).is_empty(), "{:#?}", instances(env));
    let log = hub.log_text();
    assert!(
        log.lines().any(
            |l| l.contains("refused a remote client's hello") && l.contains("wrong hub secret")
        ),
        "{log}"
    );
    assert_no_local_hub(&other);

    // A secret in a file others can read is not used at all.
    remote["secret"] = json!(remote_config(env)["secret"]);
    set_remote(&other, &remote);
    let cfg = other.agent_dir().join("telegram.json");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    connect_until(&mut pi, "chmod 600");
    assert!(instances(env).is_empty());

    // Nothing listening there: the pi says where it looked, and starts no hub of its own.
    remote["connect"] = json!(format!("127.0.0.1:{}", free_port()));
    set_remote(&other, &remote);
    connect_until(&mut pi, "cannot reach the hub at 127.0.0.1:");
    assert_no_local_hub(&other);
    let _ = pi.close(Duration::from_secs(20));
}

// ------------------------------------------------------------------------------ without pi

/// Accepts exactly the certificate with `fingerprint` (what the extension does).
#[derive(Debug)]
struct Pinned {
    fingerprint: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &pki_types::CertificateDer<'_>,
        _intermediates: &[pki_types::CertificateDer<'_>],
        _server_name: &pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if hub::remote::fingerprint_of(end_entity) == self.fingerprint {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A blocking line client over TLS, pinning `fingerprint`.
struct Client {
    reader: BufReader<Tls>,
}

impl Client {
    fn connect(addr: &str, fingerprint: &str) -> Result<Self, std::io::Error> {
        Self::over(TcpStream::connect(addr)?, fingerprint)
    }

    /// Over a TCP connection made already (from a chosen address).
    fn over(tcp: TcpStream, fingerprint: &str) -> Result<Self, std::io::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                fingerprint: fingerprint.to_owned(),
                provider,
            }))
            .with_no_client_auth();
        let name = pki_types::ServerName::try_from("pi-telegram-hub").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        // Drive the handshake now, so a certificate mismatch fails here.
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(Self {
            reader: BufReader::new(tls),
        })
    }

    fn send(&mut self, v: &Value) {
        let tls = self.reader.get_mut();
        tls.write_all(format!("{v}\n").as_bytes()).unwrap();
        tls.flush().unwrap();
    }

    /// The next line; `None` once the hub closed the connection.
    fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).unwrap()),
        }
    }

    /// The next message of `ty`, answering what a scripted instance must on the way.
    fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let m = self
                .recv()
                .unwrap_or_else(|| panic!("closed while waiting for {ty}"));
            if m["type"] == ty {
                return m;
            }
            if m["type"] == "get_commands" {
                self.send(&json!({ "type": "response", "id": m["id"], "ok": true, "data": { "commands": [] } }));
            }
        }
    }
}

fn instance_hello(secret: &str, cwd: &str) -> Value {
    json!({ "type": "hello", "protocol": 1, "role": "instance", "secret": secret,
            "pid": 4242, "cwd": cwd, "mode": "rpc", "reason": "startup",
            "session_id": "remote-session", "idle": true, "pending": false,
            "received_turns": [], "completed_turns": [] })
}

#[test]
fn the_listener_serves_the_protocol_to_instances_only_and_keeps_its_certificate() {
    let env = Env::new();
    env.preset_owner();
    // Off by default: nothing to print, and the person is told how to turn it on.
    let out = env.run(&["remote-config"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"listen\""), "{err}");
    let mut hub = env.serve();
    wait_for("the hub's socket", 30, || {
        env.profile_dir().join("hub.sock").exists()
    });
    assert!(!hub.log_text().contains("other machines"));
    assert_eq!(hub.stop(), Some(0));

    let addr = listen(&env);
    // `setup` makes the certificate as soon as the listener is configured, and says so.
    let out = env.run(&[
        "setup",
        "--token",
        common::TOKEN,
        "--api-base",
        env.fake.base_url(),
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("pi on other machines"), "{said}");
    assert!(env.profile_dir().join("remote.pem").exists());
    let remote = remote_config(&env);
    assert!(
        said.contains(remote["fingerprint"].as_str().unwrap()),
        "{said}"
    );
    let (fingerprint, secret) = (
        remote["fingerprint"].as_str().unwrap().to_owned(),
        remote["secret"].as_str().unwrap().to_owned(),
    );
    let mut hub = env.serve();
    wait_listening(&env, &hub, &addr);
    assert!(
        hub.log_text()
            .contains("listening for pi on other machines")
    );
    // A certificate other than the pinned one fails the handshake.
    assert!(Client::connect(&addr, "sha256:00").is_err());

    // Cleartext is not TLS: the hub never reads it as a hello.
    {
        let mut plain = TcpStream::connect(&addr).unwrap();
        plain
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = plain.write_all(format!("{}\n", instance_hello(&secret, "/x")).as_bytes());
        let mut buf = String::new();
        let _ = BufReader::new(plain).read_line(&mut buf);
        assert!(!buf.contains("welcome"), "{buf}");
    }
    // A wrong secret, and the local-only roles, are refused.
    let mut c = Client::connect(&addr, &fingerprint).unwrap();
    c.send(&instance_hello(&"0".repeat(64), "/x"));
    let r = c.recv().unwrap();
    assert_eq!(
        (r["type"].as_str(), r["code"].as_str()),
        (Some("refused"), Some("secret"))
    );
    assert!(c.recv().is_none(), "closed after the refusal");
    for role in ["control", "tools"] {
        let mut c = Client::connect(&addr, &fingerprint).unwrap();
        c.send(&json!({ "type": "hello", "protocol": 1, "role": role, "secret": secret, "token": "t" }));
        let r = c.recv().unwrap();
        assert_eq!(
            (r["type"].as_str(), r["code"].as_str()),
            (Some("refused"), Some("role")),
            "{role}: {r}"
        );
    }
    assert!(instances(&env).is_empty());

    // An instance whose folder exists only on its own machine attaches and answers.
    let cwd = "/nowhere/on/this/machine/proj";
    let mut c = Client::connect(&addr, &fingerprint).unwrap();
    c.send(&instance_hello(&secret, cwd));
    let w = c.recv_type("welcome");
    assert!(w["instance_id"].is_string());
    assert_eq!(w["files"], "bytes", "{w}");
    wait_for("the instance", 20, || live(&env) == 1);
    assert_eq!(instances(&env)[0]["cwd"], cwd);
    c.send(
        &json!({ "type": "tool_call", "id": "a1", "tool": "telegram_attach", "turn_id": null,
                    "args": { "paths": ["/etc/hostname"] } }),
    );
    let r = c.recv_type("response");
    assert_eq!(r["id"], "a1");
    assert_eq!(r["ok"], false);
    assert!(
        r["error"].as_str().unwrap().contains("another machine"),
        "{r}"
    );
    // Its files come as bytes: an upload in two pieces, then the call names it.
    let piece = |offset: u64, data: &[u8], done: bool| {
        json!({ "type": "upload", "id": "u1", "name": "notes.txt", "size": 11, "offset": offset,
                "data": base64::engine::general_purpose::STANDARD.encode(data), "done": done })
    };
    c.send(&piece(0, b"hello ", false));
    c.send(&piece(6, b"world", true));
    c.send(
        &json!({ "type": "tool_call", "id": "a2", "tool": "telegram_attach", "turn_id": null,
                    "args": { "uploads": ["u1"] } }),
    );
    let r = c.recv_type("response");
    assert_eq!(
        (r["id"].as_str(), r["ok"].as_bool()),
        (Some("a2"), Some(true)),
        "{r}"
    );
    wait_for("the uploaded file", 30, || {
        bot_file(&env, "notes.txt").is_some()
    });
    let sent = bot_file(&env, "notes.txt").unwrap();
    assert_eq!(
        env.fake.control().file_bytes(&sent, None).unwrap().as_ref(),
        b"hello world"
    );
    // A piece past the size it announced ends that upload; the call says why.
    c.send(&json!({ "type": "upload", "id": "u2", "name": "x.bin", "size": 2, "offset": 0,
                    "data": base64::engine::general_purpose::STANDARD.encode(b"abc"), "done": true }));
    c.send(
        &json!({ "type": "tool_call", "id": "a3", "tool": "telegram_attach", "turn_id": null,
                    "args": { "uploads": ["u2"] } }),
    );
    let r = c.recv_type("response");
    assert_eq!(r["ok"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("more than the 2 bytes"),
        "{r}"
    );
    // The upload one call took is not another's.
    c.send(
        &json!({ "type": "tool_call", "id": "a4", "tool": "telegram_attach", "turn_id": null,
                    "args": { "uploads": ["u1"] } }),
    );
    let r = c.recv_type("response");
    assert!(r["error"].as_str().unwrap().contains("no upload u1"), "{r}");
    // Nothing of the uploads is left in the hub's folder of copies but what is being sent.
    wait_for("the copies to be gone", 30, || {
        std::fs::read_dir(env.agent.join("tmp/telegram/default/out"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    });
    env.say("over the network");
    let prompt = c.recv_type("prompt");
    assert_eq!(prompt["text"], "over the network");
    let turn = prompt["turn_id"].clone();
    c.send(&json!({ "type": "ack", "turn_id": turn, "disposition": "started" }));
    c.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_start" } }));
    c.send(&json!({ "type": "event", "turn_id": turn, "event": { "type": "agent_settled", "aborted": false } }));
    c.send(&json!({ "type": "turn_done", "turn_id": turn, "text": "answered from afar", "aborted": false, "error": null }));
    wait_for("the answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.contains("answered from afar"))
    });
    c.send(&json!({ "type": "bye", "reason": "shutdown" }));
    drop(c);
    assert_eq!(hub.stop(), Some(0));

    // The same certificate after a restart: the pin still holds.
    let hub = env.serve();
    wait_listening(&env, &hub, &addr);
    assert!(Client::connect(&addr, &fingerprint).is_ok());
    assert_eq!(remote_config(&env)["fingerprint"], fingerprint.as_str());
}

// ------------------------------------------------------------------------------ strangers

/// A TCP connection to `addr` from `local`, an address of 127/8 (Linux routes all of it to
/// loopback): another machine, as far as the hub can tell.
fn connect_from(env: &Env, local: &str, addr: &str) -> std::io::Result<TcpStream> {
    let (local, addr) = (format!("{local}:0").parse().unwrap(), addr.parse().unwrap());
    env.rt.block_on(async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(local)?;
        let stream = socket.connect(addr).await?.into_std()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    })
}

/// The listener on, a hub serving it with `env_vars`; (address, fingerprint, secret).
fn listening(env: &Env, env_vars: &[(&str, &str)]) -> (common::Hub, String, String, String) {
    env.preset_owner();
    let addr = listen(env);
    let remote = remote_config(env);
    let hub = env.serve_with(env_vars);
    wait_listening(env, &hub, &addr);
    let fingerprint = remote["fingerprint"].as_str().unwrap().to_owned();
    let secret = remote["secret"].as_str().unwrap().to_owned();
    (hub, addr, fingerprint, secret)
}

/// The probe's finding: idle connections from one stranger filled the listener's places (32
/// in all) and locked remote pi out. A stranger holds a few now, for a few seconds, and a pi
/// from another address gets through every time.
#[test]
fn a_strangers_idle_connections_never_lock_a_remote_pi_out() {
    let env = Env::new();
    let (hub, addr, fingerprint, secret) = listening(&env, &[]);
    let idle = |n| -> Vec<TcpStream> {
        (0..n)
            .filter_map(|_| TcpStream::connect(&addr).ok())
            .collect()
    };
    let mut held = idle(40);
    let first = std::time::Instant::now();
    for attempt in 0..10 {
        // The stranger tops up before every attempt.
        held.extend(idle(40));
        let tcp = connect_from(&env, "127.0.0.2", &addr).unwrap();
        let mut c = Client::over(tcp, &fingerprint)
            .unwrap_or_else(|e| panic!("attempt {attempt}: no TLS handshake: {e}"));
        c.send(&instance_hello(&secret, &format!("/far/away/{attempt}")));
        let w = c.recv_type("welcome");
        assert!(w["instance_id"].is_string(), "attempt {attempt}: {w}");
        c.send(&json!({ "type": "bye", "reason": "shutdown" }));
    }
    // The stranger's first connection, idle since, was closed at its deadline.
    let mut oldest = held.remove(0);
    oldest
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    let end = std::io::Read::read(&mut oldest, &mut buf);
    assert!(
        matches!(&end, Ok(0))
            || end
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{end:?}"
    );
    assert!(
        first.elapsed() < Duration::from_secs(25),
        "closed {:?} after it opened",
        first.elapsed()
    );
    // What the stranger did is in the log once or twice, not 400 times.
    let log = hub.log_text();
    let lines = log
        .lines()
        .filter(|l| l.contains("peer=127.0.0.1") && !l.contains("127.0.0.2"))
        .count();
    assert!(lines <= 6, "{lines} lines about the stranger:\n{log}");
}

/// The probe's other finding: 268,000 failed handshakes in 20 s pushed the log's history out
/// of its cap. Each source's failures of a kind are logged once, then summed up per interval.
#[test]
fn a_flood_of_failed_handshakes_is_logged_once_then_summed_up() {
    let env = Env::new();
    let (hub, addr, _, _) = listening(&env, &[("PI_TELEGRAM_REMOTE_LOG_EVERY_SECS", "2")]);
    const ATTEMPTS: u64 = 300;
    for _ in 0..ATTEMPTS {
        let mut s = connect_from(&env, "127.0.0.3", &addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // Not TLS: the handshake fails, and the hub closes.
        let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
        let _ = std::io::Read::read_to_end(&mut s, &mut Vec::new());
    }
    let summed = regex::Regex::new(
        r"([0-9][0-9,]*) failed TLS handshakes from 127\.0\.0\.3 in the last 2 s",
    )
    .unwrap();
    let total = |log: &str| -> u64 {
        summed
            .captures_iter(log)
            .map(|c| c[1].replace(',', "").parse::<u64>().unwrap())
            .sum()
    };
    wait_for("the summary lines to count every attempt", 30, || {
        total(&hub.log_text()) >= ATTEMPTS
    });
    let log = hub.log_text();
    assert_eq!(total(&log), ATTEMPTS, "{log}");
    let about: Vec<&str> = log.lines().filter(|l| l.contains("127.0.0.3")).collect();
    assert!(
        about.len() <= 12,
        "{} lines for {ATTEMPTS} attempts:\n{log}",
        about.len()
    );
    assert_eq!(
        about
            .iter()
            .filter(|l| l.contains("a remote TLS handshake failed"))
            .count(),
        1,
        "{log}"
    );
    // The JSON log holds as few.
    let json = std::fs::read_to_string(env.profile_dir().join("logs/hub.jsonl")).unwrap();
    let json_about = json.lines().filter(|l| l.contains("127.0.0.3")).count();
    assert_eq!(json_about, about.len(), "{json}");
}
