//! The physics track's lessons from `list` to a completed card, on small shapes and few
//! tokens: refused by their own rules (snapshot), refused for values that differ from
//! quest's computation (snapshot, numbers masked: they are this machine's), passed with
//! the solution, the measured quiz answer read from what quest printed, the card
//! accepted. Every edit goes to a copy of the course.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{course_copy, home, text};

/// `quest` on the course at `root`, with `QUEST_CONTEXTS` for the slope's exercise.
fn quest_env(root: &Path, home: &Path, contexts: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quest"));
    command
        .args(args)
        .env("QUEST_ROOT", root)
        .env("QUEST_HOME", home)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80");
    if let Some(contexts) = contexts {
        command.env("QUEST_CONTEXTS", contexts);
    }
    command.output().unwrap()
}

/// The value quest printed for `key` (`key = 1.234`) under "quest also computed".
fn printed(stdout: &str, key: &str) -> f64 {
    let prefix = format!("{key} = ");
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{key}` in:\n{stdout}"))
        .parse()
        .unwrap()
}

/// What a refusal said, with this machine's numbers masked.
fn masked(text: &str, body: impl FnOnce(&str)) {
    insta::with_settings!({filters => vec![
        // A number after a space, `(` or `=`, signed or not; not the digits of a name.
        (r"([\s(])[+-]?\d+(\.\d+)?(e-?\d+)?", "$1[n]"),
    ]}, {
        body(text);
    });
}

/// One lesson: the starting code refused by its rules, `broken` (the solution with one
/// edit) refused by the values check, the solution passed, the card completed with the
/// measured answer `measured` decides from two printed values and the `fixed` answers.
struct Physics<'a> {
    id: &'a str,
    file: &'a str,
    model: &'a str,
    max_tokens: &'a str,
    contexts: Option<&'a str>,
    /// (text in the solution, its replacement): an arithmetic mistake.
    broken: (&'a str, &'a str),
    /// (question, [(choice, value printed by quest)]): the larger value is the answer.
    measured: (&'a str, [(&'a str, &'a str); 2]),
    fixed: &'a [&'a str],
}

/// Returns what the rules refusal and the values refusal printed.
fn physics(lesson: Physics) -> (String, String) {
    let id = lesson.id;
    let root = course_copy(id);
    let home = home(&format!("physics-{id}"));
    let quest = |args: &[&str]| quest_env(&root, &home, lesson.contexts, args);
    let shapes = ["--model", lesson.model, "--max-tokens", lesson.max_tokens];
    let exercise = root.join(format!("exercises/{id}/{}", lesson.file));
    let solution =
        std::fs::read_to_string(root.join(format!("solutions/{id}/{}", lesson.file))).unwrap();

    let (stdout, _) = text(&quest(&["list"]));
    assert!(
        stdout.contains("Physics: what sets the speed of a token") && stdout.contains(id),
        "{stdout}"
    );

    // A measured answer before anything was measured: measure first.
    let (question, choices) = lesson.measured;
    let out = quest(&[
        "card",
        id,
        "--answer",
        &format!("{question}={}", choices[0].0),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).0.contains("run `quest submit"),
        "{}",
        text(&out).0
    );

    // The starting code runs; quest marks each value it computed, ✗ where it differs.
    let out = quest(&[&["run", id, "--no-lesson"][..], &shapes].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("Checking your values") && stdout.contains("✗"),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("`quest hint {id}`")), "{stdout}");
    assert!(
        !stdout.contains("Time to first token"),
        "no decode timing of its own: {stdout}"
    );

    // The starting code: its own rules.
    let out = quest(&[&["submit", id][..], &shapes].concat());
    let (rules_refusal, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{rules_refusal}{stderr}");
    assert!(stderr.contains("fix those lines"), "{stderr}");

    // An arithmetic mistake keeps the rules and is found in the values.
    let (from, to) = lesson.broken;
    assert!(solution.contains(from), "{from}");
    std::fs::write(&exercise, solution.replace(from, to)).unwrap();
    let out = quest(&[&["submit", id][..], &shapes].concat());
    let (values_refusal, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{values_refusal}{stderr}");
    assert!(
        values_refusal.contains("✗") && stderr.contains("Some values differ"),
        "{values_refusal}{stderr}"
    );

    // The solution: every value quest's; the card with this machine's answer.
    std::fs::write(&exercise, &solution).unwrap();
    let out = quest(&[&["submit", id][..], &shapes].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("Every value you computed is quest's."),
        "{stdout}"
    );
    assert!(!stdout.contains("✗"), "{stdout}");
    let [(a, a_value), (b, b_value)] = choices;
    let (right, wrong) = if printed(&stdout, a_value) > printed(&stdout, b_value) {
        (a, b)
    } else {
        (b, a)
    };
    let card = |measured: &str| {
        let mut args = vec![
            "card".to_owned(),
            id.to_owned(),
            "--answer".to_owned(),
            format!("{question}={measured}"),
        ];
        for answer in lesson.fixed {
            args.extend(["--answer".to_owned(), (*answer).to_owned()]);
        }
        quest(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = card(wrong);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out).0);
    assert!(
        text(&out).0.contains("Not on this machine"),
        "{}",
        text(&out).0
    );
    let out = card(right);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("Lesson {id} complete: +100 XP")),
        "{stdout}"
    );
    let (stdout, _) = text(&quest(&["list"]));
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(id) && l.contains("[done]")),
        "{stdout}"
    );
    (rules_refusal, values_refusal)
}

#[test]
fn decode_ceiling_from_list_to_card() {
    let (rules, values) = physics(Physics {
        id: "decode-ceiling",
        file: "ceiling.rs",
        model: "SmolLM2-135M,SmolLM2-360M",
        max_tokens: "3",
        contexts: None,
        // Forgets the output head.
        broken: (
            "let matrices = layers * layer_matrices + head;",
            "let matrices = layers * layer_matrices;",
        ),
        measured: (
            "larger-term",
            [("fixed", "fixed_term_ms"), ("bytes", "bytes_term_ms")],
        ),
        fixed: &["ceiling-is=bound"],
    });
    insta::assert_snapshot!("decode_ceiling_refused", rules);
    masked(&values, |v| {
        insta::assert_snapshot!("decode_ceiling_values_refused", v)
    });
}

#[test]
fn context_slope_from_list_to_card() {
    let (rules, values) = physics(Physics {
        id: "context-slope",
        file: "slope.rs",
        // The smallest full-attention shape beside the smallest hybrid.
        model: "SmolLM2-135M,Qwen3.5-0.8B",
        max_tokens: "2",
        contexts: Some("8,32,64"),
        // Counts every layer as full attention.
        broken: (
            "shape.num_hidden_layers / shape.full_attention_interval",
            "shape.num_hidden_layers",
        ),
        measured: (
            "steeper-here",
            [
                ("measured", "full_measured_ms_per_1k"),
                ("bytes", "full_predicted_ms_per_1k"),
            ],
        ),
        fixed: &["pays-slope=attention"],
    });
    insta::assert_snapshot!("context_slope_refused", rules);
    masked(&values, |v| {
        insta::assert_snapshot!("context_slope_values_refused", v)
    });
}
