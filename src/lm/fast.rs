//! `lm::fast`: what mlx-lm's model files reach through `mx.fast` — `rms_norm`, `rope`,
//! `scaled_dot_product_attention` — and the other parts a learner may write (SwiGLU, the
//! gated delta rule, a quantized matrix's product). The one place that decides, per call,
//! whose code computes a part of the model: the learner's ([`Pieces`], counted on the way
//! in), quest's CUDA kernels ([`crate::kernels`], CUDA builds only), or MLX's ops.
//!
//! A model holds one [`Fast`], built at load and shared by its blocks (an `Rc`: a model
//! and its graphs stay on the thread of its stream), so a block calls
//! `self.fast.rms_norm(h, &self.input_layernorm)` as mlx-lm's calls
//! `mx.fast.rms_norm(h, w, eps)`, and no signature carries the kernels or the pieces.
//!
//! Each of quest's kernels is asked at one point below, named with the pieces its code
//! takes the place of ([`Fast::quest_kernels`]): the one decision per kernel.

use std::cell::{Cell, Ref, RefCell};
use std::rc::Rc;

use anyhow::Result;
use mlx_rs::fast::ScaledDotProductAttentionMask;
use mlx_rs::ops::quantized_matmul;
use mlx_rs::Array;

use super::cache::KvCache;
use super::models::activations;
use super::models::gated_delta_ops;
use super::pieces::{Counted, Mask, MlpLayers, Pieces};
use super::weights::{Fused, Linear, RmsNorm};
use crate::course::spec::Piece;
use crate::kernels::{Fold, HeadsSpec, Kernel, Kernels};

/// Which parts of a model the learner's pieces compute, and which of quest's kernels its
/// graphs use: asked by every block of one model.
pub struct Fast {
    kernels: Cell<Kernels>,
    /// Which parts are the learner's to write ([`crate::lm::Model::with_pieces`]).
    written: Cell<Written>,
    /// The learner's pieces, counted; `None`: quest's own code, MLX's fused ops called
    /// directly, the path every model takes by default (and the baseline a piece is
    /// measured against).
    pieces: RefCell<Option<Counted>>,
    /// Which of quest's kernels computed a call since the model was made: what a run says
    /// ran ([`Fast::kernel_use`]), call by call rather than from the settings (the matvec
    /// still computes the output head where the learner's product takes the layers').
    ran: Cell<[bool; Kernel::ALL.len()]>,
}

/// What a run says of quest's kernels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelUse {
    /// Those that computed at least one call.
    pub ran: Vec<&'static str>,
    /// Those the model had on and turned off where their code would take the place of the
    /// learner's piece.
    pub off_for_piece: Vec<&'static str>,
}

/// Which parts of a model are the learner's to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// None: quest's code everywhere, its kernels as the model chose them.
    Nothing,
    /// One piece, the lesson's: the learner's code for it, quest's for every other part,
    /// its kernels included wherever they do not take that piece's place.
    One(Piece),
    /// Every piece the learner's code hands over, and none of quest's kernels (a run by
    /// hand, where no lesson says which piece is the learner's).
    Every,
}

/// The pieces each of quest's kernels computes in every variant, whatever it folds in:
/// a learner's piece among them turns it off (for the kernels' own reading, as the
/// report names them; each call asks [`Fast::quest_kernels`] with what it folds).
const KERNEL_COMPUTES: [(Kernel, &[Piece]); 3] = [
    (Kernel::Matvec, &[Piece::QuantizedMatmul]),
    (Kernel::Qkv, &[Piece::RmsNorm, Piece::Rope]),
    (
        Kernel::Attend,
        &[Piece::RmsNorm, Piece::Rope, Piece::Attention],
    ),
];

/// What `kernel` computes in every variant ([`KERNEL_COMPUTES`]): the one list a call of it
/// and the report both read.
fn computes(kernel: Kernel) -> &'static [Piece] {
    KERNEL_COMPUTES
        .iter()
        .find(|(k, _)| *k == kernel)
        .map_or(&[], |(_, pieces)| pieces)
}

