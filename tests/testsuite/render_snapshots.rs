//! The mlx-path lesson as a learner sees it without colour, at 80 columns.
//! Review changes with `cargo insta review` (or INSTA_UPDATE=always).

use std::path::Path;

use quest::course::{Course, Lang};
use quest::render::{self, RenderOptions};

fn rendered(lang: Lang) -> String {
    let lessons = Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons");
    let course = Course::load(&lessons).expect("the course loads");
    let lesson = course.lesson("mlx-path", lang).expect("the lesson loads");
    let options = RenderOptions {
        width: 80,
        color: false,
        lang,
    };
    render::terminal(&lesson, &course, &options)
}

#[test]
fn mlx_path_en() {
    insta::assert_snapshot!("mlx_path_en", rendered(Lang::En));
}

#[test]
fn mlx_path_ko() {
    insta::assert_snapshot!("mlx_path_ko", rendered(Lang::Ko));
}

#[test]
fn no_line_is_wider_than_80_columns_outside_code() {
    for lang in Lang::ALL {
        let text = rendered(lang);
        for line in text.lines().filter(|line| !line.starts_with("    ")) {
            let width = unicode_width::UnicodeWidthStr::width(line);
            assert!(width <= 80, "{lang}: {width} columns: {line}");
        }
    }
}
