//! The lesson shows its exercise in a ```` ```rust exercise=NAME ```` block, and that
//! block *is* the starting exercise: `quest reset` writes it to the exercise file, and
//! the pristine code quest measures as "before" is derived from it. The file under
//! `exercises/` is the learner's, whatever they made of it.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::sections::EXERCISE_ATTR;
use super::{CodeBlock, Lesson};

impl Lesson {
    /// The code blocks that show the exercise, in order.
    pub fn exercise_blocks(&self) -> Vec<&CodeBlock> {
        self.sections
            .iter()
            .flat_map(|section| &section.code_blocks)
            .filter(|block| block.attr(EXERCISE_ATTR).is_some())
            .collect()
    }

    /// The exercise exactly as the lesson gives it: its first exercise block.
    pub fn starting_code(&self) -> Result<String> {
        self.exercise_blocks()
            .first()
            .map(|block| block.code.clone())
            .with_context(|| format!("{} has no exercise code block", self.path.display()))
    }

    /// The learner's exercise file, resolved against the project root.
    pub fn exercise_path(&self) -> Option<PathBuf> {
        let exercise = self.spec.exercise.as_ref()?;
        Some(self.project_root().join(exercise))
    }

    /// The reference solution, resolved against the project root.
    pub fn solution_path(&self) -> Option<PathBuf> {
        let solution = self.spec.solution.as_ref()?;
        Some(self.project_root().join(solution))
    }

    /// Fails unless every exercise block names the exercise file and all of them show
    /// the same code (a lesson may show it twice, never two versions of it).
    pub fn check_exercise_blocks(&self) -> Result<()> {
        let Some(exercise) = &self.spec.exercise else {
            return Ok(());
        };
        let stem = exercise
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default();
        let blocks = self.exercise_blocks();
        for block in &blocks {
            let name = block.attr(EXERCISE_ATTR).unwrap_or_default();
            if name != stem {
                bail!(
                    "{}:{}: the code block says `{EXERCISE_ATTR}={name}`, but lesson.yaml's exercise is {}",
                    self.path.display(),
                    block.line,
                    exercise.display()
                );
            }
            if let Some(difference) = first_line_difference(&block.code, &blocks[0].code) {
                bail!(
                    "{}:{}: this exercise block differs from the first one (line {}):\n  here:  {}\n  first: {}",
                    self.path.display(),
                    block.line + 1 + difference.index,
                    blocks[0].line + 1 + difference.index,
                    difference.left,
                    difference.right
                );
            }
        }
        Ok(())
    }
}

/// The first line where two texts differ, each shown without its newline.
#[derive(Debug)]
pub struct LineDifference {
    /// 0-based line index.
    pub index: usize,
    pub left: String,
    pub right: String,
}

pub fn first_line_difference(left: &str, right: &str) -> Option<LineDifference> {
    let mut left_lines = left.split_inclusive('\n');
    let mut right_lines = right.split_inclusive('\n');
    for index in 0.. {
        match (left_lines.next(), right_lines.next()) {
            (None, None) => return None,
            (a, b) if a == b => continue,
            (a, b) => {
                return Some(LineDifference {
                    index,
                    left: show_line(a, b),
                    right: show_line(b, a),
                })
            }
        }
    }
    unreachable!("the loop only ends by returning")
}

fn show_line(line: Option<&str>, other: Option<&str>) -> String {
    match line {
        None => "(no more lines)".to_string(),
        // Same text, different ending: only the final newline differs.
        Some(text)
            if other.map(|o| o.trim_end_matches('\n')) == Some(text.trim_end_matches('\n')) =>
        {
            let ending = if text.ends_with('\n') {
                "with"
            } else {
                "without"
            };
            format!("{} ({ending} a final newline)", text.trim_end_matches('\n'))
        }
        Some(text) => text.trim_end_matches('\n').to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::tests::fixture_lessons;
    use crate::course::Lang;

    #[test]
    fn a_lesson_gives_its_starting_code() {
        let lesson = Lesson::load(&fixture_lessons(), "good", Lang::En).unwrap();
        lesson.check_exercise_blocks().unwrap();
        assert!(lesson.starting_code().unwrap().contains("fn main"));
        assert!(lesson
            .exercise_path()
            .unwrap()
            .ends_with("exercises/demo.rs"));
    }

    #[test]
    fn two_different_exercise_blocks_name_the_first_differing_line() {
        let lesson = Lesson::load(&fixture_lessons(), "code-mismatch", Lang::En).unwrap();
        let error = lesson.check_exercise_blocks().unwrap_err().to_string();
        let second = lesson.exercise_blocks()[1].line;
        assert!(
            error.contains(&format!("code-mismatch/en.md:{}:", second + 2)),
            "{error}"
        );
        assert!(error.contains("here:      let answer = 41;"), "{error}");
        assert!(error.contains("first:     let answer = 42;"), "{error}");
    }

    #[test]
    fn differences_at_the_end_are_spelled_out() {
        let missing = first_line_difference("a\n", "a\nb\n").unwrap();
        assert_eq!(
            (missing.index, missing.left.as_str()),
            (1, "(no more lines)")
        );
        let newline = first_line_difference("a\n", "a").unwrap();
        assert_eq!(newline.left, "a (with a final newline)");
        assert!(first_line_difference("a\nb\n", "a\nb\n").is_none());
    }
}
