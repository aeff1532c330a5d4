//! Black-box tests of the `quest` binary (rustlings style): each runs the real CLI with
//! its own progress folder, no colour and a fixed width; timings are redacted in snapshots.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{home, quest, quest_command};

fn stdout(o: &Output) -> String {
    common::text(o).0
}

fn stderr(o: &Output) -> String {
    common::text(o).1
}

fn fixture_progress(home: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/progress/halfway.json");
    std::fs::copy(src, home.join("progress.json")).unwrap();
}

#[test]
fn list_in_both_languages() {
    let h = home("list");
    insta::assert_snapshot!("list_en", stdout(&quest(&h, &["list"])));
    insta::assert_snapshot!("list_ko", stdout(&quest(&h, &["--lang", "ko", "list"])));
}

#[test]
fn the_language_choice_is_remembered() {
    let h = home("lang");
    quest(&h, &["--lang", "ko", "list"]);
    assert!(stdout(&quest(&h, &["list"])).contains("레슨"));
    quest(&h, &["--lang", "en", "list"]);
    assert!(stdout(&quest(&h, &["list"])).starts_with("Lessons"));
}

#[test]
fn status_in_both_languages() {
    let h = home("status");
    fixture_progress(&h);
    insta::assert_snapshot!("status_en", stdout(&quest(&h, &["status"])));
    insta::assert_snapshot!(
        "status_ko_verbose",
        stdout(&quest(&h, &["--lang", "ko", "status", "--verbose"]))
            .replace(&h.display().to_string(), "[HOME]")
    );
}

#[test]
fn a_fresh_learner_is_level_zero() {
    let h = home("fresh");
    let out = stdout(&quest(&h, &["status"]));
    assert!(out.starts_with("Level 0 · Spec-sheet skimmer"), "{out}");
    assert!(out.contains("100 XP to Token counter"), "{out}");
}

#[test]
fn unknown_or_sneaky_lesson_ids_list_the_lessons() {
    let h = home("ids");
    for id in ["../x", "nope", "MLX-PATH"] {
        for cmd in ["run", "hint", "submit", "reset"] {
            let out = quest(&h, &[cmd, id]);
            assert_eq!(out.status.code(), Some(1), "{cmd} {id}");
            let err = stderr(&out);
            assert!(
                err.contains("Unknown lesson") && err.contains("mlx-path"),
                "{cmd} {id}: {err}"
            );
        }
    }
    let ko = stderr(&quest(&h, &["--lang", "ko", "hint", "nope"]));
    assert!(
        ko.contains("mlx-path") && !ko.contains("Unknown lesson"),
        "{ko}"
    );
}

#[test]
fn a_damaged_progress_file_is_kept_and_repair_is_offered() {
    let h = home("damaged");
    std::fs::write(h.join("progress.json"), b"{\"schema\": 1, \"lessons\": {").unwrap();
    let out = quest(&h, &["status"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("progress.json") && err.contains("quest status --repair"),
        "{err}"
    );
    // Nothing was reset: the damaged bytes are still there.
    assert_eq!(
        std::fs::read(h.join("progress.json")).unwrap(),
        b"{\"schema\": 1, \"lessons\": {"
    );
    let out = quest(&h, &["status", "--repair"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&quest(&h, &["status"])).starts_with("Level 0"));
    assert_eq!(common::backups_of(&h.join("progress.json")).len(), 1);
}

#[test]
fn hint_shows_the_hint_section() {
    let h = home("hint");
    let out = stdout(&quest(&h, &["hint", "mlx-path"]));
    // The hint section's first sentence, as the lesson gives it (wrapped for the terminal).
    let lesson = quest::course::Lesson::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons"),
        "mlx-path",
        quest::course::Lang::En,
    )
    .unwrap();
    let hint = lesson.sections.iter().find(|s| s.id == "hint").unwrap();
    let body = &lesson.body()[hint.range.clone()];
    let first = body.lines().skip(1).find(|l| !l.trim().is_empty()).unwrap();
    let first_words: String = first
        .split_whitespace()
        .take(6)
        .collect::<Vec<_>>()
        .join(" ");
    let printed = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        printed.contains(&first_words),
        "{first_words:?} not in {out}"
    );
}

