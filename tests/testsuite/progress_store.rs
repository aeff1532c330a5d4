//! Black-box tests of the progress store: keyed awards, damaged files,
//! repair, and the lock. Multi-process tests are in progress_processes.rs.

use anyhow::bail;
use quest::progress::{repair, BadProgressFile, Store};
use std::fs;
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use crate::common::backups_of;

fn temp_progress_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("progress.json");
    (dir, path)
}

#[test]
fn a_missing_file_is_a_fresh_start_in_a_new_folder() {
    let (_dir, parent) = temp_progress_path();
    let path = parent
        .with_file_name("quest")
        .join("nested")
        .join("progress.json");
    let mut store = Store::open(&path).unwrap();
    assert!(store.state().awards.is_empty());
    assert!(store.award("lesson:mlx-path:complete", 50).unwrap());
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("\"schema\": {}", quest::progress::SCHEMA)),
        "{text}"
    );
    assert!(
        text.contains("\n  \"awards\": {\n"),
        "pretty-printed: {text}"
    );
}

#[test]
fn awarding_a_key_twice_records_it_once() {
    let (_dir, path) = temp_progress_path();
    let mut store = Store::open(&path).unwrap();
    assert!(store.award("achievement:first-token", 10).unwrap());
    assert!(!store.award("achievement:first-token", 10).unwrap());
    // Another handle, as another quest would have, sees the same ledger.
    let mut other = Store::open(&path).unwrap();
    assert!(!other.award("achievement:first-token", 10).unwrap());
    assert_eq!(other.state().awards.len(), 1);
    assert_eq!(other.state().total_xp(), 10);
}

#[test]
fn a_failed_update_writes_nothing() {
    let (_dir, path) = temp_progress_path();
    let mut store = Store::open(&path).unwrap();
    store.award("a", 1).unwrap();
    let before = fs::read(&path).unwrap();
    let result: anyhow::Result<()> = store.update(|state| {
        state.award("b", 1, quest::progress::Timestamp::now());
        bail!("the run failed")
    });
    assert!(result.is_err());
    assert_eq!(fs::read(&path).unwrap(), before);
    assert!(!Store::open(&path).unwrap().state().has_award("b"));
}

#[test]
fn threads_with_their_own_stores_lose_no_award() {
    let (_dir, path) = temp_progress_path();
    let writers: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|side| {
            let path = path.clone();
            thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                for i in 0..50 {
                    assert!(store.award(&format!("{side}:{i}"), 1).unwrap());
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(Store::open(&path).unwrap().state().awards.len(), 100);
}

#[test]
fn a_held_lock_times_out_naming_the_lock_file() {
    let (_dir, path) = temp_progress_path();
    let mut holder = Store::open(&path).unwrap();
    let message = holder
        .update(|_| {
            let waiter = Store::open_with_lock_timeout(&path, Duration::from_millis(100));
            Ok(format!("{:#}", waiter.unwrap_err()))
        })
        .unwrap();
    assert!(message.contains("progress.json.lock"), "{message}");
    assert!(message.contains("timed out"), "{message}");
}

fn check_damaged_file_is_kept(bytes: &[u8], expected_problem: &str) {
    let (_dir, path) = temp_progress_path();
    fs::write(&path, bytes).unwrap();

    let error = Store::open(&path).unwrap_err();
    let bad = error
        .downcast_ref::<BadProgressFile>()
        .expect("a BadProgressFile error");
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(expected_problem), "{message}");
    assert!(message.contains("backup copy is kept at"), "{message}");
    assert!(message.contains("quest status --repair"), "{message}");
    assert_eq!(fs::read(&bad.backup).unwrap(), bytes);
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "the damaged file is left alone"
    );

    // Opening again, or trying to write, keeps the same single backup.
    assert!(Store::open(&path).is_err());
    assert!(Store::open(&path)
        .and_then(|mut store| store.award("x", 1))
        .is_err());
    assert_eq!(backups_of(&path), vec![bad.backup.clone()]);

    let backup = repair(&path).unwrap().expect("something to repair");
    assert_eq!(backup, bad.backup);
    assert_eq!(fs::read(&backup).unwrap(), bytes);
    let mut store = Store::open(&path).unwrap();
    assert!(store.state().awards.is_empty());
    assert!(store.award("fresh", 1).unwrap());
    assert_eq!(repair(&path).unwrap(), None, "a good file needs no repair");
}

#[test]
fn a_truncated_file_is_reported_and_kept() {
    let (_dir, path) = temp_progress_path();
    Store::open(&path).unwrap().award("a", 1).unwrap();
    let whole = fs::read(&path).unwrap();
    check_damaged_file_is_kept(&whole[..whole.len() / 2], "cut short");
}

#[test]
fn a_garbage_file_is_reported_and_kept() {
    check_damaged_file_is_kept(b"\x7fELF\x02\x01\x01 not progress", "not valid JSON");
}

#[test]
fn a_file_from_a_newer_quest_is_reported_and_kept() {
    check_damaged_file_is_kept(
        br#"{"schema": 99, "hologram": true}"#,
        "newer quest (schema 99",
    );
}

#[test]
fn repair_leaves_a_missing_file_alone() {
    let (_dir, path) = temp_progress_path();
    assert_eq!(repair(&path).unwrap(), None);
    assert!(!path.exists());
}
