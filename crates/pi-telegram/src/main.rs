//! `pi-telegram`: the composition root. It parses the command line, sets up logging, and hands
//! each subcommand to the `hub` crate; errors become a message and an exit code.

mod arenas;
mod cli;
mod cmd;
mod demo;
mod install;

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use cmd::{doctor, setup};
use hub::paths::{AgentDir, ProfileName};
use hub::{HubError, lock, logging, serve};

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if matches!(cli.command, cli::Command::Serve) {
        arenas::reexec_with_few_arenas();
    }
    let (agent_dir, profile) = match where_from(&cli) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("pi-telegram: {e}");
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1));
        }
    };
    // serve logs its life at info, also into its profile's log file; the demo keeps the
    // terminal for the conversation.
    let default_level = match cli.command {
        cli::Command::Serve => "info",
        cli::Command::Demo => "error",
        _ => "warn",
    };
    let paths = agent_dir.profile(&profile);
    // A second serve that will find the lock taken must not write (or rotate) the running
    // hub's log.
    let file = matches!(cli.command, cli::Command::Serve)
        && matches!(lock::ProfileLock::holder(&paths.lock_file()), Ok(None));
    logging::init(&logging::LogSetup {
        default_level,
        file: file.then_some(paths),
        rotation: logging::rotate::Rotation::default(),
    });
    match run(cli, agent_dir, profile) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pi-telegram: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}

/// The agent dir and the profile every subcommand works on.
fn where_from(cli: &cli::Cli) -> Result<(AgentDir, ProfileName), HubError> {
    let profile = ProfileName::new(&cli.profile).map_err(|e| HubError::Usage(e.to_string()))?;
    let agent_dir = AgentDir::from_env().map_err(HubError::io("finding pi's agent directory"))?;
    Ok((agent_dir, profile))
}

