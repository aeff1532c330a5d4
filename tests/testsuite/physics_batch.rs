//! The physics track's `batch` lesson on the real model, from `list` to a completed card:
//! the starting code and a per-row loop refused by the rules (snapshots, in English and
//! Korean), a batch of two refused by the batch check, the solution passed, the card's
//! numbers and its measured answer accepted. Every edit goes to a copy of the course.

use crate::common::{card_numbers, course_copy, home, quest_in, submit_ratio, text};

const ID: &str = "batch";

/// The measured answer of the `here` question for the total rate's improvement `ratio`,
/// as lessons/batch/lesson.yaml bands it.
fn band(ratio: f64) -> &'static str {
    if ratio >= 3.0 {
        "here=one-step"
    } else if ratio >= 1.5 {
        "here=between"
    } else {
        "here=four-steps"
    }
}

#[test]
fn batch_from_list_to_card() {
    let root = course_copy(ID);
    let home = home("physics-batch");
    let quest = |args: &[&str]| quest_in(&root, &home, args);
    let exercise = root.join("exercises/batch/decode_loop.rs");
    let starting = std::fs::read_to_string(&exercise).unwrap();

    let out = quest(&["list"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("Physics: what sets the speed of a token") && stdout.contains(ID),
        "{stdout}"
    );

    // The starting code: one row, refused by the rules, in both languages.
    let out = quest(&["--lang", "en", "submit", ID]);
    let (refused_en, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{refused_en}{stderr}");
    insta::assert_snapshot!("batch_refused_en", refused_en);
    let out = quest(&["--lang", "ko", "submit", ID]);
    let (refused_ko, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{refused_ko}");
    insta::assert_snapshot!("batch_refused_ko", refused_ko);

    // Four rows, but one forward per row inside each step: refused too.
    let per_row = starting
        .replace(
            "let prompts = lm::tokens_array(&prompt_ids);",
            "let prompts = mlx_rs::ops::broadcast_to(lm::tokens_array(&prompt_ids), &[4, prompt_ids.len() as i32])?;",
        )
        .replace(
            "let logits = model.forward(&y.reshape(&[batch, 1])?, &mut cache)?;",
            "let mut parts = Vec::new();\n        for row in 0..batch {\n            parts.push(model.forward(&y.index(row..row + 1).reshape(&[1, 1])?, &mut cache)?);\n        }\n        let logits = mlx_rs::ops::concatenate(&parts, 0)?;",
        );
    assert_ne!(per_row, starting);
    std::fs::write(&exercise, &per_row).unwrap();
    let out = quest(&["--lang", "en", "submit", ID]);
    let (refused_per_row, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{refused_per_row}{stderr}");
    insta::assert_snapshot!("batch_per_row_refused", refused_per_row);

    // A batch of two keeps the rules, but the lesson asks for four.
    let solution = std::fs::read_to_string(root.join("solutions/batch/decode_loop.rs")).unwrap();
    let two = solution.replace(
        "&[4, prompt_ids.len() as i32]",
        "&[2, prompt_ids.len() as i32]",
    );
    assert_ne!(two, solution);
    std::fs::write(&exercise, &two).unwrap();
    let out = quest(&["--lang", "en", "submit", ID]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout
            .contains("Your run decoded 2 sequence(s) at once; this lesson asks for a batch of 4"),
        "{stdout}"
    );

    // The solution: row 0 writes the reference's tokens; measured beside the starting code.
    std::fs::write(&exercise, &solution).unwrap();
    let out = quest(&["--lang", "en", "submit", ID, "--rounds", "1"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("greedy tokens as the reference"),
        "{stdout}"
    );
    assert!(stdout.contains("decode tok/s per sequence"), "{stdout}");
    let (before, after, _) = card_numbers(&stdout, ID);
    let ratio = submit_ratio(&stdout);

    // A wrong band is refused with the lesson's explanation; the measured one completes.
    let wrong = ["here=one-step", "here=between", "here=four-steps"]
        .into_iter()
        .find(|answer| *answer != band(ratio))
        .unwrap();
    let card = |here: &str| {
        quest(&[
            "card",
            ID,
            "--before",
            &before,
            "--after",
            &after,
            "--answer",
            "reads=weights-once",
            "--answer",
            here,
        ])
    };
    let out = card(wrong);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("Four sequences for the time of one step"),
        "{stdout}"
    );
    let out = card(band(ratio));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("Lesson {ID} complete: +100 XP")),
        "{stdout}"
    );
    let progress = std::fs::read_to_string(home.join("progress.json")).unwrap();
    assert!(progress.contains("lesson:batch:complete"), "{progress}");
    assert!(progress.contains("per_seq_tok_s"), "{progress}");
}
