//! Running templates with real processes.

mod common;

use std::time::{Duration, Instant};

use cmdtpl::{OutputValue, RunErrorKind, RunOptions, Template, TemplateError, Values};
use common::{path_str, process_gone, run, run_ok, run_stdout, stdout, tpl, wait_gone};
use serde_json::json;

#[tokio::test]
async fn quoting_and_splitting_reach_argv_intact() {
    let out = run_stdout(
        json!(r#"printf [%s] 'a b' "c d" e\ f '' "" 'it'\''s' "q\"q" a'b c'd"#),
        &Values::new(),
    )
    .await;
    assert_eq!(out, "[a b][c d][e f][][][it's][q\"q][ab cd]");
}

#[tokio::test]
async fn placeholders_substitute_per_word() {
    let values = Values::new()
        .with("text", "hello world")
        .with("file", "/tmp/a b.ogg")
        .with("on", "1")
        .with("items", vec!["x", "y"]);
    let out = run_stdout(
        json!({
            "defaults": {"rate": "+30%"},
            "template": "printf [%s] {text} --lang {lang=ru} --rate {rate} --file={file} {missing??fb} {on?yes:no} {off?yes:no} {items[1]} '{text}' \\{text}"
        }),
        &values,
    )
    .await;
    assert_eq!(
        out,
        "[hello world][--lang][ru][--rate][+30%][--file=/tmp/a b.ogg][fb][yes][no][y][hello world][{text}]"
    );
}

#[tokio::test]
async fn empty_conditional_word_vanishes() {
    let t = json!("printf [%s] {verbose?-v:} {text} '{verbose?-v:}'");
    let quiet = run_stdout(t.clone(), &Values::new().with("text", "")).await;
    assert_eq!(quiet, "[][]");
    let loud = run_stdout(t, &Values::new().with("text", "t").with("verbose", "true")).await;
    assert_eq!(loud, "[-v][t][-v]");
}

#[tokio::test]
async fn missing_value_is_a_clear_error_and_nothing_runs() {
    let e = run(json!(["printf ok", "printf %s {nope}"]), &Values::new())
        .await
        .expect_err("missing value");
    assert!(
        matches!(&e.kind, RunErrorKind::Template(TemplateError::Missing { name, at }) if name == "nope" && at == "root[1]"),
        "{e}"
    );
    assert!(e.to_string().contains("`nope`"), "{e}");
    // Configuration errors stop the run even under the default `failure: "continue"`.
    assert_eq!(e.steps.len(), 1, "only the first step ran");
}

#[tokio::test]
async fn no_shell_evaluation_of_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("pwned");
    let evil = format!(
        "; rm -rf /tmp/x; touch {m} $(touch {m}) `touch {m}` | tee {m} && {{file}}",
        m = path_str(&marker)
    );
    let out = run_stdout(
        json!("printf %s {text}"),
        &Values::new().with("text", evil.clone()),
    )
    .await;
    assert_eq!(out, evil, "one literal argument, byte for byte");
    assert!(!marker.exists(), "nothing was evaluated");
}

