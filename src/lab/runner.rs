//! quest's side of the lab: building an exercise as the lab binary ([`build`], or a
//! prebuilt one), starting it on quest's line and clock ([`run`] and its kin), reading back
//! what it wrote, running quest's own model as the reference ([`reference`]), and the
//! child processes quest waits for ([`Killed`], [`TimedOut`], [`end_children_on_signal`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::clock;
use super::exercise::{greedy, Greedy, Report};
use crate::lm::models::Layers;

/// What `quest run` passes to an exercise.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub model: String,
    pub prompt: String,
    pub max_tokens: usize,
    /// Stop the exercise after this long (off when `None`).
    pub time_limit: Option<Duration>,
    /// The piece the lesson has the learner write (its `piece:`), said on quest's line
    /// ([`crate::line::Hello::piece`]): every other part keeps quest's code.
    pub piece: Option<crate::course::spec::Piece>,
}

/// The floats of [`le_bytes`](super::exercise::le_bytes) (a trailing partial float is left
/// out: callers check the length).
fn le_floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Reads `QUEST_LAYERS`'s file back ([`write_layers`](super::exercise::write_layers)).
pub fn read_layers(path: &Path) -> Result<Layers> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let word = |i: usize| -> Option<usize> {
        Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?) as usize)
    };
    let (Some(layers), Some(width)) = (word(0), word(4)) else {
        anyhow::bail!("{}: {} bytes hold no header", path.display(), bytes.len());
    };
    let floats = le_floats(&bytes[8..]);
    let per_step = layers * width;
    anyhow::ensure!(
        per_step > 0 && floats.len() % per_step == 0 && (bytes.len() - 8) % 4 == 0,
        "{}: {} floats are not whole steps of {layers} layers × {width}",
        path.display(),
        floats.len()
    );
    Ok(floats
        .chunks_exact(per_step)
        .map(|step| step.chunks_exact(width).map(<[f32]>::to_vec).collect())
        .collect())
}

/// Reads `QUEST_LOGITS`'s file: `steps` rows of float32.
pub fn read_logits(path: &Path, steps: usize) -> Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let floats = le_floats(&bytes);
    anyhow::ensure!(
        steps > 0 && bytes.len() % 4 == 0 && floats.len() % steps == 0,
        "{}: {} bytes are not {steps} rows of float32 logits",
        path.display(),
        bytes.len()
    );
    Ok(floats
        .chunks_exact(floats.len() / steps)
        .map(<[f32]>::to_vec)
        .collect())
}

/// The cargo workspace quest was built from: where exercises are compiled, whatever
/// folder the course lives in.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo builds in `workspace` (`CARGO_TARGET_DIR` when set).
pub fn target_dir(workspace: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from)
}

/// `QUEST_PREBUILT`: a folder of exercise binaries built elsewhere ([`prebuild`]), used
/// instead of cargo, for a machine with no Rust toolchain (a GPU box). Each binary is
/// named by its source's [`prebuilt_key`], so an edited source has none and is refused.
pub const PREBUILT_ENV: &str = crate::settings::PREBUILT.name;
/// The list [`prebuild`] keeps beside the binaries: `<key> <source>` per line.
const PREBUILT_LIST: &str = "prebuilt.txt";

/// The name of a prebuilt binary: the first 16 hex digits of its source's sha256.
pub fn prebuilt_key(source: &[u8]) -> String {
    crate::course::sha256_hex(source)[..16].to_owned()
}

/// Builds `source` (any exercise file) as the lab binary, with cargo in `workspace`
/// and the same profile as quest itself; returns a copy of the binary kept for this
/// exact source. Compiler errors stream to the terminal as cargo prints them; `quiet`
/// hides cargo's progress lines. With `QUEST_PREBUILT` set, takes the binary built for
/// this exact source from that folder instead, and never calls cargo.
pub fn build(workspace: &Path, source: &Path, quiet: bool) -> Result<PathBuf> {
    match crate::settings::PREBUILT.os() {
        Some(dir) => prebuilt(Path::new(&dir), source),
        None => build_with_cargo(workspace, source, quiet, !cfg!(debug_assertions)),
    }
}

