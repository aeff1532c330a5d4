//! The learner's progress as the CLI uses it: the store plus the course's levels and
//! achievements, recording runs and announcing what was earned.

use std::path::PathBuf;

use anyhow::{Context, Result};

use quest::course::{Lang, Lesson};
use quest::lab::Report;
use quest::progress::{
    award_earned, load_achievements, Achievement, CodeKind, CodeRef, LessonRecord, LevelCurve, Run,
    State, Store, Timestamp,
};

use super::Ctx;

/// The lesson's starting code and solution, as files: the submission's library finds them.
pub use quest::judge::{solution_path, starting_code_file};

pub struct Learner {
    pub store: Store,
    pub levels: LevelCurve,
    pub achievements: Vec<Achievement>,
}

impl Learner {
    pub fn open(ctx: &Ctx) -> Result<Self> {
        let course = &ctx.course;
        Ok(Self {
            store: Store::open_default()?,
            levels: LevelCurve::from_course(&course.levels)?,
            achievements: load_achievements(&course.achievements, &course.tracks)?,
        })
    }

    /// A copy of what the progress file holds for lesson `id` (empty before its first run).
    pub fn lesson(&self, id: &str) -> LessonRecord {
        self.store.state().lesson(id).cloned().unwrap_or_default()
    }

    /// Applies `change`, then awards whatever became true, and tells the learner.
    pub fn update<T>(
        &mut self,
        ctx: &Ctx,
        change: impl FnOnce(&mut State) -> Result<T>,
    ) -> Result<T> {
        let achievements = &self.achievements;
        let levels = &self.levels;
        let (value, earned, level_before, level_after) = self.store.update(|state| {
            let level_before = levels.number_for(state.total_xp());
            let value = change(state)?;
            let earned: Vec<(String, u32)> = award_earned(state, achievements, Timestamp::now())
                .into_iter()
                .map(|a| (a.name.get(ctx.lang).to_owned(), a.xp))
                .collect();
            Ok((
                value,
                earned,
                level_before,
                levels.number_for(state.total_xp()),
            ))
        })?;
        for (name, xp) in earned {
            println!(
                "★ {} (+{xp} XP)",
                ctx.ui_with("achievement_unlocked", &[("name", &name)])
            );
        }
        if level_after > level_before {
            let xp = self.store.state().total_xp();
            let name = self.levels.level_for(xp).name.get(ctx.lang);
            // The course counts levels from 0.
            let shown = level_after - 1;
            println!(
                "▲ {}",
                ctx.ui_with("level_up", &[("level", &format!("{shown} · {name}"))])
            );
        }
        Ok(value)
    }
}

/// The exercise file as it is now: its path, its bytes, and which code it is. Read it
/// before building, so a save during the run cannot mislabel what was measured.
pub fn current_exercise(lesson: &Lesson) -> Result<(PathBuf, Vec<u8>, CodeRef)> {
    let path = exercise_path(lesson)?;
    let source = std::fs::read(&path).with_context(|| {
        format!(
            "could not read your exercise {}; `quest reset {}` writes it as the lesson gives it",
            path.display(),
            lesson.meta.id
        )
    })?;
    let code = exercise_code(&source, &lesson.starting_code()?);
    Ok((path, source, code))
}

/// The learner's exercise file; a reading-only lesson has none.
pub fn exercise_path(lesson: &Lesson) -> Result<PathBuf> {
    lesson
        .exercise_path()
        .with_context(|| format!("lesson {} has no exercise", lesson.meta.id))
}

/// Which code a run of the exercise file measured: the lesson's starting code, or
/// the learner's edit of it.
pub fn exercise_code(source: &[u8], original: &str) -> CodeRef {
    let kind = if source == original.as_bytes() {
        CodeKind::Original
    } else {
        CodeKind::Exercise
    };
    CodeRef::of(kind, source)
}

pub fn run_record(report: &Report, code: CodeRef, lang: Lang) -> Run {
    Run {
        at: Timestamp::now(),
        code,
        backend: report.backend.recorded_name(),
        tokens_generated: report.generated_tokens as u32,
        prompt_tokens: report.prompt_tokens as u32,
        lang,
        metrics: report.metrics(),
        weights: (!report.weights.is_empty()).then(|| report.weights.clone()),
    }
}
