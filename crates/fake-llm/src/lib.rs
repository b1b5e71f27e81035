//! `fake-llm`: a deterministic fake of the OpenAI Chat Completions API, so that the real `pi`
//! coding agent can run offline in tests and demos.
//!
//! It serves `GET /v1/models`, `POST /v1/chat/completions` (SSE when `stream: true`, plain JSON
//! otherwise) and `GET /healthz`. The answer depends only on the request, mostly on the text of
//! the last user message:
//!
//! | last user message contains | answer |
//! |---|---|
//! | nothing special | `echo: <text>` |
//! | `[[slow]]` | the same, streamed word by word [`FakeLlmConfig::slow_delay`] apart |
//! | `[[bash:CMD]]` | "Running `CMD`." then a call to pi's `bash` tool with `{"command": CMD}` |
//! | `[[tool:NAME:{json}]]` | a call to the tool NAME with those arguments |
//! | `[[error:CODE]]` | HTTP CODE with an OpenAI-style error body |
//! | `[[reply:TEXT]]` | exactly TEXT (may span lines) |
//! | `[[lone-surrogate]]` | `lone `, half a character (`\ud800`), ` surrogate`, in three chunks |
//! | `[[split-emoji]]` | `split 😀 emoji`, the emoji's two UTF-16 halves in two chunks |
//!
//! The last two stream what JavaScript strings may hold and Rust strings cannot (see
//! [`Reply::Utf16`]). Request bodies are read leniently: a lone surrogate escape in the
//! conversation (after such an answer) is read as U+FFFD, not refused.
//!
//! When the last message is a tool result the answer is `tool said: <result>`, and pi's
//! compaction/summary calls get [`plan::SUMMARY_TEXT`] whatever they quote. Tests can queue
//! canned replies that win over these rules ([`FakeLlm::script`], `POST /__script`), read every
//! request body ([`FakeLlm::requests`], `GET /__requests`) and clear both ([`FakeLlm::reset`],
//! `POST /__reset`).
//!
//! Every completion reports a usage: words counted as tokens, the prompt's split as a prompt
//! cache would make it ([`plan::cache_split`]: earlier messages read, half the last one
//! written), read back with [`FakeLlm::usages`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let llm = fake_llm::FakeLlm::start(fake_llm::FakeLlmConfig::default())?;
//! let agent_dir = std::path::Path::new("/tmp/agent");
//! fake_llm::write_pi_agent_config(agent_dir, llm.base_url())?;
//! // run pi with PI_CODING_AGENT_DIR=/tmp/agent ...
//! # Ok(()) }
//! ```

mod pi_config;
pub mod plan;
mod server;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

pub use pi_config::{MODEL_ID, PROVIDER, REASONING_MODEL_ID, write_pi_agent_config};
pub use plan::{Reply, ScriptEntryError};

/// The default delay between words of a `[[slow]]` reply.
pub const DEFAULT_SLOW_DELAY: Duration = Duration::from_millis(300);

/// The environment variable [`FakeLlmConfig::from_env`] reads the slow delay from, in ms.
pub const SLOW_MS_ENV: &str = "FAKE_LLM_SLOW_MS";

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum FakeLlmError {
    /// Binding the listening socket failed.
    #[error("fake-llm: cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// [`FakeLlm::start`] was called outside a tokio runtime.
    #[error(
        "fake-llm: FakeLlm::start needs a tokio runtime (use FakeLlm::start_background outside one)"
    )]
    NoRuntime,
    /// Building the dedicated runtime of [`FakeLlm::start_background`] failed.
    #[error("fake-llm: cannot build a tokio runtime: {0}")]
    Runtime(std::io::Error),
    /// An environment variable has a value that cannot be used.
    #[error("fake-llm: {name}={value:?} is not a number of milliseconds")]
    BadEnv {
        /// The variable.
        name: &'static str,
        value: String,
    },
    /// A scripted reply has an unknown shape.
    #[error(transparent)]
    Script(#[from] ScriptEntryError),
}

/// How to run the fake.
#[derive(Debug, Clone)]
pub struct FakeLlmConfig {
    /// Address to bind; loopback by default.
    pub host: IpAddr,
    /// Port to bind; 0 picks a free one.
    pub port: u16,
    /// Delay before each word of a `[[slow]]` reply.
    pub slow_delay: Duration,
    /// The model id `/v1/models` lists and responses name when the request names none.
    pub model_id: String,
    /// Also append every chat request body as one JSON line to this file.
    pub log_file: Option<PathBuf>,
}

impl Default for FakeLlmConfig {
    /// Loopback, a free port, 300 ms slow delay, model `fake-model`, no log file. Deliberately
    /// ignores the environment, so tests are not changed by a stray variable.
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            slow_delay: DEFAULT_SLOW_DELAY,
            model_id: MODEL_ID.to_owned(),
            log_file: None,
        }
    }
}

