//! Continuous batching: requests arrive while others decode; each joins the running batch
//! as soon as its prompt is prefilled and leaves it the step its last token comes. One
//! step reads every weight once whatever the rows, so a row that joins early costs the
//! others almost nothing and waits for nobody.
//!
//! The rows of one [`Batch`] are different requests of different lengths. Their keys and
//! values share one array per layer, `[rows, kv_heads, positions, head_dim]`, each row's
//! own positions at the right end and zeros on its left: its `padding`. The step's mask
//! hides each row's padding from its query ([`Engine::step`]). Every row's new position
//! is the batch's next column, so a padded row's positions are shifted by its padding;
//! RoPE keeps only the distance between a query and a key, which the shift leaves as it
//! was.
//!
//! A learner writes a [`Scheduler`]: `join` and `keep` (the padded rows' bookkeeping) and
//! `serve`, the loop that admits each arrived request, steps the batch and lets finished
//! rows leave. [`Requests`] hands out the requests of a trace ([`trace`]) as their times
//! come and takes each token as it is known, on quest's line; [`Engine`] runs quest's
//! model. [`StaticBatches`] is the baseline: a batch admits nobody until it is empty.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use mlx_rs::ops::indexing::take_axis;
use mlx_rs::ops::indexing::{argmax_axis, IndexOp};
use mlx_rs::ops::{arange, concatenate, ge, pad};
use mlx_rs::Array;

use crate::course::spec::Piece;
use crate::lm::piece_check::{Found, Row, Verdict};
use crate::lm::{KvCache, LayerCache, Model, RowsStep};

/// Requests in a trace.
pub const TRACE_REQUESTS: usize = 8;
/// The trace's seed: every run of a lesson serves the same requests at the same times.
pub const TRACE_SEED: u64 = 7;

/// What the trace's requests ask, in turn (request `i` asks the `i mod n`-th, the lesson's
/// prompt first). Short questions of different lengths.
const QUESTIONS: [&str; 7] = [
    "Name three colors of the rainbow.",
    "Write one sentence about the sea.",
    "What is two plus three? Answer with the number and one short sentence explaining it.",
    "Give me a short tip for learning a new language.",
    "Describe a cat in one sentence.",
    "Why is the sky blue? Answer briefly, in simple words, for a child who is curious.",
    "List two fruits.",
];

/// One request of a trace, as quest plans it: when it arrives (ms after the start) and
/// how many tokens it asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub id: usize,
    pub at_ms: f64,
    pub max_tokens: usize,
    /// The question it asks (the lesson's prompt for request 0).
    pub question: String,
}

/// The trace: `requests` requests, arriving with gaps drawn from an exponential
/// distribution of mean `mean_gap_ms` (a Poisson process; the first at 0), each asking
/// for between `max_tokens / 2` and `max_tokens` tokens, all from `seed`.
pub fn trace(
    requests: usize,
    mean_gap_ms: f64,
    max_tokens: usize,
    prompt: &str,
    seed: u64,
) -> Vec<Planned> {
    let mut state = seed;
    let mut next = move || {
        // splitmix64: enough for a trace, the same on every machine.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let least = (max_tokens / 2).max(1);
    let mut at_ms = 0.0;
    (0..requests)
        .map(|id| {
            if id > 0 {
                at_ms += -mean_gap_ms * (1.0 - next()).ln();
            }
            let span = (max_tokens.max(least) - least + 1) as f64;
            let max_tokens = least + ((next() * span) as usize).min(max_tokens - least);
            Planned {
                id,
                at_ms,
                max_tokens,
                question: if id == 0 {
                    prompt.to_owned()
                } else {
                    QUESTIONS[(id - 1) % QUESTIONS.len()].to_owned()
                },
            }
        })
        .collect()
}

/// The mean gap between arrivals, ms (`QUEST_ARRIVAL_MS`).
pub fn mean_gap_ms() -> Result<f64> {
    let setting = crate::settings::ARRIVAL_MS;
    let text = setting.value();
    match text.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(ms),
        _ => bail!(
            "{}={text} is not a time: give the mean gap between requests in milliseconds (0 or more)",
            setting.name
        ),
    }
}