/// RoPE's constants for one attention (mlx-lm's `nn.RoPE(dims, traditional, base)`).
#[derive(Clone, Copy, Debug)]
pub struct Rope {
    /// How many leading channels of each head turn (Qwen3.5: a quarter).
    pub dims: i32,
    pub traditional: bool,
    pub base: f32,
}

impl Fast {
    /// The handle a model's blocks share, with `kernels` and no pieces. Only quest makes
    /// one: a learner's code reaches a model's parts through its pieces, not this.
    pub(crate) fn new(kernels: Kernels) -> Rc<Fast> {
        Rc::new(Fast {
            kernels: Cell::new(kernels),
            written: Cell::new(Written::Nothing),
            pieces: RefCell::new(None),
            ran: Cell::new([false; Kernel::ALL.len()]),
        })
    }

    /// `y`, with `kernel` recorded as having computed a call when it did (`Some`).
    fn ran<T>(&self, kernel: Kernel, y: Option<T>) -> Option<T> {
        if y.is_some() {
            let mut ran = self.ran.get();
            ran[kernel as usize] = true;
            self.ran.set(ran);
        }
        y
    }

    /// Which of quest's kernels computed a call, and which are off for the learner's piece.
    pub fn kernel_use(&self) -> KernelUse {
        let (ran, chosen, now) = (self.ran.get(), self.kernels.get(), self.kernels());
        KernelUse {
            ran: Kernel::ALL
                .into_iter()
                .filter(|k| ran[*k as usize])
                .map(Kernel::name)
                .collect(),
            off_for_piece: Kernel::ALL
                .into_iter()
                .filter(|k| chosen.uses(*k) && !now.uses(*k))
                .map(Kernel::name)
                .collect(),
        }
    }

    /// Which of quest's kernels the graphs built from now on may use: the model's, less
    /// those that take the place of a piece the learner writes.
    pub fn kernels(&self) -> Kernels {
        let kernels = self.kernels.get();
        match self.written.get() {
            Written::Nothing => kernels,
            Written::Every => Kernels::FOR_PIECES,
            Written::One(piece) => KERNEL_COMPUTES
                .into_iter()
                .filter(|(_, computes)| computes.contains(&piece))
                .fold(kernels, |kernels, (kernel, _)| {
                    kernels.off_for_a_piece(kernel)
                }),
        }
    }

    pub fn set_kernels(&self, kernels: Kernels) {
        self.kernels.set(kernels);
    }

    /// Which parts are the learner's to write, from now on.
    pub(crate) fn set_written(&self, written: Written) {
        self.written.set(written);
    }

    /// The parts that are the learner's call `pieces` from now on.
    pub(crate) fn set_pieces(&self, pieces: Counted) {
        self.pieces.replace(Some(pieces));
    }

