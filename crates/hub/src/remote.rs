//! pi on other machines. The hub can also listen on TCP (`profiles.<p>.remote.listen`), where
//! every connection is TLS with a self-signed certificate made once per profile (`remote.pem`,
//! 0600). The other machine pins that certificate by its SHA-256 fingerprint and proves the hub
//! secret in its hello, as over `hub.sock`. `pi-telegram remote-config` prints what to put there.
//!
//! The certificate is never checked against a CA or a host name: the fingerprint is the whole
//! trust, so it never expires and a host's name or address may change freely.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

use crate::config::{ConfigFile, REMOTE_PORT};
use crate::error::HubError;
use crate::paths::{AgentDir, ProfileName, ProfilePaths};

/// What went wrong with the hub's TLS identity.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a certificate with its key.
    #[error(
        "{path} does not hold the hub's certificate and key ({problem}). Remove it: the next start makes a new one, and the other machines need its fingerprint from `pi-telegram remote-config`"
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        problem: String,
    },
    /// Making the certificate failed.
    #[error("making the hub's certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("the hub's TLS set-up: {0}")]
    Tls(#[from] rustls::Error),
}

/// The hub's certificate and key, and the fingerprint other machines pin.
pub struct Identity {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    fingerprint: String,
}

impl std::fmt::Debug for Identity {
    // The key stays out of every log and error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// `sha256:` and the lowercase hex SHA-256 of a certificate's DER bytes (what Node computes
/// from `getPeerCertificate().raw`).
pub fn fingerprint_of(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

impl Identity {
    /// The profile's identity, made (once) when there is none. Two processes making it at once
    /// agree: the file is published with a hard link, which only the first one wins.
    pub fn load_or_create(path: &Path) -> Result<Self, RemoteError> {
        if let Some(found) = Self::load(path)? {
            return Ok(found);
        }
        let io = |source| RemoteError::Io {
            path: path.to_owned(),
            source,
        };
        let pem = generate()?;
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let written = (|| {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::remove_file(&tmp);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(pem.as_bytes())?;
            f.sync_all()?;
            match std::fs::hard_link(&tmp, path) {
                Ok(()) => {}
                // Another process made one first: theirs it is.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            if let Some(dir) = path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        let _ = std::fs::remove_file(&tmp);
        written.map_err(io)?;
        tracing::info!(file = %path.display(), "made the hub's TLS certificate for pi on other machines");
        Self::load(path)?.ok_or_else(|| RemoteError::Malformed {
            path: path.to_owned(),
            problem: "it vanished right after it was written".into(),
        })
    }

    /// The identity in `path`, or `None` when there is no file.
    pub fn load(path: &Path) -> Result<Option<Self>, RemoteError> {
        use std::os::unix::fs::PermissionsExt;
        let io = |source| RemoteError::Io {
            path: path.to_owned(),
            source,
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        // It holds the private key: tighten a copy someone loosened.
        let mode = std::fs::metadata(path).map_err(io)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
        let malformed = |problem: String| RemoteError::Malformed {
            path: path.to_owned(),
            problem,
        };
        let cert = CertificateDer::from_pem_slice(&bytes)
            .map_err(|e| malformed(format!("certificate: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(&bytes)
            .map_err(|e| malformed(format!("private key: {e}")))?;
        let fingerprint = fingerprint_of(&cert);
        Ok(Some(Self {
            cert,
            key,
            fingerprint,
        }))
    }

    /// The fingerprint to pin (`sha256:<hex>`).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// A TLS acceptor serving this certificate: TLS 1.3 only (Node has it since 12), no client
    /// certificates (the hub secret authenticates the client), ring (the provider the
    /// Telegram client already links).
    pub fn acceptor(&self) -> Result<TlsAcceptor, RemoteError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], self.key.clone_key())?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// A new self-signed certificate (ECDSA P-256) and its key, as PEM. The names in it do not
/// matter (nobody checks them); the validity is rcgen's default, 1975 to 4096, so a pinned
/// fingerprint never stops working by itself.
fn generate() -> Result<String, RemoteError> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec!["pi-telegram-hub".to_owned()])?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "pi-telegram hub");
    let cert = params.self_signed(&key)?;
    Ok(format!("{}{}", cert.pem(), key.serialize_pem()))
}

/// What `pi-telegram remote-config` found: the snippet for the other machine and what it is
/// made of.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// The profile.
    pub profile: ProfileName,
    /// Where the hub listens (`remote.listen`).
    pub listen: SocketAddr,
    /// What the other machine connects to (`host:port`).
    pub connect: String,
    /// The certificate's fingerprint.
    pub fingerprint: String,
    /// `{"profiles": {"<p>": {"remote": {"connect", "fingerprint", "secret"}}}}`.
    pub snippet: Value,
}

/// Makes (when needed) the certificate and the secret, and builds the snippet for the other
/// machine. `host` names this machine as the other one reaches it; by default the listen
/// address, or this machine's host name when the hub listens on every address.
pub fn remote_config(
    agent_dir: &AgentDir,
    profile: &ProfileName,
    host: Option<&str>,
) -> Result<RemoteConfig, HubError> {
    let config_path = agent_dir.config_file();
    let file = ConfigFile::load(&config_path)?;
    let settings = file.profile(profile);
    if settings.remote_client {
        return Err(HubError::Usage(format!(
            "profile {profile} in {} connects to a hub on another machine (remote.connect or remote.socket): run remote-config on the hub's machine",
            config_path.display()
        )));
    }
    let Some(listen) = settings.remote_listen else {
        return Err(HubError::Usage(format!(
            "the hub of profile {profile} does not listen for other machines. Add \"remote\": {{\"listen\": \"0.0.0.0:{REMOTE_PORT}\"}} to profiles.{profile} in {} (or \"127.0.0.1:{REMOTE_PORT}\" to reach it only through an SSH tunnel), restart the hub, and run this again",
            config_path.display()
        )));
    };
    let paths = agent_dir.profile(profile);
    let identity = ensure_identity(&paths)?;
    let secret = crate::secret::ensure(&paths.secret()).map_err(HubError::io(format!(
        "creating {}",
        paths.secret().display()
    )))?;
    let host = match host {
        Some(h) => h.to_owned(),
        None if listen.ip().is_unspecified() => host_name(),
        None => listen.ip().to_string(),
    };
    let connect = join_host_port(&host, listen.port());
    let snippet = json!({ "profiles": { profile.as_str(): { "remote": {
        "connect": connect,
        "fingerprint": identity.fingerprint(),
        "secret": secret,
    } } } });
    Ok(RemoteConfig {
        profile: profile.clone(),
        listen,
        connect,
        fingerprint: identity.fingerprint().to_owned(),
        snippet,
    })
}

/// The profile's TLS identity, made when there is none (the folder too).
pub fn ensure_identity(paths: &ProfilePaths) -> Result<Identity, HubError> {
    paths
        .ensure()
        .map_err(HubError::io(format!("creating {}", paths.dir.display())))?;
    Ok(Identity::load_or_create(&paths.remote_identity())?)
}

/// What `remote-config` says around the snippet (to stderr, so the snippet alone can be piped).
pub fn explain(rc: &RemoteConfig, config_file: &Path) -> String {
    let connect_cmd = if rc.profile == ProfileName::default_profile() {
        "/telegram-connect".to_owned()
    } else {
        format!("/telegram-connect {}", rc.profile)
    };
    let mut text = format!(
        "On the other machine: put this in <agent-dir>/telegram.json (usually ~/.pi/agent/telegram.json; merge it into one that exists) with mode 0600, as it holds the hub secret; install the extension there; then run {connect_cmd} in pi.\nThe hub listens on {} (remote.listen in {}); the other machine pins its certificate {}.\n",
        rc.listen,
        config_file.display(),
        rc.fingerprint,
    );
    if rc.listen.ip().is_loopback() {
        text.push_str(&format!(
            "It listens on loopback only: from another machine, forward the port first, e.g. `ssh -N -L {port}:127.0.0.1:{port} <this host>` there (then connect stays 127.0.0.1:{port}).\n",
            port = rc.listen.port()
        ));
    }
    text
}

/// `host:port`, with an IPv6 address in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// This machine's name, for a hub listening on every address.
fn host_name() -> String {
    let name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_identity_is_made_once_kept_private_and_keeps_its_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("remote.pem");
        assert!(Identity::load(&path).unwrap().is_none());
        let first = Identity::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(first.fingerprint().starts_with("sha256:"));
        assert_eq!(first.fingerprint().len(), "sha256:".len() + 64);
        // A restart reads the same certificate: the pinned fingerprint still holds.
        let again = Identity::load_or_create(&path).unwrap();
        assert_eq!(again.fingerprint(), first.fingerprint());
        again.acceptor().unwrap();
        // Only the file is left (no temporary), and a loosened file is tightened.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("remote.pem")]);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Identity::load(&path).unwrap().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Another profile (or a removed file) gets another certificate.
        let other = Identity::load_or_create(&dir.path().join("other.pem")).unwrap();
        assert_ne!(other.fingerprint(), first.fingerprint());
    }

    #[test]
    fn the_fingerprint_is_the_sha256_of_the_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("remote.pem");
        let id = Identity::load_or_create(&path).unwrap();
        let der = CertificateDer::from_pem_file(&path).unwrap();
        let hex: String = Sha256::digest(&der)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(id.fingerprint(), format!("sha256:{hex}"));
        assert!(!format!("{id:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_broken_file_is_reported_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("remote.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let err = Identity::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("Remove it"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a certificate");
    }

    #[test]
    fn addresses_for_the_other_machine() {
        assert_eq!(join_host_port("10.0.0.2", 7391), "10.0.0.2:7391");
        assert_eq!(join_host_port("::1", 7391), "[::1]:7391");
        assert_eq!(join_host_port("hub.lan", 7391), "hub.lan:7391");
        assert!(!host_name().is_empty());
    }

    fn write_config(dir: &Path, remote: Value) -> AgentDir {
        let cfg = json!({ "profiles": { "default": { "remote": remote } } });
        std::fs::write(dir.join("telegram.json"), cfg.to_string()).unwrap();
        AgentDir::at(dir)
    }

    #[test]
    fn remote_config_prints_the_snippet_or_says_how_to_turn_it_on() {
        let dir = tempfile::tempdir().unwrap();
        let profile = ProfileName::default_profile();
        let agent = AgentDir::at(dir.path());
        let err = remote_config(&agent, &profile, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"listen\""), "{err}");

        let agent = write_config(dir.path(), json!({ "listen": "127.0.0.1:7391" }));
        let rc = remote_config(&agent, &profile, None).unwrap();
        assert_eq!(rc.connect, "127.0.0.1:7391");
        let remote = &rc.snippet["profiles"]["default"]["remote"];
        assert_eq!(remote["connect"], "127.0.0.1:7391");
        assert_eq!(remote["fingerprint"], rc.fingerprint.as_str());
        let secret =
            std::fs::read_to_string(dir.path().join("telegram/default/hub.secret")).unwrap();
        assert_eq!(remote["secret"], secret.trim());
        // The same certificate the hub serves.
        let id = Identity::load(&dir.path().join("telegram/default/remote.pem"))
            .unwrap()
            .unwrap();
        assert_eq!(id.fingerprint(), rc.fingerprint);
        assert!(explain(&rc, &agent.config_file()).contains("ssh -N -L 7391:127.0.0.1:7391"));

        let rc = remote_config(&agent, &profile, Some("hub.lan")).unwrap();
        assert_eq!(rc.connect, "hub.lan:7391");
        let agent = write_config(dir.path(), json!({ "listen": "0.0.0.0:7400" }));
        let rc = remote_config(&agent, &profile, None).unwrap();
        assert!(rc.connect.ends_with(":7400") && !rc.connect.starts_with("0.0.0.0"));
        assert_eq!(rc.fingerprint, id.fingerprint());

        let agent = write_config(
            dir.path(),
            json!({ "connect": "hub.lan:7391", "fingerprint": "sha256:00", "secret": "s" }),
        );
        let err = remote_config(&agent, &profile, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hub's machine"), "{err}");
    }
}
