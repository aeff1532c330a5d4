//! The progress store across processes: concurrent writers and a writer
//! killed with SIGKILL. The test binary re-runs itself as the writer.

use quest::progress::Store;
use std::env;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const CHILD_FILE: &str = "QUEST_TEST_WRITER_FILE";
const CHILD_PREFIX: &str = "QUEST_TEST_WRITER_PREFIX";
const CHILD_COUNT: &str = "QUEST_TEST_WRITER_COUNT";
const ACK: &str = "ACK ";

/// The writer, not a test of its own: the tests below spawn it (ignored, so a
/// normal run skips it) with the file to write. It awards `<prefix>:<i>` one
/// update at a time and prints each key only after its update returned. Run by
/// `--include-ignored` without being spawned, it has no file and does nothing.
#[test]
#[ignore = "the child process of the tests in this file; they spawn it"]
fn writer_process() {
    let Ok(path) = env::var(CHILD_FILE) else {
        return;
    };
    let prefix = env::var(CHILD_PREFIX).unwrap();
    let count: usize = env::var(CHILD_COUNT).unwrap().parse().unwrap();
    let mut store = Store::open(path).unwrap();
    for i in 0..count {
        let key = format!("{prefix}:{i}");
        assert!(store.award(&key, 1).unwrap(), "{key} was new");
        println!("{ACK}{key}");
    }
}

fn spawn_writer(path: &Path, prefix: &str, count: usize) -> Child {
    Command::new(env::current_exe().unwrap())
        .args([
            "progress_processes::writer_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_FILE, path)
        .env(CHILD_PREFIX, prefix)
        .env(CHILD_COUNT, count.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

// Not a prefix match: libtest prints `test writer_process ... ` before the
// test body runs, on the same line as the first key.
fn acknowledged_key(line: &str) -> Option<&str> {
    line.split_once(ACK).map(|(_, key)| key)
}

fn acknowledged_keys(output: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(output)
        .lines()
        .filter_map(|line| acknowledged_key(line).map(str::to_owned))
        .collect()
}

fn temp_progress_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("progress.json");
    (dir, path)
}

#[test]
fn two_processes_award_50_each_and_all_100_land() {
    let (_dir, path) = temp_progress_path();
    let writers = [spawn_writer(&path, "a", 50), spawn_writer(&path, "b", 50)];
    for writer in writers {
        let output = writer.wait_with_output().unwrap();
        assert!(output.status.success());
        assert_eq!(acknowledged_keys(&output.stdout).len(), 50);
    }
    let store = Store::open(&path).unwrap();
    for prefix in ["a", "b"] {
        for i in 0..50 {
            assert!(store.state().has_award(&format!("{prefix}:{i}")));
        }
    }
    assert_eq!(store.state().awards.len(), 100);
}

#[test]
fn killing_a_writer_loses_no_acknowledged_award() {
    let (_dir, path) = temp_progress_path();
    let mut acknowledged = Vec::new();
    // Several rounds, each killed after a different number of writes, so
    // that the kills land at different points of the write.
    for (round, kill_after) in [7, 23, 41].into_iter().enumerate() {
        let mut writer = spawn_writer(&path, &format!("round{round}"), 100_000);
        let mut lines = BufReader::new(writer.stdout.take().unwrap()).lines();
        let mut seen = 0;
        while seen < kill_after {
            let line = lines.next().expect("the writer stopped early").unwrap();
            if let Some(key) = acknowledged_key(&line) {
                acknowledged.push(key.to_owned());
                seen += 1;
            }
        }
        writer.kill().unwrap(); // SIGKILL on Unix
        writer.wait().unwrap();
        // Lines printed before the kill were acknowledged too.
        for line in lines.map_while(Result::ok) {
            if let Some(key) = acknowledged_key(&line) {
                acknowledged.push(key.to_owned());
            }
        }
        let store = Store::open(&path).expect("the file still parses");
        let missing: Vec<_> = acknowledged
            .iter()
            .filter(|key| !store.state().has_award(key))
            .collect();
        assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    }

    // The next write sweeps away temp files the killed writers left behind.
    Store::open(&path).unwrap().award("after", 1).unwrap();
    let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
