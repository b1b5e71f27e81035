//! Finding the pi binary the tests run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variable that names the pi binary (`scripts/test.sh` sets it).
pub const PI_ENV: &str = "PI_TELEGRAM_TEST_PI";

/// Set to `1` to skip the tests that need pi instead of failing them.
pub const SKIP_ENV: &str = "PI_TELEGRAM_SKIP_PI_TESTS";

/// pi is not where the tests look for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "pi is not installed at {} ({}): run scripts/install-test-deps.sh from the repository root \
     (it fetches Node 22 and pi into .cache/test-deps/), or set {SKIP_ENV}=1 to skip the tests \
     that run pi",
    path.display(),
    if *from_env { "named by $PI_TELEGRAM_TEST_PI" } else { "the default location" }
)]
pub struct PiMissing {
    /// Where pi was looked for.
    pub path: PathBuf,
    /// Whether that path came from `$PI_TELEGRAM_TEST_PI`.
    pub from_env: bool,
}

/// The workspace root, found from this crate's manifest dir (`crates/pi-testkit/../..`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The pi binary: `$PI_TELEGRAM_TEST_PI` when set (and not empty), else
/// `<workspace root>/.cache/test-deps/bin/pi`, as installed by `scripts/install-test-deps.sh`.
pub fn pi_bin() -> Result<PathBuf, PiMissing> {
    resolve(
        std::env::var_os(PI_ENV),
        workspace_root().join(".cache/test-deps/bin/pi"),
    )
}

fn resolve(from_env: Option<OsString>, default: PathBuf) -> Result<PathBuf, PiMissing> {
    let (path, from_env) = match from_env.filter(|v| !v.is_empty()) {
        Some(v) => (PathBuf::from(v), true),
        None => (default, false),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(PiMissing { path, from_env })
    }
}

/// The pi binary for a test that needs it. Returns `None` only when `PI_TELEGRAM_SKIP_PI_TESTS=1`
/// (the test should then return early); otherwise panics with [`PiMissing`]'s instructions when
/// pi is missing, so that a machine without pi fails the tests rather than skipping them quietly.
pub fn require_pi() -> Option<PathBuf> {
    if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
        eprintln!("{SKIP_ENV}=1: skipping a test that runs pi");
        return None;
    }
    match pi_bin() {
        Ok(path) => Some(path),
        Err(missing) => panic!("{missing}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn env_wins_over_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let pi = dir.path().join("pi");
        std::fs::write(&pi, "#!/bin/sh\n").unwrap();
        let got = resolve(Some(pi.clone().into()), dir.path().join("nope")).unwrap();
        assert_eq!(got, pi);
        // empty means unset
        let got = resolve(Some(OsString::new()), pi.clone()).unwrap();
        assert_eq!(got, pi);
    }

    #[test]
    fn missing_pi_says_how_to_install_it() {
        let err = resolve(None, PathBuf::from("/nowhere/.cache/test-deps/bin/pi")).unwrap_err();
        assert!(!err.from_env);
        let msg = err.to_string();
        assert!(msg.contains("/nowhere/.cache/test-deps/bin/pi"), "{msg}");
        assert!(msg.contains("the default location"), "{msg}");
        assert!(msg.contains("scripts/install-test-deps.sh"), "{msg}");
        assert!(msg.contains("PI_TELEGRAM_SKIP_PI_TESTS=1"), "{msg}");

        let err = resolve(Some("/nowhere/pi".into()), PathBuf::from("/x")).unwrap_err();
        assert!(err.from_env);
        assert!(err.to_string().contains("named by $PI_TELEGRAM_TEST_PI"));
    }

    #[test]
    fn workspace_root_holds_the_scripts() {
        assert!(
            workspace_root()
                .join("scripts/install-test-deps.sh")
                .is_file()
        );
    }
}
