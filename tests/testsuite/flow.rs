//! The learner's whole path on the real default model: `quest run`, then `quest submit`
//! failing each way it can, then passing, the card refusing invented numbers and the
//! wrong term, the lesson completing once. Slow (real decoding on the CPU): kept small.

use crate::common;

use std::path::{Path, PathBuf};

use common::{course_copy, quest_in, text};

const EXERCISE: &str = "exercises/mlx-path/decode_loop.rs";

/// The exercise of a temporary copy of the course: the test edits it, never the
/// learner's own file.
struct Exercise {
    path: PathBuf,
    original: String,
}

impl Exercise {
    fn of(root: &Path) -> Self {
        let path = root.join(EXERCISE);
        let original = std::fs::read_to_string(&path).unwrap();
        Self { path, original }
    }
    fn write(&self, source: &str) {
        std::fs::write(&self.path, source).unwrap();
    }
}

/// Timings vary run to run, and the device machine to machine; everything else in
/// `quest run`'s output must not.
fn assert_snapshot_redacted(name: &str, s: &str) {
    let mut settings = insta::Settings::clone_current();
    // The device, and the weight layout that depends on it (dense f32 on a CPU).
    settings.add_filter(
        r"(?m)^(Model: .*) \((?:cpu|metal|cuda)(?:, [^)]*)?\)$",
        "$1 ([DEVICE], [WEIGHTS])",
    );
    // What ran the matmuls: the BLAS and the kernels it chose for this CPU, or on CUDA
    // which of quest's kernels ran.
    settings.add_filter(
        r"(?m)^(?:CPU matmuls on|quest's own CUDA kernels): .*$",
        "[WHAT RAN THE MATMULS]",
    );
    settings.add_filter(r"\d+\.\d+ ms", "[TTFT] ms");
    settings.add_filter(r"\d+\.\d+ tok/s", "[RATE] tok/s");
    settings.bind(|| insta::assert_snapshot!(name, s));
}

/// The no-sync edit the lesson asks for.
fn edited(original: &str) -> String {
    let hand = "    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        tokens.push(y.item_exact::<u32>()); // a GPU sync per token — the hand loop's cost
    }";
    assert!(
        original.contains(hand),
        "the exercise's decode loop changed; update this test"
    );
    original.replace(
        hand,
        "    let mut on_device = Vec::new();
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        mlx_rs::transforms::async_eval([&y])?;
        on_device.push(y.clone());
    }
    tokens.extend(on_device.iter().map(|t| t.item_exact::<u32>()));",
    )
}

#[test]
fn run_submit_card_status() {
    let home = common::home("flow");
    let root = course_copy("flow");
    let guard = Exercise::of(&root);
    let quest = |home: &Path, args: &[&str]| quest_in(&root, home, args);
    let small = ["--max-tokens", "8"];

    // quest run: the lesson, then the exercise's numbers.
    let out = quest(&home, &["run", "mlx-path", small[0], small[1]]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("The MLX path: a decode loop by hand"),
        "{stdout}"
    );
    let results = &stdout[stdout.find("Output:").expect(&stdout)..];
    assert!(
        results.contains(" weights, ") && results.contains(" MB/token)"),
        "the run says which weight layout ran and its bytes per token: {results}"
    );
    assert_snapshot_redacted("run_mlx_path", results);

    // Submitting the untouched hand loop: the code check names the sync and its line.
    let out = quest(&home, &["submit", "mlx-path"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains(&format!("{EXERCISE}:34:"))
            && stdout.contains("`item_exact` inside the decode loop"),
        "{stdout}"
    );
    assert!(stderr.contains("fix those lines"), "{stderr}");

    // No sync, but the loop stops one token short: behaviour differs from the reference.
    let source = edited(&guard.original).replace(
        "for _ in 1..run.max_tokens {",
        "for _ in 2..run.max_tokens {",
    );
    guard.write(&source);
    let out = quest(
        &home,
        &["submit", "mlx-path", small[0], small[1], "--rounds", "1"],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("differ from the reference from token 7"),
        "{stdout}"
    );

    // A build error is shown as cargo prints it, with a non-zero exit.
    guard.write(&source.replace(
        "argmax_axis(lm::last_position(&logits), -1, None)?;",
        "argmax_axis(;",
    ));
    let out = quest(&home, &["run", "mlx-path", "--no-lesson"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("error") && stderr.contains("did not build"),
        "{stderr}"
    );

    // The lesson's edit: passes the checks, is measured, asks for the card.
    guard.write(&edited(&guard.original));
    let out = quest(
        &home,
        &["submit", "mlx-path", small[0], small[1], "--rounds", "1"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("The same 8 greedy tokens as the reference"),
        "{stdout}"
    );
    let (before, after, shows) = common::card_numbers(&stdout, "mlx-path");

    // Invented numbers are refused, with what was measured.
    let out = quest(
        &home,
        &[
            "card", "mlx-path", "--before", "74.1", "--after", "88.0", "--term", "fixed",
            "--answer", shows,
        ],
    );
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("74.10 tok/s, is not within 15 %") && stdout.contains(&before),
        "{stdout}"
    );

    // The wrong term is refused.
    let out = quest(
        &home,
        &[
            "card", "mlx-path", "--before", &before, "--after", &after, "--term", "bytes",
            "--answer", shows,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).0.contains("Not that term"));

    // The honest card completes the lesson.
    let out = quest(
        &home,
        &[
            "card", "mlx-path", "--before", &before, "--after", &after, "--term", "fixed",
            "--answer", shows,
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("Lesson mlx-path complete: +100 XP"),
        "{stdout}"
    );
    let xp = |home: &Path| {
        let status = text(&quest(home, &["status"])).0;
        status
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .nth(2)
            .unwrap()
            .to_owned()
    };
    let xp_once = xp(&home);

    // Again: nothing is awarded twice.
    let out = quest(
        &home,
        &[
            "card", "mlx-path", "--before", &before, "--after", &after, "--term", "fixed",
            "--answer", shows,
        ],
    );
    assert!(text(&out).0.contains("already complete"));
    assert_eq!(xp(&home), xp_once);
    assert!(text(&quest(&home, &["list"])).0.contains("[done]"));

    // The same run in Korean: the lesson, the UI and the numbers.
    guard.write(&guard.original);
    let out = quest(
        &home,
        &["--lang", "ko", "run", "mlx-path", "--max-tokens", "4"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with("MLX 경로"), "{stdout}");
    assert!(
        stdout.contains("첫 토큰까지") && stdout.contains("tok/s"),
        "{stdout}"
    );
}
