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
