// your-model: the whole decoder, written by you, from the weights by name and the config,
// with MLX's plain ops: no fused norm, rotation or attention (`mlx_rs::fast`), no layers
// (`mlx_rs::nn`).
// Your task (see the lesson): every `todo!()` below. The weights are loaded by name, the
// matrices multiplied as stored (`project`, `embed`) and the loop is quest's.
//
// A llama decoder (SmolLM2): embedding → every block → final norm → head (the embedding
// table, tied). Each block, with its own KV cache:
//   h = h + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))   n = rms_norm(h)
//   h = h + down_proj(silu(gate_proj(m)) · up_proj(m))                      m = rms_norm(h)
//
// Ops you may want (mlx_rs::ops and Array's methods): arange, cos, sin, exp, rsqrt, square,
// mean_axis, max_axis, sum_axis, split_at_indices, concatenate, le, select, sigmoid,
// matmul, reshape, transpose_axes, swap_axes, expand_dims, as_dtype.

use anyhow::{bail, Result};
use mlx_rs::ops::{dequantize, matmul, quantized_matmul};
use mlx_rs::{Array, Dtype};
use quest::lab::Exercise;
use quest::lm::{self, Checkpoint, Config, KvCache, LayerCache, Linear};

/// `x · Wᵀ`, the matrix dense (the CPU) or quantized as stored (a GPU).
fn project(x: &Array, w: &Linear) -> Result<Array> {
    Ok(match w {
        Linear::Dense { weight_t, .. } => matmul(x, weight_t)?,
        Linear::Quantized {
            weight,
            scales,
            biases,
            group_size,
            bits,
            ..
        } => quantized_matmul(x, weight, scales, biases, true, *group_size, *bits)?,
    })
}

/// The embedding table's rows for `ids`.
fn embed(ids: &Array, table: &Linear) -> Result<Array> {
    Ok(match table {
        Linear::Dense { weight_t, .. } => weight_t.t().take_axis(ids, 0)?,
        Linear::Quantized {
            weight,
            scales,
            biases,
            group_size,
            bits,
            ..
        } => dequantize(
            weight.take_axis(ids, 0)?,
            scales.take_axis(ids, 0)?,
            &biases.take_axis(ids, 0)?,
            *group_size,
            *bits,
        )?,
    })
}

/// RMSNorm over the last axis: `x · rsqrt(mean(x²) + eps) · weight`. Compute it in
/// float32 and return it in x's dtype (a GPU's float16 overflows x² past 256).
fn rms_norm(x: &Array, weight: &Array, eps: f32) -> Result<Array> {
    todo!("rms_norm")
}

/// The angles of RoPE for `l` positions from `offset` on: pair i of a head's `d` channels
/// (d = head_dim) at position p turns by p · θ^(-2i/d) (θ = rope_theta). Both `[L, d/2]`,
/// in `dtype`.
struct Rotation {
    cos: Array,
    sin: Array,
}

fn rotation(c: &Config, offset: i32, l: i32, dtype: Dtype) -> Result<Rotation> {
    todo!("rotation")
}

/// RoPE on `[B, heads, L, d]`, split halves: channel i pairs with i + d/2, and each pair
/// (a, b) turns by its angle: (a·cos − b·sin, a·sin + b·cos).
fn rope(x: &Array, r: &Rotation) -> Result<Array> {
    todo!("rope")
}

/// The causal mask for `l` new positions after `offset` cached ones, added to the scores
/// `[.., L, S]` (S = offset + L): query i sits at position offset + i and sees keys
/// 0 ..= offset + i (add 0), never after (add −∞). One new position sees every key: `None`.
fn causal_mask(offset: i32, l: i32, dtype: Dtype) -> Result<Option<Array>> {
    todo!("causal_mask")
}

/// The KV cache: this call's keys and values (`[B, kv_heads, L, d]`) written after the
/// `cache.offset` positions it holds, and all of them read back, `[B, kv_heads, S, d]`
/// (quest's `KvCache` keeps them: `update_and_fetch`).
fn append_and_read(cache: &mut KvCache, k: &Array, v: &Array) -> Result<(Array, Array)> {
    todo!("append_and_read")
}