#[tokio::test]
async fn composition_pipes_stdout_into_stdin() {
    let out = run_stdout(
        json!(["printf 'hello world'", "tr a-z A-Z", "cat"]),
        &Values::new(),
    )
    .await;
    assert_eq!(out, "HELLO WORLD");

    // The caller's stdin goes to the first step; a large payload does not deadlock.
    let big = vec![b'a'; 1 << 20];
    let o = tpl(json!(["cat", "tr a b"]))
        .run(&Values::new(), Some(big), &RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(o.output, OutputValue::Stdout(vec![b'b'; 1 << 20]));

    // Without caller stdin the first step reads /dev/null (no hang).
    assert_eq!(run_stdout(json!("cat"), &Values::new()).await, "");
    assert_eq!(o.steps.len(), 2);
    assert!(o.steps.iter().all(|s| !s.failed && s.exit_code == Some(0)));
}

#[tokio::test]
async fn output_selects_a_file_written_by_a_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ogg = dir.path().join("out.ogg");
    let values = Values::new().with("ogg", ogg.clone()).with("text", "hi");
    for selector in ["ogg", "{ogg}"] {
        let _ = std::fs::remove_file(&ogg);
        let o = run_ok(
            json!({
                "output": selector,
                "template": ["printf %s {text}", "sh -c 'cat > \"$0\"' {ogg}"]
            }),
            &values,
        )
        .await;
        assert_eq!(o.output, OutputValue::File(ogg.clone()), "{selector}");
        assert_eq!(std::fs::read_to_string(&ogg).expect("written"), "hi");
    }

    // A relative selector is resolved against `cwd`.
    let opts = RunOptions {
        cwd: Some(dir.path().to_path_buf()),
        ..RunOptions::default()
    };
    let o = tpl(json!({"output": "{name}", "template": "sh -c 'echo x > \"$0\"' {name}"}))
        .run(&Values::new().with("name", "rel.txt"), None, &opts)
        .await
        .expect("runs");
    assert_eq!(o.output, OutputValue::File(dir.path().join("rel.txt")));

    let e = run(
        json!({"output": "ogg", "template": "true"}),
        &Values::new().with("ogg", dir.path().join("never.ogg")),
    )
    .await
    .expect_err("file never written");
    assert!(matches!(e.kind, RunErrorKind::OutputMissing { .. }), "{e}");
}

#[tokio::test]
async fn timeout_kills_the_command_and_its_children() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("pid");
    let values = Values::new()
        .with("pidfile", pidfile.clone())
        .with("ms", "300");
    let started = Instant::now();
    let e = run(
        json!({
            "timeout": "{ms}",
            "template": "sh -c 'sleep 10 & echo $! > \"$0\"; wait' {pidfile}"
        }),
        &values,
    )
    .await
    .expect_err("times out");
    let elapsed = started.elapsed();
    assert!(
        matches!(&e.kind, RunErrorKind::Timeout { after, program: Some(p), .. } if *after == Duration::from_millis(300) && p == "sh"),
        "{e}"
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    let step = &e.steps[0];
    assert!(step.failed && step.exit_code.is_none());
    let shell = step.pid.expect("started");
    assert!(process_gone(shell), "the command itself is reaped");
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .expect("pid written")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        wait_gone(grandchild).await,
        "its background child was killed too"
    );
}

#[tokio::test]
async fn plain_sleep_times_out() {
    let started = Instant::now();
    let e = run(
        json!({"timeout": 200, "template": "sleep 10"}),
        &Values::new(),
    )
    .await
    .expect_err("times out");
    assert!(matches!(e.kind, RunErrorKind::Timeout { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(process_gone(e.steps[0].pid.expect("started")));

    // `default_timeout` covers commands without a `timeout` key; `timeout: 0` opts out.
    let opts = RunOptions {
        default_timeout: Some(Duration::from_millis(200)),
        ..RunOptions::default()
    };
    let e = tpl(json!("sleep 10"))
        .run(&Values::new(), None, &opts)
        .await
        .expect_err("default timeout");
    assert!(matches!(e.kind, RunErrorKind::Timeout { .. }), "{e}");
    let fine = tpl(json!({"timeout": 0, "template": "sleep 0.3"}))
        .run(&Values::new(), None, &opts)
        .await;
    assert!(fine.is_ok(), "timeout 0 means unbounded");
}

#[tokio::test]
async fn composition_timeout_bounds_the_whole_sequence() {
    let e = run(
        json!({"timeout": 300, "template": ["sleep 0.1", "sleep 10", "printf never"]}),
        &Values::new(),
    )
    .await
    .expect_err("composition timeout");
    assert!(
        matches!(e.kind, RunErrorKind::Timeout { program: None, .. }),
        "{e}"
    );
    let last = e.steps.last().expect("a report");
    assert!(
        last.failed
            && last.argv.is_empty()
            && last
                .error
                .as_deref()
                .is_some_and(|m| m.contains("composition"))
    );
}

#[tokio::test]
async fn dropping_the_run_kills_the_process_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("pid");
    let t = tpl(json!("sh -c 'sleep 10 & echo $! > \"$0\"; wait' {pidfile}"));
    let values = Values::new().with("pidfile", pidfile.clone());
    let opts = RunOptions::default();
    let fut = t.run(&values, None, &opts);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), fut)
            .await
            .is_err()
    );
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .expect("pid written")
        .trim()
        .parse()
        .expect("a pid");
    assert!(wait_gone(grandchild).await);
}

