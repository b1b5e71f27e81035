//! The listener for pi on other machines (`remote.listen`): TCP, then TLS with the profile's
//! certificate ([`crate::remote::Identity`]), then the very protocol of `hub.sock`
//! ([`super::socket::connection`], as a [`Peer::Remote`]).
//!
//! Anyone who can reach the port can open a connection, so what a stranger may hold is
//! bounded ([`super::strangers`]): a few connections without a hello per source, a deadline
//! from the accept to the hello, and room kept for sources that hold fewer; their failures are
//! logged once, then summed up.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::socket::{Peer, Shared, connection};
use super::strangers::{Failure, Limits, Strangers};

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
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let strangers = Strangers::new(limits);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    let Some((admission, evicted)) = strangers.admit(addr) else {
                        strangers.failed(addr, Failure::TooMany);
                        continue;
                    };
                    let (acceptor, shared, strangers) = (acceptor.clone(), shared.clone(), strangers.clone());
                    tokio::spawn(async move {
                        keep_alive(&stream);
                        let deadline = admission.deadline();
                        let work = async move {
                            match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
                                Ok(Ok(tls)) => connection(tls, Peer::Remote(addr), shared, Some(admission)).await,
                                Ok(Err(e)) => admission.failed(Failure::Handshake(e.to_string())),
                                Err(_) => admission.failed(Failure::SlowHandshake),
                            }
                        };
                        // Until its hello the connection may have to make room (`Strangers::
                        // admit`); once the hello is settled its admission is gone, and with it
                        // the eviction (`Err`: that branch is off).
                        tokio::select! {
                            () = work => {}
                            Ok(()) = evicted => {
                                strangers.failed(addr, Failure::Evicted);
                            }
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
