//! Checks of this machine: the config file, the state database, the profile folder's
//! permissions, the hub process and its socket, disk space.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::{self, ConfigFile};
use crate::lock::ProfileLock;

use super::{Check, Ctx, DoctorOptions, bytes, profile_flag};

/// `config`: telegram.json readable and valid, and private.
pub(crate) fn config(opts: &DoctorOptions, checks: &mut Vec<Check>) -> Option<ConfigFile> {
    const ID: &str = "config";
    const TITLE: &str = "Configuration";
    let path = opts.agent_dir.config_file();
    let file = match ConfigFile::load(&path) {
        Ok(f) => f,
        Err(e) => {
            checks.push(Check::fail(
                ID,
                TITLE,
                e.to_string(),
                format!(
                    "edit {} so that it is valid JSON of the form {{\"profiles\": {{\"{}\": {{\"botToken\": \"…\"}}}}}} (or move it away and run `pi-telegram setup{}`)",
                    path.display(),
                    opts.profile,
                    profile_flag(&opts.profile)
                ),
            ));
            return None;
        }
    };
    let readable = config::permission_warnings(&path);
    let values = crate::assistant::Settings::from_file(&file, &opts.profile).1;
    if !readable.is_empty() || !values.is_empty() {
        let mut fixes = Vec::new();
        if !readable.is_empty() {
            fixes.push(format!("chmod 600 {}", path.display()));
        }
        if !values.is_empty() {
            fixes.push("correct the values named above (their defaults apply meanwhile)".into());
        }
        let all: Vec<String> = readable.into_iter().chain(values).collect();
        checks.push(Check::warn(
            ID,
            TITLE,
            format!("{} is valid, but: {}", path.display(), all.join("; ")),
            fixes.join("\n"),
        ));
    } else if !path.exists() {
        checks.push(Check::warn(
            ID,
            TITLE,
            format!("no {} yet", path.display()),
            format!(
                "run `pi-telegram setup{}` (it saves the token there)",
                profile_flag(&opts.profile)
            ),
        ));
    } else {
        checks.push(Check::pass(
            ID,
            TITLE,
            format!("{} is valid", path.display()),
        ));
    }
    Some(file)
}

/// `state`: the state database opens and has this binary's schema.
pub(crate) fn state(ctx: &Ctx, checks: &mut Vec<Check>) -> Option<store::Store> {
    const ID: &str = "state";
    const TITLE: &str = "State database";
    let path = ctx.paths.state_db();
    match store::Store::open_for_reading(&path) {
        Ok(Some(s)) => {
            checks.push(Check::pass(
                ID,
                TITLE,
                format!("{} is readable", path.display()),
            ));
            Some(s)
        }
        Ok(None) => {
            checks.push(Check::pass(
                ID,
                TITLE,
                "none yet (setup or the first start of the hub creates it)",
            ));
            None
        }
        Err(e) => {
            let fix = match &e {
                store::StoreError::TooNew { .. } => {
                    "this pi-telegram is older than the one that wrote the state: use the newer binary".to_owned()
                }
                _ => format!(
                    "start the hub once (`pi-telegram serve{}`) if it only needs an upgrade; otherwise move {} away to start over (the pairing and queued messages are lost)",
                    profile_flag(&ctx.opts.profile),
                    path.display()
                ),
            };
            checks.push(Check::fail(ID, TITLE, e.to_string(), fix));
            None
        }
    }
}

/// One problem with a path's permissions and the command that fixes it.
struct Problem {
    what: String,
    fix: String,
}

