//! `Store`: the one way to read and change the progress file, safe against
//! crashes (atomic writes) and other quests running at the same time (lock).

use super::file::{self, serialize, write_atomically};
use super::lock::{self, DEFAULT_LOCK_TIMEOUT};
use super::{default_path, State, Timestamp, SCHEMA};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    lock_timeout: Duration,
    /// As of the last open, reload or update; other processes may have moved on.
    state: State,
}

impl Store {
    /// Opens the progress file at `path`; a missing file is a fresh start.
    /// A damaged or too-new file fails with [`super::BadProgressFile`].
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with_lock_timeout(path, DEFAULT_LOCK_TIMEOUT)
    }

    /// Like [`Store::open`], waiting at most `lock_timeout` for other quests,
    /// here and in every later reload or update.
    pub fn open_with_lock_timeout(
        path: impl Into<PathBuf>,
        lock_timeout: Duration,
    ) -> Result<Self> {
        let mut store = Store {
            path: path.into(),
            lock_timeout,
            state: State::default(),
        };
        store.reload()?;
        Ok(store)
    }

    /// Opens the file at [`default_path`].
    pub fn open_default() -> Result<Self> {
        Self::open(default_path()?)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Reads the file again, to see what other quests wrote since.
    pub fn reload(&mut self) -> Result<&State> {
        // Locked so that two quests finding a damaged file keep one backup.
        let _lock = lock::acquire(&self.path, self.lock_timeout)?;
        (self.state, _) = file::load(&self.path)?;
        Ok(&self.state)
    }

    /// Re-reads the file under the lock, applies `change`, and writes the
    /// result atomically. When `change` fails, nothing is written.
    pub fn update<T>(&mut self, change: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        let _lock = lock::acquire(&self.path, self.lock_timeout)?;
        let (mut state, old_bytes) = file::load(&self.path)?;
        let result = change(&mut state)?;
        let new_bytes = serialize(&state)?;
        if old_bytes.as_ref() != Some(&new_bytes) {
            // A file of an older schema is kept as it was, once, before it is rewritten.
            if let Some(old) = old_bytes
                .as_ref()
                .filter(|old| file::schema_of(old) < SCHEMA)
            {
                file::keep_backup(&self.path, old)?;
            }
            write_atomically(&self.path, &new_bytes)?;
        }
        self.state = state;
        Ok(result)
    }

    /// Awards `key` once, now; `false` when it was already awarded.
    pub fn award(&mut self, key: &str, xp: u32) -> Result<bool> {
        self.update(|state| Ok(state.award(key, xp, Timestamp::now())))
    }
}
