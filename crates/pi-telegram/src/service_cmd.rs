//! `pi-telegram service …`: prints what the hub's service module did.

use hub::HubError;
use hub::paths::{AgentDir, ProfileName};
use hub::service::{self, Manager, UnitSpec};

use crate::cli::ServiceCommand;

pub fn run(
    agent_dir: &AgentDir,
    profile: &ProfileName,
    command: ServiceCommand,
) -> Result<(), HubError> {
    let manager = Manager::here();
    let paths = agent_dir.profile(profile);
    match command {
        ServiceCommand::Install { dry_run } => {
            let spec = UnitSpec::current(profile)?;
            if dry_run {
                let file = service::unit_file(manager, profile)?;
                println!("# {}", file.display());
                print!("{}", service::unit_text(manager, &spec, &paths));
                return Ok(());
            }
            let done = service::install(agent_dir, manager, &spec)?;
            println!(
                "Installed and started {} ({}). It starts at login and restarts after a crash.\nStatus: pi-telegram service status{}; stop it for now: pi-telegram stop{}",
                done.name,
                done.file.display(),
                flag(profile),
                flag(profile),
            );
        }
        ServiceCommand::Uninstall => match service::uninstall(agent_dir, profile)? {
            Some(done) => println!(
                "Stopped and removed {} ({}).",
                done.name,
                done.file.display()
            ),
            None => println!("No service is installed for profile {profile}."),
        },
        ServiceCommand::Status { json } => {
            let st = service::status(&paths);
            if json {
                let out = serde_json::to_string_pretty(&st)
                    .map_err(|e| HubError::io("printing")(std::io::Error::other(e)))?;
                println!("{out}");
            } else {
                match &st.installed {
                    None => println!(
                        "No service installed for profile {profile} (pi-telegram service install{}).",
                        flag(profile)
                    ),
                    Some(found) => println!(
                        "{} ({})\nenabled      {}\nrunning      {}\nmanager says {}",
                        found.name,
                        found.file.display(),
                        if st.enabled { "yes" } else { "no" },
                        if st.running { "yes" } else { "no" },
                        st.detail.as_deref().unwrap_or("-"),
                    ),
                }
            }
        }
    }
    Ok(())
}

fn flag(profile: &ProfileName) -> String {
    if *profile == ProfileName::default_profile() {
        String::new()
    } else {
        format!(" --profile {profile}")
    }
}
