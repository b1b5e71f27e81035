//! The listener for pi on other machines (`remote.listen`): TCP, then TLS with the profile's
//! certificate ([`crate::remote::Identity`]), then the very protocol of `hub.sock`
//! ([`super::socket::connection`], as a [`Peer::Remote`]).
//!
//! Anyone who can reach the port can open a connection, so what a stranger may hold is
//! bounded: the TLS handshake and the hello share the hello's time limit, and at most
//! [`MAX_UNAUTHENTICATED`] connections may be on their way to a hello at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::socket::{HELLO_TIMEOUT, Peer, Shared, connection};

/// Connections that have not proved the secret yet, at most (more are closed at once).
pub const MAX_UNAUTHENTICATED: usize = 32;
/// A silent peer (a machine that went away without closing) is noticed after about
/// `IDLE + INTERVAL * PROBES`: a minute, rather than the system's default two hours.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_PROBES: u32 = 3;

/// Binds the listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Accepts connections until `stop`.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let gate = Arc::new(Semaphore::new(MAX_UNAUTHENTICATED));
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    let Ok(permit) = gate.clone().try_acquire_owned() else {
                        tracing::warn!(peer = %addr, "too many remote connections without a hello; closed this one");
                        continue;
                    };
                    let (acceptor, shared) = (acceptor.clone(), shared.clone());
                    tokio::spawn(async move {
                        keep_alive(&stream);
                        match tokio::time::timeout(HELLO_TIMEOUT, acceptor.accept(stream)).await {
                            Ok(Ok(tls)) => connection(tls, Peer::Remote(addr), shared, Some(permit)).await,
                            Ok(Err(e)) => tracing::info!(peer = %addr, error = %e, "a remote TLS handshake failed"),
                            Err(_) => tracing::info!(peer = %addr, "a remote TLS handshake took too long"),
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept on the remote listener failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// TCP keepalive with short timers: a remote pi whose machine vanished must not stay "live"
/// (holding its identity and turns) for hours.
fn keep_alive(stream: &TcpStream) {
    use rustix::net::sockopt;
    let set = sockopt::set_socket_keepalive(stream, true)
        .and_then(|()| sockopt::set_tcp_keepidle(stream, KEEPALIVE_IDLE))
        .and_then(|()| sockopt::set_tcp_keepintvl(stream, KEEPALIVE_INTERVAL))
        .and_then(|()| sockopt::set_tcp_keepcnt(stream, KEEPALIVE_PROBES));
    if let Err(e) = set {
        tracing::debug!(error = %e, "could not set TCP keepalive on a remote connection");
    }
}
