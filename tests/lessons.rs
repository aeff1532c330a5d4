//! Checks on the real lesson data: every lesson loads in every language, its
//! code block matches its exercise file, and its translations are current.

use std::path::{Path, PathBuf};

use quest::course::{self, Course, Lang, TranslationStatus};

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
            assert!(
                lesson.exercise_path().exists(),
                "{}",
                lesson.exercise_path().display()
            );
        }
    }
}

/// Set QUEST_SYNC_LESSONS=1 to copy the exercise files into the lessons
/// instead of failing (then review the snapshot changes).
#[test]
fn lesson_code_matches_exercise() {
    let lessons = lessons_dir();
    let course = Course::load(&lessons).unwrap();
    let sync = std::env::var_os("QUEST_SYNC_LESSONS").is_some_and(|v| v == "1");
    for id in course.lesson_ids() {
        if sync {
            for path in course::sync_exercise_code(&lessons, id).unwrap() {
                eprintln!("synced {}", path.display());
            }
        }
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap();
            if let Err(error) = lesson.check_exercise_code() {
                panic!(
                    "{error:#}\n\nTo copy the exercise into the lesson: \
                     QUEST_SYNC_LESSONS=1 cargo test --test lessons lesson_code_matches_exercise"
                );
            }
        }
    }
}

#[test]
fn translations_are_up_to_date() {
    let course = Course::load(&lessons_dir()).unwrap();
    for id in course.lesson_ids() {
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap();
            if let TranslationStatus::Stale { recorded, current } =
                lesson.translation_status().unwrap()
            {
                panic!(
                    "{} is stale: it records source_hash {recorded}, but {}/{}.md now hashes to\n\
                     {current}\nUpdate the translation, then set `source_hash: {current}`.",
                    lesson.path.display(),
                    id,
                    Lang::SOURCE
                );
            }
        }
    }
}

#[test]
fn both_languages_have_the_same_sections_and_code() {
    let course = Course::load(&lessons_dir()).unwrap();
    for id in course.lesson_ids() {
        let source = course.lesson(id, Lang::SOURCE).unwrap();
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap();
            let ids =
                |l: &course::Lesson| l.sections.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&lesson), ids(&source), "{lang}");
            let blocks = |l: &course::Lesson| {
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
                "{lang}: commands and code are not translated"
            );
            let meta = (
                &lesson.meta.model,
                &lesson.meta.exercise,
                lesson.meta.minutes,
                lesson.meta.xp,
                &lesson.meta.tags,
            );
            let source_meta = (
                &source.meta.model,
                &source.meta.exercise,
                source.meta.minutes,
                source.meta.xp,
                &source.meta.tags,
            );
            assert_eq!(
                meta, source_meta,
                "{lang}: front matter facts match the source"
            );
        }
    }
}

#[test]
fn the_course_has_ui_strings_levels_and_achievements() {
    let course = Course::load(&lessons_dir()).unwrap();
    for key in [
        "unknown_lesson",
        "ttft",
        "decode",
        "tok_per_s",
        "building",
        "running_on",
        "hint",
        "done",
        "not_started",
        "lessons",
    ] {
        assert!(course.ui.contains_key(key), "missing ui key {key}");
    }
    assert_eq!(
        course.ui_with(
            "unknown_lesson",
            Lang::En,
            &[("id", "x"), ("list", "mlx-path")]
        ),
        "Unknown lesson x. Lessons: mlx-path"
    );
    assert!(course
        .levels
        .as_sequence()
        .is_some_and(|levels| levels.len() >= 6));
    assert!(course
        .achievements
        .as_sequence()
        .is_some_and(|list| list.len() >= 6));
}

/// `quest submit` measures the original hand loop from a pristine copy under solutions/,
/// since the learner edits the exercise: that copy must stay the lesson's code.
#[test]
fn the_pristine_hand_loop_is_the_lesson_code() {
    let course = Course::load(&lessons_dir()).unwrap();
    for id in course.lesson_ids() {
        let lesson = course.lesson(id, Lang::En).unwrap();
        let blocks = lesson.exercise_blocks();
        let block = blocks.first().expect("the lesson has an exercise block");
        let pristine = lessons_dir().join(format!("../solutions/{id}/hand_loop.rs"));
        let text = std::fs::read_to_string(&pristine).unwrap();
        assert!(
            text == block.code,
            "{} differs from the lesson's exercise code",
            pristine.display()
        );
    }
}
