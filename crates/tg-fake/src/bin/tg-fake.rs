//! `tg-fake`: run the fake Telegram Bot API server.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use tg_fake::{FakeConfig, FakeServer, FloodConfig};

/// A faithful fake of the Telegram Bot API on loopback, with a control API under /__control/.
#[derive(Parser, Debug)]
#[command(name = "tg-fake", version)]
struct Args {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Bot token (repeatable; the first bot is the default for control calls).
    #[arg(long = "token", default_value = tg_fake::DEFAULT_TOKEN)]
    tokens: Vec<String>,
    /// Also write the base URL to this file (written atomically, once listening).
    #[arg(long)]
    url_file: Option<PathBuf>,
    /// Accept parameters the Bot API documentation does not list (strict is the default).
    #[arg(long)]
    no_strict: bool,
    /// Start with Threaded Mode (private-chat topics) enabled.
    #[arg(long)]
    topics: bool,
    /// Enable the flood model with Telegram-like limits (1 msg/s per chat, burst 3; 30/s overall).
    #[arg(long)]
    flood: bool,
    /// Seed for probabilistic faults.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = FakeConfig {
        host: args.host,
        port: args.port,
        tokens: args.tokens,
        strict: !args.no_strict,
        has_topics_enabled: args.topics,
        flood: FloodConfig {
            enabled: args.flood,
            ..FloodConfig::default()
        },
        seed: args.seed,
        ..FakeConfig::default()
    };
    let server = FakeServer::start(config)
        .await
        .context("binding the listener")?;
    println!("{}", server.base_url());
    if let Some(path) = &args.url_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\n", server.base_url()))
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    }
    wait_for_signal().await;
    server.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
