//! Any text as a lesson file or as its `lesson.yaml`: front matter, Markdown, anchors,
//! code blocks and lesson data must parse to a lesson or an error with a location,
//! never panic. Run with: cargo +nightly fuzz run --fuzz-dir tests/fuzz lesson_parse

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// A lesson's data with rules, a measurement and a quiz, so the text is checked
/// against all of them.
const SPEC: &str = "minutes: 5\nxp: 10\nexercise: exercises/x/main.rs\nsolution: solutions/x/main.rs\n\
rules:\n  - {id: r, forbid: [host_read], in: {loop: forward}}\n\
measure: {metric: decode_tok_s, expect: higher}\n\
quiz:\n  - {id: q, choices: [a, b], answer: a}\n";

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let _ = quest::course::LessonSpec::parse(Path::new("fuzz/lesson.yaml"), &text);
    let spec = quest::course::LessonSpec::parse(Path::new("fuzz/lesson.yaml"), SPEC)
        .expect("the fixed lesson data parses");
    let _ = quest::course::Lesson::parse(Path::new("fuzz/en.md"), text, spec);
});
