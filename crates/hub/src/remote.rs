//! pi on other machines. The hub can also listen on TCP (`profiles.<p>.remote.listen`), where
//! every connection is TLS with a self-signed certificate made once per profile (`remote.pem`,
//! 0600). The other machine pins that certificate by its SHA-256 fingerprint and proves the hub
//! secret in its hello, as over `hub.sock`. `pi-telegram remote-config` prints what to put there.
//!
//! The certificate is never checked against a CA or a host name: the fingerprint is the whole
//! trust, so it never expires and a host's name or address may change freely.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

use crate::paths::ProfilePaths;

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

/// The profile's TLS identity, made when there is none (the folder too).
pub fn ensure_identity(paths: &ProfilePaths) -> Result<Identity, RemoteError> {
    paths.ensure().map_err(|source| RemoteError::Io {
        path: paths.dir.clone(),
        source,
    })?;
    Identity::load_or_create(&paths.remote_identity())
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
}
