//! GGUF files (as llama.cpp writes them) loaded straight into MLX arrays: MLX's own
//! GGUF reader turns Q4_0/Q4_1/Q8_0 tensors into its affine quantized layout (group 32),
//! so a Q4_1 file runs as 4-bit MLX weights without a float copy. Here the names become
//! Hugging Face names, llama.cpp's Q/K row permutation is undone, and a `config.json`
//! equivalent is read from the metadata.

use std::path::Path;

use anyhow::{bail, Context, Result};
use mlx_rs::io::{GgufFile, GgufMetadataValue};
use mlx_rs::{Array, Dtype};
use serde_json::{json, Value};

use crate::lm::weights::Weights;

/// An opened GGUF file: its tensors and metadata.
pub struct Gguf {
    file: GgufFile,
    path: std::path::PathBuf,
}

impl Gguf {
    pub fn open(path: &Path) -> Result<Self> {
        super::gguf_check::check(path)?;
        let file = GgufFile::load(path).map_err(|e| {
            anyhow::anyhow!(
                "could not read the GGUF file {}: {e}. It may be truncated or corrupt (delete it to \
                 download again), or use a tensor type MLX cannot load (supported: Q4_0, Q4_1, Q8_0, F16, F32)",
                path.display()
            )
        })?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn string(&self, key: &str) -> Result<Option<String>> {
        Ok(match self.file.get_metadata(key)? {
            Some(GgufMetadataValue::String(s)) => Some(s),
            _ => None,
        })
    }

    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        Ok(match self.file.get_metadata(key)? {
            Some(GgufMetadataValue::Strings(s)) => Some(s),
            _ => None,
        })
    }

    pub fn array(&self, key: &str) -> Result<Option<Array>> {
        Ok(match self.file.get_metadata(key)? {
            Some(GgufMetadataValue::Array(a)) => Some(a),
            _ => None,
        })
    }

    pub fn number(&self, key: &str) -> Result<Option<f64>> {
        Ok(match self.array(key)? {
            Some(a) => Some(a.as_dtype(Dtype::Float64).map_or_else(
                |_| {
                    a.as_dtype(Dtype::Float32)
                        .map(|f| f.item_exact::<f32>() as f64)
                },
                |f| Ok(f.item_exact::<f64>()),
            )?),
            None => None,
        })
    }

    fn require(&self, key: &str) -> Result<f64> {
        self.number(key)?.with_context(|| {
            format!(
                "the GGUF file {} has no metadata `{key}`, which quest needs",
                self.path.display()
            )
        })
    }

    /// A `config.json` equivalent from the `<arch>.*` metadata keys.
    pub fn config(&self) -> Result<Value> {
        let arch = self
            .string("general.architecture")?
            .with_context(|| format!("{} has no general.architecture", self.path.display()))?;
        let key = |k: &str| format!("{arch}.{k}");
        let heads = self.require(&key("attention.head_count"))? as i64;
        let hidden = self.require(&key("embedding_length"))? as i64;
        let vocab = match self.number(&key("vocab_size"))? {
            Some(v) => v as i64,
            None => self
                .strings("tokenizer.ggml.tokens")?
                .map_or(0, |t| t.len() as i64),
        };
        let head_dim = match self.number(&key("attention.key_length"))? {
            Some(d) => d as i64,
            None => hidden / heads,
        };
        let tied = !self.file.array_keys()?.iter().any(|k| k == "output.weight");
        let mut config = json!({
            "model_type": arch,
            "hidden_size": hidden,
            "num_hidden_layers": self.require(&key("block_count"))? as i64,
            "intermediate_size": self.require(&key("feed_forward_length"))? as i64,
            "num_attention_heads": heads,
            "num_key_value_heads": self.number(&key("attention.head_count_kv"))?.map_or(heads, |v| v as i64),
            "head_dim": head_dim,
            "rms_norm_eps": self.require(&key("attention.layer_norm_rms_epsilon"))?,
            "rope_theta": self.number(&key("rope.freq_base"))?.unwrap_or(10_000.0),
            "vocab_size": vocab,
            "tie_word_embeddings": tied,
        });
        if self
            .file
            .array_keys()?
            .iter()
            .any(|k| k.ends_with(".scales"))
        {
            // MLX's GGUF reader unpacks every supported quant type with groups of 32;
            // the bits differ per tensor and are read off each tensor's shape.
            config["quantization"] = json!({"group_size": 32, "bits": 4});
        }
        Ok(config)
    }

    fn tensor(&self, name: &str) -> Result<Array> {
        self.file
            .get_array(name)?
            .with_context(|| format!("{} has no tensor {name}", self.path.display()))
    }

    /// The tensors under Hugging Face names, Q/K rows back in Hugging Face order.
    pub fn weights(&self, config: &Value, float_dtype: Dtype) -> Result<Weights> {
        let arch = config["model_type"].as_str().unwrap_or_default();
        let heads = config["num_attention_heads"].as_i64().unwrap_or(1) as i32;
        let kv_heads = config["num_key_value_heads"]
            .as_i64()
            .unwrap_or(heads as i64) as i32;
        let mut tensors = std::collections::HashMap::new();
        for name in self.file.array_keys()? {
            let array = self.tensor(&name)?;
            let Some(hf) = hf_name(&name) else {
                bail!(
                    "{} has a tensor `{name}` quest does not know for architecture `{arch}`",
                    self.path.display()
                );
            };
            // llama.cpp interleaves the two rotary halves of each head's Q and K rows.
            let array = match (arch, hf.as_str()) {
                ("llama", n) if n.contains("self_attn.q_proj.") => unpermute(&array, heads)?,
                ("llama", n) if n.contains("self_attn.k_proj.") => unpermute(&array, kv_heads)?,
                _ => array,
            };
            tensors.insert(hf, array);
        }
        Ok(Weights::new(tensors, &self.path, float_dtype))
    }
}

/// Maps `blk.3.attn_q.weight` to `model.layers.3.self_attn.q_proj.weight` (and the
/// `.scales` / `.biases` MLX adds for quantized tensors).
fn hf_name(gguf: &str) -> Option<String> {
    let (stem, suffix) = gguf.rsplit_once('.')?;
    let top = match stem {
        "token_embd" => Some("model.embed_tokens"),
        "output_norm" => Some("model.norm"),
        "output" => Some("lm_head"),
        _ => None,
    };
    if let Some(top) = top {
        return Some(format!("{top}.{suffix}"));
    }
    let rest = stem.strip_prefix("blk.")?;
    let (layer, part) = rest.split_once('.')?;
    let part = match part {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{part}.{suffix}"))
}

/// Undoes llama.cpp's `permute`: rows `[heads, 2, half, …]` were stored as `[heads, half, 2, …]`.
fn unpermute(rows: &Array, heads: i32) -> Result<Array> {
    let shape = rows.shape().to_vec();
    let per_head = shape[0] / heads;
    let mut split = vec![heads, per_head / 2, 2];
    split.extend_from_slice(&shape[1..]);
    Ok(rows.reshape(&split)?.swap_axes(1, 2)?.reshape(&shape)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_hugging_face() {
        assert_eq!(
            hf_name("blk.3.attn_q.scales").unwrap(),
            "model.layers.3.self_attn.q_proj.scales"
        );
        assert_eq!(
            hf_name("token_embd.weight").unwrap(),
            "model.embed_tokens.weight"
        );
        assert_eq!(
            hf_name("blk.0.ffn_down.biases").unwrap(),
            "model.layers.0.mlp.down_proj.biases"
        );
        assert!(hf_name("blk.0.mystery.weight").is_none());
    }
}
