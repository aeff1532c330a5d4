//! The learner's piece inside quest's model: one small seam where the model calls its
//! parts, as mlx-lm's model files call `mx.fast.*`. Every method has quest's own
//! implementation as its default (MLX's fused op); an exercise overrides one and hands
//! its pieces to the model:
//!
//! ```text
//! struct MyNorm;
//! impl Pieces for MyNorm {
//!     fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> { … }
//! }
//! let (model, tokenizer) = lm::load(&run.model)?;
//! let model = model.with_pieces(MyNorm); // every norm of every layer is now MyNorm's
//! ```
//!
//! What runs through the seam: every `RmsNorm` of the model — each block's
//! `input_layernorm` and `post_attention_layernorm`, Qwen3's per-head `q_norm` and
//! `k_norm`, the final `model.norm` — and every MLP's SwiGLU gate (`act_fn(gate) * up`
//! in mlx-lm's `MLP`). Everything else is quest's, unchanged. (Qwen3.5's
//! gated-delta layers norm inside their own recurrence, without a learned weight per
//! call site: those stay quest's.)

use anyhow::Result;
use mlx_rs::Array;

/// The model's parts a learner may write. A default method is quest's own.
pub trait Pieces: Send + Sync {
    /// `x · rsqrt(mean(x², last axis) + eps) · weight`, mlx-lm's `nn.RMSNorm`: by default
    /// MLX's fused kernel (`mlx_rs::fast::rms_norm`), one op in the graph.
    fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
        Ok(mlx_rs::fast::rms_norm(x, Some(weight), eps)?)
    }

    /// `silu(gate) · up`, the SwiGLU feed-forward's gate between its up and down
    /// projections (mlx-lm's `swiglu`): by default quest's, compiled once per thread into
    /// one element-wise kernel ([`crate::lm::models::activations::swiglu`]).
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        Ok(crate::lm::models::activations::swiglu(gate, up)?)
    }
}

/// quest's own pieces: every default. A model holds none until [`Model::with_pieces`]
/// (its norms then call MLX's fused op directly, as before the seam existed).
///
/// [`Model::with_pieces`]: crate::lm::Model::with_pieces
pub struct QuestPieces;

impl Pieces for QuestPieces {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::{random, tokens_array};
    use mlx_rs::ops::{abs, mean_axis, rsqrt, subtract};

    /// RMSNorm written with MLX's ops, as the lesson's solution writes it.
    struct ByOps;
    impl Pieces for ByOps {
        fn rms_norm(&self, x: &Array, weight: &Array, eps: f32) -> Result<Array> {
            let mean_square = mean_axis(x.square()?, -1, true)?;
            let eps = Array::from_f32(eps);
            Ok(x.multiply(rsqrt(mean_square.add(eps)?)?)?
                .multiply(weight)?)
        }
    }

    /// No norm at all: the model must notice (the seam reaches every norm).
    struct NoNorm;
    impl Pieces for NoNorm {
        fn rms_norm(&self, x: &Array, _weight: &Array, _eps: f32) -> Result<Array> {
            Ok(x.clone())
        }
    }

    fn logits(model: &crate::lm::Model) -> Array {
        let mut cache = model.make_cache();
        let first = model
            .forward(&tokens_array(&[1, 2, 3, 4, 5]), &mut cache)
            .unwrap();
        let step = model.forward(&tokens_array(&[9]), &mut cache).unwrap();
        mlx_rs::ops::concatenate(&[first, step], 1).unwrap()
    }

    fn max_diff(a: &Array, b: &Array) -> f32 {
        abs(subtract(a, b).unwrap())
            .unwrap()
            .max(None)
            .unwrap()
            .item_exact::<f32>()
    }

    /// The ops-written norm gives the fused norm's logits, on llama and on Qwen3 (q/k
    /// norms too); a model without norms does not: the pieces are really called.
    #[test]
    fn the_models_norms_run_through_the_pieces() {
        let qwen3 = serde_json::json!({"model_type": "qwen3", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 32, "intermediate_size": 128, "vocab_size": 256,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true});
        for config in [random::tiny_llama(), qwen3] {
            let quest = logits(&random::model(&config, 7).unwrap());
            let by_ops = logits(&random::model(&config, 7).unwrap().with_pieces(ByOps));
            let none = logits(&random::model(&config, 7).unwrap().with_pieces(NoNorm));
            let same = max_diff(&quest, &by_ops);
            assert!(same <= 1e-4, "{}: {same}", config["model_type"]);
            let off = max_diff(&quest, &none);
            assert!(off > 1e-2, "{}: {off}", config["model_type"]);
        }
    }
}
