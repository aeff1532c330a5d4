//! The gated delta rule's recurrence by MLX's ops, as mlx-lm keeps `gated_delta_ops` beside
//! its model: what a gated delta layer ([`super::gated_delta`]) runs without pieces, and
//! the default of [`crate::lm::Pieces::gated_delta`].

use anyhow::Result;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::ops::stack;
use mlx_rs::Array;

/// The delta rule over `L` tokens, one step at a time (mlx-lm's `gated_delta_ops`).
/// `q`, `k`: `[B, L, Hk, Dk]`; `v`: `[B, L, Hv, Dv]`; `g`, `beta`: `[B, L, Hv]`;
/// `state`: `[B, Hv, Dv, Dk]`. Returns `y` (`[B, L, Hv, Dv]`) and the new state.
pub(crate) fn recurrence(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    mut state: Array,
) -> Result<(Array, Array)> {
    let (key_heads, value_heads) = (q.shape()[2], v.shape()[2]);
    // Several value heads share one key head: repeat each key head for its group.
    let (q, k) = if value_heads > key_heads {
        let repeat =
            |t: &Array| -> Result<Array> {
                let [b, l, h, d] = [t.shape()[0], t.shape()[1], t.shape()[2], t.shape()[3]];
                let grouped = t.reshape(&[b, l, h, 1, d])?;
                Ok(
                    mlx_rs::ops::broadcast_to(&grouped, &[b, l, h, value_heads / h, d])?
                        .reshape(&[b, l, value_heads, d])?,
                )
            };
        (repeat(q)?, repeat(k)?)
    } else {
        (q.clone(), k.clone())
    };
    let mut ys = Vec::with_capacity(q.shape()[1] as usize);
    for t in 0..q.shape()[1] {
        let (q_t, k_t, v_t) = (q.index((.., t)), k.index((.., t)), v.index((.., t)));
        let (g_t, beta_t) = (g.index((.., t)), beta.index((.., t)));
        // [B, H] -> [B, H, 1, 1]: one decay per head.
        state = state.multiply(g_t.expand_dims(-1)?.expand_dims(-1)?)?;
        let k_row = k_t.expand_dims(-2)?; // [B, H, 1, Dk]
        let recalled = state.multiply(&k_row)?.sum_axis(-1, None)?; // S k: [B, H, Dv]
        let delta = v_t.subtract(recalled)?.multiply(beta_t.expand_dims(-1)?)?;
        state = state.add(k_row.multiply(delta.expand_dims(-1)?)?)?;
        let y = state.multiply(q_t.expand_dims(-2)?)?.sum_axis(-1, None)?;
        ys.push(y.as_dtype(q.dtype())?);
    }
    Ok((stack(&ys, 1)?, state))
}
