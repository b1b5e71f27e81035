//! What a release needs from the repository: one version everywhere (the crates, the extension,
//! the npm packages, CHANGELOG.md), the crates that `cargo install pi-telegram` builds marked
//! publishable with the metadata crates.io shows, and the extension the crate embeds being the
//! repository's. `cargo package` (scripts/test.sh) checks that those crates build from what
//! they carry.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's packages as cargo reads them (inheritance from the root applied).
fn packages() -> Vec<Value> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"].as_array().unwrap().clone()
}

fn published(package: &Value) -> bool {
    // `publish = false` is an empty list of registries.
    package["publish"] != Value::Array(Vec::new())
}

/// The version of the workspace: every package's (they all inherit it).
fn workspace_version(packages: &[Value]) -> String {
    let root_manifest = root().join("Cargo.toml").canonicalize().unwrap();
    let version = packages[0]["version"].as_str().unwrap().to_owned();
    for p in packages {
        assert_eq!(
            p["version"].as_str().unwrap(),
            version,
            "{} has version {} and {} has {version}: every crate takes `version.workspace = true` from {}",
            p["manifest_path"],
            p["version"],
            packages[0]["manifest_path"],
            root_manifest.display()
        );
    }
    version
}

/// Every `package.json` under `dir`, outside `node_modules`.
fn package_jsons(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "node_modules") {
                package_jsons(&path, out);
            }
        } else if path.file_name().is_some_and(|n| n == "package.json") {
            out.push(path);
        }
    }
}

/// The differences between the one version and the other places that state it; empty when
/// they all agree.
fn version_mismatches(root: &Path, version: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut manifests = vec![root.join("extension/package.json")];
    package_jsons(&root.join("npm"), &mut manifests);
    let mut docs = BTreeMap::new();
    for path in manifests {
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                wrong.push(format!("{rel}: cannot be read: {e}"));
                continue;
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(doc) => {
                docs.insert(rel, doc);
            }
            Err(e) => wrong.push(format!("{rel}: not JSON: {e}")),
        }
    }
    let ours: BTreeSet<&str> = docs.values().filter_map(|d| d["name"].as_str()).collect();
    for (rel, doc) in &docs {
        let have = doc["version"].as_str().unwrap_or("(none)");
        if have != version {
            wrong.push(format!(
                "{rel} has version {have}, the workspace (Cargo.toml) has {version}"
            ));
        }
        // One of our packages needing another needs the one released with it.
        for field in ["dependencies", "optionalDependencies", "peerDependencies"] {
            let Some(deps) = doc[field].as_object() else {
                continue;
            };
            for (name, req) in deps {
                let req = req.as_str().unwrap_or("");
                if ours.contains(name.as_str()) && req.trim_start_matches('=') != version {
                    wrong.push(format!(
                        "{rel} asks for {name} {req} in {field}, the workspace (Cargo.toml) has {version}: write \"{version}\""
                    ));
                }
            }
        }
    }
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap_or_default();
    let heading = |line: &str| {
        let Some(rest) = line.strip_prefix("## ") else {
            return false;
        };
        let rest = rest.strip_prefix('[').unwrap_or(rest);
        rest.strip_prefix(version)
            .is_some_and(|after| after.is_empty() || after.starts_with([']', ' ']))
    };
    if !changelog.lines().any(heading) {
        wrong.push(format!(
            "CHANGELOG.md has no heading for {version} (`## [{version}] - YYYY-MM-DD`), the workspace's version (Cargo.toml)"
        ));
    }
    wrong
}

#[test]
fn one_version_for_the_crates_the_extension_the_npm_packages_and_the_changelog() {
    let packages = packages();
    let version = workspace_version(&packages);
    let wrong = version_mismatches(&root(), &version);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The crates released together ask for each other at exactly this version.
    for p in &packages {
        for dep in p["dependencies"].as_array().unwrap() {
            let Some(path) = dep["path"].as_str() else {
                continue;
            };
            let target = packages
                .iter()
                .find(|q| {
                    Path::new(q["manifest_path"].as_str().unwrap()).parent()
                        == Some(Path::new(path))
                })
                .unwrap();
            if published(target) {
                assert_eq!(
                    dep["req"].as_str().unwrap(),
                    format!("={version}"),
                    "{} asks for {} {}: declare it in [workspace.dependencies] of Cargo.toml with version \"={version}\"",
                    p["manifest_path"],
                    dep["name"],
                    dep["req"]
                );
            }
        }
    }
}

