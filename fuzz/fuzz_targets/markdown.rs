//! `cargo +nightly fuzz run markdown`: see crates/fuzzing (`fuzzing::markdown`) for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::markdown(data));
