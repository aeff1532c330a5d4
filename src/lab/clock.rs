//! quest's clock: the numbers quest shows, records and awards are timed here, in quest's
//! process, not by the exercise it judges.
//!
//! quest starts an exercise with one end of a socket pair as its descriptor 3
//! ([`crate::line`], the exercise's end, says what travels). The exercise loads its
//! model, then asks for the prompt ([`crate::lab::Exercise::prompt`]), and quest starts its
//! clock as it hands the prompt over, so no prefill can begin before it does. Every token
//! the exercise holds on the host comes to quest as its value
//! ([`crate::lab::Timer::first_token`], [`crate::lab::Timer::token`]; the report hands over
//! the rest), and quest timestamps each arrival with its own monotonic clock, as mlx-lm's
//! `stream_generate` times the tokens it yields to its caller. The learner's own
//! [`crate::lab::Timer`] stays their instrument: its `done` mark travels too, so quest can
//! say where the two disagree and why.
//!
//! Where a token is handed over is the exercise's choice, so the decode is not timed by
//! the hand-overs alone: quest's model marks each forward call as it is asked for
//! ([`crate::line::asked`]), which no step's compute can precede, and [`clocked`] bounds
//! the decode by those marks ([`decode_tok_s`]). Moving, delaying or batching any
//! hand-over then never makes a decode faster than its compute: a first token held back
//! lengthens the time to first token, the decode stays what it was, and the run is named
//! for it ([`HeldBack`]).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::line::{self, Hello};

// ---------------------------------------------------------------------------------------
// quest's side.

/// What kind of message a token arrived in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The first token, marked by the exercise's timer as it had it.
    First,
    /// A later token, marked as it had it.
    Token,
    /// Handed over by the report, with every token not marked before it.
    Rest,
}

/// One step's tokens as they reached quest: ms after the exercise was started.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrival {
    pub at_ms: f64,
    pub sent: Sent,
    pub ids: Vec<u32>,
}

/// Everything quest's clock saw of one run, in ms after the exercise was started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arrivals {
    /// The model was built, its warm-up forward next (where quest asked for one).
    pub loaded_ms: Option<f64>,
    /// The exercise said its model was loaded (and warmed up).
    pub ready_ms: Option<f64>,
    /// quest sent the prompt (its clock's zero for the time to first token).
    pub prompt_sent_ms: Option<f64>,
    /// Each step's tokens, in the order of the steps: the first token first, wherever it
    /// arrived among the others.
    pub steps: Vec<Arrival>,
    /// Each forward call quest's model was asked for, as it began building the call's
    /// graph (the warm-up's are not marked).
    pub asked_ms: Vec<f64>,
    /// The exercise's timer marked done.
    pub done_ms: Option<f64>,
    /// The piece check's verdict, as the exercise's end of the line sent it (JSON).
    pub checked: Option<String>,
    /// How often the model called each piece, counted by quest's seam (JSON).
    pub calls: Option<String>,
    /// The most bytes MLX held during the prefill, as quest's loop read them.
    pub prefill_peak_bytes: Option<u64>,
    /// The bytes of weights a decode step reads, as quest's model counted them.
    pub weight_bytes_per_token: Option<u64>,
    /// Each token of a served trace (`lm::batching::Requests::emit`) as it arrived: its
    /// request, its value.
    pub served: Vec<ServedToken>,
    /// The port a server (`Exercise::serve_http`) said it listens on.
    pub listening: Option<u16>,
}

/// One token of one request of a served trace, as it reached quest.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedToken {
    pub at_ms: f64,
    pub request: usize,
    pub token: u32,
}

/// A served trace's numbers on quest's clock: each request's times from its arrival (the
/// trace's time for it after quest sent the prompt), and every token over the whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServedTimes {
    /// Each request's time to its first token, by id.
    pub ttft_ms: Vec<f64>,
    /// Each request's time to its last token, by id.
    pub latency_ms: Vec<f64>,
    /// Every request's tokens over the time from the prompt to the last token.
    pub tok_s: f64,
    /// Between consecutive tokens of each request, every request's (a server's, as its
    /// clients saw the events; empty for a trace).
    pub itl_ms: Vec<f64>,
}

impl ServedTimes {
    /// The `q`-quantile (0 to 1) of `values`, the nearest rank's: the p99 of eight
    /// requests is the slowest.
    pub fn quantile(values: &[f64], q: f64) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(rank - 1).copied().unwrap_or(0.0)
    }
}