/// softmax(q · kᵀ / √d + mask) · v per head, grouped-query: query head h reads key/value
/// head h / (heads / kv_heads). q `[B, heads, L, d]`, keys and values `[B, kv_heads, S, d]`;
/// out `[B, heads, L, d]`. The softmax over the keys: exp(s − max) / Σ exp(s − max).
fn attend(q: &Array, keys: &Array, values: &Array, mask: Option<&Array>) -> Result<Array> {
    todo!("attend")
}

struct Block {
    input_layernorm: Array,
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    post_attention_layernorm: Array,
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

struct MyModel {
    config: Config,
    embed_tokens: Linear,
    layers: Vec<Block>,
    norm: Array,
}

impl MyModel {
    fn load(w: &mut Checkpoint) -> Result<Self> {
        let config = w.config.clone();
        if !config.tie_word_embeddings {
            bail!("this decoder ties its head to the embedding, as SmolLM2 does");
        }
        if config.rope_traditional {
            bail!("this decoder rotates split halves, as SmolLM2 does, not adjacent pairs");
        }
        let mut layers = Vec::new();
        for i in 0..config.num_hidden_layers {
            let p = format!("model.layers.{i}");
            layers.push(Block {
                input_layernorm: w.vector(&format!("{p}.input_layernorm.weight"))?,
                q_proj: w.matrix(&format!("{p}.self_attn.q_proj"))?,
                k_proj: w.matrix(&format!("{p}.self_attn.k_proj"))?,
                v_proj: w.matrix(&format!("{p}.self_attn.v_proj"))?,
                o_proj: w.matrix(&format!("{p}.self_attn.o_proj"))?,
                post_attention_layernorm: w
                    .vector(&format!("{p}.post_attention_layernorm.weight"))?,
                gate_proj: w.matrix(&format!("{p}.mlp.gate_proj"))?,
                up_proj: w.matrix(&format!("{p}.mlp.up_proj"))?,
                down_proj: w.matrix(&format!("{p}.mlp.down_proj"))?,
            });
        }
        Ok(MyModel {
            embed_tokens: w.matrix("model.embed_tokens")?,
            norm: w.vector("model.norm.weight")?,
            layers,
            config,
        })
    }

    /// `o_proj(attend(rope(q), rope(k) and v with the cache's, mask))` for `x` `[B, L, hidden]`:
    /// q, k, v = q_proj(x), k_proj(x), v_proj(x), each `[B, L, heads·d]` made
    /// `[B, heads, L, d]` (num_attention_heads for q, num_key_value_heads for k and v);
    /// the output back to `[B, L, heads·d]` before o_proj.
    fn attention(
        &self,
        block: &Block,
        x: &Array,
        cache: &mut KvCache,
        r: &Rotation,
        mask: Option<&Array>,
    ) -> Result<Array> {
        todo!("attention")
    }

    /// `down_proj(silu(gate_proj(x)) · up_proj(x))`, silu(g) = g · sigmoid(g).
    fn mlp(&self, block: &Block, x: &Array) -> Result<Array> {
        todo!("mlp")
    }

    /// One block: attention then MLP, each on its normed input, each added to `h`:
    /// h + attention(rms_norm(h, input_layernorm)), then that + mlp(rms_norm(…,
    /// post_attention_layernorm)); eps = rms_norm_eps.
    fn block(
        &self,
        block: &Block,
        h: &Array,
        cache: &mut KvCache,
        r: &Rotation,
        mask: Option<&Array>,
    ) -> Result<Array> {
        todo!("block")
    }
}

impl lm::Forward for MyModel {
    /// `[B, L]` ids → `[B, L, vocab]` logits: embed, every block with its layer's cache
    /// (`LayerCache::Kv`), the final norm, the head (the embedding table: h · Eᵀ). The new
    /// positions go on where the caches end (`offset`, the same in every layer); the
    /// rotation and the mask are the same in every layer.
    fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        todo!("forward")
    }

    fn make_cache(&self) -> Vec<LayerCache> {
        self.layers
            .iter()
            .map(|_| LayerCache::Kv(KvCache::new()))
            .collect()
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (mut weights, tokenizer) = lm::load_weights(&run.model)?;
    let model = MyModel::load(&mut weights)?;
    let read = weights.finish()?;
    run.decode_yours(&model, &read, &tokenizer)
}