#[test]
fn completions_are_printed() {
    let h = home("completions");
    let out = quest(&h, &["completions", "bash"]);
    assert!(out.status.success() && stdout(&out).contains("quest"));
}

#[test]
fn version_is_printed() {
    let h = home("version");
    assert!(stdout(&quest(&h, &["--version"])).starts_with("quest "));
}

/// `quest hint` gives one level more each time, every level before it above, and keeps
/// how far the learner read in the progress file; past the last it says there are no more.
#[test]
fn hint_shows_one_level_more_each_time_and_remembers_it() {
    let h = home("hint-levels");
    let lesson = quest::course::Lesson::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons"),
        "rope",
        quest::course::Lang::En,
    )
    .unwrap();
    let hints = lesson.hints().unwrap();
    let title = |n: usize| format!("Hint {n} of 3: {}", hints.levels[n - 1].title);

    let first = stdout(&quest(&h, &["hint", "rope"]));
    assert!(first.contains(&title(1)), "{first}");
    assert!(!first.contains(&title(2)), "level 2 not yet: {first}");
    assert!(first.contains("quest hint rope` again"), "{first}");
    assert_eq!(common::progress(&h).lesson("rope").unwrap().hint_level, 1);

    let second = stdout(&quest(&h, &["hint", "rope"]));
    assert!(
        second.contains(&title(1)) && second.contains(&title(2)),
        "{second}"
    );
    assert!(!second.contains(&title(3)), "level 3 not yet: {second}");
    assert_eq!(common::progress(&h).lesson("rope").unwrap().hint_level, 2);

    let third = stdout(&quest(&h, &["hint", "rope"]));
    assert!(
        third.contains(&title(3)) && third.contains("the last hint"),
        "{third}"
    );
    let past = stdout(&quest(&h, &["hint", "rope"]));
    assert!(
        past.contains("No more hints") && past.contains("solutions/rope/rope.rs"),
        "{past}"
    );
    // One level alone, asked for: the level reached stays.
    let one = stdout(&quest(&h, &["hint", "rope", "--level", "1"]));
    assert!(one.contains(&title(1)) && !one.contains(&title(2)), "{one}");
    assert_eq!(common::progress(&h).lesson("rope").unwrap().hint_level, 3);
    let out = quest(&h, &["hint", "rope", "--level", "4"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("1 to 3"), "{}", stderr(&out));
}

/// A schema-1 progress file with mlx-path completed (as quest 0.1 wrote it): read as
/// it is, migrated to the current schema on the first write with the original kept beside it,
/// and nothing earned is lost.
#[test]
fn a_schema_1_file_with_a_finished_lesson_is_migrated_keeping_everything() {
    let h = home("schema1");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/progress/schema1-complete.json");
    let original = std::fs::read(&src).unwrap();
    std::fs::write(h.join("progress.json"), &original).unwrap();

    let before = stdout(&quest(&h, &["status"]));
    assert!(before.contains("210"), "all 210 XP: {before}");
    assert!(
        stdout(&quest(&h, &["list"])).contains("[완료]"),
        "still done, still in Korean"
    );

    // The first write: choosing a language.
    assert!(quest(&h, &["--lang", "en", "list"]).status.success());
    let migrated = std::fs::read_to_string(h.join("progress.json")).unwrap();
    let state = quest::progress::parse(migrated.as_bytes()).unwrap();
    assert!(
        migrated.contains(&format!("\"schema\": {}", quest::progress::SCHEMA)),
        "{migrated}"
    );
    assert_eq!(state.total_xp(), 210);
    let record = state.lesson("mlx-path").unwrap();
    assert!(record.is_done());
    assert_eq!(record.runs.len(), 2);
    assert_eq!(record.runs[1].metrics["library_decode_tok_s"], 7.6);
    let card = record.card.as_ref().unwrap();
    assert_eq!(card.numbers["before"], 7.5);
    assert_eq!(card.answers["term"], "fixed");
    let backups = common::backups_of(&h.join("progress.json"));
    assert_eq!(backups.len(), 1, "one backup of the schema-1 file");
    assert_eq!(std::fs::read(&backups[0]).unwrap(), original);
    assert!(stdout(&quest(&h, &["status"])).contains("210"));
}

