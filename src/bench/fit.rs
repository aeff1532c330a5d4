//! The decode-ceiling formula, measured: time per token = fixed + bytes / bandwidth.
//! Random-weights models of several sizes are decoded with the pipelined loop (and the
//! hand loop beside it); a least-squares line through (bytes per token, ms per token)
//! gives the fixed term (its intercept) and the bandwidth the loop achieves (1 / slope).

use crate::kernels::{Kernels, Process};
use anyhow::{Context, Result};
use serde::Serialize;

use super::{loops, Measured};
use crate::lm::random;
use crate::lm::Layout;
use crate::stats::{least_squares, median};

#[derive(Debug, Serialize)]
pub struct ShapePoint {
    pub shape: String,
    /// How the matrices were held (`dense-f32`, `quantized`, `q4-g64`, …).
    pub layout: String,
    pub bytes_per_token: u64,
    pub hand_tok_s: f64,
    pub pipelined_tok_s: f64,
    pub hand: Vec<Measured>,
    pub pipelined: Vec<Measured>,
    pub layers: usize,
    /// The host's time per token: the median of one more pipelined run after each round
    /// (see [`loops::HostSplit::median_run`]); each round's in `host_runs`.
    pub host: loops::HostSplit,
    pub host_runs: Vec<loops::HostSplit>,
    /// With `--peer`: mlx-lm's `generate_step` on the same shape and prompt, its rounds
    /// interleaved with these (median tok/s, then each round).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mlx_lm_tok_s: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mlx_lm: Vec<Measured>,
    /// Bytes per token × the pipelined rate ÷ the bandwidth measured beside the run:
    /// the share of what this machine can stream that the decode loop reached.
    pub fraction_of_bandwidth: f64,
}

impl ShapePoint {
    pub fn ms_per_token(&self) -> f64 {
        1e3 / self.pipelined_tok_s
    }

    /// What the hand loop's per-token sync costs here: its extra ms per token.
    pub fn sync_ms(&self) -> f64 {
        1e3 / self.hand_tok_s - self.ms_per_token()
    }

    /// Host time (graph building and `async_eval`) per layer and token, in µs.
    pub fn host_us_per_layer(&self) -> f64 {
        (self.host.build_ms + self.host.eval_ms) * 1e3 / self.layers.max(1) as f64
    }
}

#[derive(Debug, Serialize)]
pub struct Fit {
    pub backend: crate::device::Backend,
    /// False while shapes are still being measured: the file is written after every shape,
    /// so a run stopped early keeps what it measured (its fits are then absent).
    pub complete: bool,
    /// The rates measured beside the run (the better of before and after), so that the
    /// file alone says what fraction of the machine the loop reached.
    pub rates: super::rates::Rates,
    /// How the bandwidth was measured ([`super::rates::bandwidth_method`]).
    pub bandwidth_method: String,
    /// On a GPU the bandwidth is a copy's (read + write): the same number under its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_gb_s: Option<f64>,
    pub points: Vec<ShapePoint>,
    /// Intercept: ms per token that does not depend on the bytes read.
    pub fixed_ms: f64,
    /// 1 / slope, in GB/s: the bandwidth the decode loop achieves.
    pub effective_gb_s: f64,
    /// The hand loop's extra ms per token over the pipelined one on the largest shape:
    /// what the per-token `.item()` adds to the fixed term where there is device work to
    /// overlap (on small shapes the host's own per-step work is the longer of the two).
    pub sync_cost_ms: f64,
    /// The root-mean-square distance of the points from the line, in ms.
    pub rms_residual_ms: f64,
    /// The same points with a per-layer term as well (one layout, four shapes or more):
    /// whether the fixed term grows with the layers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_layer: Option<PerLayerFit>,
    /// With several layouts (`--bits`): the same line fitted through each layout's points.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_layout: Vec<LayoutFit>,
    /// Which of quest's own CUDA kernels ran (`crate::kernels`), by name; empty where
    /// none can (every backend but CUDA).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quest_kernels: Vec<String>,
    pub date: String,
}

/// `time per token = fixed + bytes / bandwidth` through one layout's points: where
/// the kernels stream bytes, every width reaches about the same bandwidth.
#[derive(Debug, Serialize)]
pub struct LayoutFit {
    pub layout: String,
    pub fixed_ms: f64,
    pub effective_gb_s: f64,
}