/// quest's times for a served trace: every request's tokens as `rows` (by id) reported
/// them must be the tokens that reached the clock, in order, and none may arrive before
/// its request did (`planned`: ms after the prompt was sent).
pub fn served(
    arrivals: &Arrivals,
    planned: &[f64],
    rows: &[Vec<u32>],
) -> Result<ServedTimes, ClockProblem> {
    let Some(sent) = arrivals.prompt_sent_ms else {
        return Err(ClockProblem::NeverReady);
    };
    let mut ttft_ms = Vec::new();
    let mut latency_ms = Vec::new();
    let mut last = sent;
    for (request, (row, &at)) in rows.iter().zip(planned).enumerate() {
        let came: Vec<&ServedToken> = arrivals
            .served
            .iter()
            .filter(|t| t.request == request)
            .collect();
        let handed: Vec<u32> = came.iter().map(|t| t.token).collect();
        if handed != *row || row.is_empty() {
            let step = handed.iter().zip(row).take_while(|(a, b)| a == b).count();
            return Err(ClockProblem::TokensDiffer {
                step,
                row: request,
                sent: handed.get(step).copied(),
                reported: row.get(step).copied(),
            });
        }
        let arrived = sent + at;
        let (first, end) = (came[0].at_ms, came[came.len() - 1].at_ms);
        if first < arrived {
            return Err(ClockProblem::ServedEarly {
                request,
                early_ms: arrived - first,
            });
        }
        ttft_ms.push(first - arrived);
        latency_ms.push(end - arrived);
        last = last.max(end);
    }
    if let Some(extra) = arrivals.served.iter().find(|t| t.request >= rows.len()) {
        return Err(ClockProblem::TokensDiffer {
            step: 0,
            row: extra.request,
            sent: Some(extra.token),
            reported: None,
        });
    }
    let tokens: usize = rows.iter().map(Vec::len).sum();
    Ok(ServedTimes {
        itl_ms: Vec::new(),
        ttft_ms,
        latency_ms,
        tok_s: if last > sent {
            tokens as f64 * 1e3 / (last - sent)
        } else {
            0.0
        },
    })
}

/// A run's numbers as quest's clock measured them.
#[derive(Clone, Debug, PartialEq)]
pub struct Clocked {
    /// From starting the exercise to its model built: the process's start and the load.
    pub load_ms: f64,
    /// From the model built to `ready`: the warm-up forward, what a fresh process's first
    /// forward pays once (0 where none ran).
    pub warm_up_ms: f64,
    /// From sending the prompt to the first token's arrival.
    pub ttft_ms: f64,
    /// Steps after the first, every row counted, over a time that holds their compute
    /// whatever the hand-overs did ([`decode_tok_s`]; 0 with fewer than two steps).
    pub decode_tok_s: f64,
    /// Between the arrivals of the steps the exercise's timer marked one by one, in order,
    /// where the first token was not held back.
    pub token_ms: Vec<f64>,
    /// The first token reached the clock after the decode had begun.
    pub held_back: Option<HeldBack>,
}

/// A run whose first token reached quest's clock after its decode had begun: its time to
/// first token holds decode steps, and the time between its first and last arrivals is
/// shorter than its decode. quest's decode rate is bounded by the steps asked for, so the
/// hold gains nothing; this names it.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldBack {
    /// Forward calls asked for after the prefill's first and before the first token
    /// arrived; `None` where the model marked no call (the decode is then timed from the
    /// prompt).
    pub asked_before: Option<usize>,
    /// The time to first token quest measured.
    pub ttft_ms: f64,
    /// From the first token's arrival to the last's, the decode as the hand-overs would
    /// time it (0 where the first token arrived last).
    pub between_ms: f64,
    /// The decode on quest's clock: the time its rate is over.
    pub decode_ms: f64,
    /// quest's decode rate.
    pub clock_tok_s: f64,
}

/// Why quest's clock cannot time a run whose report says it decoded tokens.
#[derive(Clone, Debug, PartialEq)]
pub enum ClockProblem {
    /// It never asked for the prompt: the clock has no zero.
    NeverReady,
    /// It handed over no token.
    NoTokens { reported: usize },
    /// A request's token reached the clock before the request arrived on quest's trace.
    ServedEarly { request: usize, early_ms: f64 },
    /// The tokens it handed over are not the tokens it reported.
    TokensDiffer {
        step: usize,
        row: usize,
        sent: Option<u32>,
        reported: Option<u32>,
    },
}

impl std::fmt::Display for ClockProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClockProblem::NeverReady => write!(
                f,
                "the exercise never asked quest for its prompt (`run.prompt()?` after the \
                 model is loaded), so quest's clock had no start: time to first token counts \
                 from the moment quest hands over the prompt"
            ),
            ClockProblem::NoTokens { reported } => write!(
                f,
                "the exercise reported {reported} tokens but handed none to quest's clock: \
                 pass each token to `timer.first_token(token)` / `timer.token(token)` as it \
                 reaches the host, and end with `run.report(…)`, which hands over the rest"
            ),
            ClockProblem::ServedEarly { request, early_ms } => write!(
                f,
                "request {request}'s first token reached quest's clock {early_ms:.1} ms before \
                 the request arrived on quest's trace: serve each request once `arrived()` \
                 hands it out, and leave QUEST_ARRIVAL_MS as quest set it"
            ),
            ClockProblem::TokensDiffer {
                step,
                row,
                sent,
                reported,
            } => {
                let show = |t: &Option<u32>| t.map_or("nothing".to_owned(), |t| t.to_string());
                write!(
                    f,
                    "the tokens handed to quest's clock are not the tokens reported: at step \
                     {step} (row {row}) the timer was handed {} and the report says {}: hand \
                     the timer the token the step produced, once it is on the host",
                    show(sent),
                    show(reported)
                )
            }
        }
    }
}

