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

/// The `quest` binary under test, in the environment its cargo builds must see.
pub fn quest_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quest"));
    // Cargo rebuilds what a build script watching RUSTC_BOOTSTRAP made (anyhow's does),
    // so a test run under it (libtest's `--report-time` asks for it) would rebuild the
    // exercises' dependencies once, and the next plain `cargo test` again.
    command.env_remove("RUSTC_BOOTSTRAP");
    command
}

pub fn quest(home: &Path, args: &[&str]) -> Output {
    quest_command()
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
    quest_command()
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
    // The result files the lessons' figures are traced to (`quest dev check`).
    copy_dir(&repo.join("docs"), &root.join("docs"));
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

/// From what `quest submit` printed: the `--before X --after Y` of its card command for
/// lesson `id`, as printed (the card takes the numbers the learner reads).
pub fn card_numbers(stdout: &str, id: &str) -> (String, String) {
    let line = stdout
        .lines()
        .find(|l| l.contains(&format!("quest card {id} --before")))
        .unwrap_or_else(|| panic!("no card command in:\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| words[words.iter().position(|w| *w == flag).unwrap() + 1].to_owned();
    (after("--before"), after("--after"))
}

/// The progress file of the learner at `home`.
pub fn progress(home: &Path) -> quest::progress::State {
    let path = home.join("progress.json");
    let bytes =
        std::fs::read(&path).unwrap_or_else(|e| panic!("no progress file {}: {e}", path.display()));
    quest::progress::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
}

/// The middle value (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => panic!("the median of nothing"),
        n if n % 2 == 1 => sorted[mid],
        _ => (sorted[mid - 1] + sorted[mid]) / 2.0,
    }
}

/// The improvement (above 1: better, in the lesson's direction) that the latest
/// submission of lesson `id` passing its checks measured, from the rounds quest
/// recorded: unrounded, where `submit` prints two decimals (×1.10 for 1.095).
pub fn recorded_improvement(root: &Path, home: &Path, id: &str) -> f64 {
    let spec = quest::course::LessonSpec::load(&root.join("lessons"), id).unwrap();
    let measure = spec.measure.expect("a lesson that measures");
    let state = progress(home);
    let measurement = state.lessons[id]
        .submissions
        .iter()
        .rev()
        .filter(|s| s.checks_passed)
        .find_map(|s| s.measurement.as_ref())
        .unwrap_or_else(|| panic!("{id}: no measured submission passed its checks"));
    let (before, after) = (median(&measurement.before), median(&measurement.after));
    match measure.expect {
        quest::course::spec::Direction::Higher => after / before,
        quest::course::spec::Direction::Lower => before / after,
    }
}

/// The `yes`/`no` of "did the effect show here" for a measured `improvement`, by the
/// threshold quest's card uses.
pub fn shows(improvement: f64) -> &'static str {
    if improvement >= quest::course::spec::EFFECT_SHOWS_RATIO {
        "yes"
    } else {
        "no"
    }
}

/// The backups quest made of the progress file at `path` (`progress.json.bak-…` beside it),
/// oldest first.
pub fn backups_of(path: &Path) -> Vec<PathBuf> {
    let mut backups: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("progress.json.bak-"))
        .collect();
    backups.sort();
    backups
}

/// The solution as a learner's own submission: quest refuses the solution copied as it
/// is (`quest::judge::same_as_solution`), so a flow that passes with the solution's
/// arithmetic adds a line of its own to it.
pub fn learners_own(solution: &str) -> String {
    format!("{solution}\n// A line of the learner's own.\nconst _MINE: () = ();\n")
}
