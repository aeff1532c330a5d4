//! The journey's new lessons on the real model, each from its starting code to a
//! completed card: refused by its own rules (snapshot of what the learner reads),
//! passed with its solution, the card's numbers and quiz answers accepted. Every
//! edit goes to a copy of the course, never to the learner's exercises.

use crate::common::{card_numbers, course_copy, home, quest_in, text};

/// Submits the starting code (refused by the rules: returns what was printed), then
/// the solution (passes), then the card with `answers`; checks the lesson completes.
fn journey(id: &str, answers: &[&str]) -> String {
    let root = course_copy(id);
    let home = home(&format!("journey-{id}"));
    let quest = |args: &[&str]| quest_in(&root, &home, args);

    let out = quest(&["submit", id]);
    let (refused, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{refused}{stderr}");
    assert!(stderr.contains("fix those lines"), "{stderr}");

    let solution = root.join(format!("solutions/{id}/decode_loop.rs"));
    std::fs::copy(
        &solution,
        root.join(format!("exercises/{id}/decode_loop.rs")),
    )
    .unwrap();
    let out = quest(&["submit", id, "--rounds", "1"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("greedy tokens as the reference"),
        "{stdout}"
    );
    let (before, after, shows) = card_numbers(&stdout, id);

    let mut args = vec![
        "card", id, "--before", &before, "--after", &after, "--answer", shows,
    ];
    for answer in answers {
        args.extend(["--answer", answer]);
    }
    let out = quest(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("Lesson {id} complete: +100 XP")),
        "{stdout}"
    );
    let progress = std::fs::read_to_string(home.join("progress.json")).unwrap();
    assert!(
        progress.contains(&format!("lesson:{id}:complete")),
        "{progress}"
    );
    refused
}

#[test]
fn kv_cache_from_starting_code_to_card() {
    let refused = journey("kv-cache", &["trade=memory", "grows=positions"]);
    insta::assert_snapshot!("kv_cache_refused", refused);
}

#[test]
fn lazy_prefill_from_starting_code_to_card() {
    let refused = journey("lazy-prefill", &["skipped=head", "saved=arithmetic"]);
    insta::assert_snapshot!("lazy_prefill_refused", refused);
}

#[test]
fn mapped_lazy_from_starting_code_to_card() {
    let refused = journey("mapped-lazy", &["paid-by=first-forward"]);
    insta::assert_snapshot!("mapped_lazy_refused", refused);
}
