//! Learner progress: what was run, measured and earned, kept in one
//! human-readable JSON file that survives crashes and concurrent `quest`s.
//!
//! - [`State`] is the file's content; [`Store`] reads and changes it safely.
//! - [`LevelCurve`] and [`Achievement`] are course data (`levels:` and
//!   `achievements:` in `lessons/quest.yaml`), not code.
//! - A damaged file is never reset silently: see [`BadProgressFile`] and [`repair`].

mod achievements;
mod file;
mod header;
mod hints;
mod levels;
mod lock;
mod migrate;
mod state;
mod store;
mod timestamp;

pub use achievements::{award_earned, load_achievements, Achievement, Predicate};
pub use file::{parse, peek, repair, serialize, BadProgressFile};
pub use header::{Header, LessonStatus};
pub use hints::{hint_step, HintStep, HintThen};
pub use levels::{Level, LevelCurve};
pub use lock::DEFAULT_LOCK_TIMEOUT;
pub use state::{
    Attempt, Award, Card, CodeKind, CodeRef, LessonRecord, Measurement, Run, State, Submission,
    LIBRARY_DECODE_TOK_S, SAME_KERNELS_DECODE_TOK_S, SCHEMA,
};
pub use store::Store;
pub use timestamp::Timestamp;

use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::PathBuf;

/// The progress file's name, inside `$QUEST_HOME` or the data directory.
pub const FILE_NAME: &str = "progress.json";

/// Where progress lives: `$QUEST_HOME/progress.json` when QUEST_HOME is set,
/// else `<data dir>/quest/progress.json` (XDG data dir on Linux).
pub fn default_path() -> Result<PathBuf> {
    path_from(crate::settings::HOME.os(), dirs::data_dir())
}

// Split from `default_path` so tests need not change the process environment.
fn path_from(quest_home: Option<OsString>, data_dir: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(home) = quest_home.filter(|home| !home.is_empty()) {
        return Ok(PathBuf::from(home).join(FILE_NAME));
    }
    let data_dir = data_dir.context(
        "could not find this user's data directory; set QUEST_HOME to the folder \
         where quest should keep its progress",
    )?;
    Ok(data_dir.join("quest").join(FILE_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quest_home_wins_over_the_data_dir() {
        let path = path_from(Some("/q".into()), Some("/data".into())).unwrap();
        assert_eq!(path, PathBuf::from("/q/progress.json"));
    }

    #[test]
    fn empty_quest_home_is_ignored() {
        let path = path_from(Some("".into()), Some("/data".into())).unwrap();
        assert_eq!(path, PathBuf::from("/data/quest/progress.json"));
    }

    #[test]
    fn no_data_dir_asks_for_quest_home() {
        let error = path_from(None, None).unwrap_err();
        assert!(error.to_string().contains("QUEST_HOME"));
    }
}
