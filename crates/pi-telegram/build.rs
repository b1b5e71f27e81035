//! Embeds the pi extension's runtime files so `pi-telegram install-extension` can install the
//! version that matches this binary. They are read from `extension/` inside this crate, the copy
//! `scripts/build-extension.sh` makes of the repository's `extension/package.json` and
//! `extension/dist/`: the repository's `extension/` is outside the crate, so a crate packaged
//! for crates.io would not have it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_owned());
        }
    }
    Ok(())
}

fn main() {
    // The release this binary reports (`--version`, the hub's welcome): the package's, unless
    // the build is told otherwise (the registry test builds a "next" release from this tree).
    println!("cargo:rerun-if-env-changed=PI_TELEGRAM_BUILD_VERSION");
    let version = std::env::var("PI_TELEGRAM_BUILD_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| std::env::var("CARGO_PKG_VERSION").unwrap_or_default());
    println!("cargo:rustc-env=PI_TELEGRAM_VERSION={version}");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("extension");
    println!("cargo::rerun-if-changed={}", root.display());
    // A binary without them would only fail later, at `install-extension` on someone's machine.
    let mut files = Vec::new();
    let found = walk(&root, &root, &mut files);
    for needed in ["package.json", "dist/index.js"] {
        if found.is_err() || !files.iter().any(|f| f == Path::new(needed)) {
            println!(
                "cargo::error={} has no {needed}: run scripts/build-extension.sh, which copies the extension's runtime files there",
                root.display()
            );
            return;
        }
    }
    let mut code = String::from(
        "/// The extension's files: (relative path, contents).\npub const EXTENSION_FILES: &[(&str, &[u8])] = &[\n",
    );
    for rel in files {
        let abs = root.join(&rel);
        let _ = writeln!(
            code,
            "    ({:?}, include_bytes!({:?})),",
            rel.display().to_string(),
            abs.display().to_string()
        );
    }
    code.push_str("];\n");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("extension_files.rs");
    if let Err(e) = std::fs::write(&out, code) {
        println!("cargo::error=could not write {}: {e}", out.display());
    }
}
