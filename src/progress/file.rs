//! The progress file on disk: parsing, crash-safe writes, and what happens
//! when the file is damaged (a backup is kept, nothing is reset silently).

use super::lock::{self, DEFAULT_LOCK_TIMEOUT};
use super::{migrate, State, Timestamp, SCHEMA};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::error::Category;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Opening a damaged or too-new progress file. It names the file, says what
/// is wrong and where the backup is, and how to start over.
#[derive(Debug)]
pub struct BadProgressFile {
    pub path: PathBuf,
    pub backup: PathBuf,
    pub problem: String,
}

impl fmt::Display for BadProgressFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.\nNothing was reset: a backup copy is kept at {}.\n{REPAIR_HINT}",
            cannot_use(&self.path, &self.problem),
            self.backup.display()
        )
    }
}

/// What to run about a damaged or too-new progress file.
pub const REPAIR_HINT: &str =
    "To set the damaged file aside and start fresh, run: quest status --repair";

fn cannot_use(path: &Path, problem: &str) -> String {
    format!("cannot use the progress file {}: {problem}", path.display())
}

/// Reads the progress file and changes nothing (no lock, no backup): for a reader that
/// only shows it, `quest serve`. A missing file is a fresh start; a damaged or too-new
/// one gives what `quest status` says of it, with the same repair hint.
pub fn peek(path: &Path) -> std::result::Result<State, String> {
    let problem = match read_if_present(path) {
        Ok(None) => return Ok(State::default()),
        Ok(Some(bytes)) => match parse(&bytes) {
            Ok(state) => return Ok(state),
            Err(problem) => format!("{problem:#}"),
        },
        Err(error) => format!("{error:#}"),
    };
    Err(format!(
        "{}.\nNothing was reset.\n{REPAIR_HINT}",
        cannot_use(path, &problem)
    ))
}

impl std::error::Error for BadProgressFile {}

/// Reads progress-file bytes. Errors say, in words, what is wrong.
pub fn parse(bytes: &[u8]) -> Result<State> {
    // The version is read first so that a newer file is reported as newer,
    // not as a list of fields this quest has never heard of.
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(describe_json_error)?;
    let Some(object) = json.as_object() else {
        bail!("it holds JSON but not an object, so it is not a quest progress file");
    };
    match object.get("schema").map(|schema| (schema, schema.as_u64())) {
        None => bail!("it has no `schema` field, so it is not a quest progress file"),
        Some((schema, None)) => bail!("its `schema` is {schema}, not a version number"),
        Some((_, Some(0))) => bail!("it claims schema 0, which no quest ever wrote"),
        Some((_, Some(found))) if found > u64::from(SCHEMA) => bail!(
            "it was written by a newer quest (schema {found}; this quest reads up to \
             schema {SCHEMA}); update quest to keep using it"
        ),
        Some(_) => {}
    }
    if schema_of(bytes) < SCHEMA {
        let current = migrate::to_current(json)?;
        return serde_json::from_value(current).map_err(describe_json_error);
    }
    // Parsed again from the bytes, not the JSON value, to report line numbers.
    serde_json::from_slice(bytes).map_err(describe_json_error)
}

/// The `schema` a progress file says it has (0 when it says none).
pub(crate) fn schema_of(bytes: &[u8]) -> u32 {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|json| json.get("schema")?.as_u64())
        .map_or(0, |schema| schema as u32)
}

fn describe_json_error(error: serde_json::Error) -> anyhow::Error {
    match error.classify() {
        Category::Eof => anyhow!("it ends too early, as if cut short ({error})"),
        Category::Syntax | Category::Io => anyhow!("it is not valid JSON ({error})"),
        Category::Data => anyhow!("it does not match the progress format ({error})"),
    }
}

/// The file's bytes: pretty JSON, checked to read back, so that quest never
/// writes a file it would refuse (NaN, for one, would turn into `null`).
pub fn serialize(state: &State) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(state).context("could not encode progress")?;
    bytes.push(b'\n');
    parse(&bytes).context("refusing to write progress that would not read back")?;
    Ok(bytes)
}

/// The state in `path` and the bytes it came from; a missing file is a
/// fresh start. A bad file gets a backup and a [`BadProgressFile`] error.
pub(crate) fn load(path: &Path) -> Result<(State, Option<Vec<u8>>)> {
    let Some(bytes) = read_if_present(path)? else {
        return Ok((State::default(), None));
    };
    match parse(&bytes) {
        Ok(state) => Ok((state, Some(bytes))),
        Err(problem) => Err(BadProgressFile {
            path: path.to_owned(),
            backup: keep_backup(path, &bytes)?,
            problem: format!("{problem:#}"),
        }
        .into()),
    }
}