#[tokio::test]
async fn failure_continue_records_clears_stdout_and_goes_on() {
    let o = run_ok(
        json!([
            "printf abc",
            "sh -c 'cat; echo oops >&2; exit 3'",
            "sh -c 'printf \"[%s]\" \"$(cat)\"'"
        ]),
        &Values::new(),
    )
    .await;
    assert_eq!(stdout(&o), "[]", "the failed step's stdout was cleared");
    assert!(o.any_failed());
    let failed = &o.steps[1];
    assert!(failed.failed && failed.exit_code == Some(3));
    assert_eq!(failed.stderr_tail.trim(), "oops");
    assert_eq!(failed.at, "root[1]");
    assert!(!o.steps[2].failed);
}

#[tokio::test]
async fn failure_branch_stops_the_enclosing_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (m1, m2) = (dir.path().join("m1"), dir.path().join("m2"));
    let values = Values::new().with("m1", m1.clone()).with("m2", m2.clone());

    // The inner array stops at its `branch` step; the outer array (default `continue`)
    // records the failed inner array and goes on.
    let o = run_ok(
        json!([
            {"label": "inner", "template": [{"failure": "branch", "template": "false"}, "touch {m1}"]},
            "touch {m2}"
        ]),
        &values,
    )
    .await;
    assert!(!m1.exists() && m2.exists());
    assert!(o.any_failed());
    assert_eq!(o.steps[0].label.as_deref(), Some("inner"));

    // `failure` on a group is inherited by its steps; the group stops at the first failure,
    // and at the top a branch failure is a run failure.
    std::fs::remove_file(&m2).expect("rm");
    let e = run(
        json!({"failure": "branch", "template": ["false", "touch {m1}"]}),
        &values,
    )
    .await
    .expect_err("branch failure at the root");
    assert!(
        matches!(e.kind, RunErrorKind::Exit { code: Some(1), .. }),
        "{e}"
    );
    assert!(!m1.exists());
    assert_eq!(e.steps.len(), 1);

    // A group marked `branch` inside an array also stops that array (its own `failure` is
    // what the parent applies).
    let e = run(
        json!([{"failure": "branch", "template": ["false", "touch {m1}"]}, "touch {m2}"]),
        &values,
    )
    .await
    .expect_err("the parent stops too");
    assert!(matches!(e.kind, RunErrorKind::Exit { .. }), "{e}");
    assert!(!m1.exists() && !m2.exists());
}

#[tokio::test]
async fn a_timed_out_step_is_a_step_failure_under_continue() {
    let o = run_ok(
        json!(["printf a", {"timeout": 150, "template": "sleep 5"}, "printf b"]),
        &Values::new(),
    )
    .await;
    assert_eq!(stdout(&o), "b");
    let step = &o.steps[1];
    assert!(
        step.failed
            && step
                .error
                .as_deref()
                .is_some_and(|e| e.contains("timed out"))
    );
    assert!(process_gone(step.pid.expect("started")));
}

#[tokio::test]
async fn failure_root_aborts_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (m1, m2) = (dir.path().join("m1"), dir.path().join("m2"));
    let values = Values::new().with("m1", m1.clone()).with("m2", m2.clone());
    let e = run(
        json!([
            {"template": [{"failure": "root", "template": "sh -c 'exit 4'"}, "touch {m1}"]},
            "touch {m2}"
        ]),
        &values,
    )
    .await
    .expect_err("root abort");
    assert!(
        matches!(e.kind, RunErrorKind::Exit { code: Some(4), .. }),
        "{e}"
    );
    assert!(!m1.exists() && !m2.exists());
}

