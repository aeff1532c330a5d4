//! What the black-box CLI tests share: running the real `quest` binary with its own
//! progress folder, no colour and a fixed width.
#![allow(dead_code)] // each test binary uses its own part

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