/// A request handed to the scheduler: its id and its prompt's token ids (the chat
/// template applied).
#[derive(Clone, Debug)]
pub struct Request {
    pub id: usize,
    pub prompt: Vec<u32>,
}

/// The trace as it plays: requests handed out as their times come, tokens taken back
/// one at a time. Each token goes to quest's clock as it is taken. Behind a server
/// ([`Requests::live`]) the requests are the clients' instead, as they come in.
pub struct Requests {
    planned: Vec<Planned>,
    prompts: Vec<Vec<u32>>,
    eos: Vec<u32>,
    start: Instant,
    /// How many requests were handed out (the trace is in order of arrival).
    handed: usize,
    tokens: Vec<Vec<u32>>,
    finished: Vec<bool>,
    live: Option<Live>,
}

/// A request a server's connection hands over: its prompt's ids, how many tokens it may
/// have, and where its tokens go (each as it is emitted; the channel closes when it is
/// finished).
pub struct Incoming {
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sink: std::sync::mpsc::Sender<u32>,
}

/// A server's requests: the connections' channel, and each request's sink.
struct Live {
    incoming: std::sync::mpsc::Receiver<Incoming>,
    /// A request received while waiting, handed out by the next `arrived`.
    waiting: Vec<Incoming>,
    /// Whether the server still listens (more requests may come).
    open: bool,
    sinks: Vec<Option<std::sync::mpsc::Sender<u32>>>,
}

impl Requests {
    /// The trace's requests with their prompts' ids, starting now.
    pub fn start(planned: Vec<Planned>, prompts: Vec<Vec<u32>>, eos: Vec<u32>) -> Self {
        let n = planned.len();
        Self {
            planned,
            prompts,
            eos,
            start: Instant::now(),
            handed: 0,
            tokens: vec![Vec::new(); n],
            finished: vec![false; n],
            live: None,
        }
    }

    /// A server's requests, as its connections hand them over on `incoming`; more may
    /// come until every sender is gone.
    pub fn live(incoming: std::sync::mpsc::Receiver<Incoming>, eos: Vec<u32>) -> Self {
        Self {
            live: Some(Live {
                incoming,
                waiting: Vec::new(),
                open: true,
                sinks: Vec::new(),
            }),
            ..Self::start(Vec::new(), Vec::new(), eos)
        }
    }