    /// The learner's pieces where they compute `piece`: the one decision, per piece,
    /// between the learner's code and quest's. Where every piece is the learner's, a
    /// method the learner did not write runs quest's default there, counted as quest's own.
    fn yours(&self, piece: Piece) -> Option<Ref<'_, Counted>> {
        let yours = match self.written.get() {
            Written::Nothing => false,
            Written::One(written) => written == piece,
            Written::Every => true,
        };
        if !yours {
            return None;
        }
        Ref::filter_map(self.pieces.borrow(), Option::as_ref).ok()
    }

    /// quest's kernels for a call whose kernel code would take the place of `replaced`:
    /// the one decision, per kernel. None where the learner writes one of `replaced` (or
    /// every piece), the model's otherwise. The baseline (quest's own pieces, no learner's
    /// code) decides the same way, so the two differ in the learner's piece alone.
    fn quest_kernels(&self, replaced: &[Piece]) -> Kernels {
        match self.written.get() {
            Written::Nothing => self.kernels.get(),
            Written::One(piece) if !replaced.contains(&piece) => self.kernels.get(),
            Written::One(_) | Written::Every => Kernels::FOR_PIECES,
        }
    }

    /// `x / rms(x) · weight` over the last axis (mlx-lm's `nn.RMSNorm`): the learner's
    /// [`Pieces::rms_norm`], else MLX's fused `fast::rms_norm`.
    pub fn rms_norm(&self, x: &Array, norm: &RmsNorm) -> Result<Array> {
        match self.yours(Piece::RmsNorm) {
            Some(pieces) => pieces.rms_norm(x, &norm.weight, norm.eps),
            None => Ok(mlx_rs::fast::rms_norm(x, Some(&norm.weight), norm.eps)?),
        }
    }

    /// `x` (`[B, heads, L, head_dim]`) rotated to positions `offset..offset + L`: the
    /// learner's [`Pieces::rope`], else MLX's fused `fast::rope`.
    pub fn rope(&self, x: &Array, rope: &Rope, offset: i32) -> Result<Array> {
        match self.yours(Piece::Rope) {
            Some(pieces) => pieces.rope(x, rope.dims, rope.traditional, rope.base, offset),
            None => Ok(mlx_rs::fast::rope(
                x,
                rope.dims,
                rope.traditional,
                rope.base,
                1.0,
                offset,
                None,
            )?),
        }
    }

    /// `x` (`[B, H, 1, D]`) rotated to each row's own position (`positions`, `[B]`): rows
    /// of different requests in one step (`crate::lm::batching`). MLX's op; no learner's
    /// piece here (the batching lesson writes none).
    pub fn rope_rows(&self, x: &Array, rope: &Rope, positions: &Array) -> Result<Array> {
        Ok(mlx_rs::fast::rope_dynamic(
            x,
            rope.dims,
            rope.traditional,
            rope.base,
            1.0,
            positions,
            None,
        )?)
    }

    /// `softmax(q·kᵀ·scale + mask) · v` per head, grouped-query: the learner's
    /// [`Pieces::attention`], else MLX's fused `fast::scaled_dot_product_attention`.
    pub fn scaled_dot_product_attention(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        mask: Option<Mask>,
    ) -> Result<Array> {
        if let Some(pieces) = self.yours(Piece::Attention) {
            return pieces.attention(queries, keys, values, scale, mask);
        }
        let mask = mask.map(|Mask::Causal| ScaledDotProductAttentionMask::Causal);
        Ok(mlx_rs::fast::scaled_dot_product_attention(
            queries, keys, values, scale, mask, None,
        )?)
    }

    /// Attention of one step over rows of different requests (`crate::lm::batching`):
    /// `rows`, `[B, 1, 1, S]` booleans, hides each row's left padding. MLX's op with the
    /// mask as an array; no learner's piece here (the batching lesson writes none).
    pub fn attention_over_rows(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        scale: f32,
        rows: &Array,
    ) -> Result<Array> {
        Ok(mlx_rs::fast::scaled_dot_product_attention(
            queries,
            keys,
            values,
            scale,
            ScaledDotProductAttentionMask::Array(rows),
            None,
        )?)
    }

    /// `silu(gate) · up`: the learner's [`Pieces::swiglu`], else quest's compiled gate.
    pub fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        match self.yours(Piece::Swiglu) {
            Some(pieces) => pieces.swiglu(gate, up),
            None => Ok(activations::swiglu(gate, up)?),
        }
    }

    /// Qwen3.5's gated delta rule over `L` tokens (see [`Pieces::gated_delta`]): the
    /// learner's, else quest's, MLX's ops in mlx-lm's order.
    pub fn gated_delta(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        g: &Array,
        beta: &Array,
        state: Array,
    ) -> Result<(Array, Array)> {
        match self.yours(Piece::GatedDelta) {
            Some(pieces) => pieces.gated_delta(queries, keys, values, g, beta, state),
            None => gated_delta_ops::recurrence(queries, keys, values, g, beta, state),
        }
    }

    /// `x · Wᵀ (+ b)` for a projection of a block's attention or MLP: a quantized matrix
    /// by the learner's [`Pieces::quantized_matmul`] where the model has pieces, else
    /// [`Fast::linear_without_pieces`].
    pub fn linear(&self, x: &Array, linear: &Linear) -> Result<Array> {
        let Some(pieces) = self.yours(Piece::QuantizedMatmul) else {
            return self.linear_without_pieces(x, linear);
        };
        product(x, linear, |q| {
            pieces.quantized_matmul(x, q.weight, q.scales, q.biases, q.group_size, q.bits)
        })
    }

    /// `x · Wᵀ (+ b)` for a matrix the pieces never reach (the output head, Qwen3.5's
    /// gated-delta projections): a 4-bit matrix times one row in quest's matvec where it
    /// runs, else MLX's matmul or quantized matmul.
    pub fn linear_without_pieces(&self, x: &Array, linear: &Linear) -> Result<Array> {
        product(x, linear, |q| {
            // No learner's piece runs here: quest's matvec stays where it runs.
            let by_kernel = self.quest_kernels(&[]).project(
                x,
                q.weight,
                q.scales,
                q.biases,
                q.group_size,
                q.bits,
                &Fold::default(),
            )?;
            match self.ran(Kernel::Matvec, by_kernel) {
                Some(y) => Ok(y),
                None => Ok(quantized_matmul(
                    x,
                    q.weight,
                    q.scales,
                    q.biases,
                    true,
                    q.group_size,
                    q.bits,
                )?),
            }
        })
    }

    /// `x` through `linear` with `fold`'s ops around it: one kernel of quest's where it
    /// applies (4-bit, no bias, one row, quest's matvec on), else the same ops one by
    /// one — SwiGLU of `[gate | up]`, the norm, the product, the residual add.
    fn linear_folded(&self, x: &Array, linear: &Linear, fold: &Fold) -> Result<Array> {
        use Piece::{QuantizedMatmul, RmsNorm as Norm, Swiglu};
        let replaced: &[Piece] = match (fold.norm.is_some(), fold.swiglu) {
            (false, false) => &[QuantizedMatmul],
            (true, false) => &[QuantizedMatmul, Norm],
            (false, true) => &[QuantizedMatmul, Swiglu],
            (true, true) => &[QuantizedMatmul, Norm, Swiglu],
        };
        if let Linear::Quantized {
            weight,
            scales,
            biases,
            bias: None,
            group_size,
            bits,
        } = linear
        {
            let kernels = self.quest_kernels(replaced);
            let y = kernels.project(x, weight, scales, biases, *group_size, *bits, fold)?;
            if let Some(y) = self.ran(Kernel::Matvec, y) {
                return Ok(y);
            }
        }
        let mut x = x.clone();
        if fold.swiglu {
            let halves = x.split_equal(2, -1)?;
            x = self.swiglu(&halves[0], &halves[1])?;
        }
        if let Some((weight, eps)) = fold.norm {
            let norm = RmsNorm {
                weight: weight.clone(),
                eps,
            };
            x = self.rms_norm(&x, &norm)?;
        }
        let y = self.linear(&x, linear)?;
        Ok(match fold.residual {
            Some(r) => r.add(&y)?,
            None => y,
        })
    }

    /// Each part's output of linear layers that read the same input, in the order given.
    pub fn fused(&self, x: &Array, fused: &Fused) -> Result<Vec<Array>> {
        match fused {
            Fused::One { linear, .. } => fused.split(&self.linear(x, linear)?),
            Fused::Separate(parts) => parts.iter().map(|p| self.linear(x, p)).collect(),
        }
    }

    /// The input of a residual sublayer, `h + f(norm(h))`: `h` read through `norm`. In a
    /// decode step where quest's matvec runs, the norm is left to the sublayer's first
    /// projection and the add to its last, one kernel each ([`Fast::first_projection`],
    /// [`Fast::last_projection`]); anywhere else it is normed here.
    pub fn pre_norm<'a>(&self, h: &'a Array, norm: &'a RmsNorm) -> Result<Sublayer<'a>> {
        let kernels = self.quest_kernels(&[Piece::RmsNorm, Piece::QuantizedMatmul]);
        let folded = h.shape().get(1) == Some(&1) && kernels.folds();
        Ok(Sublayer {
            stream: h,
            norm,
            normed: if folded {
                None
            } else {
                Some(self.rms_norm(h, norm)?)
            },
        })
    }

    /// The sublayer's first projection (q/k/v, or gate/up), stacked: the norm folded in
    /// where [`Fast::pre_norm`] left it.
    pub fn first_projection<'f>(&self, x: &Sublayer, fused: &'f Fused) -> Result<Projected<'f>> {
        let out = match fused {
            Fused::One { linear, .. } => {
                let fold = Fold {
                    norm: x.folded_norm().map(|n| (&n.weight, n.eps)),
                    ..Fold::default()
                };
                Out::Joined(self.linear_folded(x.input(), linear, &fold)?)
            }
            Fused::Separate(_) => Out::Parts(self.fused(&x.normed(self)?, fused)?),
        };
        Ok(Projected { out, fused })
    }

    /// `y · Wᵀ`, the sublayer's last projection, on its way back to the residual stream:
    /// where [`Fast::pre_norm`] folded the norm, the kernel adds `h` as well.
    pub fn last_projection(&self, x: &Sublayer, y: &Array, linear: &Linear) -> Result<Residual> {
        let fold = Fold {
            residual: x.folded_residual(),
            ..Fold::default()
        };
        let out = self.linear_folded(y, linear, &fold)?;
        Ok(x.residual(out))
    }

    /// `down(silu(gate) · up)` from the MLP's `[gate | up]` projection: SwiGLU folded
    /// into the down projection's kernel where quest's matvec runs (a stacked `[gate | up]`,
    /// no pieces), else the gate of each half and then the down projection.
    fn swiglu_last_projection(
        &self,
        x: &Sublayer,
        gate_up: &Projected,
        down: &Linear,
    ) -> Result<Residual> {
        if let (Out::Joined(joined), None) = (&gate_up.out, self.yours(Piece::Swiglu)) {
            let fold = Fold {
                swiglu: true,
                residual: x.folded_residual(),
                ..Fold::default()
            };
            let out = self.linear_folded(joined, down, &fold)?;
            return Ok(x.residual(out));
        }
        let parts = gate_up.parts()?;
        let y = self.linear(&self.swiglu(&parts[0], &parts[1])?, down)?;
        Ok(Residual::Alone(y))
    }

    /// `mlp(norm(h))`, a block's feed-forward from its stacked `[gate | up]` and its
    /// `down`: the learner's [`Pieces::mlp`] (handed the block's projections, each still
    /// quest's product), else quest's own, SwiGLU folded into the down projection's kernel
    /// where quest's matvec runs.
    pub fn mlp(&self, x: &Sublayer, gate_up: &Fused, down: &Linear) -> Result<Residual> {
        let Some(pieces) = self.yours(Piece::Mlp) else {
            let projected = self.first_projection(x, gate_up)?;
            return self.swiglu_last_projection(x, &projected, down);
        };
        let input = x.normed(self)?;
        let layers = MlpLayers::new(
            &input,
            Box::new(|x| self.fused(x, gate_up)),
            Box::new(|x| self.linear(x, down)),
            Box::new(|gate, up| self.swiglu(gate, up)),
        );
        let y = pieces.mlp(&input, &layers)?;
        Ok(Residual::Alone(y))
    }

    /// A decode step's `[q, k, v]` heads from the stacked projection, q and k normed and
    /// rotated to `offset`, in one kernel of quest's; `None`: not here.
    pub fn heads(
        &self,
        qkv: &Projected,
        spec: &HeadsSpec,
        offset: i32,
    ) -> Result<Option<[Array; 3]>> {
        let Out::Joined(qkv) = &qkv.out else {
            return Ok(None);
        };
        let heads = self
            .quest_kernels(computes(Kernel::Qkv))
            .heads(qkv, spec, offset)?;
        Ok(self.ran(Kernel::Qkv, heads))
    }

    /// A decode step's attention from the stacked projection, the new key and value
    /// written into `cache`, in one kernel of quest's; `None`: not here (the cache
    /// untouched).
    pub fn attend(
        &self,
        qkv: &Projected,
        spec: &HeadsSpec,
        cache: &mut KvCache,
    ) -> Result<Option<Array>> {
        let Out::Joined(qkv) = &qkv.out else {
            return Ok(None);
        };
        let out = self
            .quest_kernels(computes(Kernel::Attend))
            .attend(qkv, spec, cache)?;
        Ok(self.ran(Kernel::Attend, out))
    }
}

