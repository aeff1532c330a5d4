//! The exercise's end of quest's line: the socket quest starts an exercise with, at its
//! file descriptor 3 (`QUEST_LINE`). What travels on it is what the judged code must
//! not be able to set or write itself: which pieces run (quest's own for a baseline, the
//! learner's otherwise), the prompt, handed over only once the model is loaded, and
//! every token as it reaches the host, which quest timestamps on its own clock
//! (`lab::clock`, quest's end). Run by hand, an exercise has no line: it reads
//! `QUEST_PROMPT` and `QUEST_PIECES` and times itself.
//!
//! quest → exercise, one JSON line each: [`Hello`] as soon as the exercise starts, then
//! the prompt (a string) once the exercise says `ready`. Exercise → quest, a line each:
//! `loaded` (the model built, its warm-up forward next, where asked); `checked <verdict>`
//! (the piece check's); `ready`; `asked` (quest's model asked for a forward call, about to
//! build its graph: no step's compute starts before it, [`asked`]); `first <ids>`, `token <ids>` (one step's token for every row, handed to the
//! timer as it came); `rest <ids>` (a step's tokens handed over by the report, all at
//! once); `done` (the timer's mark); `calls <counts>` (the seam's); `end`.
//!
//! Only quest's code in the exercise's process writes on the line: sending is private to
//! this crate, so the judged code can neither write a verdict or counts of its own nor
//! reach the descriptor itself (an exercise is built with `unsafe` forbidden).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The descriptor the exercise finds its end of the line at.
pub const FD: i32 = 3;

/// What quest tells an exercise as it starts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Run quest's own pieces (the baseline a piece is measured against) whatever pieces
    /// the learner's code hands the model: `QUEST_PIECES=quest` of a run by hand.
    pub quest_pieces: bool,
    /// Check this piece against quest's own before anything else
    /// (the piece check), where the exercise hands its pieces to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<crate::course::spec::Piece>,
    /// The piece the lesson has the learner write: the model runs the learner's code for
    /// it alone and keeps quest's own for every other part, kernels included, in the
    /// learner's run and in its baseline alike. `None` (a run by hand, a lesson without a
    /// piece): every piece the learner hands over runs, and none of quest's kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub piece: Option<crate::course::spec::Piece>,
    /// End the process once the piece check has answered: quest asked for it alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_alone: bool,
    /// Run one token through a model as it is loaded (`lm::load`), before the prompt: what
    /// a fresh process's first forward pays once is then timed apart from the prefill.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warm_up: bool,
}

/// Whether quest asked for a warm-up forward as the model is loaded.
pub fn warm_up_asked() -> bool {
    hello().is_some_and(|hello| hello.warm_up)
}

/// The socket's two directions, used one exchange at a time.
struct Channel {
    stream: UnixStream,
    replies: BufReader<UnixStream>,
}

/// quest's line: what it said as the exercise started (read once, never changed), and
/// the channel.
struct Line {
    hello: Hello,
    channel: Mutex<Channel>,
}

fn line() -> Option<&'static Line> {
    static LINE: OnceLock<Option<Line>> = OnceLock::new();
    LINE.get_or_init(|| {
        use std::os::fd::FromRawFd;
        let fd: i32 = crate::settings::LINE.os()?.to_str()?.parse().ok()?;
        // SAFETY: quest put its end of a socket pair at this descriptor for this process
        // (`lab::clock::Clock::attach`), and nothing else in the exercise owns it.
        let stream = unsafe { UnixStream::from_raw_fd(fd) };
        let mut replies = BufReader::new(stream.try_clone().ok()?);
        let mut first = String::new();
        replies.read_line(&mut first).ok()?;
        let hello = serde_json::from_str(first.trim_end()).ok()?;
        Some(Line {
            hello,
            channel: Mutex::new(Channel { stream, replies }),
        })
    })
    .as_ref()
}

/// What quest said as the exercise started, where quest started it.
fn hello() -> Option<&'static Hello> {
    line().map(|line| &line.hello)
}

/// Whether quest's line is there (the exercise was started by quest).
pub fn connected() -> bool {
    line().is_some()
}

/// Whether this run keeps quest's own pieces: quest says so on its line; run by hand,
/// `QUEST_PIECES=quest` does. The environment is not asked when quest runs the exercise:
/// the code it judges can write its own environment.
pub fn quest_pieces() -> bool {
    match hello() {
        Some(hello) => hello.quest_pieces,
        None => crate::settings::PIECES.raw().as_deref() == Some("quest"),
    }
}

/// The piece the lesson has the learner write, as quest said on its line ([`Hello::piece`]).
pub fn lesson_piece() -> Option<crate::course::spec::Piece> {
    hello()?.piece
}

/// The piece quest asked this run to check first, and whether to end after it.
pub(crate) fn piece_check() -> Option<(crate::course::spec::Piece, bool)> {
    let hello = hello()?;
    hello.check.map(|piece| (piece, hello.check_alone))
}

/// Sends one message to quest, if it listens. Best effort: a quest that stopped
/// listening has ended, and the exercise's next question to it fails.
pub(crate) fn send(message: &str) {
    if let Some(line) = line() {
        let mut channel = line.channel.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(channel.stream, "{message}");
    }
}

/// One step's tokens (one per row) as a message of `kind`.
pub(crate) fn send_step(kind: &str, ids: &[u32]) {
    if connected() {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        send(&format!("{kind} {}", ids.join(" ")));
    }
}

/// Tells quest's clock that a forward call was asked for, as quest's model (or quest's
/// wrapper around a decoder of the learner's) starts building its graph. The judged code
/// cannot move this mark later than the compute it asks for, so quest bounds the decode by
/// it whatever the code does with its tokens' hand-overs (`lab::clock`).
pub fn asked() {
    if connected() && !PREFILLING.with(std::cell::Cell::get) {
        send("asked");
    }
}

thread_local! {
    /// Inside quest's loop's prefill: its calls are the prompt's, not decode steps.
    static PREFILLING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, the prompt's forward calls, with no call marked as asked for: the clock
/// bounds the decode by the calls asked after the first token's, and a prefill of several
/// calls (a chunked one) would read as decode steps begun before it. Everything `f` does
/// is inside the time to first token all the same.
pub(crate) fn prefilling<T>(f: impl FnOnce() -> T) -> T {
    PREFILLING.with(|p| p.set(true));
    let out = f();
    PREFILLING.with(|p| p.set(false));
    out
}

/// Tells quest the model is loaded and waits for the prompt; `None` when no line is there.
pub(crate) fn ready() -> Result<Option<String>> {
    let Some(line) = line() else {
        return Ok(None);
    };
    let mut channel = line.channel.lock().unwrap_or_else(|e| e.into_inner());
    writeln!(channel.stream, "ready").context("quest stopped listening")?;
    let mut reply = String::new();
    channel
        .replies
        .read_line(&mut reply)
        .context("quest sent no prompt")?;
    let prompt: String = serde_json::from_str(reply.trim_end())
        .with_context(|| format!("quest sent no prompt but {reply:?}"))?;
    Ok(Some(prompt))
}
