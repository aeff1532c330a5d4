//! `QUEST_PREBUILT` (exercise binaries built elsewhere, for a GPU machine with no Rust):
//! quest runs the binary built for the exact source and never calls cargo, and refuses a
//! source that has none, saying how to make one. The binaries here are small scripts
//! that write a report, so nothing is compiled.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::{course_copy, home, text};

/// A stand-in exercise binary: a script that speaks to quest's clock as an exercise does
/// (asks for the prompt, hands over its four tokens) and writes a report whose own timer
/// says `tok_s` to `$QUEST_REPORT`.
fn fake_binary(tok_s: f64) -> String {
    let report = format!(
        r#"{{"schema": {}, "model": "random:smollm2-135m", "backend": "cpu", "prompt_tokens": 12,
        "generated_tokens": 4, "own": {{"load_ms": 1.0, "ttft_ms": 2.0, "decode_tok_s": {tok_s}}},
        "tokens": [1, 2, 3, 4], "text": "<t1><t2><t3><t4>"}}"#,
        quest::lab::REPORT_SCHEMA
    );
    format!(
        "#!/bin/sh\nprintf 'ready\\n' >&3\nread -r prompt <&3\n\
         printf 'first 1\\ntoken 2\\ntoken 3\\ntoken 4\\nend\\n' >&3\n\
         cat > \"$QUEST_REPORT\" <<'JSON'\n{report}\nJSON\n"
    )
}

/// A course copy named `name` and a prebuilt folder whose binary for mlx-path's exercise,
/// as the lesson gives it, is the shell script `script`.
fn course_with_prebuilt_exercise(
    name: &str,
    script: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = course_copy(name);
    let prebuilt = home(&format!("{name}-bins"));
    let exercise = root.join("exercises/mlx-path/decode_loop.rs");
    let key = quest::lab::runner::prebuilt_key(&std::fs::read(&exercise).unwrap());
    let binary = prebuilt.join(&key);
    std::fs::write(&binary, script).unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        prebuilt.join("prebuilt.txt"),
        format!("{key} {}\n", exercise.display()),
    )
    .unwrap();
    (root, prebuilt)
}

/// `quest run mlx-path` on the stand-in model, without the lesson.
const RUN: [&str; 5] = [
    "run",
    "mlx-path",
    "--no-lesson",
    "--model",
    "random:smollm2-135m",
];

fn quest_prebuilt(root: &Path, prebuilt: &Path, args: &[&str]) -> std::process::Output {
    crate::common::quest_command()
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
    let (root, prebuilt) = course_with_prebuilt_exercise("prebuilt", &fake_binary(42.5));
    let exercise = root.join("exercises/mlx-path/decode_loop.rs");
    let args = RUN;
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

/// An exercise that a signal ends is reported by the signal, whatever it printed before
/// (here a download's log, as the first run on a CPU its BLAS was not built for showed):
/// SIGILL's line names the BLAS in use and `QUEST_BLAS=bundled`, in either language.
#[test]
fn an_exercise_killed_by_a_signal_is_reported_by_its_signal() {
    let (root, prebuilt) = course_with_prebuilt_exercise(
        "prebuilt-sigill",
        "#!/bin/sh\necho 'quest: fetching smollm2-135m-instruct (98 MB) with pip: done' >&2\nkill -ILL $$\n",
    );
    let out = quest_prebuilt(&root, &prebuilt, &RUN);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    let killed = stderr
        .find("quest: The exercise was killed by SIGILL (illegal instruction")
        .unwrap_or_else(|| panic!("the signal is not named:\n{stderr}"));
    // What it printed comes after the signal, as what it printed, not as the error.
    let said = stderr
        .find("What it printed before it was killed:\nquest: fetching")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(killed < said, "{stderr}");
    assert!(stderr.contains("QUEST_BLAS=bundled"), "{stderr}");
    assert!(stderr.contains(&quest::device::blas::library()), "{stderr}");

    let korean: Vec<&str> = RUN.iter().copied().chain(["--lang", "ko"]).collect();
    let out = quest_prebuilt(&root, &prebuilt, &korean);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("연습 코드가 SIGILL(잘못된 명령어"),
        "{stderr}"
    );
    assert!(stderr.contains("QUEST_BLAS=bundled"), "{stderr}");
}

/// The learner's edits the GPU walks carry (docs/gpu/own_edit.py, made here before the
/// carry: the device cannot build Rust) still apply to the lessons as they are: each edit
/// asserts that the code it replaces is there, so a lesson changed under it stops here and
/// not on a device lent for an hour.
#[test]
fn the_gpu_walks_own_edits_still_apply() {
    let course = course_copy("own-edits");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/gpu/own_edit.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&course)
        .output()
        .expect("python3 runs");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    // An edit that applied changed the exercise: the kernel lesson's, for one.
    let edited =
        std::fs::read_to_string(course.join("exercises/matvec-kernel/matvec_kernel.rs")).unwrap();
    assert!(edited.contains("dot += (scale * (float)"), "{edited}");
}