/// `quest status --repair`: keeps a backup of a damaged progress file and
/// starts fresh. Returns the backup, or `None` when nothing needed repair.
pub fn repair(path: &Path) -> Result<Option<PathBuf>> {
    let _lock = lock::acquire(path, DEFAULT_LOCK_TIMEOUT)?;
    let Some(bytes) = read_if_present(path)? else {
        return Ok(None);
    };
    if parse(&bytes).is_ok() {
        return Ok(None);
    }
    let backup = keep_backup(path, &bytes)?;
    // The backup holds the same bytes, so replacing the file loses nothing.
    write_atomically(path, &serialize(&State::default())?)?;
    Ok(Some(backup))
}

fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error)
            .with_context(|| format!("could not read the progress file {}", path.display())),
    }
}

/// Copies `bytes` to `progress.json.bak-<time>`, unless a backup with the
/// same bytes exists already: one backup per damage, however often opened.
pub(crate) fn keep_backup(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let prefix = format!("{}.bak-", file_name(path));
    let dir = parent_dir(path);
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let is_backup = entry.file_name().to_string_lossy().starts_with(&prefix);
            if is_backup && fs::read(entry.path()).is_ok_and(|old| old == bytes) {
                return Ok(entry.path());
            }
        }
    }
    let stem = format!("{prefix}{}", Timestamp::now().compact());
    for attempt in 1.. {
        let name = match attempt {
            1 => stem.clone(),
            n => format!("{stem}-{n}"),
        };
        let backup = dir.join(name);
        // create_new: an older backup is never overwritten.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&backup)
        {
            Ok(mut file) => {
                file.write_all(bytes)
                    .and_then(|()| file.sync_all())
                    .with_context(|| format!("could not write the backup {}", backup.display()))?;
                return Ok(backup);
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("could not create the backup {}", backup.display()))
            }
        }
    }
    unreachable!("the backup name loop only ends by returning")
}

/// Replaces `path` so that a crash at any moment leaves either the old or
/// the new file: write a temp file beside it, fsync, rename, fsync the dir.
/// Callers hold the progress lock.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_dir(path);
    let temp_prefix = format!(".{}.", file_name(path));
    remove_stale_temp_files(dir, &temp_prefix);
    let mut temp = tempfile::Builder::new()
        .prefix(&temp_prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("could not create a temporary file in {}", dir.display()))?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .with_context(|| format!("could not write {}", temp.path().display()))?;
    temp.persist(path)
        .map_err(|error| error.error)
        .with_context(|| format!("could not replace {}", path.display()))?;
    sync_dir(dir)
}

// A writer killed mid-write leaves its temp file behind. We hold the lock,
// so no temp file can belong to a live writer and all may go.
fn remove_stale_temp_files(dir: &Path, temp_prefix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(temp_prefix) && name.ends_with(".tmp") {
            let _ = fs::remove_file(entry.path());
        }
    }
}

// The rename is durable only once the directory entry is on disk.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("could not sync the folder {}", dir.display()))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<()> {
    Ok(())
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| super::FILE_NAME.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(bytes: &[u8]) -> String {
        format!("{:#}", parse(bytes).unwrap_err())
    }

    #[test]
    fn fresh_state_round_trips() {
        let bytes = serialize(&State::default()).unwrap();
        assert_eq!(parse(&bytes).unwrap(), State::default());
        assert!(String::from_utf8(bytes)
            .unwrap()
            .contains(&format!("\"schema\": {SCHEMA}")));
    }

    #[test]
    fn each_kind_of_damage_is_named() {
        assert!(problem(b"{\"schema\": 1, \"awa").contains("cut short"));
        assert!(problem(b"").contains("cut short"));
        assert!(problem(b"\x00garbage\xff").contains("not valid JSON"));
        assert!(problem(b"{}").contains("no `schema` field"));
        assert!(problem(b"[1, 2]").contains("not an object"));
        assert!(problem(b"{\"schema\": \"1\"}").contains("not a version number"));
        assert!(problem(b"{\"schema\": 1, \"xp\": 3}").contains("unknown field `xp`"));
        assert!(problem(b"{\"schema\": 7}").contains("newer quest (schema 7"));
    }

    #[test]
    fn refuses_to_write_what_it_could_not_read() {
        use crate::course::Lang;
        use crate::progress::{CodeKind, CodeRef, Run};
        let mut state = State::default();
        state.lesson_mut("mlx-path").runs.push(Run {
            at: Timestamp::now(),
            code: CodeRef::of(CodeKind::Learner, b""),
            backend: "cpu".into(),
            tokens_generated: 1,
            prompt_tokens: 1,
            lang: Lang::En,
            metrics: [("ttft_ms".to_owned(), f64::NAN)].into(),
            weights: None,
        });
        assert!(serialize(&state).is_err());
    }
}
