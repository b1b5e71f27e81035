//! `cargo +nightly fuzz run update`: see crates/fuzzing (`fuzzing::update`) for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::update(data));
