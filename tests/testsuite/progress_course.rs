//! The course's own `levels:` and `achievements:` load into the progress types.

use quest::course::Course;
use quest::progress::{load_achievements, LevelCurve};
use std::path::Path;

fn course() -> Course {
    Course::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")).unwrap()
}

#[test]
fn the_course_level_curve_loads() {
    let curve = LevelCurve::from_course(&course().levels).unwrap();
    assert_eq!(curve.levels()[0].xp, 0);
    assert_eq!(curve.number_for(0), 1);
}

#[test]
fn the_course_achievements_load_and_name_real_lessons() {
    let course = course();
    let achievements = load_achievements(&course.achievements, &course.tracks).unwrap();
    assert!(achievements.iter().any(|a| a.id == "first-token"));
}
