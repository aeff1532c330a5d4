//! SiLU and SwiGLU as MLX compiled functions, each traced once per thread.
//!
//! `mlx_rs::nn::silu` builds a new compiled closure on every call, and each one gets a
//! fresh id from mlx-rs: MLX traces and compiles `x * sigmoid(x)` again on every call
//! (36 times a token in an 8B model's MLPs), on the host, every step. Here each function
//! is compiled once (shapeless, as mlx-lm's `nn.silu` and `swiglu`), and later calls reuse
//! MLX's compile cache: one fused element-wise kernel, no retrace. The values are those
//! of the same ops run one by one: compilation fuses kernels, it does not change the math.
//!
//! The compiled state lives in a thread-local: MLX's compile cache, like the rest of a
//! stream's work, is used from the thread that runs the model.

use std::cell::RefCell;

use mlx_rs::error::Exception;
use mlx_rs::ops::sigmoid;
use mlx_rs::transforms::compile::compile;
use mlx_rs::Array;

type Unary = Box<dyn for<'a> FnMut(&'a Array) -> Result<Array, Exception>>;
type Binary = Box<dyn for<'a> FnMut((&'a Array, &'a Array)) -> Result<Array, Exception>>;

fn silu_ops(x: &Array) -> Result<Array, Exception> {
    x.multiply(sigmoid(x)?)
}

thread_local! {
    static SILU: RefCell<Unary> = RefCell::new(Box::new(compile(silu_ops, true)));
    static SWIGLU: RefCell<Binary> = RefCell::new(Box::new(compile(
        |(gate, up): (&Array, &Array)| silu_ops(gate)?.multiply(up),
        true,
    )));
}

/// `x * sigmoid(x)`.
pub fn silu(x: &Array) -> Result<Array, Exception> {
    SILU.with(|f| (f.borrow_mut())(x))
}

/// `silu(gate) * up`: the SwiGLU feed-forward's gate, one kernel.
pub fn swiglu(gate: &Array, up: &Array) -> Result<Array, Exception> {
    SWIGLU.with(|f| (f.borrow_mut())((gate, up)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx_rs::ops::abs;

    fn max_diff(a: &Array, b: &Array) -> f32 {
        abs(a.subtract(b).unwrap())
            .unwrap()
            .max(None)
            .unwrap()
            .item_exact::<f32>()
    }

    #[test]
    fn compiled_silu_and_swiglu_match_the_plain_ops() {
        let x = Array::from_slice(&[-4.0f32, -1.0, -0.25, 0.0, 0.5, 2.0, 8.0], &[7]);
        let up = Array::from_slice(&[1.0f32, -2.0, 3.0, 0.5, -0.5, 1.5, 0.25], &[7]);
        let plain = silu_ops(&x).unwrap();
        // Twice, and at another shape: the shapeless trace is reused, not redone.
        for _ in 0..2 {
            assert_eq!(max_diff(&silu(&x).unwrap(), &plain), 0.0);
            let expected = plain.multiply(&up).unwrap();
            assert!(max_diff(&swiglu(&x, &up).unwrap(), &expected) <= 1e-6);
        }
        let y = x.reshape(&[1, 7]).unwrap();
        assert_eq!(
            max_diff(&silu(&y).unwrap(), &plain.reshape(&[1, 7]).unwrap()),
            0.0
        );
    }
}
