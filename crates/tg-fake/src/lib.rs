//! `tg-fake`: a faithful fake of the Telegram Bot API for tests, demos and benchmarks.
//!
//! It serves `/bot<token>/<method>` and `/file/bot<token>/<path>` on loopback with Telegram's
//! semantics and error texts (see the crate README for what is modelled), plus a control API
//! under `/__control/` to act as the person, read what they see, inject faults and move time.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let fake = tg_fake::FakeServer::start(tg_fake::FakeConfig::default()).await?;
//! let url = format!("{}/bot{}/getMe", fake.base_url(), tg_fake::DEFAULT_TOKEN);
//! fake.control().send_text(tg_fake::control::SendText { text: "hi".into(), ..Default::default() });
//! # Ok(()) }
//! ```

mod api;
mod api_lookup;
pub mod api_spec;
mod api_table;
pub mod clock;
pub mod config;
pub mod control;
pub mod error;
pub mod faults;
pub mod flood;
pub mod log;
pub mod params;
mod server;
mod shared;
mod tls;
pub mod world;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use api::{counts_for_flood, is_draft};
pub use api_table::BOT_API_VERSION;
pub use config::{DEFAULT_TOKEN, DEFAULT_USER_ID, FakeConfig};
pub use control::Control;
pub use faults::{FaultKind, FaultSpec};
pub use flood::FloodConfig;
pub use tls::TlsError;

/// A running fake server. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeServer {
    addr: SocketAddr,
    base_url: String,
    ca_pem: Option<String>,
    control: Control,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

/// The axum app: control routes plus the Bot API fallback.
fn app(shared: Arc<shared::Shared>) -> Router {
    Router::new()
        .nest("/__control", control::routes())
        .fallback(server::bot_api)
        .with_state(shared)
}

impl FakeServer {
    /// Binds `config.host:config.port` and serves in the background on the current runtime.
    pub async fn start(config: FakeConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind((config.host, config.port)).await?;
        let addr = listener.local_addr()?;
        let tls = if config.tls {
            Some(tls::identity(addr.ip())?)
        } else {
            None
        };
        let shared = shared::Shared::new(config);
        let control = Control::new(shared.clone());
        let (stop, stop_rx) = watch::channel(false);
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (acceptor, ca_pem) = match tls {
            Some(t) => (Some(t.acceptor), Some(t.ca_pem)),
            None => (None, None),
        };
        let task = tokio::spawn(server::accept_loop(
            listener,
            app(shared),
            acceptor,
            stop_rx,
        ));
        Ok(Self {
            addr,
            base_url: format!("{scheme}://{addr}"),
            ca_pem,
            control,
            stop,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:<port>` (`https://` with `tls`): the API base
    /// (`{base}/bot<token>/<method>`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// With `tls`: the PEM of the authority that signed the fake's certificate, for a client
    /// to trust.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The in-process control handle.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// `{base}/bot{token}/{method}`.
    pub fn method_url(&self, token: &str, method: &str) -> String {
        format!("{}/bot{token}/{method}", self.base_url)
    }

    /// Stops accepting and closes every connection.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
