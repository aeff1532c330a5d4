//! The decode-ceiling formula, measured: time per token = fixed + bytes / bandwidth.
//! Random-weights models of several sizes are decoded with the pipelined loop (and the
//! hand loop beside it); a least-squares line through (bytes per token, ms per token)
//! gives the fixed term (its intercept) and the bandwidth the loop achieves (1 / slope).

use anyhow::Result;
use serde::Serialize;

use super::{loops, random, Measured};
use crate::stats::{least_squares, median};

#[derive(Debug, Serialize)]
pub struct ShapePoint {
    pub shape: String,
    pub bytes_per_token: u64,
    pub hand_tok_s: f64,
    pub pipelined_tok_s: f64,
    pub hand: Vec<Measured>,
    pub pipelined: Vec<Measured>,
    pub layers: usize,
    /// The host's time per token in one more pipelined run (see [`loops::HostSplit`]).
    pub host: loops::HostSplit,
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
    pub backend: String,
    pub points: Vec<ShapePoint>,
    /// Intercept: ms per token that does not depend on the bytes read.
    pub fixed_ms: f64,
    /// 1 / slope, in GB/s: the bandwidth the decode loop achieves.
    pub effective_gb_s: f64,
    /// The hand loop's extra ms per token over the pipelined one on the largest shape:
    /// what the per-token `.item()` adds to the fixed term where there is device work to
    /// overlap (on small shapes the host's own per-step work is the longer of the two).
    pub sync_cost_ms: f64,
    pub date: String,
}

pub struct FitOptions {
    pub shapes: Vec<&'static random::Shape>,
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    pub rounds: usize,
}

pub fn run(options: &FitOptions, mut progress: impl FnMut(&str)) -> Result<Fit> {
    let prompt = random::prompt(options.prompt_tokens);
    let mut points = Vec::new();
    for shape in &options.shapes {
        progress(&format!("{}: making random 4-bit weights…", shape.name));
        let model = random::model(&(shape.config)(), 0)?;
        let kv = super::cache_bytes(&model)?.at(options.prompt_tokens + options.max_tokens / 2);
        let bytes_per_token = (model.weight_bytes() + kv) as u64;
        loops::hand(&model, &prompt[..2], 2)?; // warm-up
        loops::pipelined(&model, &prompt[..2], 2)?;
        let (mut hand, mut pipelined) = (Vec::new(), Vec::new());
        for _ in 0..options.rounds {
            hand.push(loops::hand(&model, &prompt, options.max_tokens)?);
            pipelined.push(loops::pipelined(&model, &prompt, options.max_tokens)?);
        }
        let host = loops::pipelined_split(&model, &prompt, options.max_tokens)?;
        let rate =
            |runs: &[Measured]| median(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>());
        let point = ShapePoint {
            shape: shape.name.into(),
            bytes_per_token,
            hand_tok_s: rate(&hand),
            pipelined_tok_s: rate(&pipelined),
            hand,
            pipelined,
            layers: model.num_layers(),
            host,
        };
        progress(&format!(
            "{}: {:.0} MB/token, hand {:.2} tok/s, pipelined {:.2} tok/s",
            point.shape,
            bytes_per_token as f64 / 1e6,
            point.hand_tok_s,
            point.pipelined_tok_s
        ));
        points.push(point);
    }
    let (fixed_ms, ms_per_byte) = least_squares(
        &points
            .iter()
            .map(|p| (p.bytes_per_token as f64, p.ms_per_token()))
            .collect::<Vec<_>>(),
    );
    Ok(Fit {
        backend: crate::lm::Backend::detect().name().into(),
        fixed_ms,
        effective_gb_s: if ms_per_byte > 0.0 {
            1e-6 / ms_per_byte
        } else {
            f64::INFINITY
        },
        sync_cost_ms: points.last().map_or(0.0, ShapePoint::sync_ms),
        points,
        date: crate::progress::Timestamp::now().to_string(),
    })
}

impl Fit {
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:>10} {:>12} {:>14} {:>8} {:>10} {:>10} {:>9}\n",
            "shape",
            "MB/token",
            "hand tok/s",
            "pipelined",
            "ratio",
            "ms/token",
            "residual",
            "sync ms"
        );
        for p in &self.points {
            let predicted = self.fixed_ms + p.bytes_per_token as f64 / (self.effective_gb_s * 1e6);
            out += &format!(
                "{:<14} {:>10.1} {:>12.2} {:>14.2} {:>8} {:>10.2} {:>+10.2} {:>+9.2}\n",
                p.shape,
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
             (random weights: decode speed depends on shapes and bytes, not on the values)\n",
            self.fixed_ms, self.effective_gb_s, self.sync_cost_ms
        );
        out += &format!(
            "\nhost time per token (one more pipelined run): building the graph, then async_eval\n\
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
