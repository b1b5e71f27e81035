//! Checks of this machine: the config file, the state database, the profile folder's
//! permissions, the hub process and its socket, disk space.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hub::config::{self, ConfigFile};
use hub::lock::ProfileLock;

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
    let values = hub::assistant::Settings::from_file(&file, &opts.profile).1;
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

/// `state`: the state database opens, has this binary's schema, and SQLite's `quick_check`
/// finds it sound (it only reads). The fixes never suggest discarding the state unless the
/// file is damaged: a folder or file that cannot be written is a `chmod` away from working,
/// with the pairing and the queue intact.
pub(crate) fn state(ctx: &Ctx, checks: &mut Vec<Check>) -> Option<store::Store> {
    const ID: &str = "state";
    const TITLE: &str = "State database";
    let path = ctx.paths.state_db();
    let opened = store::Store::open_for_reading(&path);
    let trouble = match opened {
        Ok(Some(s)) => match s.quick_check() {
            Ok(problems) if problems.is_empty() => {
                checks.push(Check::pass(
                    ID,
                    TITLE,
                    format!("{} is readable and sound (quick_check)", path.display()),
                ));
                return Some(s);
            }
            Ok(problems) => Trouble::Damaged(first_lines(&problems)),
            Err(e) => trouble(&e, &path),
        },
        Ok(None) => {
            checks.push(Check::pass(
                ID,
                TITLE,
                "none yet (setup or the first start of the hub creates it)",
            ));
            return None;
        }
        Err(e) => trouble(&e, &path),
    };
    let flag = profile_flag(&ctx.opts.profile);
    let (detail, fix) = match trouble {
        Trouble::TooNew(e) => (
            e,
            "this pi-telegram is older than the one that wrote the state: use the newer binary"
                .to_owned(),
        ),
        Trouble::Old(e) => (
            e,
            format!(
                "start the hub once (`pi-telegram serve{flag}`): it upgrades the state in place, keeping everything"
            ),
        ),
        Trouble::Unwritable(e, fixes) => (
            format!(
                "{} cannot be opened ({e}): SQLite writes beside it even to read it",
                path.display()
            ),
            format!(
                "{}\nnothing is lost: the pairing and the queued messages are in the file",
                fixes.join("\n")
            ),
        ),
        Trouble::Damaged(e) => (
            format!("{} is damaged: {e}", path.display()),
            damaged_fix(&path, &flag),
        ),
        Trouble::NotAFile(e) => (
            e,
            format!(
                "it holds no state: move it away (mv {0} {0}.not-a-file); the next `pi-telegram serve{flag}` makes a new one",
                path.display()
            ),
        ),
        Trouble::Other(e) => (
            e,
            format!(
                "run the doctor again (another program may hold the file); if it stays, look at {} and the hub's log (`pi-telegram logs{flag}`); the state is not to be discarded for this",
                path.display()
            ),
        ),
    };
    checks.push(Check::fail(ID, TITLE, detail, fix));
    None
}

/// What kept the state database from being read.
enum Trouble {
    /// From a newer pi-telegram.
    TooNew(String),
    /// From an older one, not migrated yet.
    Old(String),
    /// A folder or file cannot be written (SQLite needs to, even to read a WAL database): the
    /// error and the commands that fix it.
    Unwritable(String, Vec<String>),
    /// The file itself is damaged (or no database at all).
    Damaged(String),
    /// Not a file at all (a FIFO, a folder): nothing in it to keep.
    NotAFile(String),
    /// Anything else (busy, I/O).
    Other(String),
}

fn trouble(e: &store::StoreError, path: &Path) -> Trouble {
    match e {
        store::StoreError::TooNew { .. } => Trouble::TooNew(e.to_string()),
        store::StoreError::Corrupt(m) if m.contains("is not a regular file") => {
            Trouble::NotAFile(e.to_string())
        }
        store::StoreError::Corrupt(_) => Trouble::Old(e.to_string()),
        store::StoreError::Sqlite { .. } => match e.trouble() {
            store::Trouble::Damaged => Trouble::Damaged(e.to_string()),
            kind => {
                let fixes = unwritable(path);
                if !fixes.is_empty() || kind == store::Trouble::Permission {
                    let fixes = if fixes.is_empty() {
                        vec![format!(
                            "make {} and its state.db* files writable for yourself (ls -la {} shows who may write them)",
                            parent(path).display(),
                            parent(path).display()
                        )]
                    } else {
                        fixes
                    };
                    Trouble::Unwritable(e.to_string(), fixes)
                } else {
                    Trouble::Other(e.to_string())
                }
            }
        },
    }
}

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// The commands that make the state's folder and files writable for this user, one per path
/// that is not (none when all are).
fn unwritable(db: &Path) -> Vec<String> {
    let dir = parent(db);
    let mut fixes = Vec::new();
    if let Ok(vfs) = rustix::fs::statvfs(dir)
        && vfs.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)
    {
        fixes.push(format!(
            "{} is on a read-only file system: remount it read-write (or point PI_CODING_AGENT_DIR at a writable place)",
            dir.display()
        ));
        return fixes;
    }
    let mut paths = vec![dir.to_owned()];
    paths.extend(
        ["", "-wal", "-shm"]
            .iter()
            .map(|s| PathBuf::from(format!("{}{s}", db.display()))),
    );
    for p in paths {
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if meta.uid() != our_uid() {
            fixes.push(format!("chown \"$(id -u)\" {}", p.display()));
        }
        let access = if meta.is_dir() {
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK
        } else {
            rustix::fs::Access::WRITE_OK
        };
        if rustix::fs::access(&p, access).is_err() {
            let mode = if meta.is_dir() { "u+wx" } else { "u+w" };
            fixes.push(format!("chmod {mode} {}", p.display()));
        }
    }
    fixes
}

/// At most three of quick_check's lines, for the detail.
fn first_lines(problems: &[String]) -> String {
    // `*** in database main ***` heads the lines of a database, and names nothing.
    let lines: Vec<&str> = problems
        .iter()
        .flat_map(|p| p.lines())
        .filter(|l| !l.starts_with("***"))
        .collect();
    let mut shown = lines.iter().take(3).copied().collect::<Vec<_>>().join("; ");
    if lines.len() > 3 {
        shown.push_str(&format!(" (and {} more)", lines.len() - 3));
    }
    shown
}

/// What to do with a damaged state database: what starting over loses, and how to keep the
/// damaged file.
fn damaged_fix(db: &Path, flag: &str) -> String {
    format!(
        "the hub cannot work with it. A new state starts empty: it loses the pairing (pair again with `pi-telegram setup{flag}`, unless allowedUserId is in telegram.json), the messages waiting for pi or for Telegram, the queue and the topic bindings (new topics follow)\n\
         to start over and keep the damaged file as a copy: stop the hub (`pi-telegram stop{flag}`), then cd {} && mkdir state.db.broken && mv state.db state.db-wal state.db-shm state.db.broken/ (the last two may be missing); the next `pi-telegram serve{flag}` makes a new state\n\
         what can be saved from the copy: sqlite3 state.db.broken/state.db .recover | sqlite3 recovered.db",
        parent(db).display()
    )
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
        hub::logging::log_dir(&ctx.paths),
    ];
    files.extend(hub::logging::read::files(&hub::logging::log_file(
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
    let logs: u64 = hub::logging::read::files(&hub::logging::log_file(&ctx.paths))
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
