//! `QUEST_PREBUILT` (exercise binaries built elsewhere, for a GPU machine with no Rust):
//! quest runs the binary built for the exact source and never calls cargo, and refuses a
//! source that has none, saying how to make one. The binaries here are small scripts
//! that write a report, so nothing is compiled.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::common::{course_copy, home, text};

/// A stand-in exercise binary: writes a report with `tok_s` to `$QUEST_REPORT`.
fn fake_binary(path: &Path, tok_s: f64) {
    let report = format!(
        r#"{{"schema": {}, "model": "random:smollm2-135m", "backend": "cpu", "prompt_tokens": 12,
        "generated_tokens": 4, "load_ms": 1.0, "ttft_ms": 2.0, "decode_tok_s": {tok_s},
        "tokens": [1, 2, 3, 4], "text": "<t1><t2><t3><t4>"}}"#,
        quest::lab::REPORT_SCHEMA
    );
    std::fs::write(
        path,
        format!("#!/bin/sh\ncat > \"$QUEST_REPORT\" <<'JSON'\n{report}\nJSON\n"),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn quest_prebuilt(root: &Path, prebuilt: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_quest"))
        .args(args)
        .env("QUEST_ROOT", root)
        .env("QUEST_HOME", home(&format!("prebuilt-{}", args.len())))
        .env("QUEST_PREBUILT", prebuilt)
        // Any call of cargo fails loudly: quest must not make one.
        .env("CARGO", "/bin/false")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[test]
fn prebuilt_binaries_are_used_by_source_hash_and_an_edited_source_is_refused() {
    let root = course_copy("prebuilt");
    let prebuilt = home("prebuilt-bins");
    let exercise = root.join("exercises/mlx-path/decode_loop.rs");
    let key = quest::lab::prebuilt_key(&std::fs::read(&exercise).unwrap());
    fake_binary(&prebuilt.join(&key), 42.5);
    std::fs::write(
        prebuilt.join("prebuilt.txt"),
        format!("{key} {}\n", exercise.display()),
    )
    .unwrap();

    let args = [
        "run",
        "mlx-path",
        "--no-lesson",
        "--model",
        "random:smollm2-135m",
    ];
    let out = quest_prebuilt(&root, &prebuilt, &args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("42.50"), "{stdout}");
    assert!(stdout.contains("<t1><t2><t3><t4>"), "{stdout}");

    // The learner edits the exercise: no binary was built from this source.
    let mut source = std::fs::read_to_string(&exercise).unwrap();
    source.push_str("\n// edited\n");
    std::fs::write(&exercise, source).unwrap();
    let out = quest_prebuilt(&root, &prebuilt, &args);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("holds no exercise binary for"), "{stderr}");
    assert!(stderr.contains("the source changed since"), "{stderr}");
    assert!(stderr.contains("quest dev prebuild"), "{stderr}");
}
