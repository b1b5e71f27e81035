//! `pi-telegram demo`: type as the person, read the bot's replies (echo agent and real pi), and
//! `install-extension`.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs the demo, typing each line once the previous line's expected output has appeared.
fn run_demo(pi_bin: &str, script: &[(&str, &str)]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pi-telegram"))
        .arg("demo")
        .env("PI_TELEGRAM_PI_BIN", pi_bin)
        .env("PI_TELEGRAM_POLL_TIMEOUT_SECS", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let wait_for = |needle: &str, seen: &mut String| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !seen.contains(needle) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(_) => panic!("the demo never printed {needle:?}; it printed:\n{seen}"),
            }
        }
    };
    wait_for("You are Ada", &mut seen);
    for (line, expect) in script {
        writeln!(stdin, "{line}").unwrap();
        wait_for(expect, &mut seen);
    }
    writeln!(stdin, "/quit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(status.success());
    seen
}

#[test]
fn the_demo_without_pi_uses_the_labelled_echo_agent() {
    let out = run_demo(
        "/nonexistent/pi",
        &[
            ("hello demo", "bot: echo: hello demo"),
            ("/start", "[!1] ▶ demo-project"),
        ],
    );
    assert!(
        out.contains("built-in echo agent stands in for it (it is NOT pi)"),
        "{out}"
    );
    assert!(out.contains("bot: echo: hello demo"), "{out}");
    assert!(out.contains("[!1] ▶ demo-project"), "{out}");
}

#[test]
fn the_demo_with_pi_runs_real_pi_and_its_tools() {
    let Some(pi) = pi_testkit::require_pi() else {
        return;
    };
    let out = run_demo(
        &pi.display().to_string(),
        &[
            ("hello pi", "bot: echo: hello pi"),
            ("[[bash:echo from-a-tool]]", "bot: tool said: from-a-tool"),
            // Several lines make one message; a button tap's answer is shown.
            ("two \\", "go on"),
            ("lines", "     lines"),
            ("/start", "[!1] ▶ demo-project"),
            ("!1", "(toast: New messages go to demo-project)"),
        ],
    );
    assert!(out.contains("echo: two\n     lines"), "{out}");
    // The demo's pi started once (not once more as "restored").
    assert_eq!(out.matches("pi connected").count(), 1, "{out}");
    assert!(!out.contains("The hub restarted"), "{out}");
    assert!(
        out.contains("real pi, talking to a local fake model"),
        "{out}"
    );
    assert!(out.contains("bot: echo: hello pi"), "{out}");
    assert!(out.contains("bot: tool said: from-a-tool"), "{out}");
}

#[test]
fn install_extension_writes_the_extension_and_registers_it_with_pi() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("settings.json"),
        r#"{"defaultProvider":"fake","packages":["/other/pkg"]}"#,
    )
    .unwrap();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_pi-telegram"))
            .arg("install-extension")
            .env("PI_CODING_AGENT_DIR", dir.path())
            .output()
            .unwrap()
    };
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ext = dir.path().join("telegram/extension");
    // What pi loads, as the repository has it, and nothing else: no sources, no dev tools.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../extension");
    let mut expected = vec!["package.json".to_owned()];
    expected.extend(
        files_under(&repo.join("dist"))
            .into_iter()
            .map(|f| format!("dist/{f}")),
    );
    // The skill pi lists for the model (`pi.skills`).
    expected.extend(
        files_under(&repo.join("skills"))
            .into_iter()
            .map(|f| format!("skills/{f}")),
    );
    expected.sort();
    assert!(
        expected.contains(&"skills/telegram-bridge/SKILL.md".to_owned()),
        "{expected:?}"
    );
    assert!(
        expected.contains(&"dist/index.js".to_owned()),
        "{expected:?}"
    );
    assert_eq!(files_under(&ext), expected);
    for f in &expected {
        assert!(
            std::fs::read(ext.join(f)).unwrap() == std::fs::read(repo.join(f)).unwrap(),
            "the installed {f} is not the repository's extension/{f}"
        );
    }
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["defaultProvider"], "fake");
    assert_eq!(
        settings["packages"],
        serde_json::json!(["/other/pkg", ext.display().to_string()])
    );
    // Twice is the same as once.
    assert!(run().status.success());
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(again["packages"].as_array().unwrap().len(), 2);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("telegram.json")).unwrap())
            .unwrap();
    assert!(
        config["hubBinary"]
            .as_str()
            .unwrap()
            .ends_with("pi-telegram")
    );
}

/// The files under `dir`, as sorted relative paths.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