    /// A server's new requests, numbered on from the last.
    fn take_incoming(&mut self) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        let mut came: Vec<Incoming> = std::mem::take(&mut live.waiting);
        loop {
            match live.incoming.try_recv() {
                Ok(incoming) => came.push(incoming),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    live.open = false;
                    break;
                }
            }
        }
        let at_ms = self.start.elapsed().as_secs_f64() * 1e3;
        for incoming in came {
            // A request the learner's edge read (`lm::serving::Api::parse`), reaching the
            // model's thread.
            if !crate::line::quest_pieces() {
                crate::lm::pieces::seam_called(Piece::Server);
            }
            let id = self.planned.len();
            self.planned.push(Planned {
                id,
                at_ms,
                max_tokens: incoming.max_tokens.max(1),
                question: String::new(),
            });
            self.prompts.push(incoming.prompt);
            self.tokens.push(Vec::new());
            self.finished.push(false);
            live.sinks.push(Some(incoming.sink));
        }
    }

    /// Every request whose time has come and that was not handed out yet, in order.
    pub fn arrived(&mut self) -> Vec<Request> {
        self.take_incoming();
        let now_ms = self.start.elapsed().as_secs_f64() * 1e3;
        let mut out = Vec::new();
        while let Some(planned) = self.planned.get(self.handed) {
            if planned.at_ms > now_ms {
                break;
            }
            out.push(Request {
                id: planned.id,
                prompt: self.prompts[self.handed].clone(),
            });
            self.handed += 1;
        }
        out
    }

    /// Sleeps until the next request arrives; `false` at once where every request has
    /// arrived already (then nothing more will come).
    pub fn wait(&mut self) -> bool {
        if let Some(live) = self.live.as_mut() {
            if self.handed < self.planned.len() || !live.waiting.is_empty() {
                return true;
            }
            if !live.open {
                return false;
            }
            return match live.incoming.recv() {
                Ok(incoming) => {
                    live.waiting.push(incoming);
                    true
                }
                Err(_) => {
                    live.open = false;
                    false
                }
            };
        }
        let Some(next) = self.planned.get(self.handed) else {
            return false;
        };
        let due = self.start + Duration::from_secs_f64(next.at_ms / 1e3);
        if let Some(left) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
        true
    }

    /// Takes request `id`'s next token, on the host, and sends it to quest's clock.
    /// Returns whether the request is finished: it has its tokens, or this one ends its
    /// answer. A finished request takes no more.
    pub fn emit(&mut self, id: usize, token: u32) -> Result<bool> {
        ensure!(
            id < self.handed,
            "request {id} has not arrived: emit tokens only for requests `arrived()` handed out"
        );
        ensure!(
            !self.finished[id],
            "request {id} is finished already: its row should have left the batch"
        );
        self.tokens[id].push(token);
        crate::line::send(&format!("served {id} {token}"));
        let done =
            self.tokens[id].len() >= self.planned[id].max_tokens || self.eos.contains(&token);
        self.finished[id] = done;
        if let Some(live) = self.live.as_mut() {
            // A client that hung up takes nothing more; its row finishes all the same.
            let at_eos = self.eos.contains(&token);
            if let Some(sink) = &live.sinks[id] {
                if !at_eos {
                    let _ = sink.send(token);
                }
            }
            if done {
                live.sinks[id] = None;
                // The counts so far: a server is stopped, never ends on its own.
                if let Ok(calls) = serde_json::to_string(&crate::lm::pieces::calls()) {
                    crate::line::send(&format!("calls {calls}"));
                }
            }
        }
        Ok(done)
    }

    /// How many requests are not finished; behind a server that still listens, one more
    /// (the requests still to come).
    pub fn unfinished(&self) -> usize {
        let open = self.live.as_ref().is_some_and(|live| live.open);
        self.finished.iter().filter(|done| !**done).count() + usize::from(open)
    }

    /// Each request's tokens, by id.
    pub fn tokens(&self) -> &[Vec<u32>] {
        &self.tokens
    }

    /// The trace's requests, by id.
    pub fn planned(&self) -> &[Planned] {
        &self.planned
    }
}

/// Rows of different requests decoded together: every layer's keys and values in one
/// padded array, and for each row its padding, its request and its last token.
pub struct Batch {
    /// One quest cache a layer, `[rows, kv_heads, positions, head_dim]` held.
    caches: Vec<LayerCache>,
    /// Positions on the left of each row that hold no entry of its own (zeros).
    pub padding: Vec<i32>,
    /// The request each row decodes.
    pub ids: Vec<usize>,
    /// Each row's last token: what the next step feeds it.
    pub last: Vec<u32>,
}

impl Batch {
    /// No rows.
    pub fn empty() -> Self {
        Self {
            caches: Vec::new(),
            padding: Vec::new(),
            ids: Vec::new(),
            last: Vec::new(),
        }
    }