/// A quantized matrix's parts, as a product of it is handed them.
struct Quantized<'a> {
    weight: &'a Array,
    scales: &'a Array,
    biases: &'a Array,
    group_size: i32,
    bits: i32,
}

/// `x · Wᵀ (+ b)`: MLX's matmul for a dense matrix, `quantized` for a quantized one.
fn product(
    x: &Array,
    linear: &Linear,
    quantized: impl FnOnce(Quantized) -> Result<Array>,
) -> Result<Array> {
    let (y, bias) = match linear {
        Linear::Dense { weight_t, bias } => (mlx_rs::ops::matmul(x, weight_t)?, bias),
        Linear::Quantized {
            weight,
            scales,
            biases,
            bias,
            group_size,
            bits,
        } => (
            quantized(Quantized {
                weight,
                scales,
                biases,
                group_size: *group_size,
                bits: *bits,
            })?,
            bias,
        ),
    };
    add_bias(y, bias.as_ref())
}

fn add_bias(y: Array, bias: Option<&Array>) -> Result<Array> {
    Ok(match bias {
        Some(b) => y.add(b)?,
        None => y,
    })
}

/// A residual sublayer's input (from [`Fast::pre_norm`]): the residual stream `h`, its
/// norm, and `norm(h)` unless a decode step folds the norm into the first projection.
pub struct Sublayer<'a> {
    stream: &'a Array,
    norm: &'a RmsNorm,
    normed: Option<Array>,
}