fn our_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Checks that `path` (if it exists) is ours and private (`mode` for folders, 0600 for files).
fn private(path: &Path, dir_mode: u32, problems: &mut Vec<Problem>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let shown = path.display();
    if meta.uid() != our_uid() {
        problems.push(Problem {
            what: format!("{shown} belongs to user {}, not to you", meta.uid()),
            fix: format!("chown -R \"$(id -u)\" {shown}"),
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    let want = if meta.is_dir() { dir_mode } else { 0o600 };
    if mode & 0o077 != 0 {
        problems.push(Problem {
            what: format!("others can use {shown} (mode {mode:o})"),
            fix: format!("chmod {want:o} {shown}"),
        });
    }
}

/// `permissions`: the profile folder and what it holds are the person's alone and writable;
/// so is the download folder.
pub(crate) fn permissions(ctx: &Ctx, checks: &mut Vec<Check>) {
    const ID: &str = "permissions";
    const TITLE: &str = "Folder permissions";
    let dir = &ctx.paths.dir;
    if !dir.exists() {
        checks.push(Check::warn(
            ID,
            TITLE,
            format!("{} does not exist yet", dir.display()),
            format!(
                "run `pi-telegram setup{}` (it creates it, mode 0700)",
                profile_flag(&ctx.opts.profile)
            ),
        ));
        return;
    }
    let mut problems = Vec::new();
    private(dir, 0o700, &mut problems);
    if let Err(e) = rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    ) {
        problems.push(Problem {
            what: format!("{} is not writable ({e})", dir.display()),
            fix: format!("chmod 700 {}", dir.display()),
        });
    }
    if let Ok(vfs) = rustix::fs::statvfs(dir)
        && vfs.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)
    {
        problems.push(Problem {
            what: format!("{} is on a read-only file system", dir.display()),
            fix: "remount it read-write, or point PI_CODING_AGENT_DIR at a writable place".into(),
        });
    }
    let db = ctx.paths.state_db();
    let mut files: Vec<PathBuf> = vec![
        db.clone(),
        PathBuf::from(format!("{}-wal", db.display())),
        PathBuf::from(format!("{}-shm", db.display())),
        ctx.paths.secret(),
        ctx.paths.lock_file(),
        ctx.paths.socket(),
        crate::logging::log_dir(&ctx.paths),
    ];
    files.extend(crate::logging::read::files(&crate::logging::log_file(
        &ctx.paths,
    )));
    for f in &files {
        private(f, 0o700, &mut problems);
    }
    let downloads = ctx
        .opts
        .agent_dir
        .path()
        .join("tmp")
        .join("telegram")
        .join(ctx.opts.profile.as_str());
    private(&downloads, 0o700, &mut problems);
    if problems.is_empty() {
        checks.push(Check::pass(
            ID,
            TITLE,
            format!(
                "{} and its files are yours alone (0700/0600)",
                dir.display()
            ),
        ));
    } else {
        checks.push(Check::fail(
            ID,
            TITLE,
            problems
                .iter()
                .map(|p| p.what.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            problems
                .iter()
                .map(|p| p.fix.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        ));
    }
}

/// `hub`: whether a hub holds the profile lock. Returns its pid.
pub(crate) fn hub(ctx: &Ctx, checks: &mut Vec<Check>) -> Option<u32> {
    const ID: &str = "hub";
    const TITLE: &str = "Hub process";
    let lock = ctx.paths.lock_file();
    match ProfileLock::holder(&lock) {
        Ok(Some(pid)) => {
            let who = if pid == 0 {
                "running (pid unknown)".to_owned()
            } else {
                format!("running (pid {pid})")
            };
            checks.push(Check::pass(ID, TITLE, who));
            Some(pid)
        }
        Ok(None) => {
            checks.push(Check::warn(
                ID,
                TITLE,
                "not running: messages wait at Telegram until it starts",
                format!(
                    "start it: `pi-telegram serve{}`, or /telegram-connect in pi (it starts the hub)",
                    profile_flag(&ctx.opts.profile)
                ),
            ));
            None
        }
        Err(e) => {
            checks.push(Check::fail(
                ID,
                TITLE,
                format!("cannot use the profile lock: {e}"),
                format!(
                    "{} must be a file you can read and write: remove it if it is anything else (no hub may be running then)",
                    lock.display()
                ),
            ));
            None
        }
    }
}

/// `socket`: with a hub running, `hub.sock` is a private socket that accepts connections.
pub(crate) fn socket(ctx: &Ctx, checks: &mut Vec<Check>) {
    const ID: &str = "socket";
    const TITLE: &str = "Hub socket";
    let path = ctx.paths.socket();
    let Some(pid) = ctx.hub_pid else {
        checks.push(Check::skip(ID, TITLE, "no hub running"));
        return;
    };
    let restart = format!(
        "restart the hub (stop pid {pid}, then `pi-telegram serve{}`): it makes a new one",
        profile_flag(&ctx.opts.profile)
    );
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) => {
            checks.push(Check::fail(
                ID,
                TITLE,
                format!("{}: {e}: pi cannot reach the running hub", path.display()),
                restart,
            ));
            return;
        }
    };
    if !meta.file_type().is_socket() {
        checks.push(Check::fail(
            ID,
            TITLE,
            format!("{} is not a socket", path.display()),
            restart,
        ));
        return;
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        checks.push(Check::fail(
            ID,
            TITLE,
            format!("others can connect to {} (mode {mode:o})", path.display()),
            format!("chmod 600 {}, or {restart}", path.display()),
        ));
        return;
    }
    match std::os::unix::net::UnixStream::connect(&path) {
        Ok(_) => checks.push(Check::pass(
            ID,
            TITLE,
            format!("{} accepts connections (0600)", path.display()),
        )),
        Err(e) => checks.push(Check::fail(
            ID,
            TITLE,
            format!("{} refuses connections ({e})", path.display()),
            restart,
        )),
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// `disk`: free space where the state lives, and how much the state and logs take.
pub(crate) fn disk(ctx: &Ctx, checks: &mut Vec<Check>) {
    const ID: &str = "disk";
    const TITLE: &str = "Disk space";
    // The nearest folder that exists: before setup the profile folder is not there yet.
    let mut at: &Path = &ctx.paths.dir;
    while !at.exists() {
        match at.parent() {
            Some(p) => at = p,
            None => break,
        }
    }
    let vfs = match rustix::fs::statvfs(at) {
        Ok(v) => v,
        Err(e) => {
            checks.push(Check::skip(
                ID,
                TITLE,
                format!("cannot measure {}: {e}", at.display()),
            ));
            return;
        }
    };
    let free = vfs.f_bavail.saturating_mul(vfs.f_frsize);
    let db = ctx.paths.state_db();
    let state = size(&db)
        + size(Path::new(&format!("{}-wal", db.display())))
        + size(Path::new(&format!("{}-shm", db.display())));
    let logs: u64 = crate::logging::read::files(&crate::logging::log_file(&ctx.paths))
        .iter()
        .map(|p| size(p))
        .sum();
    let detail = format!(
        "{} free on the file system of {}; state {}, logs {}",
        bytes(free),
        at.display(),
        bytes(state),
        bytes(logs)
    );
    let min = ctx.opts.min_free_bytes;
    let warn_below = (1024 * 1024 * 1024u64).max(min.saturating_mul(4));
    if free < min {
        checks.push(Check::fail(
            ID,
            TITLE,
            detail,
            format!(
                "free some space (under {} the hub cannot store updates or files safely)",
                bytes(min)
            ),
        ));
    } else if free < warn_below {
        checks.push(Check::warn(
            ID,
            TITLE,
            detail,
            "free some space soon: downloads and the state grow",
        ));
    } else {
        checks.push(Check::pass(ID, TITLE, detail));
    }
}
