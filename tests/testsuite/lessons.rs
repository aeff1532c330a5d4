//! Checks on the real course data: every lesson loads in every language, both
//! languages show the same code, every UI string the CLI asks for exists, and the
//! author's check (`quest dev check`) passes — none of it reads the learner's
//! exercises, which may be edited, solved or broken.

use std::path::{Path, PathBuf};

use quest::course::{Course, Lang, Lesson};

use crate::common::{home, quest_in};

fn lessons_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")
}

#[test]
fn every_lesson_loads_in_every_language() {
    let course = Course::load(&lessons_dir()).unwrap();
    for id in course.lesson_ids() {
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap_or_else(|e| panic!("{e:#}"));
            assert!(lesson.section("exercise").is_some());
            assert!(lesson.section("hint").is_some());
        }
    }
}

/// A lesson a learner reads in minutes, with a hint that teaches instead of handing the
/// answer over: every lesson's default text (what `quest run` shows, before the hint) and
/// hint, computed from the files against the course's targets (`quest dev words` prints
/// the same numbers).
#[test]
fn every_lesson_reads_in_minutes_and_its_hint_leaves_the_code_to_the_learner() {
    use quest::course::readability::{self, TARGETS};
    let course = Course::load(&lessons_dir()).unwrap();
    let mut missed = Vec::new();
    for id in course.lesson_ids() {
        let lesson = course.lesson(id, Lang::En).unwrap();
        let code = readability::lesson_code(&lesson).unwrap();
        let found = readability::measure(
            &lesson,
            code.as_ref().map(|(s, e)| (s.as_str(), e.as_str())),
            &TARGETS,
        );
        missed.extend(found.problems.iter().map(|p| format!("{id}: {p}")));
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// The whole author's check: every starting code and solution built, and run where the
/// lesson judges by numbers. Most of ten minutes on two cores, so part of the course
/// walk that `.ci/run` runs; what it proves for one lesson is proven in the plain run by
/// the test below and by each track's default walk.
#[test]
#[ignore = "the course walk: `.ci/run` runs it (cargo test -- --include-ignored)"]
fn the_authors_check_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = quest_in(root, &home("dev-check"), &["dev", "check"]);
    let (stdout, stderr) = crate::common::text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("the course holds together"), "{stdout}");
}

/// A figure no result file holds fails the author's check: the host time per layer that
/// mlx-path once stated with nothing to trace it to, put back in a copy of the course.
#[test]
fn an_untraced_figure_fails_the_authors_check() {
    let root = crate::common::course_copy("dev-figures");
    let home = home("dev-figures");
    let out = quest_in(&root, &home, &["dev", "figures"]);
    assert!(out.status.success(), "{:?}", crate::common::text(&out));
    let lesson = root.join("lessons/mlx-path/en.md");
    let text = std::fs::read_to_string(&lesson).unwrap();
    let traced = "That host work comes once per token and grows with the number of layers.";
    assert!(
        text.contains(traced),
        "mlx-path's sentence changed; update this test"
    );
    std::fs::write(
        &lesson,
        text.replace(
            traced,
            "That host work comes once per token and grows with the number of layers: \
             measured on an NVIDIA H200, about 113.4 µs per layer.",
        ),
    )
    .unwrap();
    let out = quest_in(&root, &home, &["dev", "figures"]);
    let (stdout, _) = crate::common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("mlx-path/en.md") && stdout.contains("`113.4 µs`"),
        "{stdout}"
    );
}

/// Every lesson's code as data, with no process: its starting code breaks one of its
/// rules (unless its numbers judge it), its solution keeps them all, and neither starts
/// with an inner attribute. The same function `quest dev check` runs before it builds.
#[test]
fn every_lessons_code_breaks_or_keeps_its_rules_as_it_should() {
    let course = Course::load(&lessons_dir()).unwrap();
    let mut checked = 0;
    for id in course.lesson_ids() {
        let lesson = course.lesson(id, Lang::En).unwrap();
        let Ok(starting) = lesson.starting_code() else {
            continue;
        };
        let solution_path = lesson.solution_path().unwrap();
        let solution = std::fs::read_to_string(&solution_path).unwrap();
        let problems =
            quest::judge::lesson_code(&lesson, &starting, Some((&solution_path, &solution)));
        assert!(problems.is_empty(), "{problems:#?}");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} lessons have an exercise");
}