/// A schema-2 file (before quiz answers were recorded, and before "faster than the
/// library" was judged on the library's kernels), with mlx-path completed on a GPU and
/// that achievement earned there by quest's kernels: migrated on the first write, the
/// original kept, and every award kept, that one too.
#[test]
fn a_schema_2_file_keeps_every_award_through_the_migration() {
    let h = home("schema2");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/progress/schema2-complete.json");
    let original = std::fs::read(&src).unwrap();
    std::fs::write(h.join("progress.json"), &original).unwrap();
    let before = quest::progress::parse(&original).unwrap();
    assert_eq!(before.total_xp(), 290);
    assert!(stdout(&quest(&h, &["status"])).contains("290"));

    // The first write: choosing a language.
    assert!(quest(&h, &["--lang", "ko", "list"]).status.success());
    let migrated = std::fs::read_to_string(h.join("progress.json")).unwrap();
    assert!(
        migrated.contains(&format!("\"schema\": {}", quest::progress::SCHEMA)),
        "{migrated}"
    );
    let state = quest::progress::parse(migrated.as_bytes()).unwrap();
    assert_eq!(state.awards, before.awards, "every award, as it was");
    let record = state.lesson("mlx-path").unwrap();
    assert!(record.is_done());
    assert_eq!(record.card, before.lesson("mlx-path").unwrap().card);
    // The CUDA run claims no rate on the library's kernels: quest's may have made it.
    assert!(!record.runs[1]
        .metrics
        .contains_key(quest::progress::SAME_KERNELS_DECODE_TOK_S));
    let backups = common::backups_of(&h.join("progress.json"));
    assert_eq!(backups.len(), 1, "one backup of the schema-2 file");
    assert_eq!(std::fs::read(&backups[0]).unwrap(), original);
    assert!(stdout(&quest(&h, &["status"])).contains("290"));
}

/// `quest qmv` compares two CUDA kernels: with nothing to compare it says what to name (on
/// any machine, before looking at it); on any other backend it says it needs CUDA.
#[test]
fn kernel_and_peer_comparisons_refuse_what_they_cannot_compare() {
    let h = home("qmv-cpu");
    let cases: [(&[&str], &str); 6] = [
        (&["qmv", "--shapes", ""], "nothing to compare"),
        // `all` or names of `quest fit`'s shapes, checked before anything runs.
        (&["qmv", "--shapes", "all,GPT-5"], "unknown shape `all`"),
        (&["fit", "--shapes", "GPT-5"], "unknown shape `GPT-5`"),
        (
            &["qmv", "--kernel", "rope", "--shapes", "SmolLM2-135M"],
            "unknown kernel",
        ),
        (
            &["qmv", "--shapes", "SmolLM2-135M"],
            "compares CUDA kernels",
        ),
        // Before any peer venv is made.
        (&["fit", "--peer", "--bits", "4,8"], "leave out --bits"),
    ];
    for (args, says) in cases {
        let out = quest(&h, args);
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// A mistyped `QUEST_GRAPH_COMMIT` stops quest at once, naming the variable and its
/// choices, on any build (a CPU build reads it too, and sets nothing).
#[test]
fn a_mistyped_graph_commit_choice_is_named() {
    let h = home("graph-commit");
    let list = |choice: &str| {
        quest_command()
            .args(["list"])
            .env("QUEST_HOME", &h)
            .env("QUEST_GRAPH_COMMIT", choice)
            .output()
            .unwrap()
    };
    let out = list("once");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("QUEST_GRAPH_COMMIT=once") && err.contains("use step or mlx"),
        "{err}"
    );
    let ok = list("mlx");
    assert!(ok.status.success(), "{}", stderr(&ok));
}