/// The binary in `dir` built from exactly this `source`, or why there is none.
fn prebuilt(dir: &Path, source: &Path) -> Result<PathBuf> {
    let bytes =
        std::fs::read(source).with_context(|| format!("could not read {}", source.display()))?;
    let key = prebuilt_key(&bytes);
    let binary = dir.join(&key);
    if binary.is_file() {
        return Ok(binary);
    }
    let list = std::fs::read_to_string(dir.join(PREBUILT_LIST)).unwrap_or_default();
    let built_from = list
        .lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(_, path)| Path::new(path).file_name() == source.file_name())
        .map_or_else(String::new, |(key, path)| {
            format!(" It holds {path} as it was then ({key}): the source changed since.")
        });
    anyhow::bail!(
        "{PREBUILT_ENV}={} holds no exercise binary for {} as it is now (sha256 {key}…).{built_from} \
         Build the binaries again from this source where cargo is (`quest dev prebuild <lesson> \
         --out <folder>`, see docs/gpu/carry.sh), or unset {PREBUILT_ENV} to build here",
        dir.display(),
        source.display()
    )
}

/// Builds `source` with cargo ([`build`] without `QUEST_PREBUILT`; in the release
/// profile when `release`, whatever quest's own) and puts a copy in `dir` under its
/// [`prebuilt_key`], listed in `dir`'s `prebuilt.txt`. Cargo builds against whatever MLX
/// its environment asks for (`QUEST_MLX=cuda`, `CARGO_TARGET_DIR`), so a CPU quest here
/// can build a GPU machine's exercises.
pub fn prebuild(workspace: &Path, source: &Path, dir: &Path, release: bool) -> Result<PathBuf> {
    let built = build_with_cargo(workspace, source, true, release)?;
    let key = prebuilt_key(&std::fs::read(source)?);
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let kept = dir.join(&key);
    std::fs::copy(&built, &kept).with_context(|| format!("could not write {}", kept.display()))?;
    let list_path = dir.join(PREBUILT_LIST);
    let mut list = std::fs::read_to_string(&list_path).unwrap_or_default();
    let line = format!("{key} {}", source.display());
    if !list.lines().any(|l| l == line) {
        list.push_str(&line);
        list.push('\n');
        std::fs::write(&list_path, list)?;
    }
    Ok(kept)
}

fn build_with_cargo(
    workspace: &Path,
    source: &Path,
    quiet: bool,
    release: bool,
) -> Result<PathBuf> {
    let profile = if release { "release" } else { "debug" };
    let target = target_dir(workspace);
    let bytes =
        std::fs::read(source).with_context(|| format!("could not read {}", source.display()))?;
    // Keyed by the source and by this quest (a rebuilt quest may change the library).
    let quest_stamp = std::env::current_exe()
        .and_then(std::fs::metadata)
        .and_then(|m| m.modified())
        .map(|t| format!("{t:?}"))
        .unwrap_or_default();
    let mut key = bytes.clone();
    key.extend_from_slice(quest_stamp.as_bytes());
    let kept = target
        .join(profile)
        .join("quest-lab-builds")
        .join(&crate::course::sha256_hex(&key)[..16]);
    if kept.is_file() {
        // Used now: the newest builds are the ones kept.
        let _ = std::fs::File::options()
            .write(true)
            .open(&kept)
            .and_then(|file| file.set_modified(std::time::SystemTime::now()));
        return Ok(kept);
    }
    std::fs::create_dir_all(kept.parent().unwrap_or(&target))?;
    // One build at a time: the lab binary is one file, whichever source it holds.
    let lock_path = target.join("quest-lab.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("could not open {}", lock_path.display()))?;
    fs4::FileExt::lock(&lock).with_context(|| format!("could not lock {}", lock_path.display()))?;
    // Another quest may have built the same source while this one waited.
    if kept.is_file() {
        return Ok(kept);
    }
    let source = std::path::absolute(source)?;
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(workspace)
        .args(["build", "-p", "quest-lab", "--bin", "quest-lab"])
        .env(crate::settings::LAB_SOURCE.name, &source);
    if quiet {
        cargo.arg("--quiet");
    }
    if profile == "release" {
        cargo.arg("--release");
    }
    let child = cargo.spawn().context("could not start cargo")?;
    let status = wait_child(child, None)?.0;
    anyhow::ensure!(status.success(), BuildFailed);
    let built = target.join(profile).join("quest-lab");
    let partial = kept.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    // A copy, not a link: the next build may rewrite the linker's output in place.
    std::fs::copy(&built, &partial)
        .with_context(|| format!("could not keep {}", built.display()))?;
    std::fs::rename(&partial, &kept)?;
    forget_old_builds(kept.parent().unwrap_or(&target), KEPT_BUILDS);
    Ok(kept)
}

/// How many built exercises are kept (each is a whole binary, 100+ MB in a debug build).
const KEPT_BUILDS: usize = 6;

/// Removes all but the `keep` newest builds in `dir`, and never one used in the last
/// twenty minutes (another quest may be about to run it again: a submission runs its
/// binary for minutes). An hour kept every build of a walk through the course, a hundred
/// binaries of 200 MB on a 2-core machine, until the disk filled.
fn forget_old_builds(dir: &Path, keep: usize) {
    let in_use = std::time::SystemTime::now() - Duration::from_secs(20 * 60);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut builds: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    builds.sort_by_key(|build| std::cmp::Reverse(build.0));
    for (_, path) in builds.into_iter().skip(keep).filter(|(at, _)| *at < in_use) {
        let _ = std::fs::remove_file(path);
    }
}

/// The build failed; cargo has already printed why.
#[derive(Debug)]
pub struct BuildFailed;

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the exercise did not build")
    }
}