impl FakeLlmConfig {
    /// The defaults, with the slow delay taken from `FAKE_LLM_SLOW_MS` when it is set.
    pub fn from_env() -> Result<Self, FakeLlmError> {
        let mut config = Self::default();
        if let Ok(value) = std::env::var(SLOW_MS_ENV) {
            config.slow_delay = parse_slow_ms(&value)?;
        }
        Ok(config)
    }
}

fn parse_slow_ms(value: &str) -> Result<Duration, FakeLlmError> {
    value
        .trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| FakeLlmError::BadEnv {
            name: SLOW_MS_ENV,
            value: value.to_owned(),
        })
}

/// A running fake LLM server. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeLlm {
    addr: SocketAddr,
    base_url: String,
    shared: Arc<server::Shared>,
    stop: watch::Sender<bool>,
    /// The runtime of [`FakeLlm::start_background`]; `None` when serving on the caller's.
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeLlm {
    /// Binds `config.host:config.port` and serves on the current tokio runtime (so it must be
    /// called from within one: an async fn, or after `Runtime::enter`).
    pub fn start(config: FakeLlmConfig) -> Result<Self, FakeLlmError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(FakeLlmError::NoRuntime);
        }
        Self::start_in_context(config)
    }

    /// Like [`FakeLlm::start`], but serves on a dedicated runtime thread that lives as long as
    /// the returned handle: for synchronous tests that drive a child process with blocking I/O.
    pub fn start_background(config: FakeLlmConfig) -> Result<Self, FakeLlmError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fake-llm")
            .enable_all()
            .build()
            .map_err(FakeLlmError::Runtime)?;
        let guard = runtime.enter();
        let started = Self::start_in_context(config);
        drop(guard);
        let mut llm = started?;
        llm.runtime = Some(runtime);
        Ok(llm)
    }

    fn start_in_context(config: FakeLlmConfig) -> Result<Self, FakeLlmError> {
        let addr = SocketAddr::new(config.host, config.port);
        let bind_err = |source| FakeLlmError::Bind { addr, source };
        // A std listener binds synchronously, so `start` needs no `.await` and the port is known
        // (and connectable) as soon as it returns.
        let std_listener = std::net::TcpListener::bind(addr).map_err(bind_err)?;
        std_listener.set_nonblocking(true).map_err(bind_err)?;
        let bound = std_listener.local_addr().map_err(bind_err)?;
        let listener = tokio::net::TcpListener::from_std(std_listener).map_err(bind_err)?;

        let shared = Arc::new(server::Shared::new(
            config.model_id,
            config.slow_delay,
            config.log_file,
        ));
        let (stop, mut stop_rx) = watch::channel(false);
        let app = server::app(shared.clone());
        tokio::spawn(async move {
            let shutdown = async move {
                // Also stops when the handle is gone without sending (the sender dropped).
                let _ = stop_rx.wait_for(|stopped| *stopped).await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::warn!("fake-llm: server stopped: {e}");
            }
        });
        Ok(Self {
            addr: bound,
            base_url: format!("http://{bound}/v1"),
            shared,
            stop,
            runtime: None,
        })
    }

    /// `http://127.0.0.1:<port>/v1`: what pi's `models.json` calls `baseUrl`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every chat completion request body received since the start or the last reset, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests()
    }

    /// When each request of [`FakeLlm::requests`] arrived (microseconds since the Unix epoch),
    /// for latency breakdowns.
    pub fn arrivals_us(&self) -> Vec<u64> {
        self.shared.arrivals_us()
    }

    /// The `usage` of every completion answered since the start or the last reset, in order:
    /// what pi was told each request cost (`prompt_tokens_details` holds the cache split).
    pub fn usages(&self) -> Vec<Value> {
        self.shared.usages()
    }

    /// Queues canned replies (FIFO) that answer the next chat requests before the marker rules.
    /// Entries have the `/__script` shapes: `"text"`, `{"text":…,"slow"?:bool}`,
    /// `{"tool":…,"args":…}` or `{"error":code}`. On an invalid entry nothing is queued.
    pub fn script(&self, replies: Vec<Value>) -> Result<(), FakeLlmError> {
        self.shared.script(&replies)?;
        Ok(())
    }

    /// Queues one canned reply.
    pub fn push_reply(&self, reply: Reply) {
        self.shared.push(reply);
    }

    /// Clears the script queue and the request log.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Stops accepting connections; open ones finish their current response.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.stop();
        if let Some(runtime) = self.runtime.take() {
            // Not `drop(runtime)`: that blocks, and panics when the handle is dropped inside
            // another runtime (e.g. at the end of an async test).
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slow_ms_values() {
        assert_eq!(parse_slow_ms("25").unwrap(), Duration::from_millis(25));
        assert_eq!(parse_slow_ms(" 0\n").unwrap(), Duration::ZERO);
        let err = parse_slow_ms("fast").unwrap_err();
        assert_eq!(
            err.to_string(),
            "fake-llm: FAKE_LLM_SLOW_MS=\"fast\" is not a number of milliseconds"
        );
    }
}