impl std::error::Error for ClockProblem {}

/// quest's numbers for a run that decoded `rows` (each row's tokens, all of one length),
/// from what its clock saw. A run that decoded nothing (a values exercise) is not timed.
pub fn clocked(arrivals: &Arrivals, rows: &[Vec<u32>]) -> Result<Option<Clocked>, ClockProblem> {
    let steps = rows.first().map_or(0, Vec::len);
    if steps == 0 {
        return Ok(None);
    }
    let (Some(ready), Some(sent)) = (arrivals.ready_ms, arrivals.prompt_sent_ms) else {
        return Err(ClockProblem::NeverReady);
    };
    if arrivals.steps.is_empty() {
        return Err(ClockProblem::NoTokens { reported: steps });
    }
    for step in 0..steps.max(arrivals.steps.len()) {
        for (row, tokens) in rows.iter().enumerate() {
            let handed = arrivals
                .steps
                .get(step)
                .and_then(|a| a.ids.get(row))
                .copied();
            let reported = tokens.get(step).copied();
            if handed != reported {
                return Err(ClockProblem::TokensDiffer {
                    step,
                    row,
                    sent: handed,
                    reported,
                });
            }
        }
        // A step that hands over more rows than the report holds.
        if let Some(arrival) = arrivals.steps.get(step) {
            if arrival.ids.len() != rows.len() {
                return Err(ClockProblem::TokensDiffer {
                    step,
                    row: rows.len().min(arrival.ids.len()),
                    sent: arrival.ids.get(rows.len()).copied(),
                    reported: None,
                });
            }
        }
    }
    let first = arrivals.steps[0].at_ms;
    let last = last_arrival(arrivals, steps);
    let later = (steps - 1) * rows.len();
    let asked: Vec<f64> = arrivals
        .asked_ms
        .iter()
        .copied()
        .filter(|&at| at >= sent && at <= last)
        .collect();
    let decode_tok_s = decode_tok_s(&asked, sent, first, last, steps, rows.len());
    let held_back = held_back(&asked, sent, first, last, later, decode_tok_s);
    // Per-token times only where every token after the first was marked as it came, in
    // order, after a first token not held back: a report's hand-over arrives all at once
    // and times nothing.
    let marked = arrivals.steps.iter().skip(1).all(|a| a.sent == Sent::Token)
        && arrivals.steps.windows(2).all(|p| p[0].at_ms <= p[1].at_ms)
        && held_back.is_none();
    let token_ms: Vec<f64> = if marked {
        arrivals
            .steps
            .windows(2)
            .map(|pair| pair[1].at_ms - pair[0].at_ms)
            .collect()
    } else {
        Vec::new()
    };
    // Tokens kept on the device and handed over in a burst at the end arrive microseconds
    // apart: their gaps time the hand-over, not the steps. Where the typical gap is under
    // half the decode's own step, the run has no per-token times.
    let token_ms =
        if !token_ms.is_empty() && crate::stats::median(&token_ms) < 0.5 * 1e3 / decode_tok_s {
            Vec::new()
        } else {
            token_ms
        };
    let loaded = arrivals.loaded_ms.unwrap_or(ready);
    Ok(Some(Clocked {
        load_ms: loaded,
        warm_up_ms: ready - loaded,
        ttft_ms: first - sent,
        decode_tok_s,
        token_ms,
        held_back,
    }))
}

