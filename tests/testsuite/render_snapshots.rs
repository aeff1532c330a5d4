//! The mlx-path lesson as a learner's first `quest run` shows it, without colour, at 80
//! columns (never its hint).
//! Review changes with `cargo insta review` (or INSTA_UPDATE=always).

use std::path::Path;

use quest::course::{Course, Lang};
use quest::render::{self, RenderOptions};

fn rendered(lang: Lang, show: render::Show) -> String {
    let lessons = Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons");
    let course = Course::load(&lessons).expect("the course loads");
    let lesson = course.lesson("mlx-path", lang).expect("the lesson loads");
    let options = RenderOptions {
        width: 80,
        color: false,
        lang,
    };
    render::terminal(&lesson, &course, show, &options)
}

#[test]
fn mlx_path_en() {
    insta::assert_snapshot!("mlx_path_en", rendered(Lang::En, render::Show::Lesson));
}

#[test]
fn mlx_path_ko() {
    insta::assert_snapshot!("mlx_path_ko", rendered(Lang::Ko, render::Show::Lesson));
}

#[test]
fn no_line_is_wider_than_80_columns_outside_code() {
    let shows = [
        render::Show::Lesson,
        render::Show::WithAppendix,
        render::Show::Tasks,
    ];
    for (lang, show) in Lang::ALL.into_iter().flat_map(|l| shows.map(|s| (l, s))) {
        let text = rendered(lang, show);
        for line in text.lines().filter(|line| !line.starts_with("    ")) {
            let width = unicode_width::UnicodeWidthStr::width(line);
            assert!(width <= 80, "{lang}: {width} columns: {line}");
        }
    }
}

/// No way `quest run` shows a lesson prints a level of its hint: for every lesson, in
/// both languages, the longest line each hint level renders to appears in none of them.
#[test]
fn no_run_of_any_lesson_prints_its_hint() {
    let lessons = Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons");
    let course = Course::load(&lessons).expect("the course loads");
    let options = |lang| RenderOptions {
        width: 80,
        color: false,
        lang,
    };
    for id in course.lesson_ids() {
        for lang in Lang::ALL {
            let lesson = course.lesson(id, lang).unwrap();
            let shown: Vec<String> = [
                render::Show::Lesson,
                render::Show::WithAppendix,
                render::Show::Tasks,
            ]
            .into_iter()
            .map(|show| render::terminal(&lesson, &course, show, &options(lang)))
            .collect();
            for level in lesson.hints().expect("every lesson has a hint").levels {
                let text = render::markdown(level.markdown, &options(lang));
                let Some(longest) = text.lines().map(str::trim).max_by_key(|l| l.len()) else {
                    continue;
                };
                if longest.len() < 20 {
                    continue;
                }
                for output in &shown {
                    assert!(
                        !output.contains(longest),
                        "{id} ({lang}): a run shows the hint's \"{}\": {longest}",
                        level.title
                    );
                }
            }
        }
    }
}