/// A rule that the starting code keeps (the lesson asks nothing) and a solution that
/// breaks one are both named: the check above can fail.
#[test]
fn a_lesson_whose_rules_ask_nothing_is_named() {
    let course = Course::load(&lessons_dir()).unwrap();
    let lesson = course.lesson("mlx-path", Lang::En).unwrap();
    let starting = lesson.starting_code().unwrap();
    let solution_path = lesson.solution_path().unwrap();
    let solution = std::fs::read_to_string(&solution_path).unwrap();
    // The solution as the starting code: it keeps every rule.
    let problems = quest::judge::lesson_code(&lesson, &solution, Some((&solution_path, &solution)));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the starting code already keeps every rule"))
            && problems
                .iter()
                .any(|p| p.contains("the solution is the starting code")),
        "{problems:#?}"
    );
    // The starting code as the solution: it breaks the lesson's rule.
    let problems = quest::judge::lesson_code(&lesson, &starting, Some((&solution_path, &starting)));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the solution breaks rule")),
        "{problems:#?}"
    );
}

/// A solution that keeps every rule of its lesson but no longer compiles fails the
/// author's check, by name: rules read the syntax tree, only a build says it compiles.
/// `dev check mlx-path` checks that lesson alone (and a lesson it does not know is an
/// error that names the lessons).
#[test]
fn the_authors_check_builds_every_solution() {
    let root = crate::common::course_copy("dev-check-build");
    let home = home("dev-check-build");
    // The exercises' manifest, which the check also compares with the course.
    let out = quest_in(&root, &home, &["dev", "update"]);
    assert!(out.status.success(), "{:?}", crate::common::text(&out));
    let solution = root.join("solutions/mlx-path/decode_loop.rs");
    let source = std::fs::read_to_string(&solution).unwrap();
    let line = "    let run = Exercise::from_env()?;\n";
    assert!(
        source.contains(line),
        "the solution changed; update this test"
    );
    let broken = source.replace(line, &format!("{line}    let _: u32 = \"not a number\";\n"));
    std::fs::write(&solution, broken).unwrap();

    let out = quest_in(&root, &home, &["dev", "check", "mlx-pat"]);
    let (stdout, stderr) = crate::common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("no lesson `mlx-pat`") && stderr.contains("mlx-path"),
        "{stderr}"
    );

    let out = quest_in(&root, &home, &["dev", "check", "mlx-path"]);
    let (stdout, stderr) = crate::common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let expected = format!("✗ mlx-path: the {} does not build", solution.display());
    assert!(stdout.contains(&expected), "no `{expected}` in:\n{stdout}");
    // Nothing else is wrong with the copy: the build alone found it.
    let problems: Vec<&str> = stdout.lines().filter(|l| l.starts_with('✗')).collect();
    assert_eq!(problems.len(), 1, "{stdout}");
    assert!(
        stderr.contains("mismatched types"),
        "cargo's own error: {stderr}"
    );
}

#[test]
fn both_languages_have_the_same_sections_and_code() {
    let course = Course::load(&lessons_dir()).unwrap();
    for id in course.lesson_ids() {
        let source = course.lesson(id, Lang::SOURCE).unwrap();
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap();
            let ids = |l: &Lesson| l.sections.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&lesson), ids(&source), "{id} {lang}");
            let blocks = |l: &Lesson| {
                l.sections
                    .iter()
                    .flat_map(|s| {
                        s.code_blocks
                            .iter()
                            .filter(|b| b.lang != "text")
                            .map(|b| b.code.clone())
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                blocks(&lesson),
                blocks(&source),
                "{id} {lang}: commands and code are not translated"
            );
            let levels = |l: &Lesson| l.hints().map(|h| h.levels.len());
            assert_eq!(
                levels(&lesson),
                levels(&source),
                "{id} {lang}: the same hint levels"
            );
            let keys = |l: &Lesson| l.meta.messages.keys().cloned().collect::<Vec<_>>();
            assert_eq!(
                keys(&lesson),
                keys(&source),
                "{id} {lang}: the same messages"
            );
        }
    }
}

/// Where the learner writes a piece of the model, `quest hint` has three levels to give:
/// the idea, the ops with their shapes, a sketch close to the answer; each titled.
#[test]
fn the_inside_tracks_hints_come_in_three_levels() {
    let course = Course::load(&lessons_dir()).unwrap();
    let inside = course.tracks.iter().find(|t| t.id == "inside").unwrap();
    assert!(inside.lessons.len() >= 8, "{:?}", inside.lessons);
    for id in &inside.lessons {
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap();
            let hints = lesson.hints().unwrap();
            assert_eq!(hints.levels.len(), 3, "{id} {lang}");
            for level in &hints.levels {
                assert!(
                    !level.title.is_empty(),
                    "{id} {lang}: a level without a title"
                );
                assert!(
                    !level.markdown.trim().is_empty(),
                    "{id} {lang}: {}",
                    level.title
                );
            }
        }
    }
}

