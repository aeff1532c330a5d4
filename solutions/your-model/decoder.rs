// your-model: the whole decoder, written by you, from the weights by name and the config,
// with MLX's plain ops: no fused norm, rotation or attention (`mlx_rs::fast`), no layers
// (`mlx_rs::nn`).
//
// A llama decoder (SmolLM2): embedding → every block → final norm → head (the embedding
// table, tied). Each block, with its own KV cache:
//   h = h + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))   n = rms_norm(h)
//   h = h + down_proj(silu(gate_proj(m)) · up_proj(m))                      m = rms_norm(h)

use anyhow::{bail, Result};
use mlx_rs::ops::{arange, concatenate, cos, dequantize, matmul, quantized_matmul, sigmoid, sin};
use mlx_rs::ops::{le, select, split_at_indices};
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

/// RMSNorm over the last axis: `x · rsqrt(mean(x²) + eps) · weight`, in float32 (a GPU's
/// float16 would overflow x² past 256), back in x's dtype.
fn rms_norm(x: &Array, weight: &Array, eps: f32) -> Result<Array> {
    let x32 = x.as_dtype(Dtype::Float32)?;
    let mean_square = x32.square()?.mean_axis(-1, true)?;
    let normed = x32.multiply(mean_square.add(Array::from_f32(eps))?.rsqrt()?)?;
    Ok(normed.as_dtype(x.dtype())?.multiply(weight)?)
}

/// The angles of RoPE for `l` positions from `offset` on: pair i of a head's `d` channels
/// at position p turns by p · θ^(-2i/d). Both `[L, d/2]`, in `dtype`.
struct Rotation {
    cos: Array,
    sin: Array,
}

fn rotation(c: &Config, offset: i32, l: i32, dtype: Dtype) -> Result<Rotation> {
    let half = c.head_dim / 2;
    let positions = arange::<_, f32>(offset, offset + l, None)?.reshape(&[l, 1])?;
    // θ^(-2i/d) = exp(-2i/d · ln θ)
    let pair =
        arange::<_, f32>(0, half, None)?.multiply(Array::from_f32(-2.0 / c.head_dim as f32))?;
    let freq = pair.multiply(Array::from_f32(c.rope_theta.ln()))?.exp()?;
    let angle = positions.multiply(&freq)?;
    Ok(Rotation {
        cos: cos(&angle)?.as_dtype(dtype)?,
        sin: sin(&angle)?.as_dtype(dtype)?,
    })
}

/// RoPE on `[B, heads, L, d]`, split halves: channel i pairs with i + d/2, and each pair
/// (a, b) turns by its angle: (a·cos − b·sin, a·sin + b·cos).
fn rope(x: &Array, r: &Rotation) -> Result<Array> {
    let half = x.shape()[3] / 2;
    let ab = split_at_indices(x, &[half], -1)?;
    let (a, b) = (&ab[0], &ab[1]);
    let ra = a.multiply(&r.cos)?.subtract(b.multiply(&r.sin)?)?;
    let rb = a.multiply(&r.sin)?.add(b.multiply(&r.cos)?)?;
    Ok(concatenate(&[ra, rb], -1)?)
}

/// The causal mask for `l` new positions after `offset` cached ones, added to the scores
/// `[.., L, S]` (S = offset + L): query i sits at position offset + i and sees keys
/// 0 ..= offset + i (0), never after (−∞). One new position sees every key: no mask.
fn causal_mask(offset: i32, l: i32, dtype: Dtype) -> Result<Option<Array>> {
    if l == 1 {
        return Ok(None);
    }
    let s = offset + l;
    let query = arange::<_, i32>(offset, s, None)?.reshape(&[l, 1])?;
    let key = arange::<_, i32>(0, s, None)?.reshape(&[1, s])?;
    let seen = select(
        &le(&key, &query)?,
        Array::from_f32(0.0),
        Array::from_f32(f32::NEG_INFINITY),
    )?;
    Ok(Some(seen.as_dtype(dtype)?))
}

/// The KV cache: this call's keys and values (`[B, kv_heads, L, d]`) written after the
/// positions it holds, and all of them read back, `[B, kv_heads, S, d]`.
fn append_and_read(cache: &mut KvCache, k: &Array, v: &Array) -> Result<(Array, Array)> {
    Ok(cache.update_and_fetch(k, v)?)
}