impl std::error::Error for BuildFailed {}

/// A file of this process's own in the temp folder, for one exchange with an exercise
/// (`quest-WHAT-PID-N.EXT`, N counting up), none there yet.
fn scratch(what: &str, ext: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "quest-{what}-{}-{}.{ext}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// Runs a built exercise once and reads the report it wrote.
pub fn run(binary: &Path, request: &RunRequest) -> Result<Report> {
    run_with_env(binary, request, &[])
}

/// [`run`], with more environment for the exercise (e.g. `QUEST_QMV=mlx`).
pub fn run_with_env(binary: &Path, request: &RunRequest, env: &[(&str, &str)]) -> Result<Report> {
    // Which pieces run travels on quest's line, never in the environment, which the code
    // it judges can write (`std::env::set_var`).
    let hello = crate::line::Hello {
        quest_pieces: env
            .iter()
            .any(|&(name, value)| name == crate::settings::PIECES.name && value == "quest"),
        // The time to first token quest awards is the prefill's: the model's first
        // forward, which a fresh process pays once, runs before the prompt is sent.
        warm_up: true,
        ..Default::default()
    };
    if request.piece == Some(crate::course::spec::Piece::Server) {
        return serve(binary, request, env, hello);
    }
    let (report_path, arrivals) = start(binary, request, env, hello)?;
    let report = Report::read(&report_path);
    let _ = std::fs::remove_file(&report_path);
    let mut report = timed_by_quest(report?, &arrivals, request)?;
    report.calls = piece_calls(&arrivals)?;
    Ok(report)
}

/// The piece check alone ([`crate::lm::piece_check`]): the exercise is started, hands its
/// pieces to the model, and quest's code checks `piece` against quest's own in its
/// process, then ends it. `None` where the exercise never handed `piece` over (no
/// `with_pieces`, or a sampler never given to the loop).
pub fn check_piece(
    binary: &Path,
    request: &RunRequest,
    piece: crate::course::spec::Piece,
) -> Result<Option<crate::lm::piece_check::Verdict>> {
    let hello = crate::line::Hello {
        check: Some(piece),
        check_alone: true,
        ..Default::default()
    };
    let (report_path, arrivals) = start(binary, request, &[], hello)?;
    let _ = std::fs::remove_file(&report_path);
    arrivals
        .checked
        .map(|json| {
            serde_json::from_str(&json)
                .with_context(|| format!("the piece check's verdict does not read: {json}"))
        })
        .transpose()
}

/// The command that starts `binary` on `request`, its report at `report_path`: the model,
/// the tokens and `env`, never the prompt or the pieces (those travel on quest's line).
fn exercise_command(
    binary: &Path,
    request: &RunRequest,
    env: &[(&str, &str)],
    report_path: &Path,
) -> Command {
    let env: Vec<(&str, &str)> = env
        .iter()
        .copied()
        .filter(|&(name, _)| name != crate::settings::PIECES.name)
        .collect();
    let mut command = Command::new(binary);
    command
        .env(crate::settings::MODEL.name, &request.model)
        .env(
            crate::settings::MAX_TOKENS.name,
            request.max_tokens.to_string(),
        )
        .env(crate::settings::REPORT.name, report_path)
        // The prompt comes over quest's clock, once the model is loaded: not from here.
        .env_remove(crate::settings::PROMPT.name)
        .env_remove(crate::settings::PIECES.name)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// The clients at once at each level of quest's load on a server, and the requests each
/// sends one after another.
pub const SERVER_LEVELS: [usize; 3] = [1, 4, 16];
pub const SERVER_TURNS: usize = 2;

/// A server exercise (`Exercise::serve_http`) under quest's load: started, asked where it
/// listens (quest's line), sent requests that do not read (each must get OpenAI's error,
/// and the server keep serving), then driven by quest's clients at every level
/// ([`SERVER_LEVELS`]), each token timed as it reaches them; then stopped. The report is
/// quest's own, from what its clients saw: every reply's text (as the model's token ids),
/// and each level's times.
fn serve(
    binary: &Path,
    request: &RunRequest,
    env: &[(&str, &str)],
    hello: crate::line::Hello,
) -> Result<Report> {
    use super::load;
    let (report_path, child, clock) = spawn(binary, request, env, hello)?;
    let pid = child.id();
    let limit = request.time_limit;
    let waiter = std::thread::spawn(move || wait_child(child, limit));
    let stop = || {
        // SAFETY: kill(2) with a pid quest started; `wait_child` reaps it.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    };
    let port = loop {
        if let Some(port) = clock.listening() {
            break Some(port);
        }
        if waiter.is_finished() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let plan = server_plan(request);
    let outcome = port.map(|port| load::refusals(port).and_then(|()| load::drive(port, &plan)));
    stop();
    let waited = waiter
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("waiting for the server panicked")));
    let arrivals = clock.arrivals();
    let _ = std::fs::remove_file(&report_path);
    let (status, stderr) = waited?;
    let Some(outcome) = outcome else {
        if let Some(killed) = Killed::from_status(Program::Exercise, &status, &stderr) {
            anyhow::bail!(killed);
        }
        let stderr = stderr.trim();
        anyhow::bail!(RunFailed(if stderr.is_empty() {
            format!("the server ended with {status} before it said where it listens: end `main` with `run.serve_http(…)`")
        } else {
            stderr.to_owned()
        }));
    };
    let levels = outcome.map_err(|e| RunFailed(format!("quest's clients: {e:#}")))?;
    let mut report = served_report(request, &levels)?;
    report.calls = piece_calls(&arrivals)?;
    Ok(report)
}

/// How often the model called each piece, as the exercise's end of the line last sent it.
fn piece_calls(
    arrivals: &clock::Arrivals,
) -> Result<Option<std::collections::BTreeMap<crate::course::spec::Piece, crate::lm::Calls>>> {
    arrivals
        .calls
        .as_ref()
        .map(|calls| {
            serde_json::from_str(calls)
                .with_context(|| format!("the exercise's piece counts do not read: {calls}"))
        })
        .transpose()
}

/// What quest's clients send a server: every question of the batching trace in turn
/// (the lesson's prompt first), each asking for its trace's tokens.
fn server_plan(request: &RunRequest) -> super::load::Plan {
    let trace = crate::lm::batching::trace(
        crate::lm::batching::TRACE_REQUESTS,
        0.0,
        request.max_tokens,
        &request.prompt,
        crate::lm::batching::TRACE_SEED,
    );
    super::load::Plan {
        levels: SERVER_LEVELS.to_vec(),
        turns: SERVER_TURNS,
        questions: trace.iter().map(|p| p.question.clone()).collect(),
        max_tokens: trace.iter().map(|p| p.max_tokens).collect(),
    }
}

/// quest's report of a server's load: each reply's text as token ids (the lesson's model's
/// tokenizer), in the plan's order; each level's times; the last level's as the run's.
fn served_report(request: &RunRequest, levels: &[super::load::Level]) -> Result<Report> {
    let tokenizer = tokenizer_of(&request.model)?;
    let mut rows = Vec::new();
    let mut texts = Vec::new();
    let mut times = Vec::new();
    for level in levels {
        let mut tokens = 0;
        for reply in &level.replies {
            let ids = tokenizer.encode(&reply.text)?;
            tokens += ids.len();
            rows.push(ids);
            texts.push(reply.text.clone());
        }
        let wall = level
            .replies
            .iter()
            .map(|r| r.latency_ms)
            .fold(0.0, f64::max);
        times.push((
            level.clients,
            clock::ServedTimes {
                ttft_ms: level.replies.iter().map(|r| r.ttft_ms).collect(),
                latency_ms: level.replies.iter().map(|r| r.latency_ms).collect(),
                tok_s: if wall > 0.0 {
                    tokens as f64 * 1e3 / wall
                } else {
                    0.0
                },
                itl_ms: level
                    .replies
                    .iter()
                    .flat_map(|r| r.gaps_ms.clone())
                    .collect(),
            },
        ));
    }
    let last = times.last().map(|(_, t)| t.clone()).unwrap_or_default();
    let mut report = Report::from_clients(&request.model, rows, texts);
    report.ttft_ms = clock::ServedTimes::quantile(&last.ttft_ms, 0.5);
    report.decode_tok_s = last.tok_s;
    report.served = Some(last);
    report.levels = times;
    Ok(report)
}

/// The model's tokenizer, loaded once a process (its weights left lazy).
fn tokenizer_of(model: &str) -> Result<std::sync::Arc<crate::lm::Tokenizer>> {
    static LOADED: Mutex<Vec<(String, std::sync::Arc<crate::lm::Tokenizer>)>> =
        Mutex::new(Vec::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, tokenizer)) = loaded.iter().find(|(name, _)| name == model) {
        return Ok(tokenizer.clone());
    }
    let (_, tokenizer) = crate::lm::load_lazy(model)?;
    let tokenizer = std::sync::Arc::new(tokenizer);
    loaded.push((model.to_owned(), tokenizer.clone()));
    Ok(tokenizer)
}

/// Starts `binary` on `request` with quest's line saying `hello` (and the lesson's piece),
/// quest's clock listening: where its report will be, the process, the clock.
fn spawn(
    binary: &Path,
    request: &RunRequest,
    env: &[(&str, &str)],
    hello: crate::line::Hello,
) -> Result<(PathBuf, std::process::Child, clock::Clock)> {
    let hello = crate::line::Hello {
        piece: request.piece,
        ..hello
    };
    let report_path = scratch("report", "json");
    let mut command = exercise_command(binary, request, env, &report_path);
    let mut clock = clock::Clock::attach(&mut command, hello, &request.prompt)?;
    let child = command
        .spawn()
        .with_context(|| format!("could not start {}", binary.display()))?;
    clock.listen()?;
    Ok((report_path, child, clock))
}

/// Starts `binary` on `request` with quest's line saying `hello`, and waits for it: where
/// its report is, and what quest's clock saw. An exercise that was killed or failed is an
/// error saying how.
fn start(
    binary: &Path,
    request: &RunRequest,
    env: &[(&str, &str)],
    hello: crate::line::Hello,
) -> Result<(PathBuf, clock::Arrivals)> {
    let (report_path, child, clock) = spawn(binary, request, env, hello)?;
    let waited = wait_child(child, request.time_limit);
    let arrivals = clock.arrivals();
    let (status, stderr) = waited?;
    if let Some(killed) = Killed::from_status(Program::Exercise, &status, &stderr) {
        anyhow::bail!(killed);
    }
    if !status.success() {
        let stderr = stderr.trim();
        anyhow::bail!(RunFailed(if stderr.is_empty() {
            format!("the exercise ended with {status} and said nothing")
        } else {
            stderr.to_owned()
        }));
    }
    Ok((report_path, arrivals))
}

/// The report with quest's clock's times in place of any the exercise wrote, its own
/// timer's kept beside them and where the two disagree; refused where the clock cannot
/// time a run that decoded tokens ([`clock::ClockProblem`]).
fn timed_by_quest(
    mut report: Report,
    arrivals: &clock::Arrivals,
    request: &RunRequest,
) -> Result<Report> {
    let rows = if report.rows.is_empty() {
        vec![report.tokens.clone()]
    } else {
        report.rows.clone()
    };
    let rows: Vec<Vec<u32>> = rows.into_iter().filter(|row| !row.is_empty()).collect();
    // The prefill's peak as quest's loop sent it on the line, never the file's.
    report.prefill_peak_bytes = arrivals.prefill_peak_bytes.unwrap_or(0);
    // The weights a step reads as quest's model sent them on the line, over the file's.
    if let Some(bytes) = arrivals.weight_bytes_per_token {
        report.weight_bytes_per_token = bytes;
    }
    if report.requests > 0 {
        return served_by_quest(report, arrivals, request);
    }
    let Some(clocked) = clock::clocked(arrivals, &rows)? else {
        // Nothing decoded, nothing timed: whatever times the file holds were written by
        // the process judged, so none of them stands.
        report.load_ms = 0.0;
        report.warm_up_ms = 0.0;
        report.ttft_ms = 0.0;
        report.decode_tok_s = 0.0;
        report.token_ms.clear();
        return Ok(report);
    };
    let timer_tok_s = report
        .timer
        .as_ref()
        .map_or(0.0, |timer| timer.decode_tok_s);
    report.disagreement = clock::disagreement(
        arrivals,
        &clocked,
        timer_tok_s,
        report.tokens.len(),
        rows.len(),
    );
    report.load_ms = clocked.load_ms;
    report.warm_up_ms = clocked.warm_up_ms;
    report.ttft_ms = clocked.ttft_ms;
    report.decode_tok_s = clocked.decode_tok_s;
    report.token_ms = clocked.token_ms;
    report.held_back = clocked.held_back;
    // A loop that keeps several tokens a call: its calls as quest's clock saw them asked.
    if report.forward_calls > 0 {
        report.forward_calls = arrivals.asked_ms.len();
    }
    Ok(report)
}

/// A served trace's report timed by quest's clock: each request from its arrival on
/// quest's own trace (the same seed and settings the exercise's), its time to first token
/// the median request's and its rate every token's over the run.
fn served_by_quest(
    mut report: Report,
    arrivals: &clock::Arrivals,
    request: &RunRequest,
) -> Result<Report> {
    use crate::lm::batching;
    let planned = batching::trace(
        report.requests,
        batching::mean_gap_ms()?,
        request.max_tokens,
        &request.prompt,
        batching::TRACE_SEED,
    );
    let at: Vec<f64> = planned.iter().map(|p| p.at_ms).collect();
    anyhow::ensure!(
        report.rows.len() == at.len(),
        "the report holds {} requests' tokens for a trace of {}",
        report.rows.len(),
        at.len()
    );
    let served = clock::served(arrivals, &at, &report.rows)?;
    let ready = arrivals.ready_ms.unwrap_or_default();
    let loaded = arrivals.loaded_ms.unwrap_or(ready);
    report.load_ms = loaded;
    report.warm_up_ms = (ready - loaded).max(0.0);
    report.ttft_ms = clock::ServedTimes::quantile(&served.ttft_ms, 0.5);
    report.decode_tok_s = served.tok_s;
    report.token_ms.clear();
    report.held_back = None;
    report.served = Some(served);
    Ok(report)
}

/// quest's own model (every piece its default) on `request`'s model and prompt, its
/// greedy tokens and every step's logits: the reference of a lesson's `logits:` check,
/// run in quest's process.
pub fn reference(request: &RunRequest) -> Result<Greedy> {
    Ok(reference_run(request, false)?.0)
}

/// [`reference`], with every step's hidden state after each layer (`with_layers`).
pub fn reference_run(request: &RunRequest, with_layers: bool) -> Result<(Greedy, Layers)> {
    let (model, tokenizer) = crate::lm::load(&request.model)?;
    if with_layers {
        model.record_layers();
    }
    let run = greedy(
        &model,
        &tokenizer,
        &request.prompt,
        request.max_tokens,
        None,
        true,
    )?;
    Ok((run, model.recorded_layers()))
}

/// Runs a built exercise that ends with [`Exercise::decode`](super::Exercise::decode)
/// teacher-forced on `tokens` (each step feeds the next of them) and reads back its report
/// and every step's logits.
pub fn run_forced(
    binary: &Path,
    request: &RunRequest,
    tokens: &[u32],
) -> Result<(Report, Vec<Vec<f32>>)> {
    let (report, logits, _) = run_forced_with(binary, request, tokens, false)?;
    Ok((report, logits))
}

/// [`run_forced`], and with `with_layers` every step's hidden state after each layer
/// where the exercise's model is quest's decoder (`None` where it wrote none: a decoder
/// of the learner's own).
pub fn run_forced_with(
    binary: &Path,
    request: &RunRequest,
    tokens: &[u32],
    with_layers: bool,
) -> Result<(Report, Vec<Vec<f32>>, Option<Layers>)> {
    let (path, layers_path) = (scratch("logits", "f32"), scratch("layers", "f32"));
    let forced: Vec<String> = tokens.iter().map(u32::to_string).collect();
    let (forced, path_text) = (forced.join(","), path.display().to_string());
    let layers_text = layers_path.display().to_string();
    let mut env = vec![
        (crate::settings::FORCE.name, forced.as_str()),
        (crate::settings::LOGITS.name, path_text.as_str()),
    ];
    if with_layers {
        env.push((crate::settings::LAYERS.name, layers_text.as_str()));
    }
    let report = run_with_env(binary, request, &env);
    let logits = match &report {
        Ok(report) if path.exists() => read_logits(&path, report.tokens.len()),
        // An exercise that does not end with `Exercise::decode` writes none.
        _ => Ok(Vec::new()),
    };
    let layers = if layers_path.exists() {
        Some(read_layers(&layers_path))
    } else {
        None
    };
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&layers_path);
    Ok((report?, logits?, layers.transpose()?))
}