/// `time per token = fixed + layers × per layer + bytes / bandwidth`, by least squares.
#[derive(Debug, Serialize)]
pub struct PerLayerFit {
    pub fixed_ms: f64,
    pub per_layer_us: f64,
    pub effective_gb_s: f64,
    pub rms_residual_ms: f64,
}

impl PerLayerFit {
    fn through(points: &[ShapePoint]) -> Option<Self> {
        let plane: Vec<(f64, f64, f64)> = points
            .iter()
            .map(|p| (p.layers as f64, p.bytes_per_token as f64, p.ms_per_token()))
            .collect();
        let (fixed_ms, ms_per_layer, ms_per_byte) = crate::stats::least_squares_plane(&plane)?;
        let residuals: Vec<f64> = plane
            .iter()
            .map(|&(layers, bytes, ms)| {
                ms - (fixed_ms + layers * ms_per_layer + bytes * ms_per_byte)
            })
            .collect();
        Some(PerLayerFit {
            fixed_ms,
            per_layer_us: ms_per_layer * 1e3,
            effective_gb_s: 1e-6 / ms_per_byte,
            rms_residual_ms: rms(&residuals),
        })
    }
}

fn rms(values: &[f64]) -> f64 {
    (values.iter().map(|v| v * v).sum::<f64>() / values.len().max(1) as f64).sqrt()
}

pub struct FitOptions {
    pub shapes: Vec<&'static random::PublicShape>,
    /// Each shape is measured in each of these layouts ([`crate::lm::Model::requantize`]);
    /// empty: as made (4-bit, dense on a CPU by default; see [`random::model`]).
    pub layouts: Vec<Layout>,
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    pub rounds: usize,
    /// mlx-lm's `generate_step` beside each shape, a round after each of quest's.
    pub peer: Option<super::peer::Peer>,
}

/// Why `--peer` and other layouts do not go together.
pub const PEER_WITH_LAYOUTS: &str = "`quest fit --peer` compares the shapes as made (4-bit in \
     groups of 32, as mlx-lm makes them too); leave out --bits";

/// What a stopped run leaves: the shapes measured so far, no fit through them yet.
#[derive(Debug, Serialize)]
pub struct Partial<'a> {
    pub backend: crate::device::Backend,
    pub complete: bool,
    pub rates: super::rates::Rates,
    pub bandwidth_method: &'a str,
    pub points: &'a [ShapePoint],
    pub shapes_left: Vec<String>,
}

/// Measures every shape, calling `checkpoint` after each with what is measured so far,
/// and fits the lines through them. `rates` were measured before the run; they are
/// measured again after it and the better kept.
pub fn run(
    options: &FitOptions,
    rates: super::rates::Rates,
    mut progress: impl FnMut(&str),
    mut checkpoint: impl FnMut(&Partial) -> Result<()>,
) -> Result<Fit> {
    let prompt = random::prompt(options.prompt_tokens);
    let mut points: Vec<ShapePoint> = Vec::new();
    let backend = crate::device::Backend::detect();
    let started = std::time::Instant::now();
    let layouts: Vec<Option<Layout>> = if options.layouts.is_empty() {
        vec![None]
    } else {
        options.layouts.iter().copied().map(Some).collect()
    };
    let work: Vec<_> = options
        .shapes
        .iter()
        .flat_map(|shape| layouts.iter().map(move |layout| (shape, layout)))
        .collect();
    let runs_per_round = 3 + usize::from(options.peer.is_some());
    progress(&format!(
        "{} shape runs: {} rounds × {runs_per_round} runs of {} tokens each, after a warm-up; \
         the time left is estimated after each shape",
        work.len(),
        options.rounds,
        options.max_tokens
    ));
    let mut weights_done = 0.0;
    for (n, (shape, layout)) in work.iter().enumerate() {
        let point = measure_shape(options, &prompt, shape, **layout, rates, &mut progress)?;
        progress(&point_summary(&point, rates.bandwidth_gb_s));
        points.push(point);
        weights_done += decode_elements(shape);
        let left = &work[n + 1..];
        if !left.is_empty() {
            progress(&time_left(
                n + 1,
                left,
                started.elapsed().as_secs_f64(),
                weights_done,
            ));
        }
        checkpoint(&Partial {
            backend,
            complete: false,
            rates,
            bandwidth_method: super::rates::bandwidth_method(),
            points: &points,
            shapes_left: left.iter().map(|(s, _)| s.name.to_owned()).collect(),
        })?;
    }
    fit_points(points, rates, backend, layouts.len() > 1)
}

