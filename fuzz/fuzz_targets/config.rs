//! `cargo +nightly fuzz run config`: see crates/fuzzing (`fuzzing::config`) for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::config(data));
