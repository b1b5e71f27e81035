//! `cargo +nightly fuzz run callback`: see crates/fuzzing (`fuzzing::callback`) for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::callback(data));