#[test]
fn a_version_that_differs_is_named_with_its_file_and_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("extension")).unwrap();
    std::fs::create_dir_all(root.join("npm/linux-x64/node_modules/dep")).unwrap();
    std::fs::write(
        root.join("extension/package.json"),
        r#"{"name":"pi-telegram-extension","version":"0.2.0"}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("npm/package.json"),
        r#"{"name":"pi-telegram","version":"0.2.0","optionalDependencies":{"pi-telegram-linux-x64":"^0.2.0","left-pad":"1"}}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("npm/linux-x64/package.json"),
        r#"{"name":"pi-telegram-linux-x64","version":"0.1.9"}"#,
    )
    .unwrap();
    // Someone else's package, installed: not ours to check.
    std::fs::write(
        root.join("npm/linux-x64/node_modules/dep/package.json"),
        r#"{"name":"dep","version":"9.9.9"}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("CHANGELOG.md"),
        "## [Unreleased]\n\n## [0.1.0] - 2026-12-01\n",
    )
    .unwrap();
    assert_eq!(
        version_mismatches(root, "0.2.0"),
        [
            "npm/linux-x64/package.json has version 0.1.9, the workspace (Cargo.toml) has 0.2.0",
            "npm/package.json asks for pi-telegram-linux-x64 ^0.2.0 in optionalDependencies, the workspace (Cargo.toml) has 0.2.0: write \"0.2.0\"",
            "CHANGELOG.md has no heading for 0.2.0 (`## [0.2.0] - YYYY-MM-DD`), the workspace's version (Cargo.toml)",
        ]
    );
    // Both heading styles pi shows, and a version that only starts like ours is not it.
    for (changelog, found) in [
        ("## [0.2.0] - 2026-12-01\n", true),
        ("## 0.2.0 - 2026-12-01\n", true),
        ("## [0.2.0]\n", true),
        ("## [0.2.0-rc.1]\n## 0.2.01\n### [0.2.0]\n", false),
    ] {
        std::fs::write(root.join("CHANGELOG.md"), changelog).unwrap();
        std::fs::write(
            root.join("npm/linux-x64/package.json"),
            r#"{"name":"pi-telegram-linux-x64","version":"0.2.0"}"#,
        )
        .unwrap();
        std::fs::write(
            root.join("npm/package.json"),
            r#"{"name":"pi-telegram","version":"0.2.0","optionalDependencies":{"pi-telegram-linux-x64":"0.2.0"}}"#,
        )
        .unwrap();
        assert_eq!(
            version_mismatches(root, "0.2.0").is_empty(),
            found,
            "{changelog:?}"
        );
    }
}

/// The packages `cargo install pi-telegram` builds: pi-telegram and what it needs at build and
/// run time, followed through path dependencies.
fn needed_by_the_binary(packages: &[Value]) -> BTreeSet<String> {
    let by_dir: BTreeMap<&str, &Value> = packages
        .iter()
        .map(|p| {
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            (manifest.parent().unwrap().to_str().unwrap(), p)
        })
        .collect();
    let mut needed = BTreeSet::new();
    let mut todo: Vec<&Value> = packages
        .iter()
        .filter(|p| p["name"] == "pi-telegram")
        .collect();
    while let Some(p) = todo.pop() {
        if !needed.insert(p["name"].as_str().unwrap().to_owned()) {
            continue;
        }
        for dep in p["dependencies"].as_array().unwrap() {
            // Dev-dependencies are left out of a packaged crate.
            if dep["kind"] == "dev" {
                continue;
            }
            if let Some(path) = dep["path"].as_str() {
                todo.push(by_dir[path]);
            }
        }
    }
    needed
}

#[test]
fn the_crates_the_binary_needs_are_publishable_with_their_metadata_and_the_rest_are_not() {
    let packages = packages();
    let needed = needed_by_the_binary(&packages);
    // `pi-telegram demo` runs both fakes in-process.
    assert!(
        needed.contains("tg-fake") && needed.contains("fake-llm"),
        "{needed:?}"
    );
    let license = std::fs::read(root().join("LICENSE"))
        .unwrap_or_else(|e| panic!("LICENSE at the root of the repository: {e}"));
    for p in &packages {
        let name = p["name"].as_str().unwrap();
        let dir = Path::new(p["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap();
        if !needed.contains(name) {
            assert!(
                !published(p),
                "{name} is not needed by pi-telegram: give it `publish = false`"
            );
            continue;
        }
        assert!(
            published(p),
            "pi-telegram needs {name}: it must be publishable"
        );
        let text = |field: &str| p[field].as_str().unwrap_or("").to_owned();
        assert!(!text("description").is_empty(), "{name} has no description");
        assert_eq!(text("license"), "MIT", "{name}");
        // Shipped in the package: MIT asks for the notice to go with every copy.
        assert!(
            std::fs::read(dir.join("LICENSE")).is_ok_and(|l| l == license),
            "{} is not the root's LICENSE (make it a link to ../../LICENSE)",
            dir.join("LICENSE").display()
        );
        if dir.join("README.md").exists() {
            assert_eq!(text("readme"), "README.md", "{name}");
        }
        for field in ["repository", "homepage", "documentation"] {
            assert!(
                !text(field).contains(".invalid"),
                "{name}'s {field} is a placeholder: leave it out until there is a real one"
            );
        }
    }
    let binary = packages
        .iter()
        .find(|p| p["name"] == "pi-telegram")
        .unwrap();
    assert_eq!(binary["readme"], "../../README.md");
}

fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn the_extension_the_crate_embeds_is_the_repositorys_runtime_files() {
    let repo = root().join("extension");
    let mut expected = BTreeMap::new();
    expected.insert(
        "package.json".to_owned(),
        std::fs::read(repo.join("package.json")).unwrap(),
    );
    for dir in ["dist", "skills"] {
        for (rel, bytes) in files_under(&repo.join(dir)) {
            expected.insert(format!("{dir}/{rel}"), bytes);
        }
    }
    let copy = files_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("extension"));
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&copy),
        names(&expected),
        "crates/pi-telegram/extension/ does not hold extension/package.json, dist/ and skills/: run scripts/build-extension.sh"
    );
    for (rel, bytes) in &expected {
        assert!(
            copy[rel] == *bytes,
            "crates/pi-telegram/extension/{rel} differs from extension/{rel}: run scripts/build-extension.sh"
        );
    }
}
