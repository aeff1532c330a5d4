//! The lesson shows the exercise's code in a ```` ```rust exercise=NAME ````
//! block; that block must stay byte-identical to the exercise file, or the
//! learner reads one program and runs another.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{source_hash, CodeBlock, Course, Lang, Lesson};

/// The info-string attribute that ties a code block to an exercise file.
pub const EXERCISE_ATTR: &str = "exercise";

/// The section that must show the exercise.
pub const CODE_SECTION: &str = "the-code";

impl Lesson {
    /// The code blocks that mirror an exercise file, in order.
    pub fn exercise_blocks(&self) -> Vec<&CodeBlock> {
        self.sections
            .iter()
            .flat_map(|section| &section.code_blocks)
            .filter(|block| block.attr(EXERCISE_ATTR).is_some())
            .collect()
    }

    /// The exercise file, resolved against the project root.
    pub fn exercise_path(&self) -> PathBuf {
        self.project_root().join(&self.meta.exercise)
    }

    /// Fails unless `the-code` shows the exercise and every exercise block
    /// equals the exercise file byte for byte; names the first differing line.
    pub fn check_exercise_code(&self) -> Result<()> {
        let shows_exercise = self.section(CODE_SECTION).is_some_and(|section| {
            section
                .code_blocks
                .iter()
                .any(|block| block.attr(EXERCISE_ATTR).is_some())
        });
        if !shows_exercise {
            let line = self
                .section(CODE_SECTION)
                .map_or(self.body_line, |s| s.line);
            bail!(
                "{}:{line}: section `{CODE_SECTION}` needs a ```rust {EXERCISE_ATTR}=NAME code block",
                self.path.display()
            );
        }
        for block in self.exercise_blocks() {
            let (path, expected) = self.read_exercise_for(block)?;
            if let Some(difference) = first_difference(&block.code, &expected) {
                bail!(
                    "{}:{}: the `{EXERCISE_ATTR}={}` code block differs from {}:{}\n  lesson:   {}\n  exercise: {}",
                    self.path.display(),
                    block.line + 1 + difference.index,
                    block.attr(EXERCISE_ATTR).unwrap_or_default(),
                    path.display(),
                    difference.index + 1,
                    difference.lesson,
                    difference.exercise
                );
            }
        }
        Ok(())
    }

    /// The lesson's source with every exercise block replaced by its file;
    /// `None` when nothing changes.
    fn with_exercise_code(&self) -> Result<Option<String>> {
        let mut source = self.source.clone();
        let mut blocks = self.exercise_blocks();
        // Back to front, so earlier byte ranges stay valid while we splice.
        blocks.sort_by_key(|block| std::cmp::Reverse(block.code_range.start));
        for block in blocks {
            let (_, code) = self.read_exercise_for(block)?;
            let range =
                self.body_offset + block.code_range.start..self.body_offset + block.code_range.end;
            source.replace_range(range, &code);
        }
        Ok((source != self.source).then_some(source))
    }

    fn read_exercise_for(&self, block: &CodeBlock) -> Result<(PathBuf, String)> {
        let name = block.attr(EXERCISE_ATTR).unwrap_or_default();
        let path = self.exercise_path();
        let stem = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default();
        if name != stem {
            bail!(
                "{}:{}: the code block says `{EXERCISE_ATTR}={name}`, but the front matter's exercise is {}",
                self.path.display(),
                block.line,
                self.meta.exercise.display()
            );
        }
        let code = fs::read_to_string(&path)
            .with_context(|| format!("reading the exercise {}", path.display()))?;
        Ok((path, code))
    }
}