impl Sublayer<'_> {
    /// `[B, L]` of the stream.
    pub fn batch_and_length(&self) -> (i32, i32) {
        (self.stream.shape()[0], self.stream.shape()[1])
    }

    /// What the first projection reads: `norm(h)`, or `h` where it folds the norm in.
    fn input(&self) -> &Array {
        self.normed.as_ref().unwrap_or(self.stream)
    }

    /// `norm(h)`, computed now where it was folded.
    fn normed(&self, fast: &Fast) -> Result<Array> {
        match &self.normed {
            Some(normed) => Ok(normed.clone()),
            None => fast.rms_norm(self.stream, self.norm),
        }
    }

    fn folded_norm(&self) -> Option<&RmsNorm> {
        self.normed.is_none().then_some(self.norm)
    }

    fn folded_residual(&self) -> Option<&Array> {
        self.normed.is_none().then_some(self.stream)
    }

    /// The last projection's `out`: `h + r` already where the kernel folded the add in.
    fn residual(&self, out: Array) -> Residual {
        match self.normed {
            None => Residual::Added(out),
            Some(_) => Residual::Alone(out),
        }
    }
}

/// A sublayer's output `r` on its way back to the residual stream, which a block adds as
/// mlx-lm's does: `h = h + r`. Where quest's matvec folded the norm into a decode step's
/// first projection, it folds the add into the last as well: `r` arrives as `h + r`.
pub enum Residual {
    Alone(Array),
    Added(Array),
}

