//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use cmdtpl::{Outcome, OutputValue, RunError, RunOptions, Template, Values};
use serde_json::Value as Json;

pub fn tpl(v: Json) -> Template {
    match Template::parse(&v) {
        Ok(t) => t,
        Err(e) => panic!("parse {v}: {e}"),
    }
}

pub async fn run(v: Json, values: &Values) -> Result<Outcome, RunError> {
    tpl(v).run(values, None, &RunOptions::default()).await
}

pub async fn run_ok(v: Json, values: &Values) -> Outcome {
    match run(v.clone(), values).await {
        Ok(o) => o,
        Err(e) => panic!("run {v}: {e} (steps: {:#?})", e.steps),
    }
}

pub fn stdout(o: &Outcome) -> String {
    match &o.output {
        OutputValue::Stdout(b) => String::from_utf8_lossy(b).into_owned(),
        OutputValue::File(p) => panic!("expected stdout, got file {}", p.display()),
    }
}

pub async fn run_stdout(v: Json, values: &Values) -> String {
    stdout(&run_ok(v, values).await)
}

pub fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Whether the process is gone: no `/proc` entry, or only a zombie waiting for its reaper.
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state == 'Z' || state == 'X'),
    }
}

/// Polls [`process_gone`] for up to two seconds.
pub async fn wait_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    process_gone(pid)
}