/// When the last of the first `steps` steps arrived: the decode's end.
fn last_arrival(arrivals: &Arrivals, steps: usize) -> f64 {
    arrivals.steps[..steps]
        .iter()
        .map(|a| a.at_ms)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// quest's decode rate: the `steps - 1` steps after the first, each of `rows` tokens, over
/// a time that holds their compute wherever the exercise handed its tokens over. `asked`:
/// when each forward call after the prompt (`sent`) was asked for, up to the last token's
/// arrival (`last`); `first`: the first token's arrival.
///
/// A step computes after its call is asked for and before its token (or a later one)
/// arrives. The prefill is the first call, so no decode step starts before the second:
/// from the earlier of that call and the first token's arrival to the last arrival holds
/// every step. A loop that asks for step 1 before reading token 0 (mlx-lm's pipeline)
/// would have its prefill in that time, so the rate is also taken from the first arrival,
/// counting only the steps asked for after it (those before may have run before it), and
/// the larger of the two kept: each is a rate the compute reached. Without any call
/// marked (a loop with no model of quest's), the decode is timed from the prompt.
pub fn decode_tok_s(
    asked: &[f64],
    sent: f64,
    first: f64,
    last: f64,
    steps: usize,
    rows: usize,
) -> f64 {
    if steps < 2 {
        return 0.0;
    }
    let rate = |tokens: usize, from: f64| {
        if tokens > 0 && last > from {
            tokens as f64 * 1e3 / (last - from)
        } else {
            0.0
        }
    };
    let later = steps - 1;
    let Some(&second_call) = asked.get(1) else {
        return rate(later * rows, sent.min(first));
    };
    let from_calls = rate(later * rows, first.min(second_call));
    let asked_before = asked[1..].iter().filter(|&&at| at < first).count();
    let from_first = rate(later.saturating_sub(asked_before) * rows, first);
    from_calls.max(from_first)
}

/// The first token held back: its arrivals' decode time (`last - first`) shorter than
/// quest's for the `later` tokens beyond [`agree`]ment.
fn held_back(
    asked: &[f64],
    sent: f64,
    first: f64,
    last: f64,
    later: usize,
    clock_tok_s: f64,
) -> Option<HeldBack> {
    if later == 0 || clock_tok_s <= 0.0 {
        return None;
    }
    let clock_ms = later as f64 * 1e3 / clock_tok_s;
    let arrivals_ms = last - first;
    if arrivals_ms >= clock_ms || agree(arrivals_ms.max(0.0), clock_ms) {
        return None;
    }
    Some(HeldBack {
        asked_before: (asked.len() >= 2)
            .then(|| asked[1..].iter().filter(|&&at| at < first).count()),
        ttft_ms: first - sent,
        between_ms: arrivals_ms.max(0.0),
        decode_ms: clock_ms,
        clock_tok_s,
    })
}

/// Where the exercise's own timer and quest's clock disagree, and why.
#[derive(Clone, Debug, PartialEq)]
pub enum Disagreement {
    /// The timer was marked done before the last token reached the host: it timed the
    /// building of a lazy graph, not the compute (MLX is lazy).
    StoppedEarly { timer_tok_s: f64, clock_tok_s: f64 },
    /// The report's rate is not what the timer's own marks give: it was written over.
    Rewritten {
        reported_tok_s: f64,
        marks_tok_s: f64,
        clock_tok_s: f64,
    },
}

/// How far two timings of one run's decode may differ before they disagree: a share of
/// its length, and a few milliseconds for the clock's messages. A message takes
/// microseconds, but the thread that reads them may wait a scheduler's slice on a busy
/// machine, and an honest report hands its last tokens over after the text is decoded (a
/// millisecond at most); a timer stopped early or a report written over reads several
/// times off.
const AGREE_WITHIN: f64 = 0.1;
const CHANNEL_SLACK_MS: f64 = 5.0;

/// Whether two lengths of one decode, in ms, agree ([`AGREE_WITHIN`], [`CHANNEL_SLACK_MS`]).
fn agree(a_ms: f64, b_ms: f64) -> bool {
    (a_ms - b_ms).abs() <= AGREE_WITHIN * a_ms.max(b_ms) + CHANNEL_SLACK_MS
}

/// How the exercise's own decode rate (`timer_tok_s`, from its report) compares with quest's
/// clock, for a run of `steps` steps of `rows` rows: `None` when they agree.
pub fn disagreement(
    arrivals: &Arrivals,
    clocked: &Clocked,
    timer_tok_s: f64,
    steps: usize,
    rows: usize,
) -> Option<Disagreement> {
    if clocked.decode_tok_s <= 0.0 || steps < 2 {
        return None;
    }
    let first = arrivals.steps.first()?.at_ms;
    if arrivals.steps.len() < steps {
        return None;
    }
    let last = last_arrival(arrivals, steps);
    // The decode's length, in ms, that a rate over these steps means.
    let length = |tok_s: f64| ((steps - 1) * rows) as f64 * 1e3 / tok_s;
    let timer_ms = if timer_tok_s > 0.0 {
        length(timer_tok_s)
    } else {
        f64::INFINITY
    };
    if let Some(done) = arrivals.done_ms {
        let marks_ms = done - first;
        if !agree(timer_ms, marks_ms) {
            return Some(Disagreement::Rewritten {
                reported_tok_s: timer_tok_s,
                marks_tok_s: length(marks_ms.max(1e-9)),
                clock_tok_s: clocked.decode_tok_s,
            });
        }
        if done < last && !agree(marks_ms, last - first) {
            return Some(Disagreement::StoppedEarly {
                timer_tok_s,
                clock_tok_s: clocked.decode_tok_s,
            });
        }
        return None;
    }
    // No done mark (a loop of quest's, or a timer never marked done): the report alone,
    // which may not claim a shorter decode than the clock saw.
    (timer_ms < last - first && !agree(timer_ms, last - first)).then_some(Disagreement::Rewritten {
        reported_tok_s: timer_tok_s,
        marks_tok_s: f64::NAN,
        clock_tok_s: clocked.decode_tok_s,
    })
}

/// quest's end of the clock for one exercise process.
pub struct Clock {
    quest_end: UnixStream,
    exercise_end: Option<UnixStream>,
    hello: Hello,
    prompt: String,
    arrivals: Arc<Mutex<Arrivals>>,
    reader: Option<std::thread::JoinHandle<()>>,
    started: Instant,
}

impl Clock {
    /// A clock for `command`, which says `hello` as the exercise starts and hands over
    /// `prompt` when it is ready: the exercise's end goes to its descriptor [`line::FD`].
    pub fn attach(
        command: &mut std::process::Command,
        hello: Hello,
        prompt: &str,
    ) -> Result<Clock> {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let (quest_end, exercise_end) =
            UnixStream::pair().context("could not make quest's line to the exercise")?;
        let fd = exercise_end.as_raw_fd();
        // SAFETY: between fork and exec only dup2 and fcntl run, both async-signal-safe;
        // they put the exercise's end at line::FD, open across exec.
        unsafe {
            command.pre_exec(move || {
                if fd == line::FD {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, line::FD) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command.env(crate::settings::LINE.name, line::FD.to_string());
        Ok(Clock {
            quest_end,
            exercise_end: Some(exercise_end),
            hello,
            prompt: prompt.to_owned(),
            arrivals: Arc::default(),
            reader: None,
            started: Instant::now(),
        })
    }

    /// Starts listening, once the exercise has been started: quest's end is read on a
    /// thread of its own, each line timestamped as it arrives.
    pub fn listen(&mut self) -> Result<()> {
        // quest's copy of the exercise's end is closed, so the exercise's exit ends the
        // stream.
        self.exercise_end = None;
        self.started = Instant::now();
        let reader = BufReader::new(self.quest_end.try_clone()?);
        let mut writer = self.quest_end.try_clone()?;
        // Best effort: an exercise that has already ended is judged by how it ended.
        let _ = writeln!(writer, "{}", serde_json::to_string(&self.hello)?);
        let prompt = serde_json::to_string(&self.prompt)?;
        let arrivals = Arc::clone(&self.arrivals);
        let started = self.started;
        self.reader = Some(std::thread::spawn(move || {
            let ms = || started.elapsed().as_secs_f64() * 1e3;
            for line in reader.lines() {
                let Ok(line) = line else { break };
                let at_ms = ms();
                let mut seen = arrivals.lock().unwrap_or_else(|e| e.into_inner());
                let (kind, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                let ids = || -> Option<Vec<u32>> {
                    rest.split_whitespace().map(|t| t.parse().ok()).collect()
                };
                let sent = match kind {
                    "ready" if seen.ready_ms.is_none() => {
                        seen.ready_ms = Some(at_ms);
                        let _ = writeln!(writer, "{prompt}");
                        seen.prompt_sent_ms = Some(ms());
                        None
                    }
                    "done" => {
                        seen.done_ms = Some(at_ms);
                        None
                    }
                    "loaded" if seen.loaded_ms.is_none() => {
                        seen.loaded_ms = Some(at_ms);
                        None
                    }
                    // The first verdict is the check's: it runs before the exercise's
                    // own code goes on.
                    "checked" if seen.checked.is_none() => {
                        seen.checked = Some(rest.to_owned());
                        None
                    }
                    "calls" => {
                        seen.calls = Some(rest.to_owned());
                        None
                    }
                    "peak" => {
                        seen.prefill_peak_bytes = rest.trim().parse().ok();
                        None
                    }
                    "weights" => {
                        seen.weight_bytes_per_token = rest.trim().parse().ok();
                        None
                    }
                    "asked" => {
                        seen.asked_ms.push(at_ms);
                        None
                    }
                    "listening" => {
                        seen.listening = rest.trim().parse().ok();
                        None
                    }
                    "served" => {
                        if let Some([request, token]) = ids().as_deref() {
                            seen.served.push(ServedToken {
                                at_ms,
                                request: *request as usize,
                                token: *token,
                            });
                        }
                        None
                    }
                    // The first token is step 0 wherever it arrives among the others.
                    "first" if seen.steps.iter().all(|a| a.sent != Sent::First) => {
                        if let Some(ids) = ids() {
                            seen.steps.insert(
                                0,
                                Arrival {
                                    at_ms,
                                    sent: Sent::First,
                                    ids,
                                },
                            );
                        }
                        None
                    }
                    "token" => Some(Sent::Token),
                    "rest" => Some(Sent::Rest),
                    // `end`, and anything else: nothing to time.
                    _ => None,
                };
                if let (Some(sent), Some(ids)) = (sent, ids()) {
                    seen.steps.push(Arrival { at_ms, sent, ids });
                }
            }
        }));
        Ok(())
    }

    /// The port the exercise said it listens on so far (a server, still running).
    pub fn listening(&self) -> Option<u16> {
        self.arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .listening
    }

    /// What the clock saw, once the exercise has exited.
    pub fn arrivals(mut self) -> Arrivals {
        // The exercise's exit closed its end: the reader meets the end of the stream
        // after every line it sent.
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let seen = self.arrivals.lock().unwrap_or_else(|e| e.into_inner());
        seen.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(at_ms: f64, sent: Sent, id: u32) -> Arrival {
        Arrival {
            at_ms,
            sent,
            ids: vec![id],
        }
    }

    fn honest() -> Arrivals {
        Arrivals {
            ready_ms: Some(500.0),
            prompt_sent_ms: Some(500.1),
            steps: vec![
                arrival(600.1, Sent::First, 7),
                arrival(700.1, Sent::Token, 8),
                arrival(800.1, Sent::Token, 9),
            ],
            // The prefill's call, then each step's once the token before it was read.
            asked_ms: vec![500.2, 600.2, 700.2],
            done_ms: Some(800.2),
            ..Default::default()
        }
    }

    #[test]
    fn an_honest_run_is_timed_by_its_arrivals() {
        let times = clocked(&honest(), &[vec![7, 8, 9]]).unwrap().unwrap();
        assert!((times.ttft_ms - 100.0).abs() < 1e-9);
        assert!((times.decode_tok_s - 10.0).abs() < 1e-9);
        assert_eq!(times.token_ms.len(), 2);
        assert_eq!(times.load_ms, 500.0);
        assert_eq!(times.warm_up_ms, 0.0);
        assert_eq!(disagreement(&honest(), &times, 10.0, 3, 1), None);
    }

    #[test]
    fn a_warm_up_is_timed_apart_from_the_load_and_the_prefill() {
        let warmed = Arrivals {
            loaded_ms: Some(420.0),
            ..honest()
        };
        let times = clocked(&warmed, &[vec![7, 8, 9]]).unwrap().unwrap();
        assert_eq!(times.load_ms, 420.0);
        assert!((times.warm_up_ms - 80.0).abs() < 1e-9);
        assert!((times.ttft_ms - 100.0).abs() < 1e-9);
    }

    /// The source's own loop: the first token read after the prefill, the others kept on
    /// the device and read in one array at the end, each handed over then. The rate is
    /// the steps', and the burst's microsecond gaps are no per-token times.
    #[test]
    fn tokens_read_once_at_the_end_time_the_rate_but_no_token() {
        let mut burst = honest();
        burst.steps.push(arrival(900.1, Sent::Token, 10));
        burst.asked_ms = vec![500.2, 600.2, 600.3, 600.4];
        burst.steps[1].at_ms = 800.1;
        burst.steps[2].at_ms = 800.11;
        burst.steps[3].at_ms = 800.12;
        let times = clocked(&burst, &[vec![7, 8, 9, 10]]).unwrap().unwrap();
        assert!(times.token_ms.is_empty(), "{:?}", times.token_ms);
        assert!(times.held_back.is_none());
        assert!(
            times.decode_tok_s < 3.0 * 1e3 / 199.0,
            "{}",
            times.decode_tok_s
        );
    }

    #[test]
    fn a_report_handing_over_the_rest_times_no_token_but_the_rate() {
        let mut seen = honest();
        seen.steps[1].sent = Sent::Rest;
        seen.steps[2].sent = Sent::Rest;
        seen.steps[1].at_ms = 800.0;
        let times = clocked(&seen, &[vec![7, 8, 9]]).unwrap().unwrap();
        assert!(times.token_ms.is_empty());
        assert!((times.decode_tok_s - 2.0 * 1e3 / 200.0).abs() < 1e-9);
    }

    #[test]
    fn what_the_clock_cannot_time_is_named() {
        let rows = [vec![7, 8, 9]];
        let never = Arrivals::default();
        assert_eq!(clocked(&never, &rows), Err(ClockProblem::NeverReady));
        let silent = Arrivals {
            steps: Vec::new(),
            ..honest()
        };
        assert_eq!(
            clocked(&silent, &rows),
            Err(ClockProblem::NoTokens { reported: 3 })
        );
        let mut other = honest();
        other.steps[0].ids = vec![0];
        assert_eq!(
            clocked(&other, &rows),
            Err(ClockProblem::TokensDiffer {
                step: 0,
                row: 0,
                sent: Some(0),
                reported: Some(7)
            })
        );
        let mut short = honest();
        short.steps.pop();
        assert!(matches!(
            clocked(&short, &rows),
            Err(ClockProblem::TokensDiffer {
                step: 2,
                sent: None,
                ..
            })
        ));
        // A values exercise decodes nothing and is not timed.
        assert_eq!(clocked(&never, &[]), Ok(None));
    }

    #[test]
    fn a_timer_stopped_early_and_a_report_written_over_are_told_apart() {
        let mut early = honest();
        early.done_ms = Some(600.5);
        let times = clocked(&early, &[vec![7, 8, 9]]).unwrap().unwrap();
        // The timer's own rate: two tokens over 0.4 ms.
        let timer = 2.0 * 1e3 / 0.4;
        assert!(matches!(
            disagreement(&early, &times, timer, 3, 1),
            Some(Disagreement::StoppedEarly { .. })
        ));
        let times = clocked(&honest(), &[vec![7, 8, 9]]).unwrap().unwrap();
        assert!(matches!(
            disagreement(&honest(), &times, 30.0, 3, 1),
            Some(Disagreement::Rewritten { .. })
        ));
    }

    /// A decode's compute, in ms after the prompt was sent: when each forward call was
    /// asked for (the prefill's first), when each step's compute began and when each
    /// token existed, for a loop of `shape`.
    struct Schedule {
        asked: Vec<f64>,
        began: Vec<f64>,
        ready: Vec<f64>,
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Shape {
        /// Reads each token, then asks for the next step (the hand loop).
        Synced,
        /// Asks for step k + 1 before reading token k (mlx-lm's pipeline).
        Pipelined,
        /// Reads the first token, asks for every step, reads the rest at the end.
        AtTheEnd,
    }

    const BUILD: f64 = 0.4;
    const STEP: f64 = 10.0;
    const PREFILL: f64 = 120.0;

    fn schedule(shape: Shape, n: usize) -> Schedule {
        let mut asked = vec![0.0];
        let mut began = vec![BUILD];
        let mut ready = vec![BUILD + PREFILL];
        for k in 1..n {
            let ask = match shape {
                Shape::Synced => ready[k - 1] + 0.05,
                Shape::Pipelined if k == 1 => asked[0] + BUILD,
                Shape::Pipelined => (asked[k - 1] + BUILD).max(ready[k - 2]),
                Shape::AtTheEnd if k == 1 => ready[0],
                Shape::AtTheEnd => asked[k - 1] + BUILD,
            };
            asked.push(ask);
            began.push((ask + BUILD).max(ready[k - 1]));
            ready.push(began[k] + STEP);
        }
        Schedule {
            asked,
            began,
            ready,
        }
    }

    /// Where each token is handed to quest's clock.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum HandOver {
        /// Each as the loop has it on the host (the loop's own reads).
        AsRead,
        /// The first token held back until after the last.
        FirstHeldBack,
        /// The later tokens handed over together after the last is ready.
        BatchedLate,
        /// Everything handed over at the end.
        AllLate,
    }

    fn arrivals(s: &Schedule, shape: Shape, hand: HandOver, done_ms: f64) -> Arrivals {
        let n = s.ready.len();
        let end = s.ready[n - 1] + 0.01;
        let read = |k: usize| match shape {
            Shape::AtTheEnd if k > 0 => end,
            _ => s.ready[k],
        };
        let at = |k: usize| match (hand, k) {
            (HandOver::AsRead, k) => read(k),
            (HandOver::FirstHeldBack, 0) | (HandOver::AllLate, _) => end + 0.02,
            (HandOver::FirstHeldBack, k) => read(k),
            (HandOver::BatchedLate, 0) => read(0),
            (HandOver::BatchedLate, _) => end + 0.01,
        };
        let later = if shape == Shape::AtTheEnd && hand == HandOver::AsRead {
            Sent::Rest
        } else {
            Sent::Token
        };
        Arrivals {
            // A warm-up before the prompt is no call of the run's.
            asked_ms: std::iter::once(-5.0)
                .chain(s.asked.iter().copied())
                .collect(),
            ready_ms: Some(-0.1),
            prompt_sent_ms: Some(0.0),
            steps: (0..n)
                .map(|k| arrival(at(k), if k == 0 { Sent::First } else { later }, k as u32))
                .collect(),
            done_ms: Some(done_ms),
            ..Default::default()
        }
    }

    #[test]
    fn no_hand_over_makes_a_decode_faster_than_its_compute() {
        let n = 32;
        let rows = [(0..n as u32).collect::<Vec<_>>()];
        for shape in [Shape::Synced, Shape::Pipelined, Shape::AtTheEnd] {
            let s = schedule(shape, n);
            // The decode's compute: from the first step's start to the last token.
            let compute_tok_s = (n - 1) as f64 * 1e3 / (s.ready[n - 1] - s.began[1]);
            let timed = |hand: HandOver, done: f64| {
                clocked(&arrivals(&s, shape, hand, done), &rows)
                    .unwrap()
                    .unwrap()
            };
            let honest = timed(HandOver::AsRead, s.ready[n - 1] + 0.05);
            for hand in [
                HandOver::AsRead,
                HandOver::FirstHeldBack,
                HandOver::BatchedLate,
                HandOver::AllLate,
            ] {
                // `done` anywhere, before the loop or long after it: the same clock.
                let runs = [-1.0, s.ready[0], 1e6].map(|done| timed(hand, done));
                assert!(runs.iter().all(|r| *r == runs[0]), "{shape:?} {hand:?}");
                let run = &runs[0];
                let what = format!("{shape:?}, {hand:?}: {run:?} against {compute_tok_s}");
                assert!(run.decode_tok_s <= compute_tok_s * (1.0 + 1e-12), "{what}");
                // Nothing gained over the same loop handing its tokens over as it reads
                // them, beyond the microseconds a hand-over takes.
                assert!(
                    run.decode_tok_s <= honest.decode_tok_s * 1.001,
                    "{what} vs {honest:?}"
                );
                if matches!(hand, HandOver::FirstHeldBack | HandOver::AllLate) {
                    // The hold is in the time to first token, and named.
                    assert!(run.ttft_ms > honest.ttft_ms + 0.9 * (n - 1) as f64 * STEP);
                    assert!(run.token_ms.is_empty(), "{what}");
                    let held = run.held_back.as_ref().expect(&what);
                    assert_eq!(held.asked_before, Some(n - 1), "{what}");
                    assert!(held.between_ms < 0.1 * held.decode_ms, "{what}");
                } else {
                    assert_eq!(run.held_back, None, "{what}");
                }
            }
            // Handed over as read, the loop is timed as before: from the first arrival
            // (mlx-lm's pipeline: one step fewer, the one asked for before it).
            let arrivals_tok_s = (n - 1) as f64 * 1e3 / (s.ready[n - 1] - s.ready[0]);
            let expected = match shape {
                Shape::Pipelined => arrivals_tok_s * (n - 2) as f64 / (n - 1) as f64,
                _ => arrivals_tok_s,
            };
            let ended = if shape == Shape::AtTheEnd { 0.01 } else { 0.0 };
            let expected =
                expected * (s.ready[n - 1] - s.ready[0]) / (s.ready[n - 1] + ended - s.ready[0]);
            assert!(
                (honest.decode_tok_s / expected - 1.0).abs() < 1e-9,
                "{shape:?}: {honest:?}, {expected}"
            );
            assert!((honest.ttft_ms - s.ready[0]).abs() < 1e-9);
        }
    }

    #[test]
    fn a_loop_with_no_call_marked_is_timed_from_the_prompt() {
        // Six steps of 40 ms with nothing of quest's asked for: the sleepy fixture.
        let ready: Vec<f64> = (0..6).map(|k| 0.05 + 40.0 * k as f64).collect();
        let rows = [(0..6).collect::<Vec<u32>>()];
        let mut honest = Arrivals {
            ready_ms: Some(-0.1),
            prompt_sent_ms: Some(0.0),
            steps: ready
                .iter()
                .enumerate()
                .map(|(k, &at)| {
                    arrival(at, if k == 0 { Sent::First } else { Sent::Token }, k as u32)
                })
                .collect(),
            ..Default::default()
        };
        let times = clocked(&honest, &rows).unwrap().unwrap();
        assert!((times.decode_tok_s - 5.0 * 1e3 / 200.05).abs() < 1e-9);
        assert_eq!(times.held_back, None);
        assert_eq!(times.token_ms.len(), 5);
        // The first token handed over after the loop: it arrives last, is still step 0,
        // and the decode is what it was.
        honest.steps[0].at_ms = 200.1;
        let held = clocked(&honest, &rows).unwrap().unwrap();
        assert!(held.decode_tok_s <= times.decode_tok_s);
        assert!((held.ttft_ms - 200.1).abs() < 1e-9);
        assert!(held.token_ms.is_empty());
        let named = held.held_back.expect("named");
        assert_eq!(named.asked_before, None);
        assert_eq!(named.between_ms, 0.0);
    }

    fn served_arrivals(tokens: &[(f64, usize, u32)]) -> Arrivals {
        Arrivals {
            ready_ms: Some(100.0),
            prompt_sent_ms: Some(100.0),
            served: tokens
                .iter()
                .map(|&(at_ms, request, token)| ServedToken {
                    at_ms,
                    request,
                    token,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_served_trace_is_timed_from_each_arrival() {
        // Request 0 arrives at the prompt, request 1 50 ms later.
        let arrivals =
            served_arrivals(&[(110.0, 0, 7), (170.0, 1, 9), (180.0, 0, 8), (200.0, 1, 10)]);
        let times = served(&arrivals, &[0.0, 50.0], &[vec![7, 8], vec![9, 10]]).unwrap();
        assert_eq!(times.ttft_ms, [10.0, 20.0]);
        assert_eq!(times.latency_ms, [80.0, 50.0]);
        assert_eq!(times.tok_s, 4.0 * 1e3 / 100.0);
        assert_eq!(ServedTimes::quantile(&times.ttft_ms, 0.5), 10.0);
        assert_eq!(ServedTimes::quantile(&times.ttft_ms, 0.99), 20.0);
    }

    #[test]
    fn a_served_trace_is_refused_where_the_clock_saw_other_tokens_or_early_ones() {
        let arrivals = served_arrivals(&[(110.0, 0, 7), (120.0, 1, 9)]);
        // The report says request 0 got 8: not what reached the clock.
        assert!(matches!(
            served(&arrivals, &[0.0, 0.0], &[vec![8], vec![9]]),
            Err(ClockProblem::TokensDiffer { row: 0, .. })
        ));
        // Request 1 was served 20 ms after the prompt, but arrives at 50 ms.
        assert!(matches!(
            served(&arrivals, &[0.0, 50.0], &[vec![7], vec![9]]),
            Err(ClockProblem::ServedEarly { request: 1, .. })
        ));
        // A token of a request the report does not hold.
        let extra = served_arrivals(&[(110.0, 0, 7), (120.0, 3, 9)]);
        assert!(served(&extra, &[0.0], &[vec![7]]).is_err());
        // A request that got nothing.
        assert!(served(&arrivals, &[0.0, 0.0, 0.0], &[vec![7], vec![9], vec![]]).is_err());
    }
}
