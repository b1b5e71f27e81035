//! Fewer malloc arenas for `serve`. glibc's malloc gives a thread that meets contention an
//! arena of its own (up to eight per core) and keeps each arena's freed memory for later; the
//! hub's threads are few and its allocations small, so extra arenas only hold resident memory
//! (the resources bench: about 2 MB more after 10,000 turns, growing with the number of
//! threads that ever ran a store call). glibc reads `MALLOC_ARENA_MAX` once, when the process
//! starts, so `serve` starts itself again with the variable set, unless it is set already
//! (by the person, or by this step). Other allocators ignore the variable.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

/// The variable glibc reads.
const VAR: &str = "MALLOC_ARENA_MAX";
/// Two arenas: the main one and one more, so the two runtime threads rarely wait on each
/// other's allocations.
const ARENAS: &str = "2";

/// Replaces the process with itself (same pid, arguments and open files) under
/// `MALLOC_ARENA_MAX`, unless the variable is set. Returns only when that was not needed or
/// not possible; the hub then runs with glibc's default.
pub fn reexec_with_few_arenas() {
    if std::env::var_os(VAR).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let error = std::process::Command::new(exe)
        .args(args)
        .env(VAR, ARENAS)
        .exec();
    // Nothing is set up yet (logging comes later): say it plainly and go on without.
    eprintln!("pi-telegram: could not restart with {VAR}={ARENAS} ({error}); going on without");
}
