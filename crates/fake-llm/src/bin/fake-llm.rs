//! `fake-llm`: run the fake OpenAI-compatible Chat Completions server until SIGINT/SIGTERM.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use fake_llm::{FakeLlm, FakeLlmConfig};

/// A deterministic fake OpenAI-compatible Chat Completions server for offline pi runs.
/// Prints its base URL (http://HOST:PORT/v1) on stdout once listening.
#[derive(Parser, Debug)]
#[command(name = "fake-llm", version)]
struct Args {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Also write the bound port to this file (atomically, once listening).
    #[arg(long)]
    port_file: Option<PathBuf>,
    /// Delay between the words of a [[slow]] reply, in ms [default: $FAKE_LLM_SLOW_MS or 300].
    #[arg(long)]
    slow_ms: Option<u64>,
    /// Append every chat request body as a JSON line to this file [default: $FAKE_LLM_LOG].
    #[arg(long)]
    log: Option<PathBuf>,
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
    let mut config = FakeLlmConfig::from_env()?;
    config.host = args.host;
    config.port = args.port;
    config.log_file = args
        .log
        .or_else(|| std::env::var_os("FAKE_LLM_LOG").map(PathBuf::from));
    if let Some(ms) = args.slow_ms {
        config.slow_delay = Duration::from_millis(ms);
    }
    let llm = FakeLlm::start(config).context("starting the server")?;
    if let Some(path) = &args.port_file {
        // Written under another name and renamed, so a reader polling for the file never sees
        // it empty or half-written.
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, format!("{}\n", llm.port()))
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("{}", llm.base_url());
    wait_for_signal().await?;
    llm.stop();
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