/// One shape in one layout: its random model made, warmed up, and decoded round by round
/// by each loop (and the peer's, with `--peer`).
fn measure_shape(
    options: &FitOptions,
    prompt: &[u32],
    shape: &random::PublicShape,
    layout: Option<Layout>,
    rates: super::rates::Rates,
    progress: &mut impl FnMut(&str),
) -> Result<ShapePoint> {
    progress(&format!("{}: making random 4-bit weights…", shape.name));
    let mut model = super::warmed(random::model(&(shape.config)(), 0)?)?;
    if let Some(layout) = layout {
        progress(&format!("{}: requantizing to {layout}…", shape.name));
        model
            .requantize(layout)
            .with_context(|| format!("the shape {}", shape.name))?;
    }
    let mut peer = start_peer(options, prompt, shape, layout, &model, progress)?;
    let kv = super::cache_bytes(&model)?.at(options.prompt_tokens + options.max_tokens / 2);
    let bytes_per_token = (model.weight_bytes() + kv) as u64;
    loops::hand(&model, &prompt[..2], 2)?; // warm-up
    loops::pipelined(&model, &prompt[..2], 2)?;
    let (mut hand, mut pipelined, mut mlx_lm) = (Vec::new(), Vec::new(), Vec::new());
    let mut host_runs = Vec::new();
    for _ in 0..options.rounds {
        hand.push(loops::hand(&model, prompt, options.max_tokens)?);
        pipelined.push(loops::pipelined(&model, prompt, options.max_tokens)?);
        // The host's split in a round of its own: one run of it moved by a third
        // between runs on the GPU (docs/gpu/2026-12-01-attend).
        host_runs.push(loops::pipelined_split(&model, prompt, options.max_tokens)?);
        if let Some(peer) = &mut peer {
            mlx_lm.push(peer.round()?);
        }
    }
    drop(peer);
    let host = loops::HostSplit::median_run(&host_runs);
    let rate = |runs: &[Measured]| median(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>());
    let mut point = ShapePoint {
        shape: shape.name.into(),
        layout: model.layout.name(),
        bytes_per_token,
        hand_tok_s: rate(&hand),
        pipelined_tok_s: rate(&pipelined),
        hand,
        pipelined,
        layers: model.num_layers(),
        host,
        host_runs,
        mlx_lm_tok_s: (!mlx_lm.is_empty()).then(|| rate(&mlx_lm)),
        mlx_lm,
        // Set below, from the point's own bytes and rate.
        fraction_of_bandwidth: 0.0,
    };
    point.fraction_of_bandwidth = fraction(&point, rates.bandwidth_gb_s);
    Ok(point)
}

/// With `--peer`: mlx-lm serving the same shape (its own random values) in the same
/// layout, ready for a round after each of quest's.
fn start_peer(
    options: &FitOptions,
    prompt: &[u32],
    shape: &random::PublicShape,
    layout: Option<Layout>,
    model: &crate::lm::Model,
    progress: &mut impl FnMut(&str),
) -> Result<Option<super::peer::PeerSession>> {
    let Some(peer) = &options.peer else {
        return Ok(None);
    };
    anyhow::ensure!(layout.is_none(), PEER_WITH_LAYOUTS);
    progress(&format!("{}: starting mlx-lm beside it…", shape.name));
    let weights = if model.layout.is_dense() {
        "dense"
    } else {
        "quantized"
    };
    Ok(Some(peer.serve_generate(
        &super::peer::PeerModel::Config((shape.config)()),
        prompt,
        options.max_tokens,
        weights,
    )?))
}

/// The progress line for a measured shape: its bytes, each loop's rate, its share of the
/// bandwidth, the host's time.
fn point_summary(point: &ShapePoint, bandwidth_gb_s: f64) -> String {
    let peer = point
        .mlx_lm_tok_s
        .map(|peer| format!(", mlx-lm {peer:.2} (×{:.2})", point.pipelined_tok_s / peer))
        .unwrap_or_default();
    format!(
        "{} {}: {:.0} MB/token, hand {:.2} tok/s, pipelined {:.2} tok/s ({:.1} % of {:.0} GB/s){peer}, host {:.1} µs/layer",
        point.shape,
        point.layout,
        point.bytes_per_token as f64 / 1e6,
        point.hand_tok_s,
        point.pipelined_tok_s,
        point.fraction_of_bandwidth * 1e2,
        bandwidth_gb_s,
        point.host_us_per_layer()
    )
}

