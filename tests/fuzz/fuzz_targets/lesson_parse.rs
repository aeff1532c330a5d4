//! Any text as a lesson file: front matter, Markdown, anchors and code blocks must
//! parse to a lesson or an error with a location, never panic.
//! Run with: cargo +nightly fuzz run --fuzz-dir tests/fuzz lesson_parse

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let source = String::from_utf8_lossy(bytes).into_owned();
    let _ = quest::course::Lesson::parse(std::path::Path::new("fuzz/en.md"), source);
});
