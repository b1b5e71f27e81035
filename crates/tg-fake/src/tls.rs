//! HTTPS for the fake (`FakeConfig::tls`): a certificate authority made at start and a server
//! certificate it signs for `localhost`, `127.0.0.1`, `::1` and the bound address, so a client
//! that trusts the authority's PEM ([`crate::FakeServer::ca_pem`]; `SSL_CERT_FILE` for a
//! rustls-platform-verifier client such as the hub's) verifies the fake as it would verify
//! Telegram: through a proxy's `CONNECT` tunnel too.

use std::net::IpAddr;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, ServerConfig};

/// What the fake serves TLS with, and the authority a client is to trust.
pub(crate) struct Identity {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) ca_pem: String,
}

/// Why no TLS identity could be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen failed.
    #[error("making the certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> Self {
        std::io::Error::other(e.to_string())
    }
}

/// A new authority and a server certificate for the loopback names and `bound`.
pub(crate) fn identity(bound: IpAddr) -> Result<Identity, TlsError> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "tg-fake test authority");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;

    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if !bound.is_loopback() {
        names.push(bound.to_string());
    }
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "tg-fake");
    let cert = params.signed_by(&key, &ca)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let der_key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone(), ca.der().clone()], der_key)?;
    // The fake speaks HTTP/1.1 only (as its plain listener does).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Identity {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca_pem: ca.pem(),
    })
}
