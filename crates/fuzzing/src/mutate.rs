//! A small seeded mutation loop for stable Rust (the short run in `cargo test`): no coverage
//! feedback, just the seed corpus, then flips, inserts, deletes and splices with other corpus
//! entries, for a bounded time. cargo-fuzz (libFuzzer) is the real, long fuzzer.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// xorshift64*: deterministic from its seed, enough for picking mutations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced: xorshift never leaves it).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Bytes the mutator likes to insert: JSON and Markdown structure, and UTF-8 edge cases.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"\\",
    b"\\u0000",
    b"\\ud83d",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"9223372036854775808",
    b"\n",
    b"\r\n",
    b"*",
    b"**",
    b"_",
    b"`",
    b"```",
    b"|",
    b"---",
    b"> ",
    b"- ",
    b"1. ",
    b"#",
    b"<b>",
    b"</b>",
    b"&amp;",
    b"<!--",
    b"-->",
    b"\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb",
    b"\xe2\x80\xa8",
    b"\xef\xbb\xbf",
    b"\xff",
];

/// One mutation of `input`, using `corpus` for splices. At most `max_len` bytes.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next_u64() as u8;
            }
            2 => out.insert(at, rng.next_u64() as u8),
            3 if !out.is_empty() => {
                let len = 1 + rng.below(out.len().min(16));
                let from = rng.below(out.len() - len + 1);
                out.drain(from..from + len);
            }
            4 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            5 if !corpus.is_empty() => {
                // A piece of another entry, spliced in.
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                let len = rng.below(other.len() - from + 1);
                out.splice(at..at, other[from..from + len].iter().copied());
            }
            6 if !out.is_empty() => {
                // A piece of itself repeated (lengths and nesting).
                let from = rng.below(out.len());
                let len = 1 + rng.below((out.len() - from).min(64));
                let piece = out[from..from + len].to_vec();
                for _ in 0..=rng.below(8) {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            _ => out.push(rng.next_u64() as u8),
        }
    }
    out.truncate(max_len);
    out
}

/// The seed corpus of `target`: `fuzz/corpus/<target>/`, sorted by name.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Reads every file of a corpus folder, sorted by name (empty when there is none).
pub fn load_corpus(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .filter_map(|e| {
            let bytes = std::fs::read(e.path()).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), bytes))
        })
        .collect();
    files.sort();
    files
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStats {
    /// Corpus entries run as they are.
    pub corpus: usize,
    /// Mutated inputs run.
    pub mutations: u64,
}

/// Runs `target` over `corpus`, then mutations of it for `budget` (at most `max_iterations`),
/// seeded with `seed`. A panic propagates after `report` was called with the input that
/// caused it (`None` as the mutation number for a corpus entry).
pub fn run(
    target: crate::Target,
    corpus: &[Vec<u8>],
    seed: u64,
    budget: Duration,
    max_iterations: u64,
    max_len: usize,
    report: &dyn Fn(Option<u64>, &[u8]),
) -> RunStats {
    for input in corpus {
        guarded(target, input, None, report);
    }
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let mut mutations = 0;
    let fallback = vec![Vec::new()];
    let pool = if corpus.is_empty() { &fallback } else { corpus };
    while mutations < max_iterations && start.elapsed() < budget {
        let base = &pool[rng.below(pool.len())];
        let input = mutate(&mut rng, base, pool, max_len);
        guarded(target, &input, Some(mutations), report);
        mutations += 1;
    }
    RunStats {
        corpus: corpus.len(),
        mutations,
    }
}

fn guarded(
    target: crate::Target,
    input: &[u8],
    n: Option<u64>,
    report: &dyn Fn(Option<u64>, &[u8]),
) {
    if let Err(panic) = std::panic::catch_unwind(|| target(input)) {
        report(n, input);
        std::panic::resume_unwind(panic);
    }
}

/// Lowercase hex of `bytes` (to paste into a corpus file with `xxd -r -p`).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
