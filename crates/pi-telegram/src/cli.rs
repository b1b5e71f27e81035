//! Command-line interface.

use clap::{Parser, Subcommand};

/// Telegram companion hub for live pi sessions.
#[derive(Parser, Debug)]
#[command(name = "pi-telegram", version = env!("PI_TELEGRAM_VERSION"), about)]
pub struct Cli {
    /// Bot profile ([a-z0-9]{1,32}); profiles are kept in <agent-dir>/telegram.json.
    #[arg(long, global = true, default_value = "default")]
    pub profile: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check a bot token, save it, and print a one-time pairing code.
    Setup {
        /// The token from @BotFather (else $TELEGRAM_BOT_TOKEN, else asked for).
        #[arg(long)]
        token: Option<String>,
        /// Bot API base URL (a local Bot API server, or tg-fake); saved in the profile.
        #[arg(long)]
        api_base: Option<String>,
        /// Print {"bot_username","has_topics_enabled","pairing_code"} and ask nothing.
        #[arg(long)]
        json: bool,
    },
    /// Run the hub in the foreground (the only Telegram client of the profile's bot).
    Serve,
    /// Ask the running hub to start a headless pi (`pi --mode rpc`) in a folder.
    Spawn {
        /// The folder pi works in.
        #[arg(long)]
        cwd: std::path::PathBuf,
    },
    /// Try it without a bot token: a fake Telegram, the hub and one pi instance, in this
    /// terminal.
    Demo,
    /// Install the pi extension that matches this binary (`/telegram-connect` in pi).
    InstallExtension,
    /// Show the profile's state (never the token).
    Status {
        /// Machine-readable output (a stable interface; see README).
        #[arg(long)]
        json: bool,
    },
    /// Print what a pi on another machine needs to join this hub (remote.listen must be set):
    /// the JSON for that machine's telegram.json on stdout, how to use it on stderr.
    RemoteConfig {
        /// This machine's name or address as the other machine reaches it (default: the
        /// listen address, or the host name when the hub listens on every address).
        #[arg(long)]
        host: Option<String>,
    },
    /// Stop the running hub, whoever started it; a pi's extension does not start it again until
    /// `/telegram-connect` (or `serve`).
    Stop,
    /// Run the hub as a service (systemd --user on Linux, launchd on macOS).
    Service {
        /// What to do.
        #[command(subcommand)]
        command: ServiceCommand,
    },
    /// Check everything the bot needs (config, token, Telegram, other pollers, the hub, its
    /// folder, disk, pi, Node.js, the extension), each with what to do. Exit code 1 when a
    /// check fails that stops the bot from working.
    Doctor {
        /// Machine-readable output: {"profile","checks":[{"id","title","outcome","detail","fix"}],"ok"}.
        #[arg(long)]
        json: bool,
    },
    /// Print the hub's log (`<profile folder>/logs/hub.jsonl` and its rotated files, oldest
    /// first).
    Logs {
        /// Keep printing new lines as the hub writes them (across rotations).
        #[arg(short, long)]
        follow: bool,
        /// Print the JSON lines as they are.
        #[arg(long)]
        json: bool,
        /// Only lines since then: a duration back from now (30s, 10m, 2h, 1d) or a time
        /// (2026-11-30T18:00:00Z, 2026-11-30).
        #[arg(long)]
        since: Option<String>,
    },
    /// Threaded Mode: settle what the hub cannot decide alone.
    Threads {
        /// What to do.
        #[command(subcommand)]
        command: ThreadsCommand,
    },
}

/// `threads` subcommands.
#[derive(Subcommand, Debug)]
pub enum ThreadsCommand {
    /// Settle a topic creation of unknown outcome (`status` lists intents with their ids).
    #[command(group(clap::ArgGroup::new("choice").required(true).args(["create", "forget"])))]
    Resolve {
        /// The intent id.
        id: i64,
        /// Create a new topic anyway (if the first one was made after all, you get two).
        #[arg(long)]
        create: bool,
        /// Forget it: the instance stays in the main chat until it reconnects (a topic you
        /// find can be bound with "Move here").
        #[arg(long)]
        forget: bool,
    },
}

/// `service` subcommands.
#[derive(Subcommand, Debug)]
pub enum ServiceCommand {
    /// Write the unit, enable it and start it (restarted on failure, not on a bad token,
    /// configuration or another poller).
    Install {
        /// Print the unit instead of installing it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Stop and disable the service and remove its unit.
    Uninstall,
    /// Whether the service is installed, enabled and running.
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}