/// Copies each exercise file into the lesson's exercise blocks, in every
/// language; returns the files it rewrote.
///
/// A translation that was up to date stays up to date: its `source_hash` is
/// moved to the new English file, since only code (which is not translated)
/// changed.
pub fn sync_exercise_code(lessons_dir: &Path, id: &str) -> Result<Vec<PathBuf>> {
    let course = Course::load(lessons_dir)?;
    let hash_before = source_hash(lessons_dir, id)?;
    let mut rewritten = Vec::new();

    let source = course.lesson(id, Lang::SOURCE)?;
    if let Some(text) = source.with_exercise_code()? {
        write(&source.path, &text)?;
        rewritten.push(source.path.clone());
    }
    let hash_after = source_hash(lessons_dir, id)?;

    for lang in Lang::ALL.into_iter().filter(|&lang| lang != Lang::SOURCE) {
        if !course.lesson_path(id, lang).exists() {
            continue;
        }
        let translation = course.lesson(id, lang)?;
        let mut text = translation
            .with_exercise_code()?
            .unwrap_or_else(|| translation.source.clone());
        if translation.meta.source_hash.as_deref() == Some(hash_before.as_str()) {
            let (front_matter, body) = text.split_at(translation.body_offset);
            text = front_matter.replacen(&hash_before, &hash_after, 1) + body;
        }
        if text != translation.source {
            write(&translation.path, &text)?;
            rewritten.push(translation.path.clone());
        }
    }
    Ok(rewritten)
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The first line where two texts differ, shown without its newline.
struct Difference {
    index: usize,
    lesson: String,
    exercise: String,
}

fn first_difference(lesson: &str, exercise: &str) -> Option<Difference> {
    let mut lesson_lines = lesson.split_inclusive('\n');
    let mut exercise_lines = exercise.split_inclusive('\n');
    for index in 0.. {
        match (lesson_lines.next(), exercise_lines.next()) {
            (None, None) => return None,
            (a, b) if a == b => continue,
            (a, b) => {
                return Some(Difference {
                    index,
                    lesson: show_line(a, b),
                    exercise: show_line(b, a),
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
    use crate::course::TranslationStatus;

    #[test]
    fn a_matching_block_passes() {
        let lesson = Lesson::load(&fixture_lessons(), "good", Lang::En).unwrap();
        lesson.check_exercise_code().unwrap();
    }

    #[test]
    fn a_differing_block_names_the_first_differing_line() {
        let lesson = Lesson::load(&fixture_lessons(), "code-mismatch", Lang::En).unwrap();
        let error = lesson.check_exercise_code().unwrap_err().to_string();
        let block_line = lesson.exercise_blocks()[0].line;
        assert!(
            error.contains(&format!("code-mismatch/en.md:{}:", block_line + 2)),
            "{error}"
        );
        assert!(error.contains("exercises/demo.rs:2"), "{error}");
        assert!(error.contains("lesson:       let answer = 41;"), "{error}");
        assert!(error.contains("exercise:     let answer = 42;"), "{error}");
    }

    #[test]
    fn differences_at_the_end_are_spelled_out() {
        let missing = first_difference("a\n", "a\nb\n").unwrap();
        assert_eq!(
            (missing.index, missing.lesson.as_str()),
            (1, "(no more lines)")
        );
        let newline = first_difference("a\n", "a").unwrap();
        assert_eq!(newline.lesson, "a (with a final newline)");
        assert!(first_difference("a\nb\n", "a\nb\n").is_none());
    }

    /// Copies the fixture project to a fresh folder so syncing can write.
    fn scratch_copy() -> PathBuf {
        let from = fixture_lessons().parent().unwrap().to_path_buf();
        let to = std::env::temp_dir().join(format!("quest-sync-{}", std::process::id()));
        let _ = fs::remove_dir_all(&to);
        copy_dir(&from, &to);
        to
    }

    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    #[test]
    fn syncing_copies_the_exercise_and_keeps_a_fresh_translation_fresh() {
        let root = scratch_copy();
        let lessons = root.join("lessons");
        fs::write(
            root.join("exercises/demo.rs"),
            "fn main() {\n    println!(\"new\");\n}\n",
        )
        .unwrap();
        assert!(Lesson::load(&lessons, "good", Lang::En)
            .unwrap()
            .check_exercise_code()
            .is_err());

        let rewritten = sync_exercise_code(&lessons, "good").unwrap();
        assert_eq!(rewritten.len(), 2, "{rewritten:?}");
        for lang in Lang::ALL {
            let lesson = Lesson::load(&lessons, "good", lang).unwrap();
            lesson.check_exercise_code().unwrap();
            assert!(!matches!(
                lesson.translation_status().unwrap(),
                TranslationStatus::Stale { .. }
            ));
        }
        assert!(
            sync_exercise_code(&lessons, "good").unwrap().is_empty(),
            "a second sync changes nothing"
        );
        fs::remove_dir_all(root).unwrap();
    }
}
