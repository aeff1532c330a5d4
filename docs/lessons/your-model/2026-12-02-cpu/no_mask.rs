// your-model: the whole decoder, written by you, from the weights by name and the config.
//
// A llama decoder (SmolLM2): embedding → every block → final norm → head (the embedding
// table, tied). Each block, with its own KV cache:
//   h = h + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))   n = input_layernorm(h)
//   h = h + down_proj(silu(gate_proj(m)) · up_proj(m))                      m = post_attention_layernorm(h)

use anyhow::{bail, Result};
use mlx_rs::fast::{rms_norm, rope, scaled_dot_product_attention, ScaledDotProductAttentionMask};
use mlx_rs::ops::{dequantize, matmul, quantized_matmul, sigmoid};
use mlx_rs::Array;
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

    fn attention(&self, block: &Block, x: &Array, cache: &mut KvCache) -> Result<Array> {
        let c = &self.config;
        let (b, l, d) = (x.shape()[0], x.shape()[1], c.head_dim);
        // [B, L, H·D] → [B, H, L, D]: one head per row of the attention.
        let heads = |t: Array, h: i32| -> Result<Array> {
            Ok(t.reshape(&[b, l, h, d])?.transpose_axes(&[0, 2, 1, 3])?)
        };
        let q = heads(project(x, &block.q_proj)?, c.num_attention_heads)?;
        let k = heads(project(x, &block.k_proj)?, c.num_key_value_heads)?;
        let v = heads(project(x, &block.v_proj)?, c.num_key_value_heads)?;
        // Positions go on where the cache ends.
        let rotate = |t: &Array| {
            rope(t, d, c.rope_traditional, c.rope_theta, 1.0, cache.offset, None)
        };
        let (q, k) = (rotate(&q)?, rotate(&k)?);
        let (keys, values) = cache.update_and_fetch(&k, &v)?;
        // The prompt's positions see only those before them; one new token sees all.
        let mask: Option<ScaledDotProductAttentionMask> = None;
        let scale = (d as f32).powf(-0.5);
        // Grouped-query: sdpa shares each key/value head among its query heads.
        let out = scaled_dot_product_attention(&q, &keys, &values, scale, mask, None)?;
        let out = out.transpose_axes(&[0, 2, 1, 3])?.reshape(&[b, l, -1])?;
        project(&out, &block.o_proj)
    }

    fn mlp(&self, block: &Block, x: &Array) -> Result<Array> {
        let gate = project(x, &block.gate_proj)?;
        let up = project(x, &block.up_proj)?;
        let silu = gate.multiply(sigmoid(&gate)?)?;
        project(&silu.multiply(&up)?, &block.down_proj)
    }
}

impl lm::Forward for MyModel {
    fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let eps = self.config.rms_norm_eps;
        let mut h = embed(tokens, &self.embed_tokens)?;
        for (block, layer_cache) in self.layers.iter().zip(cache.iter_mut()) {
            let LayerCache::Kv(kv) = layer_cache else {
                bail!("a llama layer keeps a KV cache");
            };
            let n = rms_norm(&h, Some(&block.input_layernorm), eps)?;
            h = h.add(self.attention(block, &n, kv)?)?;
            let m = rms_norm(&h, Some(&block.post_attention_layernorm), eps)?;
            h = h.add(self.mlp(block, &m)?)?;
        }
        let h = rms_norm(&h, Some(&self.norm), eps)?;
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
    run.decode_own(&model, &read, &tokenizer)
}