    /// How many rows (requests) it decodes.
    pub fn rows(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The positions every row spans, padding included (0 when empty).
    pub fn positions(&self) -> i32 {
        match self.caches.first() {
            Some(LayerCache::Kv(kv)) => kv.offset,
            _ => 0,
        }
    }

    /// Every layer's keys and values, `[rows, kv_heads, positions, head_dim]` each.
    pub fn layers(&self) -> Vec<(Array, Array)> {
        self.caches
            .iter()
            .filter_map(|layer| match layer {
                LayerCache::Kv(kv) => kv.held(),
                LayerCache::Recurrent(_) => None,
            })
            .collect()
    }

    /// A batch of `layers` (each `[rows, kv_heads, positions, head_dim]`, every layer
    /// the same shape) whose rows have these `padding`s, `ids` and `last` tokens. Copies
    /// the arrays once, into buffers with room to grow.
    pub fn from_layers(
        layers: Vec<(Array, Array)>,
        padding: Vec<i32>,
        ids: Vec<usize>,
        last: Vec<u32>,
    ) -> Result<Self> {
        let rows = ids.len();
        ensure!(
            padding.len() == rows && last.len() == rows,
            "a batch has one padding, one id and one last token a row: got {} paddings, {} ids and {} last tokens",
            padding.len(),
            rows,
            last.len()
        );
        if rows == 0 {
            return Ok(Self::empty());
        }
        let shape = layers
            .first()
            .map(|(k, _)| k.shape().to_vec())
            .context("a batch with rows needs every layer's keys and values")?;
        ensure!(
            shape.len() == 4 && shape[0] == rows as i32,
            "each layer's keys are [rows, kv_heads, positions, head_dim]: got {shape:?} for {rows} rows"
        );
        for (i, (k, v)) in layers.iter().enumerate() {
            ensure!(
                k.shape() == shape.as_slice() && v.shape()[..3] == shape[..3],
                "layer {i}'s keys {:?} and values {:?} are not the first layer's {shape:?}",
                k.shape(),
                v.shape()
            );
        }
        let positions = shape[2];
        if let Some((row, p)) = padding
            .iter()
            .enumerate()
            .find(|(_, &p)| p < 0 || p >= positions)
        {
            bail!(
                "row {row}'s padding is {p}, but a row holds at least one position of its own out of {positions}"
            );
        }
        let caches = layers
            .iter()
            .map(|(k, v)| Ok(LayerCache::Kv(KvCache::holding(k, v)?)))
            .collect::<Result<_>>()?;
        Ok(Self {
            caches,
            padding,
            ids,
            last,
        })
    }
}

/// quest's model, for a scheduler: a request's prompt prefilled alone, then steps of
/// the whole batch.
pub struct Engine<'m> {
    model: &'m Model,
    /// The model's layers: every one keeps keys and values.
    layers: usize,
    steps: std::cell::Cell<usize>,
    widest: std::cell::Cell<usize>,
}

impl<'m> Engine<'m> {
    /// The engine of `model`, whose layers must all be attention (a recurrent state has
    /// no positions to pad).
    pub fn new(model: &'m Model) -> Result<Self> {
        let kinds = model.make_cache();
        ensure!(
            kinds.iter().all(|c| matches!(c, LayerCache::Kv(_))),
            "batching pads rows of keys and values: this model has recurrent layers, which keep no positions; take an attention-only model (SmolLM2, Qwen3)"
        );
        Ok(Self {
            model,
            layers: kinds.len(),
            steps: Default::default(),
            widest: Default::default(),
        })
    }

    /// `request`'s prompt through the model alone: a batch of one row (no padding),
    /// its first token as the row's `last`.
    pub fn prefill(&self, request: &Request) -> Result<Batch> {
        ensure!(
            !request.prompt.is_empty(),
            "request {} has no prompt",
            request.id
        );
        let mut caches = self.model.make_cache();
        let logits = crate::line::prefilling(|| {
            crate::lm::Forward::forward(
                self.model,
                &crate::lm::tokens_array(&request.prompt),
                &mut caches,
            )
        })?;
        let first = crate::lm::argmax_token(&crate::lm::last_position(&logits))?;
        Ok(Batch {
            caches,
            padding: vec![0],
            ids: vec![request.id],
            last: vec![first],
        })
    }

    /// One step of every row: each row's `last` in, its next token out (on the host),
    /// which becomes its `last`. Each row's query sees its own positions alone.
    pub fn step(&self, batch: &mut Batch) -> Result<Vec<u32>> {
        Ok(self.step_logits(batch)?.1)
    }