/// `sh` snippet: bumps the counter file `$0` and succeeds from attempt `$1` on.
const BUMP: &str = r#"sh -c 'n=$(cat "$0" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0"; [ $n -ge $1 ]' {counter} {succeed_at}"#;

#[tokio::test]
async fn retry_with_recover_between_attempts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = dir.path().join("counter");
    let log = dir.path().join("log");
    let values = Values::new()
        .with("counter", counter.clone())
        .with("log", log.clone())
        .with("succeed_at", "3");
    let o = run_ok(
        json!({"retry": 3, "recover": "sh -c 'echo r >> \"$0\"' {log}", "template": BUMP}),
        &values,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&counter).expect("counter").trim(),
        "3"
    );
    assert_eq!(
        std::fs::read_to_string(&log).expect("log"),
        "r\nr\n",
        "recover ran between attempts only"
    );
    let shape: Vec<(u32, bool, bool)> = o
        .steps
        .iter()
        .map(|s| (s.attempt, s.recovery, s.failed))
        .collect();
    assert_eq!(
        shape,
        [
            (1, false, true),
            (1, true, false),
            (2, false, true),
            (2, true, false),
            (3, false, false)
        ]
    );

    // Exhausted: the last failure is the run's failure.
    std::fs::remove_file(&counter).expect("rm");
    let e = run(
        json!({"retry": "{tries}", "template": BUMP}),
        &values.clone().with("tries", "2").with("succeed_at", "5"),
    )
    .await
    .expect_err("exhausted");
    assert!(matches!(e.kind, RunErrorKind::Exit { .. }), "{e}");
    assert_eq!(e.steps.len(), 2);
}

#[tokio::test]
async fn failed_recover_stops_retries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = dir.path().join("counter");
    let values = Values::new()
        .with("counter", counter.clone())
        .with("succeed_at", "9");
    let e = run(
        json!({"retry": 5, "recover": ["true", "false", "true"], "template": BUMP}),
        &values,
    )
    .await
    .expect_err("recover fails");
    assert!(
        matches!(&e.kind, RunErrorKind::Recover { source, .. } if matches!(**source, RunErrorKind::Exit { .. })),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&counter).expect("counter").trim(),
        "1",
        "one attempt"
    );
    // Recovery is fail-closed: its third step never ran.
    assert_eq!(e.steps.len(), 3);
}

#[tokio::test]
async fn group_retry_reruns_the_whole_sequence_with_the_original_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = dir.path().join("counter");
    let values = Values::new()
        .with("counter", counter.clone())
        .with("succeed_at", "2");
    let o = tpl(json!({
        "failure": "branch",
        "retry": 3,
        "template": ["cat", BUMP, "printf done"]
    }))
    .run(&values, Some(b"in".to_vec()), &RunOptions::default())
    .await
    .expect("second attempt succeeds");
    assert_eq!(stdout(&o), "done");
    let cats: Vec<_> = o.steps.iter().filter(|s| s.argv[0] == "cat").collect();
    assert_eq!(cats.len(), 2);
    assert_eq!(
        std::fs::read_to_string(&counter).expect("counter").trim(),
        "2"
    );
}

#[tokio::test]
async fn defaults_are_inherited_and_merged() {
    let values = Values::new().with("user", "runtime");
    let out = run_stdout(
        json!({
            "defaults": {"lang": "en", "codec": "opus", "user": "default", "n": 5},
            "template": [
                "printf %s {lang}-{codec}-{user}-{n}",
                {
                    "defaults": {"codec": "mp3"},
                    "template": "sh -c 'printf \"%s|%s-%s\" \"$(cat)\" \"$0\" \"$1\"' {lang} {codec}"
                },
                {"template": "sh -c 'printf \"%s|%s\" \"$(cat)\" \"$0\"' {codec}"}
            ]
        }),
        &values,
    )
    .await;
    assert_eq!(out, "en-opus-runtime-5|en-mp3|opus");
}

