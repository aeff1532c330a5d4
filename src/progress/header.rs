//! The numbers the course's header shows — level and its name, XP, the bar to the next
//! level, lessons done, achievements earned, percent complete — computed once, for
//! `quest status` (text and `--json`), `quest list --json` and `quest serve`'s pages.

use serde::Serialize;

use super::{Achievement, LessonRecord, LevelCurve, State};
use crate::course::{Course, Lang};
use crate::device::Backend;

/// The header of the source page, as numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Header {
    /// The course counts levels from 0.
    pub level: usize,
    pub level_name: String,
    pub xp: u64,
    /// XP earned since this level started.
    pub xp_into_level: u64,
    /// XP from this level's start to the next one's; `None` at the top level.
    pub xp_for_next_level: Option<u64>,
    /// XP still missing for the next level; `None` at the top level.
    pub xp_to_go: Option<u64>,
    /// The next level's name; `None` at the top level.
    pub next_level_name: Option<String>,
    pub lessons_done: usize,
    pub lessons_total: usize,
    /// The lessons not done whose exercise does not run on this machine (`runs_on`): what
    /// is left of the course here is the rest (custom-kernel on a machine without a GPU).
    pub lessons_elsewhere: Vec<String>,
    pub achievements_earned: usize,
    pub achievements_total: usize,
    /// Lessons done of the total, rounded down.
    pub percent_complete: usize,
    /// How far through the level, 0.0 to 1.0 (1.0 at the top): the bar.
    pub bar_fraction: f64,
}

impl Header {
    pub fn new(
        course: &Course,
        levels: &LevelCurve,
        achievements: &[Achievement],
        state: &State,
        lang: Lang,
        here: Backend,
    ) -> Header {
        let xp = state.total_xp();
        let level = levels.level_for(xp);
        let next = levels.next_level(xp);
        let lessons_total = course.lesson_ids().count();
        let done = |id: &str| state.lesson(id).is_some_and(LessonRecord::is_done);
        let lessons_done = course.lesson_ids().filter(|id| done(id)).count();
        // A lesson that does not load says so on its own page; here it counts as runnable.
        let lessons_elsewhere = course
            .lesson_ids()
            .filter(|id| !done(id))
            .filter(|id| {
                course
                    .spec(id)
                    .is_ok_and(|spec| !spec.runs_on_backend(here))
            })
            .map(str::to_owned)
            .collect();
        let achievements_earned = achievements
            .iter()
            .filter(|a| state.has_award(&a.award_key()))
            .count();
        Header {
            level: levels.number_for(xp) - 1,
            level_name: level.name.get(lang).to_owned(),
            xp,
            xp_into_level: xp - level.xp,
            xp_for_next_level: next.map(|next| next.xp - level.xp),
            xp_to_go: levels.xp_to_next(xp),
            next_level_name: next.map(|next| next.name.get(lang).to_owned()),
            lessons_done,
            lessons_total,
            lessons_elsewhere,
            achievements_earned,
            achievements_total: achievements.len(),
            percent_complete: (100 * lessons_done).checked_div(lessons_total).unwrap_or(0),
            bar_fraction: levels.progress_fraction(xp),
        }
    }
}

/// Where a learner is with one lesson.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonStatus {
    NotStarted,
    InProgress,
    Done,
}

impl LessonStatus {
    pub fn of(record: Option<&LessonRecord>) -> LessonStatus {
        match record {
            Some(r) if r.is_done() => LessonStatus::Done,
            Some(r) if !r.runs.is_empty() || !r.submissions.is_empty() => LessonStatus::InProgress,
            _ => LessonStatus::NotStarted,
        }
    }

    /// Its key in the course's `ui:` strings (and in `--json`).
    pub fn key(self) -> &'static str {
        match self {
            LessonStatus::NotStarted => "not_started",
            LessonStatus::InProgress => "in_progress",
            LessonStatus::Done => "done",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::{load_achievements, Timestamp};
    use std::path::Path;

    fn course() -> Course {
        Course::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")).unwrap()
    }

    #[test]
    fn a_fresh_learner_is_at_level_zero_with_nothing_done() {
        let course = course();
        let levels = LevelCurve::from_course(&course.levels).unwrap();
        let achievements = load_achievements(&course.achievements, &course.tracks).unwrap();
        let header = Header::new(
            &course,
            &levels,
            &achievements,
            &State::default(),
            Lang::Ko,
            Backend::Cpu,
        );
        assert_eq!(header.level, 0);
        assert_eq!(header.level_name, "스펙 시트 훑는 사람");
        assert_eq!((header.xp, header.xp_into_level), (0, 0));
        assert_eq!(header.xp_for_next_level, Some(100));
        assert_eq!(header.xp_to_go, Some(100));
        assert_eq!(header.lessons_done, 0);
        assert_eq!(header.lessons_total, course.lesson_ids().count());
        assert_eq!(header.achievements_total, achievements.len());
        assert_eq!(header.percent_complete, 0);
    }

    #[test]
    fn xp_moves_the_level_and_the_bar() {
        let course = course();
        let levels = LevelCurve::from_course(&course.levels).unwrap();
        let mut state = State::default();
        state.award("achievement:first-token", 10, Timestamp::now());
        state.award("lesson:x:complete", 140, Timestamp::now());
        let header = Header::new(&course, &levels, &[], &state, Lang::En, Backend::Cuda);
        assert_eq!((header.level, header.xp), (1, 150));
        assert_eq!(header.level_name, "Token counter");
        assert_eq!(header.xp_into_level, 50);
        assert_eq!(header.xp_for_next_level, Some(150));
        assert_eq!(header.xp_to_go, Some(100));
        assert!((header.bar_fraction - 50.0 / 150.0).abs() < 1e-9);
    }

    #[test]
    fn a_lesson_whose_exercise_cannot_run_here_is_named_until_done() {
        let course = course();
        let levels = LevelCurve::from_course(&course.levels).unwrap();
        let gpu_only: Vec<String> = course
            .lesson_ids()
            .filter(|id| !course.spec(id).unwrap().runs_on_backend(Backend::Cpu))
            .map(str::to_owned)
            .collect();
        assert!(
            !gpu_only.is_empty(),
            "the course has a lesson that runs on a GPU only"
        );
        let mut state = State::default();
        let on = |state: &State, here| {
            Header::new(&course, &levels, &[], state, Lang::En, here).lessons_elsewhere
        };
        assert_eq!(on(&state, Backend::Cpu), gpu_only);
        assert!(on(&state, Backend::Cuda).is_empty());
        // Done on a GPU, it is no longer left for another machine, wherever quest runs next.
        for id in &gpu_only {
            state
                .lesson_mut(id)
                .submissions
                .push(crate::progress::Submission {
                    at: Timestamp::now(),
                    code: None,
                    passed: true,
                    checks_passed: true,
                    lang: Lang::En,
                    measurement: None,
                });
        }
        assert!(on(&state, Backend::Cpu).is_empty());
    }

    #[test]
    fn statuses_follow_the_record() {
        assert_eq!(LessonStatus::of(None), LessonStatus::NotStarted);
        let record = LessonRecord::default();
        assert_eq!(LessonStatus::of(Some(&record)), LessonStatus::NotStarted);
    }
}