    /// [`Engine::step`], with the step's logits `[rows, vocab]`.
    pub(crate) fn step_logits(&self, batch: &mut Batch) -> Result<(Array, Vec<u32>)> {
        ensure!(!batch.is_empty(), "a step needs at least one row");
        ensure!(
            batch.caches.len() == self.layers,
            "the batch holds {} layers' keys and values; the model has {}",
            batch.caches.len(),
            self.layers
        );
        if !crate::line::quest_pieces() {
            crate::lm::pieces::seam_called(Piece::Batching);
        }
        let rows = batch.rows() as i32;
        let columns = batch.positions() + 1;
        let padding = Array::from_slice(&batch.padding, &[rows, 1, 1, 1]);
        let step = RowsStep {
            mask: ge(&arange::<_, i32>(None, columns, None)?, &padding)?,
            positions: Array::from_slice(
                &batch
                    .padding
                    .iter()
                    .map(|p| columns - 1 - p)
                    .collect::<Vec<_>>(),
                &[rows],
            ),
        };
        for layer in &mut batch.caches {
            if let LayerCache::Kv(kv) = layer {
                kv.set_rows(Some(step.clone()));
            }
        }
        let tokens = Array::from_slice(&batch.last, &[rows, 1]).as_type::<i32>()?;
        let out = crate::lm::Forward::forward(self.model, &tokens, &mut batch.caches);
        for layer in &mut batch.caches {
            if let LayerCache::Kv(kv) = layer {
                kv.set_rows(None);
            }
        }
        let logits = crate::lm::last_position(&out?);
        let next = argmax_axis(&logits, -1, None)?;
        let next: Vec<u32> = next.as_slice::<u32>().to_vec();
        batch.last = next.clone();
        self.steps.set(self.steps.get() + 1);
        self.widest.set(self.widest.get().max(batch.rows()));
        Ok((logits, next))
    }

    /// Steps run, and the most rows one of them held.
    pub fn steps(&self) -> (usize, usize) {
        (self.steps.get(), self.widest.get())
    }
}

/// What a scheduler writes: the padded rows' bookkeeping, and the loop.
pub trait Scheduler {
    /// `batch` with `row` (one request's row, fresh from [`Engine::prefill`]) added as its
    /// last row. The shorter side is padded on the left to the longer's positions.
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch>;

    /// `batch` with only the rows at `rows` (in that order); the positions no row still
    /// needs may go.
    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch>;

    /// Serves every request of `requests` with `engine`: admits each as it arrives,
    /// steps the batch, emits every token, lets finished rows leave; returns once every
    /// request is finished.
    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()>;
}

/// The baseline, static batching: an empty batch takes every request that has arrived
/// and decodes until all of them are finished; a request that arrives meanwhile waits.
pub struct StaticBatches;

impl Scheduler for StaticBatches {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        crate::lm::pieces::quest_ran(Piece::Batching);
        joined(batch, row)
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        crate::lm::pieces::quest_ran(Piece::Batching);
        kept(batch, rows)
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        let mut batch = Batch::empty();
        loop {
            if batch.is_empty() {
                for request in requests.arrived() {
                    let row = engine.prefill(&request)?;
                    if !requests.emit(request.id, row.last[0])? {
                        batch = self.join(batch, row)?;
                    }
                }
                if batch.is_empty() {
                    if requests.wait() {
                        continue;
                    }
                    return Ok(());
                }
            }
            let next = engine.step(&mut batch)?;
            let mut going = Vec::new();
            for (row, (&id, &token)) in batch.ids.iter().zip(&next).enumerate() {
                if !requests.emit(id, token)? {
                    going.push(row);
                }
            }
            batch = self.keep(batch, &going)?;
        }
    }
}

/// quest's `join`: both sides left-padded with zeros to the longer's positions, rows
/// stacked.
fn joined(batch: Batch, row: Batch) -> Result<Batch> {
    if batch.is_empty() {
        return Ok(row);
    }
    let (a, b) = (batch.positions(), row.positions());
    let width = a.max(b);
    let left = |x: &Array, n: i32| -> Result<Array> {
        if n == 0 {
            return Ok(x.clone());
        }
        let widths: &[(i32, i32)] = &[(0, 0), (0, 0), (n, 0), (0, 0)];
        Ok(pad(x, widths, None, None)?)
    };
    let layers = batch
        .layers()
        .iter()
        .zip(row.layers())
        .map(|((ka, va), (kb, vb))| {
            Ok((
                concatenate(&[left(ka, width - a)?, left(&kb, width - b)?], 0)?,
                concatenate(&[left(va, width - a)?, left(&vb, width - b)?], 0)?,
            ))
        })
        .collect::<Result<_>>()?;
    let padding = batch
        .padding
        .iter()
        .map(|p| p + width - a)
        .chain(row.padding.iter().map(|p| p + width - b))
        .collect();
    let ids = batch.ids.iter().chain(&row.ids).copied().collect();
    let last = batch.last.iter().chain(&row.last).copied().collect();
    Batch::from_layers(layers, padding, ids, last)
}

