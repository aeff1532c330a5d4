//! Any bytes at all: the progress-file parser must answer with a state or
//! an error, never panic, and any state it accepts must write back out.
//! Run with: cargo +nightly fuzz run --fuzz-dir tests/fuzz progress_parse

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(state) = quest::progress::parse(bytes) {
        // serialize also checks that its output parses again.
        quest::progress::serialize(&state).expect("an accepted state writes back");
    }
});
