//! `cargo +nightly fuzz run wire_line`: see crates/fuzzing (`fuzzing::wire_line`) for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::wire_line(data));
