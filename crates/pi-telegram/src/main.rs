//! `pi-telegram`: composition root. Subcommands arrive with later issues (setup, serve, status,
//! demo); today the binary only identifies itself.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "pi-telegram",
    version,
    about = "Telegram companion hub for live pi sessions"
)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    println!(
        "pi-telegram {}: the hub is not built yet; see README.md",
        env!("CARGO_PKG_VERSION")
    );
}