impl Residual {
    /// `h + r`: the residual add, unless the kernel made it.
    pub fn added_to(self, h: &Array) -> Result<Array> {
        match self {
            Residual::Alone(r) => Ok(h.add(r)?),
            Residual::Added(sum) => Ok(sum),
        }
    }
}

/// The first projection's output: one stacked product (for quest's kernels to read whole)
/// or each part's where the parts could not be stacked.
pub struct Projected<'f> {
    out: Out,
    fused: &'f Fused,
}

enum Out {
    Joined(Array),
    Parts(Vec<Array>),
}

impl Projected<'_> {
    /// Each part's output (q, k, v or gate, up).
    pub fn parts(&self) -> Result<Vec<Array>> {
        match &self.out {
            Out::Joined(joined) => self.fused.split(joined),
            Out::Parts(parts) => Ok(parts.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::pieces::QuestPieces;

    impl KernelUse {
        fn with_off(mut self, off: &[&'static str]) -> Self {
            self.off_for_piece = off.to_vec();
            self
        }
    }

    fn fast(written: Written) -> Rc<Fast> {
        let fast = Fast::new(Kernels::EVERY_ONE);
        fast.set_written(written);
        fast.set_pieces(Counted(Box::new(QuestPieces)));
        fast
    }

    /// A lesson's piece turns off the kernels whose code takes its place, and only those:
    /// the rest of the model keeps quest's kernels, in the learner's run and its baseline.
    #[test]
    fn a_lessons_piece_turns_off_only_the_kernels_that_compute_it() {
        let running = |written| fast(written).kernels().running();
        assert_eq!(running(Written::Nothing), ["matvec", "qkv", "attend"]);
        assert_eq!(running(Written::One(Piece::Rope)), ["matvec"]);
        assert_eq!(running(Written::One(Piece::RmsNorm)), ["matvec"]);
        assert_eq!(running(Written::One(Piece::Attention)), ["matvec", "qkv"]);
        assert_eq!(
            running(Written::One(Piece::QuantizedMatmul)),
            ["qkv", "attend"]
        );
        for kept in [Piece::Swiglu, Piece::Mlp, Piece::GatedDelta, Piece::Sample] {
            assert_eq!(running(Written::One(kept)), ["matvec", "qkv", "attend"]);
        }
        assert!(running(Written::Every).is_empty());
        assert!(fast(Written::One(Piece::Rope)).kernels().for_pieces());
        assert!(!fast(Written::One(Piece::Swiglu)).kernels().for_pieces());

        // Per call: a matvec that folds the norm in is off in the norm's lesson, the same
        // matvec on an unnormed row is not.
        let norm = fast(Written::One(Piece::RmsNorm));
        let folded = [Piece::QuantizedMatmul, Piece::RmsNorm];
        assert!(norm.quest_kernels(&folded).running().is_empty());
        assert_eq!(
            norm.quest_kernels(&[Piece::QuantizedMatmul])
                .running()
                .len(),
            3
        );
        assert!(fast(Written::Every).quest_kernels(&[]).running().is_empty());
    }

    /// A run says the kernels that computed a call, not those the settings turned on, and
    /// the ones off for the learner's piece: the matvec can be both (the output head).
    #[test]
    fn a_run_says_the_kernels_that_computed_a_call() {
        let dequant = fast(Written::One(Piece::QuantizedMatmul));
        assert_eq!(
            dequant.kernel_use(),
            KernelUse::default().with_off(&["matvec"])
        );
        assert_eq!(dequant.ran(Kernel::Qkv, None::<()>), None);
        assert_eq!(dequant.ran(Kernel::Matvec, Some(())), Some(()));
        assert_eq!(dequant.ran(Kernel::Attend, Some(())), Some(()));
        assert_eq!(
            dequant.kernel_use(),
            KernelUse {
                ran: vec!["matvec", "attend"],
                off_for_piece: vec!["matvec"],
            }
        );
        assert_eq!(
            fast(Written::One(Piece::Rope)).kernel_use().off_for_piece,
            ["qkv", "attend"]
        );
        assert_eq!(fast(Written::Nothing).kernel_use(), KernelUse::default());
    }

    /// The learner's code computes the lesson's piece alone; run by hand, every piece.
    #[test]
    fn your_code_runs_for_the_lessons_piece_alone() {
        let rope = fast(Written::One(Piece::Rope));
        assert!(rope.yours(Piece::Rope).is_some());
        assert!(rope.yours(Piece::RmsNorm).is_none());
        assert!(fast(Written::Every).yours(Piece::RmsNorm).is_some());
        assert!(fast(Written::Nothing).yours(Piece::Rope).is_none());
        let baseline = Fast::new(Kernels::EVERY_ONE);
        baseline.set_written(Written::One(Piece::Rope));
        assert!(baseline.yours(Piece::Rope).is_none());
        assert_eq!(baseline.kernels().running(), ["matvec"]);
    }
}
