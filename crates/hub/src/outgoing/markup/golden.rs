//! Golden tests (filled below).