fn run(cli: cli::Cli, agent_dir: AgentDir, profile: ProfileName) -> Result<ExitCode, HubError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Store calls hand their worker's scheduler to a pool thread while they run
        // (`hub::db`): room for both workers' and for file and DNS work besides.
        .max_blocking_threads(8)
        .enable_all()
        .build()
        .map_err(HubError::io("starting the runtime"))?;
    let done = match cli.command {
        cli::Command::Doctor { json } => {
            let mut opts = doctor::DoctorOptions::new(agent_dir, profile);
            opts.extension = Some(install::embedded());
            let report = runtime.block_on(doctor::run(opts));
            if json {
                let out = serde_json::to_string_pretty(&report)
                    .map_err(|e| HubError::io("printing")(std::io::Error::other(e)))?;
                println!("{out}");
            } else {
                print!("{}", doctor::render(&report));
            }
            // 1 when a check failed; the report said which.
            return Ok(ExitCode::from(
                u8::try_from(report.exit_code()).unwrap_or(1),
            ));
        }
        cli::Command::Logs {
            follow,
            json,
            since,
        } => {
            let since_ms = since
                .map(|s| logging::time::parse_since(&s, hub::clock::system_now_ms()))
                .transpose()
                .map_err(|e| HubError::Usage(e.to_string()))?;
            let file = logging::log_file(&agent_dir.profile(&profile));
            if !follow && logging::read::files(&file).is_empty() {
                eprintln!(
                    "no log yet: {} (the hub writes it while `serve` runs)",
                    file.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let opts = logging::read::LogsOptions {
                json,
                since_ms,
                follow,
            };
            logging::read::print(&file, &opts, &mut std::io::stdout().lock())
                .map_err(HubError::io(format!("reading {}", file.display())))
        }
        cli::Command::Setup {
            token,
            api_base,
            json,
        } => {
            let opts = setup::SetupOptions {
                agent_dir,
                profile: profile.clone(),
                token,
                api_base,
            };
            let report = runtime.block_on(setup::setup(opts, || {
                if json { Ok(None) } else { ask_token() }
            }))?;
            if json {
                let out = serde_json::to_string(&report)
                    .map_err(|e| HubError::io("printing")(std::io::Error::other(e)))?;
                println!("{out}");
            } else {
                print!("{}", setup::render(&report, &profile));
            }
            Ok(())
        }
        cli::Command::Serve => {
            let child_extension = install::child_extension(&agent_dir);
            let opts = serve::ServeOptions {
                agent_dir,
                profile,
                tuning: serve::Tuning::from_env(),
                instances_at_start: Vec::new(),
                child_extension,
                version: env!("PI_TELEGRAM_VERSION"),
            };
            runtime.block_on(async {
                // Registered before anything else, so a signal during start-up is not lost.
                let signals =
                    Signals::register().map_err(HubError::io("installing signal handlers"))?;
                let paths = opts.agent_dir.profile(&opts.profile);
                serve::serve(opts, async move {
                    if signals.recv().await == Stopped::Interrupt {
                        // Ctrl-C is a person stopping the hub on purpose: their pi must not
                        // start it again behind their back.
                        if let Err(e) = hub::lifecycle::mark_stopped(&paths, "interrupt") {
                            tracing::warn!(error = %e, "could not leave the stop marker");
                        }
                    }
                })
                .await
            })
        }
        cli::Command::Spawn { cwd } => {
            let cwd = std::fs::canonicalize(&cwd)
                .map_err(HubError::io(format!("{}", cwd.display())))?
                .display()
                .to_string();
            let paths = agent_dir.profile(&profile);
            // The hub may run with another environment (a service): tell it how this shell
            // finds pi.
            let env = hub::pi::links::rpc::REQUEST_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
                .collect();
            let msg = wire::ClientMsg::Spawn {
                id: "spawn".into(),
                cwd: cwd.clone(),
                env,
            };
            let data = runtime.block_on(hub::control::request(&paths, msg, "spawn"))?;
            let id = data
                .get("instance_id")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?");
            println!("started pi in {cwd} (instance {id})");
            Ok(())
        }
        cli::Command::Demo => runtime.block_on(demo::run()),
        cli::Command::InstallExtension => {
            let dir = install::install(&agent_dir)?;
            println!(
                "Installed the pi extension in {} and registered it in {}.\nIn pi, type /telegram-connect to connect (it starts the hub when needed).",
                dir.display(),
                agent_dir.path().join("settings.json").display()
            );
            Ok(())
        }
        cli::Command::Threads {
            command: cli::ThreadsCommand::Resolve { id, create, .. },
        } => {
            let paths = agent_dir.profile(&profile);
            let data = runtime.block_on(cmd::threads::resolve(&paths, id, create))?;
            let slot = data
                .get("slot")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?");
            let identity = data
                .get("identity")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?");
            if create {
                println!(
                    "intent #{id} (slot {slot}, {identity}) settled: a new thread will be created"
                );
            } else {
                println!("intent #{id} (slot {slot}, {identity}) forgotten");
            }
            Ok(())
        }
        cli::Command::Stop => {
            let paths = agent_dir.profile(&profile);
            match cmd::stop::stop(&paths, std::time::Duration::from_secs(30))? {
                cmd::stop::StopOutcome::NotRunning => println!(
                    "No hub is running for profile {profile}. pi will not start one until /telegram-connect."
                ),
                cmd::stop::StopOutcome::Stopped { pid } => println!(
                    "Stopped the hub of profile {profile} (pid {pid}). pi will not start it again until /telegram-connect; `pi-telegram serve` starts it by hand."
                ),
            }
            Ok(())
        }
        cli::Command::RemoteConfig { host } => {
            let rc = cmd::remote::remote_config(&agent_dir, &profile, host.as_deref())?;
            let out = serde_json::to_string_pretty(&rc.snippet)
                .map_err(|e| HubError::io("printing")(std::io::Error::other(e)))?;
            // The snippet alone on stdout, so it can be piped to the other machine.
            eprint!("{}", cmd::remote::explain(&rc, &agent_dir.config_file()));
            println!("{out}");
            Ok(())
        }
        cli::Command::Service { command } => cmd::service::run(&agent_dir, &profile, command),
        cli::Command::Status { json } => {
            let st = hub::status::status(&agent_dir, &profile)?;
            if json {
                let out = serde_json::to_string_pretty(&st)
                    .map_err(|e| HubError::io("printing")(std::io::Error::other(e)))?;
                println!("{out}");
            } else {
                print!("{}", cmd::status::render(&st));
            }
            Ok(())
        }
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// Asks for the token on a terminal; `None` when there is no terminal or no answer.
fn ask_token() -> std::io::Result<Option<String>> {
    if !std::io::stdin().is_terminal() {
        return Ok(None);
    }
    eprint!(
        "Paste the bot token from @BotFather (/newbot or /mybots → API Token; it is not shown): "
    );
    std::io::stderr().flush()?;
    let line = read_hidden_line()?;
    eprintln!();
    let line = line.trim().to_owned();
    Ok((!line.is_empty()).then_some(line))
}

/// One line from the terminal with its echo off (a token is a password), restored after.
fn read_hidden_line() -> std::io::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let before = tcgetattr(&stdin)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    tcsetattr(&stdin, OptionalActions::Now, &before)?;
    read.map(|_| line)
}

/// SIGINT and SIGTERM, registered up front.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn register() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves on the first of them.
    async fn recv(mut self) -> Stopped {
        let how = tokio::select! {
            _ = self.int.recv() => Stopped::Interrupt,
            _ = self.term.recv() => Stopped::Terminate,
        };
        tracing::info!(?how, "stopping on a signal");
        how
    }
}

/// Which signal stopped the hub.
#[derive(Debug, PartialEq, Eq)]
enum Stopped {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: `pi-telegram stop`, a service manager, a shutdown.
    Terminate,
}
