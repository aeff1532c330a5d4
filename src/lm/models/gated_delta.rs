//! Qwen3.5's "linear attention" layer: a gated delta net, as mlx-lm's `GatedDeltaNet`
//! (`models/qwen3_5.py`) with the ops reference of `models/gated_delta.py`.
//!
//! Instead of keeping every past key and value, the layer keeps one matrix per head, the
//! state `S` (`[value_dim, key_dim]`), and updates it token by token:
//!
//! ```text
//! S = g · S                         decay: forget a little of everything
//! S = S + k ⊗ β (v − S k)           delta rule: write v at key k, correcting what S recalled
//! y = S q                           read with the query
//! ```
//!
//! A short causal conv1d over the last few inputs runs first. Both the conv window and `S`
//! have a fixed size, so this layer's cache does not grow with the text.

use anyhow::{ensure, Context, Result};
use mlx_rs::fast::rms_norm;
use mlx_rs::nn::softplus;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::{concatenate, conv1d, sigmoid, split_at_indices, zeros_dtype};
use mlx_rs::{Array, Dtype};

use super::activations::silu;
use super::{LinearAttention, Shape};
use crate::lm::cache::RecurrentCache;
use crate::lm::fast::Fast;
use crate::lm::weights::{Linear, Weights};
use crate::lm::Layout;
use std::rc::Rc;

pub struct GatedDeltaNet {
    in_proj_qkv: Linear,
    in_proj_z: Linear,
    in_proj_b: Linear,
    in_proj_a: Linear,
    /// Depthwise conv weight in MLX's layout, `[channels, kernel, 1]`.
    conv_weight: Array,
    a_log: Array,
    dt_bias: Array,
    norm_weight: Array,
    out_proj: Linear,
    shape: LinearAttention,
    rms_norm_eps: f32,
    fast: Rc<Fast>,
}

impl GatedDeltaNet {
    pub fn load(w: &mut Weights, p: &str, model: &Shape, fast: &Rc<Fast>) -> Result<Self> {
        let (q, shape) = (model.quantization, &model.linear_attention);
        let shape = shape
            .clone()
            .context("a gated delta layer in a model without one")?;
        let conv_weight = w.take(&format!("{p}.conv1d.weight"))?;
        let expected = [shape.conv_channels(), shape.conv_kernel, 1];
        ensure!(
            conv_weight.shape() == expected,
            "{p}.conv1d.weight in {} has shape {:?}, but the config asks for {expected:?}",
            w.source().display(),
            conv_weight.shape()
        );
        Ok(Self {
            in_proj_qkv: w.linear(&format!("{p}.in_proj_qkv"), q)?,
            in_proj_z: w.linear(&format!("{p}.in_proj_z"), q)?,
            in_proj_b: w.linear(&format!("{p}.in_proj_b"), q)?,
            in_proj_a: w.linear(&format!("{p}.in_proj_a"), q)?,
            conv_weight,
            a_log: w.take_f32(&format!("{p}.A_log"))?,
            dt_bias: w.take(&format!("{p}.dt_bias"))?,
            norm_weight: w.take(&format!("{p}.norm.weight"))?,
            out_proj: w.linear(&format!("{p}.out_proj"), q)?,
            shape,
            rms_norm_eps: model.rms_norm_eps,
            fast: fast.clone(),
        })
    }