/// What a sampler's checked run left: its report, every step's logits and every step's
/// draws from them ([`run_drawn`]).
pub struct Drawn {
    pub report: Report,
    pub logits: Vec<Vec<f32>>,
    pub draws: Vec<Vec<u32>>,
}

/// Runs a built exercise that ends with
/// [`Exercise::decode_sampled`](super::Exercise::decode_sampled) asking `per_step` draws a
/// step with `sampling`, and reads back its report, logits and draws (none where it wrote
/// none: an exercise that does not sample).
pub fn run_drawn(
    binary: &Path,
    request: &RunRequest,
    sampling: &crate::lm::Sampling,
    per_step: usize,
) -> Result<Drawn> {
    let (logits_path, draws_path) = (scratch("sampled-logits", "f32"), scratch("draws", "u32"));
    let (logits_text, draws_text) = (
        logits_path.display().to_string(),
        draws_path.display().to_string(),
    );
    let (sampling, per_step_text) = (sampling.to_string(), per_step.to_string());
    let env = [
        (crate::settings::SAMPLING.name, sampling.as_str()),
        (crate::settings::LOGITS.name, logits_text.as_str()),
        (crate::settings::DRAWS.name, draws_text.as_str()),
        (crate::settings::DRAWS_PER_STEP.name, per_step_text.as_str()),
    ];
    let drawn = run_with_env(binary, request, &env).and_then(|report| {
        if !draws_path.exists() || !logits_path.exists() {
            return Ok(Drawn {
                report,
                logits: Vec::new(),
                draws: Vec::new(),
            });
        }
        let steps = report.tokens.len();
        let logits = read_logits(&logits_path, steps)?;
        let bytes = std::fs::read(&draws_path)?;
        anyhow::ensure!(
            bytes.len() == steps * per_step * 4,
            "{} holds {} bytes, not {steps} steps of {per_step} draws",
            draws_path.display(),
            bytes.len()
        );
        let draws = bytes
            .chunks_exact(per_step * 4)
            .map(|step| {
                step.chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
            .collect();
        Ok(Drawn {
            report,
            logits,
            draws,
        })
    });
    let _ = std::fs::remove_file(&logits_path);
    let _ = std::fs::remove_file(&draws_path);
    drawn
}

/// The exercise ran but failed; its own error output is kept.
#[derive(Debug)]
pub struct RunFailed(pub String);

impl std::fmt::Display for RunFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunFailed {}

/// Which program quest started as a child process (a signal may end it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// An exercise binary (the learner's code, a lesson's starting code, a solution).
    Exercise,
    /// The Python peer of `quest bench` and `quest fit --peer` (mlx-lm).
    PythonPeer,
}

/// A child process ended by a signal, whatever it printed before: what the learner is told
/// first, since its last lines (a download's log, say) are not why it stopped.
#[derive(Debug)]
pub struct Killed {
    pub program: Program,
    pub signal: i32,
    /// What it wrote to stderr before it died, trimmed.
    pub said: String,
}

impl Killed {
    /// `Some` when `status` says a signal ended the process.
    pub fn from_status(
        program: Program,
        status: &std::process::ExitStatus,
        said: &str,
    ) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            status.signal().map(|signal| Killed {
                program,
                signal,
                said: said.trim().to_owned(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = (program, status, said);
            None
        }
    }

    /// The signal's name (`SIGILL`), or its number where quest does not name it.
    pub fn signal_name(&self) -> String {
        match self.signal {
            libc::SIGILL => "SIGILL".into(),
            libc::SIGSEGV => "SIGSEGV".into(),
            libc::SIGBUS => "SIGBUS".into(),
            libc::SIGFPE => "SIGFPE".into(),
            libc::SIGABRT => "SIGABRT".into(),
            libc::SIGKILL => "SIGKILL".into(),
            libc::SIGTERM => "SIGTERM".into(),
            n => format!("signal {n}"),
        }
    }

    /// An illegal instruction: code built for a newer CPU than this one.
    pub fn is_illegal_instruction(&self) -> bool {
        self.signal == libc::SIGILL
    }

    /// The last `n` lines it printed before it died.
    pub fn last_lines(&self, n: usize) -> String {
        let lines: Vec<&str> = self.said.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl std::fmt::Display for Killed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match self.program {
            Program::Exercise => "the exercise",
            Program::PythonPeer => "the Python peer",
        };
        write!(f, "{who} was killed by {}", self.signal_name())
    }
}

impl std::error::Error for Killed {}

/// The exercise ran longer than its time limit and was stopped.
#[derive(Debug)]
pub struct TimedOut(pub Duration);

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped after {} s (the time limit)", self.0.as_secs())
    }
}