/// Every `ui("key")` / `ui_with("key", …)` in the CLI's source names a string of the
/// course file, in every language.
#[test]
fn every_ui_string_the_cli_uses_exists() {
    let course = Course::load(&lessons_dir()).unwrap();
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut used = Vec::new();
    for entry in std::fs::read_dir(cli).unwrap() {
        let source = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for call in ["ui(\"", "ui_with(\"", "ui_with(\n                \""] {
            for (at, _) in source.match_indices(call) {
                let rest = &source[at + call.len()..];
                used.push(rest[..rest.find('"').unwrap()].to_owned());
            }
        }
    }
    used.extend(quest::course::Metric::ALL.map(|m| format!("metric_{}", m.key())));
    assert!(used.len() > 40, "found only {used:?}");
    for key in used {
        let text = course
            .ui
            .get(&key)
            .unwrap_or_else(|| panic!("lessons/quest.yaml has no ui string `{key}`"));
        for lang in Lang::ALL {
            assert!(!text.get(lang).is_empty(), "`{key}` is empty in {lang}");
        }
    }
    assert_eq!(
        course.ui_with(
            "unknown_lesson",
            Lang::En,
            &[("id", "x"), ("list", "mlx-path")]
        ),
        "Unknown lesson x. Lessons: mlx-path"
    );
}

#[test]
fn the_course_has_levels_and_achievements() {
    let course = Course::load(&lessons_dir()).unwrap();
    assert!(course.levels.as_sequence().is_some_and(|l| l.len() >= 6));
    assert!(course
        .achievements
        .as_sequence()
        .is_some_and(|l| l.len() >= 6));
}

/// The lesson's rules on `source`: the rule ids that fired and the calls they name.
fn findings(id: &str, source: &str) -> Vec<(String, String)> {
    let course = Course::load(&lessons_dir()).unwrap();
    let lesson = course.lesson(id, Lang::En).unwrap();
    quest::judge::rules::check(source, &lesson.spec.rules)
        .into_iter()
        .map(|f| (f.rule, f.call))
        .collect()
}

fn solution(id: &str) -> String {
    let course = Course::load(&lessons_dir()).unwrap();
    let lesson = course.lesson(id, Lang::En).unwrap();
    std::fs::read_to_string(lesson.solution_path().unwrap()).unwrap()
}

/// The physics lessons ask for the arithmetic: quest's public functions that do it are
/// refused under any name they are imported by, not only the `reference_*` ones.
#[test]
fn the_physics_lessons_refuse_quests_own_arithmetic_under_any_name() {
    let own = |call: &str| vec![("own-arithmetic".to_owned(), call.to_owned())];
    let ceiling = solution("decode-ceiling");
    assert_eq!(findings("decode-ceiling", &ceiling), []);
    let fit = "let (fixed_ms, ms_per_byte) = fit_line(&points);";
    assert!(ceiling.contains(fit));
    // The line fitted by quest's statistics, renamed on import.
    let renamed = format!(
        "use quest::stats::least_squares as my_fit;\n{}",
        ceiling.replace(fit, "let (fixed_ms, ms_per_byte) = my_fit(&points);")
    );
    assert_eq!(findings("decode-ceiling", &renamed), own("least_squares"));
    // Through its module, grouped with another import.
    let grouped = format!(
        "use quest::{{stats::{{self, median}}}};\n{}",
        ceiling.replace(
            fit,
            "let (fixed_ms, ms_per_byte) = stats::least_squares(&points);"
        )
    );
    assert_eq!(findings("decode-ceiling", &grouped), own("least_squares"));
    // quest's whole computation, bound to a local.
    let whole = ceiling.replace(
        fit,
        "let f = physics::arithmetic::compute;\n    let _ = f(quest::course::spec::Computation::TimePerToken, &serde_json::Value::Null);\n    let (fixed_ms, ms_per_byte) = fit_line(&points);",
    );
    // Found where it is bound and where it is called.
    assert_eq!(
        findings("decode-ceiling", &whole),
        [own("compute"), own("compute")].concat()
    );

    let slope = solution("context-slope");
    assert_eq!(findings("context-slope", &slope), []);
    let computed = slope.replace(
        "    run.report_values(&inputs, &values, &text)",
        "    use quest::physics::arithmetic::compute as quests;\n    let _ = quests(quest::course::spec::Computation::ContextSlope, &serde_json::Value::Null);\n    run.report_values(&inputs, &values, &text)",
    );
    assert_eq!(findings("context-slope", &computed), own("compute"));
    let theil_sen = slope.replace(
        "    run.report_values(&inputs, &values, &text)",
        "    let _ = quest::stats::slope(&[1.0, 2.0, 3.0]);\n    run.report_values(&inputs, &values, &text)",
    );
    assert_eq!(findings("context-slope", &theil_sen), own("slope"));
}