    /// `x`: `[B, L, hidden]`. Continues from (and updates) the conv window and state in `cache`.
    pub fn forward(&self, x: &Array, cache: &mut RecurrentCache) -> Result<Array> {
        let s = &self.shape;
        let (b, l) = (x.shape()[0], x.shape()[1]);
        // The pieces reach none of these projections: quest's matvec or MLX's ops.
        let project = |linear: &Linear| self.fast.linear_without_pieces(x, linear);
        let qkv = project(&self.in_proj_qkv)?;
        let z = project(&self.in_proj_z)?.reshape(&[b, l, s.value_heads, s.value_head_dim])?;
        let beta = sigmoid(project(&self.in_proj_b)?)?;
        let a = project(&self.in_proj_a)?;

        // The conv sees the previous `kernel - 1` inputs first, so steps join up seamlessly.
        let keep = s.conv_kernel - 1;
        let previous = match &cache.conv {
            Some(window) => window.clone(),
            None => zeros_dtype(&[b, keep, s.conv_channels()], x.dtype())?,
        };
        let conv_input = concatenate(&[previous, qkv], 1)?;
        let conv_len = conv_input.shape()[1];
        let conv_out = silu(&conv1d(
            &conv_input,
            &self.conv_weight,
            1,
            0,
            1,
            s.conv_channels(),
        )?)?;

        let parts = split_at_indices(&conv_out, &[s.key_dim(), 2 * s.key_dim()], -1)?;
        let heads = |t: &Array, h: i32, d: i32| t.reshape(&[b, l, h, d]);
        let q = heads(&parts[0], s.key_heads, s.key_head_dim)?;
        let k = heads(&parts[1], s.key_heads, s.key_head_dim)?;
        let v = heads(&parts[2], s.value_heads, s.value_head_dim)?;
        let (q, k) = normalize_qk(&q, &k, s.key_head_dim)?;

        // Per head and token: how much of the state survives (g) and how hard to write (β).
        let decay_rate = self.a_log.exp()?.negative()?;
        let g = decay_rate
            .multiply(softplus(a.add(&self.dt_bias)?)?)?
            .exp()?;
        let state = match &cache.state {
            Some(state) => state.clone(),
            None => zeros_dtype(
                &[b, s.value_heads, s.value_head_dim, s.key_head_dim],
                Dtype::Float32,
            )?,
        };
        let (y, state) = self.fast.gated_delta(&q, &k, &v, &g, &beta, state)?;

        cache.conv = Some(conv_input.index((.., conv_len - keep.., ..)).contiguous()?);
        cache.state = Some(state);

        let out = gated_rms_norm(&y, &z, &self.norm_weight, self.rms_norm_eps)?;
        self.fast
            .linear_without_pieces(&out.reshape(&[b, l, -1])?, &self.out_proj)
    }

    /// Puts the five projections in `layout` (the conv kernel and the vectors stay float).
    pub fn requantize(&mut self, layout: Layout, dtype: Dtype) -> Result<()> {
        for projection in [
            &mut self.in_proj_qkv,
            &mut self.in_proj_z,
            &mut self.in_proj_b,
            &mut self.in_proj_a,
            &mut self.out_proj,
        ] {
            *projection = projection.requantize(layout, dtype)?;
        }
        Ok(())
    }

    pub fn nbytes(&self) -> usize {
        let projections = [
            &self.in_proj_qkv,
            &self.in_proj_z,
            &self.in_proj_b,
            &self.in_proj_a,
            &self.out_proj,
        ];
        let small = [
            &self.conv_weight,
            &self.a_log,
            &self.dt_bias,
            &self.norm_weight,
        ];
        projections.iter().map(|p| p.nbytes()).sum::<usize>()
            + small.iter().map(|a| a.nbytes()).sum::<usize>()
    }
}

/// L2-normalizes queries and keys per head, and folds the `key_dim^-0.5` read-out scale
/// into the queries (mlx-lm's `normalize_qk`, eps 1e-6 on the sum of squares).
fn normalize_qk(q: &Array, k: &Array, key_head_dim: i32) -> Result<(Array, Array)> {
    let inv_scale = (key_head_dim as f32).powf(-0.5);
    // rms_norm adds eps to the mean of squares, the reference to their sum.
    let eps = 1e-6 * inv_scale * inv_scale;
    let q = rms_norm(q, None, eps)?.multiply(scalar(inv_scale * inv_scale, q)?)?;
    let k = rms_norm(k, None, eps)?.multiply(scalar(inv_scale, k)?)?;
    Ok((q, k))
}

/// RMS-normalizes `y` per head, then gates it with `silu(z)` (in float32, as mlx-lm).
fn gated_rms_norm(y: &Array, z: &Array, weight: &Array, eps: f32) -> Result<Array> {
    let normed = rms_norm(y, Some(weight), eps)?;
    let gate = silu(&z.as_dtype(Dtype::Float32)?)?;
    Ok(gate
        .multiply(normed.as_dtype(Dtype::Float32)?)?
        .as_dtype(y.dtype())?)
}

/// A scalar in `like`'s dtype (an f32 scalar would promote float16 activations).
fn scalar(value: f32, like: &Array) -> Result<Array> {
    Ok(Array::from_f32(value).as_dtype(like.dtype())?)
}