/// quest's `keep`: the rows taken, then the columns every kept row pads dropped.
fn kept(batch: Batch, rows: &[usize]) -> Result<Batch> {
    if rows.is_empty() {
        return Ok(Batch::empty());
    }
    let index = Array::from_slice(
        &rows.iter().map(|&r| r as i32).collect::<Vec<_>>(),
        &[rows.len() as i32],
    );
    let drop = rows.iter().map(|&r| batch.padding[r]).min().unwrap_or(0);
    let layers = batch
        .layers()
        .iter()
        .map(|(k, v)| {
            let k = take_axis(k, &index, 0)?.index((.., .., drop.., ..));
            let v = take_axis(v, &index, 0)?.index((.., .., drop.., ..));
            Ok((k, v))
        })
        .collect::<Result<_>>()?;
    Batch::from_layers(
        layers,
        rows.iter().map(|&r| batch.padding[r] - drop).collect(),
        rows.iter().map(|&r| batch.ids[r]).collect(),
        rows.iter().map(|&r| batch.last[r]).collect(),
    )
}

/// quest asked for the piece check on its line: check `scheduler`'s `join` and `keep` on
/// `engine`, send the verdict, and end the process when quest asked for the check alone.
/// Nothing otherwise.
pub(crate) fn when_asked(engine: &Engine, prompts: &[Vec<u32>], scheduler: &mut dyn Scheduler) {
    if let Some((Piece::Batching, alone)) = crate::line::piece_check() {
        let verdict = crate::lm::pieces::uncounted(|| check(engine, prompts, scheduler));
        crate::lm::piece_check::answer(verdict, alone);
    }
}

/// The largest difference allowed between a row's logits in the batch and alone,
/// relative to the largest logit: the padded rows run the same matrices on more rows,
/// the masked softmax sums zeros, and RoPE turns both sides of a distance further.
pub const ROW_TOLERANCE: f32 = 1e-3;

/// `join` and `keep` on rows of three of the trace's prompts (`prompts`, every request's, by
/// id), of different lengths, each step's logits
/// against the same rows stepped alone: two rows joined; a third, at another position,
/// joined to them; two kept, in another order; none kept.
pub fn check(engine: &Engine, prompts: &[Vec<u32>], scheduler: &mut dyn Scheduler) -> Verdict {
    let mut rows = Vec::new();
    let found = |row: Result<Vec<Row>, Found>, shape: &str| match row {
        Ok(rows) => rows,
        Err(found) => vec![Row {
            shape: shape.to_owned(),
            found,
        }],
    };
    rows.extend(found(
        check_rows(engine, prompts, scheduler),
        "join and keep",
    ));
    Verdict {
        piece: Piece::Batching,
        rows,
        peaks: None,
    }
}

/// Each request's rows stepped alone: the logits of its steps 1 to `steps`.
fn alone(engine: &Engine, prompt: &[u32], id: usize, steps: usize) -> Result<Vec<Array>> {
    let mut row = engine.prefill(&Request {
        id,
        prompt: prompt.to_vec(),
    })?;
    (0..steps)
        .map(|_| Ok(engine.step_logits(&mut row)?.0))
        .collect()
}

/// One case of the check: what it is, what the scheduler does before the step, and each
/// row's (request, step alone) it must match.
type Case<'a> = (
    String,
    Box<dyn Fn(&mut dyn Scheduler, Batch) -> Result<Batch> + 'a>,
    Vec<(usize, usize)>,
);

/// The trace's requests whose prompts the check joins: 0 and 1 shorter than 3, so a join
/// pads the batch in one case and the row in another.
const CHECKED: [usize; 3] = [0, 1, 3];