impl std::error::Error for TimedOut {}

/// Processes quest started and is waiting for: ended with quest (see
/// [`end_children_on_signal`]).
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Waits for `child` (collecting its stderr, if piped), killing it after `limit`.
/// While it runs it is registered, so that a SIGINT or SIGTERM to quest ends it too.
fn wait_child(
    mut child: Child,
    limit: Option<Duration>,
) -> Result<(std::process::ExitStatus, String)> {
    let pid = child.id();
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    });
    let started = Instant::now();
    let result = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if limit.is_some_and(|limit| started.elapsed() > limit) => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(anyhow::Error::new(TimedOut(limit.unwrap_or_default())));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => break Err(error.into()),
        }
    };
    CHILDREN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&p| p != pid);
    let stderr = stderr
        .and_then(|thread| thread.join().ok())
        .unwrap_or_default();
    Ok((result?, stderr))
}

/// Makes SIGINT and SIGTERM to quest end the exercise (and cargo) it started, then
/// quest itself (exit status 130), so no exercise keeps running orphaned.
pub fn end_children_on_signal() {
    let _ = ctrlc::set_handler(|| {
        let children = CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for pid in children {
            // SAFETY: kill(2) with a pid quest started and has not reaped yet.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        std::process::exit(130);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_a_signal_ended_is_told_from_one_that_exited() {
        let status = |script: &str| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .status()
                .unwrap()
        };
        let killed = Killed::from_status(Program::Exercise, &status("kill -ILL $$"), "fetching…\n")
            .expect("SIGILL is a signal");
        assert_eq!(killed.signal_name(), "SIGILL");
        assert!(killed.is_illegal_instruction());
        assert_eq!(killed.last_lines(5), "fetching…");
        assert_eq!(killed.to_string(), "the exercise was killed by SIGILL");
        let segv = Killed::from_status(Program::PythonPeer, &status("kill -SEGV $$"), "").unwrap();
        assert_eq!(segv.to_string(), "the Python peer was killed by SIGSEGV");
        assert!(!segv.is_illegal_instruction());
        assert!(Killed::from_status(Program::Exercise, &status("exit 3"), "error").is_none());
    }

    #[test]
    fn a_child_over_its_time_limit_is_stopped() {
        let child = Command::new("sleep").arg("5").spawn().unwrap();
        let started = Instant::now();
        let error = wait_child(child, Some(Duration::from_millis(100))).unwrap_err();
        assert!(error.downcast_ref::<TimedOut>().is_some(), "{error:#}");
        assert!(started.elapsed() < Duration::from_secs(4));
        assert!(CHILDREN.lock().unwrap().is_empty());
    }
}