/// softmax(q · kᵀ / √d + mask) · v per head, grouped-query: query head h reads key/value
/// head h / (heads / kv_heads). q `[B, heads, L, d]`, keys and values `[B, kv_heads, S, d]`.
fn attend(q: &Array, keys: &Array, values: &Array, mask: Option<&Array>) -> Result<Array> {
    let (qs, ks) = (q.shape().to_vec(), keys.shape().to_vec());
    let (b, heads, l, d) = (qs[0], qs[1], qs[2], qs[3]);
    let kv_heads = ks[1];
    // [B, kv_heads, group, L, d] against [B, kv_heads, 1, S, d]: each key head meets its
    // group of query heads by broadcasting, without copying the keys.
    let q = q.reshape(&[b, kv_heads, heads / kv_heads, l, d])?;
    let (keys, values) = (keys.expand_dims(2)?, values.expand_dims(2)?);
    let scale = Array::from_f32((d as f32).powf(-0.5)).as_dtype(q.dtype())?;
    let scores = matmul(q.multiply(&scale)?, keys.swap_axes(-1, -2)?)?;
    let scores = match mask {
        Some(mask) => scores.add(mask)?,
        None => scores,
    };
    // softmax over the keys: exp(s − max) / Σ exp(s − max).
    let e = scores.subtract(scores.max_axis(-1, true)?)?.exp()?;
    let weights = e.divide(e.sum_axis(-1, true)?)?;
    Ok(matmul(&weights, &values)?.reshape(&[b, heads, l, d])?)
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

    /// `o_proj(attend(rope(q), rope(k) and v with the cache's, mask))` for `x` `[B, L, hidden]`.
    fn attention(
        &self,
        block: &Block,
        x: &Array,
        cache: &mut KvCache,
        r: &Rotation,
        mask: Option<&Array>,
    ) -> Result<Array> {
        let c = &self.config;
        let (b, l, d) = (x.shape()[0], x.shape()[1], c.head_dim);
        // [B, L, heads·d] → [B, heads, L, d]: one head per row of the attention.
        let heads = |t: Array, h: i32| -> Result<Array> {
            Ok(t.reshape(&[b, l, h, d])?.transpose_axes(&[0, 2, 1, 3])?)
        };
        let q = heads(project(x, &block.q_proj)?, c.num_attention_heads)?;
        let k = heads(project(x, &block.k_proj)?, c.num_key_value_heads)?;
        let v = heads(project(x, &block.v_proj)?, c.num_key_value_heads)?;
        let (q, k) = (rope(&q, r)?, rope(&k, r)?);
        let (keys, values) = append_and_read(cache, &k, &v)?;
        let out = attend(&q, &keys, &values, mask)?;
        let out = out.transpose_axes(&[0, 2, 1, 3])?.reshape(&[b, l, -1])?;
        project(&out, &block.o_proj)
    }

    /// `down_proj(silu(gate_proj(x)) · up_proj(x))`, silu(g) = g · sigmoid(g).
    fn mlp(&self, block: &Block, x: &Array) -> Result<Array> {
        let gate = project(x, &block.gate_proj)?;
        let up = project(x, &block.up_proj)?;
        let silu = gate.multiply(sigmoid(&gate)?)?;
        project(&silu.multiply(&up)?, &block.down_proj)
    }

    /// One block: attention then MLP, each on its normed input, each added to `h`.
    fn block(
        &self,
        block: &Block,
        h: &Array,
        cache: &mut KvCache,
        r: &Rotation,
        mask: Option<&Array>,
    ) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let n = rms_norm(h, &block.input_layernorm, eps)?;
        let h = h.add(self.attention(block, &n, cache, r, mask)?)?;
        let m = rms_norm(&h, &block.post_attention_layernorm, eps)?;
        Ok(h.add(self.mlp(block, &m)?)?)
    }
}

impl lm::Forward for MyModel {
    /// `[B, L]` ids → `[B, L, vocab]` logits: embed, every block, the final norm, the head.
    fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let mut h = embed(tokens, &self.embed_tokens)?;
        // Every layer's cache holds the same positions: the new ones go on from there.
        let offset = match cache.first() {
            Some(LayerCache::Kv(kv)) => kv.offset,
            _ => bail!("a llama layer keeps a KV cache"),
        };
        let l = tokens.shape()[1];
        // The angles and the mask are the same in every layer: made once a call.
        let r = rotation(&self.config, offset, l, h.dtype())?;
        let mask = causal_mask(offset, l, h.dtype())?;
        for (block, layer_cache) in self.layers.iter().zip(cache.iter_mut()) {
            let LayerCache::Kv(kv) = layer_cache else {
                bail!("a llama layer keeps a KV cache");
            };
            h = self.block(block, &h, kv, &r, mask.as_ref())?;
        }
        let h = rms_norm(&h, &self.norm, self.config.rms_norm_eps)?;
        // The head is the embedding table: logits = h · Eᵀ.
        project(&h, &self.embed_tokens)
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