fn check_rows(
    engine: &Engine,
    trace_prompts: &[Vec<u32>],
    scheduler: &mut dyn Scheduler,
) -> Result<Vec<Row>, Found> {
    let quest = |e: anyhow::Error| Found::Failed {
        message: format!("quest's own rows failed here: {e:#}"),
    };
    let prompts: Vec<&Vec<u32>> = CHECKED
        .iter()
        .filter_map(|&i| trace_prompts.get(i))
        .collect();
    if prompts.len() < CHECKED.len() {
        return Err(quest(anyhow::anyhow!(
            "the check needs the trace's requests {CHECKED:?}"
        )));
    }
    let reference: Vec<Vec<Array>> = (0..3)
        .map(|id| alone(engine, prompts[id], id, 4))
        .collect::<Result<_>>()
        .map_err(quest)?;
    let prefilled = |id: usize| {
        engine.prefill(&Request {
            id,
            prompt: prompts[id].to_vec(),
        })
    };
    let len = |id: usize| prompts[id].len();
    let mut out = Vec::new();
    let quest_before = crate::lm::pieces::quest_runs(Piece::Batching);
    let ran_quests = || crate::lm::pieces::quest_runs(Piece::Batching) > quest_before;
    // Each row: what the scheduler does, then one step; `want`: each row's (request,
    // alone step) logits.
    let mut batch = Batch::empty();
    let cases: [Case<'_>; 4] = [
        (
            format!("join rows of {} and {} positions", len(0), len(1)),
            Box::new(|s, _| {
                let b = s.join(Batch::empty(), prefilled(0)?)?;
                s.join(b, prefilled(1)?)
            }),
            vec![(0, 0), (1, 0)],
        ),
        (
            format!("join a row of {} positions to them, one step on", len(2)),
            Box::new(|s, b| s.join(b, prefilled(2)?)),
            vec![(0, 1), (1, 1), (2, 0)],
        ),
        (
            "keep rows 2 and 0, in that order".into(),
            Box::new(|s, b| s.keep(b, &[2, 0])),
            vec![(2, 1), (0, 2)],
        ),
        (
            "keep request 0's row alone".into(),
            Box::new(|s, b| s.keep(b, &[1])),
            vec![(0, 3)],
        ),
    ];
    for (shape, act, want) in cases {
        let result = crate::lm::piece_check::quietly(|| {
            act(scheduler, std::mem::replace(&mut batch, Batch::empty()))
        });
        if ran_quests() {
            out.push(Row {
                shape,
                found: Found::QuestRan,
            });
            return Ok(out);
        }
        let mut got = match result {
            Ok(got) => got,
            Err(found) => {
                out.push(Row { shape, found });
                return Ok(out);
            }
        };
        let ids: Vec<usize> = want.iter().map(|&(id, _)| id).collect();
        if got.ids != ids {
            out.push(Row {
                shape,
                found: Found::Failed {
                    message: format!("the batch holds the rows of requests {:?}; it should hold {ids:?}, in that order", got.ids),
                },
            });
            return Ok(out);
        }
        let logits = match engine.step_logits(&mut got) {
            Ok((logits, _)) => logits,
            Err(e) => {
                out.push(Row {
                    shape,
                    found: Found::Failed {
                        message: format!("a step of the batch failed: {e:#}"),
                    },
                });
                return Ok(out);
            }
        };
        let found = compare_rows(&logits, &want, &reference);
        let right = found.is_right();
        out.push(Row { shape, found });
        if !right {
            return Ok(out);
        }
        batch = got;
    }
    let shape = "keep no row".to_owned();
    let found = match crate::lm::piece_check::quietly(|| scheduler.keep(batch, &[])) {
        Ok(b) if b.is_empty() => Found::Right { difference: 0.0 },
        Ok(b) => Found::Failed {
            message: format!("the batch still holds {} rows", b.rows()),
        },
        Err(found) => found,
    };
    out.push(Row { shape, found });
    Ok(out)
}

