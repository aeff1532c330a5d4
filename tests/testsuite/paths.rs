//! The files the tests' comments and the fixtures' README point to exist: a moved file
//! (the tests moved into one binary under tests/testsuite/) leaves no stale pointer.

use std::path::Path;

/// The folders of the repository a pointer starts with.
const ROOTS: &[&str] = &[
    "docs/",
    "tests/",
    "src/",
    "lessons/",
    "solutions/",
    "lab/",
    "vendor/",
];

/// Every `root/…` path in `text`, as written (placeholders such as `<id>` skipped).
fn pointers(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || "`()[],;:'\"".contains(c))
        .map(|word| word.trim_end_matches(['.', '!', '?']))
        .filter(|word| ROOTS.iter().any(|root| word.starts_with(root)))
        .filter(|word| !word.contains(['<', '{', '*', '…', '$']))
        .collect()
}

#[test]
fn every_path_the_tests_point_to_exists() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = vec![(
        "tests/fixtures/README.md".to_owned(),
        std::fs::read_to_string(repo.join("tests/fixtures/README.md")).unwrap(),
    )];
    for entry in std::fs::read_dir(repo.join("tests/testsuite")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            // Comments only: string literals name files of a test's course copy.
            let source = std::fs::read_to_string(&path).unwrap();
            let comments: Vec<&str> = source
                .lines()
                .filter_map(|line| line.trim_start().strip_prefix("//"))
                .collect();
            texts.push((path.display().to_string(), comments.join("\n")));
        }
    }
    let mut missing = Vec::new();
    for (file, text) in &texts {
        for pointer in pointers(text) {
            if !repo.join(pointer).exists() {
                missing.push(format!("{file}: {pointer}"));
            }
        }
    }
    assert!(missing.is_empty(), "no such file:\n{}", missing.join("\n"));
}

#[test]
fn pointers_are_read_as_written() {
    assert_eq!(
        pointers(
            "see tests/fixtures/README.md; (docs/cpu/x.txt): lessons/<id>/en.md, `src/lab.rs`."
        ),
        ["tests/fixtures/README.md", "docs/cpu/x.txt", "src/lab.rs"]
    );
}
