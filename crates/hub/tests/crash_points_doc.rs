//! ARCHITECTURE.md's table of the hub's crash points is written from `CrashPoint::ALL`:
//! `CRASH_POINTS_WRITE=1 cargo test -p pi-telegram-hub --test crash_points_doc` rewrites it;
//! otherwise the test fails when the committed table differs. It also checks that every point
//! is reached in the hub's code and killed at by a test, so the table promises nothing that
//! nothing checks.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use hub::crashpoint::CrashPoint;

const BEGIN: &str = "<!-- crash points: written by crates/hub/tests/crash_points_doc.rs -->\n";
const END: &str = "<!-- end of the crash points -->\n";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn table() -> String {
    let mut out = String::from("| point | state at the crash | after restart |\n|---|---|---|\n");
    for p in CrashPoint::ALL {
        let (state, after) = p.guarantee();
        out.push_str(&format!("| `{}` | {state} | {after} |\n", p.name()));
    }
    out
}

/// Every `.rs` file's text under `dir`.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    out
}

#[test]
fn the_architecture_names_every_crash_point_and_each_is_reached_and_tested() {
    let path = root().join("ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (Some(a), Some(b)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("ARCHITECTURE.md has no {BEGIN:?} ... {END:?} section");
    };
    let wanted = format!("{}{BEGIN}{}{}", &doc[..a], table(), &doc[b..]);
    if std::env::var_os("CRASH_POINTS_WRITE").is_some() {
        std::fs::write(&path, &wanted).unwrap();
    } else {
        assert!(
            doc == wanted,
            "ARCHITECTURE.md's crash point table is stale: run CRASH_POINTS_WRITE=1 cargo test -p pi-telegram-hub --test crash_points_doc"
        );
    }
    let code = sources(&root().join("crates/hub/src"));
    let tests: Vec<_> = ["crates/pi-telegram/tests", "crates/hub/tests"]
        .iter()
        .flat_map(|d| sources(&root().join(d)))
        .collect();
    for p in CrashPoint::ALL {
        let variant = format!("{p:?}");
        assert!(
            code.iter().any(|(_, t)| t
                .contains(&format!("hit(crashpoint::CrashPoint::{variant})"))
                || t.contains(&format!("hit(CrashPoint::{variant})"))),
            "{} is reached nowhere in the hub",
            p.name()
        );
        assert!(
            tests
                .iter()
                .any(|(f, t)| !f.ends_with("crash_points_doc.rs")
                    && t.contains(&format!("\"{}", p.name()))),
            "no test crashes the hub at {}",
            p.name()
        );
    }
}
