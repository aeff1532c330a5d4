//! The files a submission is compared with: the lesson's starting code and its solution.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::course::Lesson;
use crate::progress::{CodeKind, CodeRef};

/// The lesson's starting code as a file quest can build (under `target/`), written
/// from the lesson's exercise block: the "before" of every measurement.
pub fn starting_code_file(lesson: &Lesson) -> Result<(PathBuf, CodeRef)> {
    let code = lesson.starting_code()?;
    let name = lesson
        .spec
        .exercise
        .as_ref()
        .and_then(|path| path.file_name())
        .map_or_else(|| "exercise.rs".into(), |name| name.to_os_string());
    let dir = crate::lab::runner::target_dir(&crate::lab::runner::workspace_root())
        .join("quest-starting-code")
        .join(&lesson.meta.id);
    let path = dir.join(name);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(code.as_str()) {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        std::fs::write(&path, &code)
            .with_context(|| format!("could not write {}", path.display()))?;
    }
    Ok((path, CodeRef::of(CodeKind::Original, code.as_bytes())))
}

/// The lesson's reference solution file.
pub fn solution_path(lesson: &Lesson) -> Result<PathBuf> {
    lesson
        .solution_path()
        .with_context(|| format!("lesson {} has no solution", lesson.meta.id))
}

/// Builds `source` as an exercise binary (quietly: cargo's errors stream as it says them).
pub(super) fn build(source: &Path) -> Result<PathBuf> {
    crate::lab::runner::build(&crate::lab::runner::workspace_root(), source, true)
}
