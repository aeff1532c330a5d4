//! What the black-box CLI tests share: running the real `quest` binary with its own
//! progress folder, no colour and a fixed width.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh folder for one test's progress file.
pub fn home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quest-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn quest(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quest"))
        .args(args)
        .env("QUEST_HOME", home)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .output()
        .unwrap()
}

/// (stdout, stderr) as text.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `quest` with its course read from `root` (`QUEST_ROOT`): a temporary course.
pub fn quest_in(root: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quest"))
        .args(args)
        .env("QUEST_ROOT", root)
        .env("QUEST_HOME", home)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .output()
        .unwrap()
}

/// A fresh copy of the real course (lessons, solutions) with every exercise as its
/// lesson gives it, in a temporary folder: tests edit these, never the learner's.
pub fn course_copy(name: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = home(&format!("course-{name}"));
    copy_dir(&repo.join("lessons"), &root.join("lessons"));
    copy_dir(&repo.join("solutions"), &root.join("solutions"));
    let course = quest::course::Course::load(&root.join("lessons")).unwrap();
    for id in course.lesson_ids() {
        let lesson = course.lesson(id, quest::course::Lang::En).unwrap();
        if let Some(path) = lesson.exercise_path() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, lesson.starting_code().unwrap()).unwrap();
        }
    }
    root
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// From what `quest submit` printed: the `--before X --after Y` of its card command
/// for lesson `id`, and the `shows-here` answer this machine's measured ratio (the
/// `(×1.23)` on the medians line) gives.
pub fn card_numbers(stdout: &str, id: &str) -> (String, String, &'static str) {
    let line = stdout
        .lines()
        .find(|l| l.contains(&format!("quest card {id} --before")))
        .unwrap_or_else(|| panic!("no card command in:\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| words[words.iter().position(|w| *w == flag).unwrap() + 1].to_owned();
    let shows = if submit_ratio(stdout) >= 1.10 {
        "shows-here=yes"
    } else {
        "shows-here=no"
    };
    (after("--before"), after("--after"), shows)
}

/// The learner's measured ratio `quest submit` printed: the `(×1.23)` on its medians line.
pub fn submit_ratio(stdout: &str) -> f64 {
    let medians = stdout
        .lines()
        .find(|l| l.contains("medians:"))
        .expect(stdout);
    medians
        .rsplit("(×")
        .next()
        .unwrap()
        .trim_end_matches(')')
        .parse()
        .unwrap()
}