/// The progress line after `done` shape runs with `left` to go: the time they took and
/// the time the rest should take, half by count and half by weights read (each shape pays
/// a fixed cost, making its weights and the fixed term, and a time that grows with what
/// it reads).
fn time_left(
    done: usize,
    left: &[(&&random::PublicShape, &Option<Layout>)],
    elapsed: f64,
    weights_done: f64,
) -> String {
    let weights_left: f64 = left.iter().map(|(shape, _)| decode_elements(shape)).sum();
    format!(
        "{done} of {} shape runs in {elapsed:.0} s; about {:.0} s left",
        done + left.len(),
        elapsed / done as f64 * left.len() as f64 * 0.5
            + elapsed * weights_left / weights_done * 0.5
    )
}

/// The fit through every measured point: the line over all of them, one per layout
/// where there are several, else the plane with layers as a second term.
fn fit_points(
    mut points: Vec<ShapePoint>,
    rates: super::rates::Rates,
    backend: crate::device::Backend,
    several_layouts: bool,
) -> Result<Fit> {
    // Measured again now that the run is over; a moment of load must not set it low.
    let rates = rates.best(super::rates::Rates::measure()?);
    for point in &mut points {
        point.fraction_of_bandwidth = fraction(point, rates.bandwidth_gb_s);
    }
    let (fixed_ms, effective_gb_s) = fit_line(points.iter());
    let per_layout = if several_layouts {
        fit_per_layout(&points)
    } else {
        Vec::new()
    };
    let residuals: Vec<f64> = points
        .iter()
        .map(|p| p.ms_per_token() - (fixed_ms + p.bytes_per_token as f64 / (effective_gb_s * 1e6)))
        .collect();
    Ok(Fit {
        backend,
        complete: true,
        rates,
        bandwidth_method: super::rates::bandwidth_method().into(),
        copy_gb_s: (backend != crate::device::Backend::Cpu).then_some(rates.bandwidth_gb_s),
        fixed_ms,
        effective_gb_s,
        rms_residual_ms: rms(&residuals),
        per_layer: if per_layout.is_empty() {
            PerLayerFit::through(&points)
        } else {
            None
        },
        // The shape that reads the most bytes (the list's order is the user's).
        sync_cost_ms: points
            .iter()
            .max_by_key(|p| p.bytes_per_token)
            .map_or(0.0, ShapePoint::sync_ms),
        points,
        per_layout,
        quest_kernels: Kernels::for_process(Process::Warmed)?
            .running()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        date: crate::progress::Timestamp::now().to_string(),
    })
}

/// A line through each layout's points, the layouts in the order first measured.
fn fit_per_layout(points: &[ShapePoint]) -> Vec<LayoutFit> {
    let mut names: Vec<&str> = Vec::new();
    for point in points {
        if !names.contains(&point.layout.as_str()) {
            names.push(&point.layout);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let (fixed_ms, effective_gb_s) = fit_line(points.iter().filter(|p| p.layout == name));
            LayoutFit {
                layout: name.to_owned(),
                fixed_ms,
                effective_gb_s,
            }
        })
        .collect()
}

/// How many weights a decode step of `shape` reads.
fn decode_elements(shape: &random::PublicShape) -> f64 {
    random::decode_tensors(&(shape.config)())
        .iter()
        .map(|dims| dims.iter().map(|&d| d as f64).product::<f64>())
        .sum()
}

/// The point's bytes streamed per second over `bandwidth_gb_s`.
fn fraction(point: &ShapePoint, bandwidth_gb_s: f64) -> f64 {
    point.bytes_per_token as f64 * point.pipelined_tok_s / (bandwidth_gb_s * 1e9)
}

/// (fixed ms, GB/s) of the least-squares line through the points' (bytes, ms per token).
fn fit_line<'a>(points: impl Iterator<Item = &'a ShapePoint>) -> (f64, f64) {
    let (fixed_ms, ms_per_byte) = least_squares(
        &points
            .map(|p| (p.bytes_per_token as f64, p.ms_per_token()))
            .collect::<Vec<_>>(),
    );
    let gb_s = if ms_per_byte > 0.0 {
        1e-6 / ms_per_byte
    } else {
        f64::INFINITY
    };
    (fixed_ms, gb_s)
}

