//! An advisory lock on `progress.json.lock`, held across each
//! read-modify-write so that two quests never lose each other's changes.

use anyhow::{bail, Context, Result};
use fs4::TryLockError;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

const RETRY_EVERY: Duration = Duration::from_millis(10);

/// How long to wait for another quest to finish its update.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Held while alive. The OS drops the lock when the file closes, also when
/// the process is killed, so a crash never leaves a stale lock behind.
pub(crate) struct ProgressLock {
    _file: File,
}

/// `progress.json` → `progress.json.lock`, a separate file because the
/// progress file itself is replaced by rename on every write.
pub(crate) fn lock_path(progress: &Path) -> PathBuf {
    let mut name = progress.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

pub(crate) fn acquire(progress: &Path, timeout: Duration) -> Result<ProgressLock> {
    let path = lock_path(progress);
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .with_context(|| format!("could not create the folder {}", dir.display()))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("could not open the lock file {}", path.display()))?;
    let started = Instant::now();
    loop {
        // Called through the trait: std's own File::try_lock needs Rust 1.89.
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => return Ok(ProgressLock { _file: file }),
            Err(TryLockError::WouldBlock) if started.elapsed() < timeout => {
                thread::sleep(RETRY_EVERY)
            }
            Err(TryLockError::WouldBlock) => bail!(
                "timed out after {:.1?} waiting for the lock file {}: another quest \
                 is still updating your progress; let it finish, then try again",
                timeout,
                path.display()
            ),
            Err(TryLockError::Error(error)) => {
                return Err(error).with_context(|| format!("could not lock {}", path.display()))
            }
        }
    }
}
