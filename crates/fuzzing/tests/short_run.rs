//! A short fuzz of every target on stable Rust, part of `cargo test --workspace`: the whole
//! seed corpus (`fuzz/corpus/<target>/`), then a seeded mutation loop. `FUZZ_SECONDS` is the
//! time per target (default 6, so the five targets take about half a minute); `FUZZ_SEED`
//! repeats a run; `FUZZ_ITERATIONS` caps the mutations per target. A failure prints the seed,
//! the mutation number and the input in hex.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use fuzzing::mutate::{self, RunStats};

/// Longest mutated input (libFuzzer's default `-max_len` is 4096 too).
const MAX_LEN: usize = 4096;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn short_run(name: &str) -> RunStats {
    let (_, target) = fuzzing::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .copied()
        .unwrap();
    let corpus: Vec<Vec<u8>> = mutate::load_corpus(&mutate::corpus_dir(name))
        .into_iter()
        .map(|(_, bytes)| bytes)
        .collect();
    assert!(!corpus.is_empty(), "fuzz/corpus/{name} has no seeds");
    let seed = env_u64("FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let seconds = env_u64("FUZZ_SECONDS").unwrap_or(6);
    let max = env_u64("FUZZ_ITERATIONS").unwrap_or(u64::MAX);
    let report = |n: Option<u64>, input: &[u8]| {
        let which = n.map_or("a seed corpus entry".to_owned(), |n| {
            format!("mutation {n}")
        });
        eprintln!(
            "fuzz target {name} failed on {which} (FUZZ_SEED={seed}; \
             `echo <hex> | xxd -r -p > fuzz/corpus/{name}/crash-...` keeps it)\ninput ({} bytes, hex): {}\ninput (lossy): {:?}",
            input.len(),
            mutate::hex(input),
            String::from_utf8_lossy(input)
        );
    };
    let stats = mutate::run(
        target,
        &corpus,
        seed,
        Duration::from_secs(seconds),
        max,
        MAX_LEN,
        &report,
    );
    eprintln!(
        "fuzz target {name}: {} corpus entries, {} mutations in {seconds} s (FUZZ_SEED={seed})",
        stats.corpus, stats.mutations
    );
    stats
}

#[test]
fn update() {
    short_run("update");
}

#[test]
fn wire_line() {
    short_run("wire_line");
}

#[test]
fn config() {
    short_run("config");
}

#[test]
fn markdown() {
    short_run("markdown");
}

#[test]
fn callback() {
    short_run("callback");
}

#[test]
fn the_mutator_is_deterministic_and_bounded() {
    let corpus = vec![b"{\"a\":1}".to_vec(), b"**x**".to_vec()];
    let run = |seed| {
        let mut rng = mutate::Rng::new(seed);
        (0..200)
            .map(|i| mutate::mutate(&mut rng, &corpus[i % 2], &corpus, 64))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    assert!(run(9).iter().all(|m| m.len() <= 64));
}

/// `FUZZ_REPLAY=<target>:<file>` runs one input (a libFuzzer artifact, say) through a target
/// on stable, with a backtrace on failure; without it, nothing.
#[test]
fn replay() {
    let Ok(spec) = std::env::var("FUZZ_REPLAY") else {
        return;
    };
    let (name, file) = spec.split_once(':').unwrap();
    let (_, target) = fuzzing::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .copied()
        .unwrap();
    target(&std::fs::read(file).unwrap());
}