/// The batch's logits row by row against each request's alone, the largest difference
/// relative to the largest reference logit.
fn compare_rows(logits: &Array, want: &[(usize, usize)], reference: &[Vec<Array>]) -> Found {
    let mut worst = 0.0f32;
    for (row, &(id, step)) in want.iter().enumerate() {
        let got = logits.index(row as i32);
        let want = &reference[id][step];
        let want = want.index(0);
        let difference = (|| -> Result<f32> {
            let gap = mlx_rs::ops::abs(mlx_rs::ops::subtract(&got, &want)?)?.max(None)?;
            let scale = mlx_rs::ops::abs(&want)?.max(None)?;
            Ok(gap.item_cast::<f32>() / scale.item_cast::<f32>().max(f32::MIN_POSITIVE))
        })();
        match difference {
            Ok(d) => worst = worst.max(d),
            Err(e) => {
                return Found::Failed {
                    message: format!("row {row}'s logits do not compare: {e:#}"),
                }
            }
        }
    }
    if worst <= ROW_TOLERANCE {
        Found::Right { difference: worst }
    } else {
        Found::Wrong {
            difference: worst,
            allowed: ROW_TOLERANCE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_the_same_from_its_seed_and_arrives_in_order() {
        let a = trace(8, 250.0, 16, "the prompt", TRACE_SEED);
        assert_eq!(a, trace(8, 250.0, 16, "the prompt", TRACE_SEED));
        assert_ne!(a, trace(8, 250.0, 16, "the prompt", TRACE_SEED + 1));
        assert_eq!(a[0].at_ms, 0.0);
        assert_eq!(a[0].question, "the prompt");
        assert!(a.windows(2).all(|p| p[0].at_ms <= p[1].at_ms));
        assert!(a.iter().all(|p| (8..=16).contains(&p.max_tokens)));
        // Poisson arrivals of mean 250 ms: eight of them span more than a gap or two.
        assert!(a[7].at_ms > 250.0, "{a:?}");
        // No gap: every request at once.
        assert!(trace(8, 0.0, 16, "p", TRACE_SEED)
            .iter()
            .all(|p| p.at_ms == 0.0));
        // One token asked: every request asks for one.
        assert!(trace(4, 10.0, 1, "p", 1).iter().all(|p| p.max_tokens == 1));
    }

    #[test]
    fn requests_arrive_on_time_and_finish_at_their_length_or_end() {
        let planned = vec![
            Planned {
                id: 0,
                at_ms: 0.0,
                max_tokens: 2,
                question: String::new(),
            },
            Planned {
                id: 1,
                at_ms: 60_000.0,
                max_tokens: 3,
                question: String::new(),
            },
        ];
        let mut requests = Requests::start(planned, vec![vec![1], vec![2]], vec![99]);
        let arrived = requests.arrived();
        assert_eq!(arrived.iter().map(|r| r.id).collect::<Vec<_>>(), [0]);
        assert!(requests.emit(1, 5).is_err(), "request 1 has not arrived");
        assert!(!requests.emit(0, 5).unwrap());
        assert!(requests.emit(0, 6).unwrap(), "two tokens: finished");
        assert!(
            requests.emit(0, 7).is_err(),
            "a finished request takes no more"
        );
        assert_eq!(requests.unfinished(), 1);
        assert_eq!(requests.tokens()[0], [5, 6]);
    }

    #[test]
    fn rope_turns_each_row_by_its_own_offset() {
        let x = mlx_rs::random::normal::<f32>(&[2, 3, 1, 8], None, None, None).unwrap();
        let offsets = Array::from_slice(&[5i32, 9], &[2]);
        let both = mlx_rs::fast::rope_dynamic(&x, 8, false, 10000.0, 1.0, &offsets, None).unwrap();
        for (row, offset) in [(0, 5), (1, 9)] {
            let alone =
                mlx_rs::fast::rope(x.index(row..row + 1), 8, false, 10000.0, 1.0, offset, None)
                    .unwrap();
            let gap =
                mlx_rs::ops::abs(mlx_rs::ops::subtract(both.index(row..row + 1), &alone).unwrap())
                    .unwrap()
                    .max(None)
                    .unwrap()
                    .item_cast::<f32>();
            assert!(gap < 1e-6, "row {row}: {gap}");
        }
    }
}