#[tokio::test]
async fn when_skips_nodes_and_passes_stdin_through() {
    let t = json!([
        "printf abc",
        {"when": "!raw", "template": "tr a-z A-Z"},
        {"when": "{suffix??}", "template": "sh -c 'printf \"%s%s\" \"$(cat)\" \"$0\"' {suffix}"},
        {"when": false, "template": "false"}
    ]);
    assert_eq!(run_stdout(t.clone(), &Values::new()).await, "ABC");
    assert_eq!(
        run_stdout(t.clone(), &Values::new().with("raw", "yes")).await,
        "abc"
    );
    assert_eq!(
        run_stdout(t, &Values::new().with("suffix", "!")).await,
        "ABC!"
    );
}

#[tokio::test]
async fn delay_waits_before_the_node() {
    let started = Instant::now();
    let out = run_stdout(
        json!(["printf a", {"delay": "{d}", "template": "cat"}]),
        &Values::new().with("d", "150"),
    )
    .await;
    assert_eq!(out, "a");
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn file_is_appended_only_to_a_single_command_without_file() {
    let file = std::path::PathBuf::from("/tmp/voice 1.ogg");
    let opts = RunOptions {
        append_file_if_absent: Some(file.clone()),
        ..RunOptions::default()
    };
    let values = Values::new()
        .with("file", "/tmp/from-values.ogg")
        .with("mime", "audio/ogg");
    let go = |v: serde_json::Value| {
        let (values, opts) = (values.clone(), opts.clone());
        async move {
            let o = tpl(v).run(&values, None, &opts).await.expect("runs");
            stdout(&o)
        }
    };
    assert_eq!(
        go(json!("printf [%s] --mime={mime}")).await,
        "[--mime=audio/ogg][/tmp/voice 1.ogg]"
    );
    assert_eq!(
        go(json!({"template": "printf [%s]"})).await,
        "[/tmp/voice 1.ogg]"
    );
    assert_eq!(
        go(json!("printf [%s] --file={file}")).await,
        "[--file=/tmp/from-values.ogg]"
    );
    assert_eq!(
        go(json!("printf [%s] {input=in}")).await,
        "[in][/tmp/voice 1.ogg]"
    );
    // Composition steps (even a one-step array) never get it.
    assert_eq!(go(json!(["printf [%s] x"])).await, "[x]");
    assert_eq!(go(json!(["printf a", "printf [%s] x"])).await, "[x]");
    // A default that is `{file}` counts as mentioning it.
    assert_eq!(
        go(json!({"defaults": {"input": "{file}"}, "template": "printf [%s] {input}"})).await,
        "[/tmp/from-values.ogg]"
    );
}

#[tokio::test]
async fn stdout_over_the_limit_is_an_error_and_the_writer_is_killed() {
    let opts = RunOptions {
        max_stdout: 1000,
        ..RunOptions::default()
    };
    let started = Instant::now();
    let e = tpl(json!("yes"))
        .run(&Values::new(), None, &opts)
        .await
        .expect_err("too much");
    assert!(
        matches!(e.kind, RunErrorKind::StdoutTooLarge { limit: 1000, .. }),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(process_gone(e.steps[0].pid.expect("started")));
    let ok = tpl(json!("head -c 1000 /dev/zero"))
        .run(&Values::new(), None, &opts)
        .await
        .expect("exactly at the limit");
    assert_eq!(ok.output, OutputValue::Stdout(vec![0; 1000]));
}

#[tokio::test]
async fn exit_and_spawn_failures_are_reported() {
    let e = run(
        json!("sh -c 'echo first >&2; echo boom >&2; exit 7'"),
        &Values::new(),
    )
    .await
    .expect_err("exit 7");
    assert!(
        matches!(&e.kind, RunErrorKind::Exit { code: Some(7), .. }),
        "{e}"
    );
    assert!(e.to_string().ends_with(": boom"), "{e}");
    assert_eq!(e.steps[0].stderr_tail, "first\nboom\n");

    let e = run(json!("/nonexistent/cmdtpl-test {x=1}"), &Values::new())
        .await
        .expect_err("spawn");
    assert!(
        matches!(&e.kind, RunErrorKind::Spawn { program, .. } if program == "/nonexistent/cmdtpl-test"),
        "{e}"
    );
    assert_eq!(e.steps[0].argv, ["/nonexistent/cmdtpl-test", "1"]);
    assert!(e.steps[0].pid.is_none());
}

#[tokio::test]
async fn tilde_in_command_position_is_home() {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    // `$HOME` is a directory, so it cannot run; the report shows what was executed.
    let e = run(json!("~ x ~"), &Values::new())
        .await
        .expect_err("a directory");
    assert_eq!(
        e.steps[0].argv,
        [home.to_string_lossy().into_owned(), "x".into(), "~".into()]
    );
    let e = run(json!("'~' x"), &Values::new())
        .await
        .expect_err("no such command");
    assert_eq!(e.steps[0].argv[0], "~");
}

#[test]
fn run_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let t: Template = "true".parse().expect("parses");
    let (values, opts) = (Values::new(), RunOptions::default());
    let fut = t.run(&values, None, &opts);
    assert_send(&fut);
}

/// A value the host names an operand (the text to speak) never reaches a program as an
/// option: a word it begins that would start with `-` is refused before anything starts,
/// unless a literal `--` ended the options first. The command here prints its argv.
#[tokio::test]
async fn an_operand_that_would_be_an_option_is_refused_unless_options_end_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let argv = dir.path().join("argv.sh");
    std::fs::write(
        &argv,
        "#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done\n",
    )
    .expect("write the script");
    let mut perms = std::fs::metadata(&argv).expect("the script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&argv, perms).expect("make it executable");
    // Run by sh, not executed itself: a script just written is busy (ETXTBSY) while a child
    // another test forks meanwhile still holds the writing descriptor.
    let argv = format!("/bin/sh {}", path_str(&argv));
    let opts = RunOptions {
        operands: vec!["text".into()],
        ..RunOptions::default()
    };
    let values = |text: &str| Values::new().with("text", text).with("lang", "-x");
    let go = |template: String, text: &'static str| {
        let opts = opts.clone();
        async move {
            tpl(json!(template))
                .run(&values(text), Some(text.as_bytes().to_vec()), &opts)
                .await
        }
    };

    for template in [
        format!("{argv} {{text}}"),
        format!("{argv} --speed 2 {{text}}"),
        format!("{argv} \"{{text}}\""),
        format!("{argv} {{text}} --"),
        format!("{argv} {{empty=}}{{text}}"),
    ] {
        let e = go(template.clone(), "--output=/tmp/x hello")
            .await
            .expect_err(&template);
        assert!(
            matches!(&e.kind, RunErrorKind::OptionLike { name, .. } if name == "text"),
            "{template}: {e}"
        );
        assert!(e.to_string().contains("put `--` before `{text}`"), "{e}");
        assert!(
            !e.to_string().contains("/tmp/x"),
            "the value stays out: {e}"
        );
        assert_eq!(e.steps.len(), 1, "{template}");
        assert!(e.steps[0].pid.is_none() && e.steps[0].failed, "{template}");
        assert!(
            !dir.path().join("ran").exists(),
            "{template}: nothing started"
        );
    }

    // `--` first, the value inside a word, other values, or a text that is no option: as is.
    for (template, text, out) in [
        (
            format!("{argv} -- {{text}}"),
            "-5 degrees",
            "[--][-5 degrees]",
        ),
        (
            format!("{argv} --lang {{lang}} -- {{text}}"),
            "-n",
            "[--lang][-x][--][-n]",
        ),
        (format!("{argv} --text={{text}}"), "-n", "[--text=-n]"),
        (format!("{argv} {{text}}"), "hello", "[hello]"),
        (format!("{argv} {{text}}"), "-", "[-]"),
    ] {
        let o = go(template.clone(), text).await.unwrap_or_else(|e| {
            panic!("{template}: {e}");
        });
        assert_eq!(stdout(&o), out, "{template}");
    }
    // Only values the host names are checked.
    let o = tpl(json!(format!("{argv} {{text}}")))
        .run(&values("-n"), None, &RunOptions::default())
        .await
        .expect("runs");
    assert_eq!(stdout(&o), "[-n]");
}