impl Fit {
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:<10} {:>10} {:>12} {:>14} {:>8} {:>10} {:>10} {:>9}\n",
            "shape",
            "layout",
            "MB/token",
            "hand tok/s",
            "pipelined",
            "ratio",
            "ms/token",
            "residual",
            "sync ms"
        );
        for p in &self.points {
            // Against the point's own layout's line when there are several layouts.
            let (fixed_ms, gb_s) = self
                .per_layout
                .iter()
                .find(|fit| fit.layout == p.layout)
                .map_or((self.fixed_ms, self.effective_gb_s), |fit| {
                    (fit.fixed_ms, fit.effective_gb_s)
                });
            let predicted = fixed_ms + p.bytes_per_token as f64 / (gb_s * 1e6);
            out += &format!(
                "{:<14} {:<10} {:>10.1} {:>12.2} {:>14.2} {:>8} {:>10.2} {:>+10.2} {:>+9.2}\n",
                p.shape,
                p.layout,
                p.bytes_per_token as f64 / 1e6,
                p.hand_tok_s,
                p.pipelined_tok_s,
                format!("×{:.2}", p.pipelined_tok_s / p.hand_tok_s),
                p.ms_per_token(),
                p.ms_per_token() - predicted,
                p.sync_ms()
            );
        }
        out += &format!(
            "\nfit (pipelined loop): time per token = {:.2} ms + bytes / {:.1} GB/s\n\
             on the largest shape the hand loop's per-token sync adds {:.2} ms per token — to the fixed term\n\
             (random weights: decode speed depends on shapes and bytes, not on the values)\n\
             measured in one process, every round after a warm-up (an exercise is a fresh process each run)\n",
            self.fixed_ms, self.effective_gb_s, self.sync_cost_ms
        );
        out += &format!(
            "the points lie {:.2} ms from the line (root mean square)\n",
            self.rms_residual_ms
        );
        match &self.per_layer {
            Some(fit) => {
                out += &format!(
                    "with a term per layer too: time per token = {:.2} ms + layers × {:.1} µs + bytes / {:.1} GB/s, {:.2} ms from the points\n",
                    fit.fixed_ms, fit.per_layer_us, fit.effective_gb_s, fit.rms_residual_ms
                );
            }
            None if self.per_layout.is_empty() => {
                out += "(a term per layer needs four shapes or more, of different layer counts)\n";
            }
            None => {}
        }
        if !self.quest_kernels.is_empty() {
            out += &format!(
                "quest's own CUDA kernels in these runs: {}\n",
                self.quest_kernels.join(", ")
            );
        }
        if !self.per_layout.is_empty() {
            out += "\nthe same line through each layout's points alone (the residuals above are \
                    from these; the line through every layout together mixes kernels):\n";
            for fit in &self.per_layout {
                out += &format!(
                    "  {:<10} time per token = {:.2} ms + bytes / {:.1} GB/s\n",
                    fit.layout, fit.fixed_ms, fit.effective_gb_s
                );
            }
        }
        if self.points.iter().any(|p| p.mlx_lm_tok_s.is_some()) {
            out += &format!(
                "\nbeside mlx-lm's generate_step (same shape and prompt, its own random values; \
                 rounds interleaved with quest's)\n{:<14} {:>14} {:>14} {:>16}\n",
                "shape", "quest tok/s", "mlx-lm tok/s", "quest ÷ mlx-lm"
            );
            for p in &self.points {
                if let Some(peer) = p.mlx_lm_tok_s {
                    out += &format!(
                        "{:<14} {:>14.2} {:>14.2} {:>16}\n",
                        p.shape,
                        p.pipelined_tok_s,
                        peer,
                        format!("×{:.2}", p.pipelined_tok_s / peer)
                    );
                }
            }
        }
        out += &format!(
            "\nhost time per token (a pipelined run after each round, the median run): building the graph, then async_eval\n\
             {:<14} {:>10} {:>10} {:>10} {:>10} {:>14}\n",
            "shape", "build ms", "eval ms", "host ms", "wall ms", "host µs/layer"
        );
        for p in &self.points {
            out += &format!(
                "{:<14} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>14.1}\n",
                p.shape,
                p.host.build_ms,
                p.host.eval_ms,
                p.host.build_ms + p.host.eval_ms,
                p.host.wall_ms,
                p.host_us_per_layer()
            );
        }
        out
    }
}
