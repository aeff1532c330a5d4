//! Bit operations on integer arrays, which mlx-rs 0.33 does not wrap: MLX's own
//! `right_shift` and `bitwise_and` (`mlx.core.right_shift`, `mlx.core.bitwise_and`),
//! called through mlx-sys so that an exercise unpacking quantized words needs no `unsafe`.
//! Both broadcast like any element-wise op, on the thread's default stream.
//!
//! ```text
//! use quest::lab::bits::{bitwise_and, right_shift};
//! // The j-th 4-bit value of every uint32 word: (word >> 4j) & 0xF.
//! let q = bitwise_and(&right_shift(&words, &Array::from_slice(&[4u32 * j], &[1]))?, &Array::from_slice(&[0xFu32], &[1]))?;
//! ```

use anyhow::{bail, Result};
use mlx_rs::{Array, Stream};

type BinaryOp = unsafe extern "C" fn(
    *mut mlx_sys::mlx_array,
    mlx_sys::mlx_array,
    mlx_sys::mlx_array,
    mlx_sys::mlx_stream,
) -> std::os::raw::c_int;

fn binary(name: &str, op: BinaryOp, a: &Array, b: &Array) -> Result<Array> {
    let stream = Stream::thread_local_or_default();
    // SAFETY: `a` and `b` are live arrays for the call; MLX writes a new array into
    // `result` (freed by the returned `Array`) or returns non-zero and writes nothing
    // we keep.
    unsafe {
        let mut result = mlx_sys::mlx_array_new();
        if op(&mut result, a.as_ptr(), b.as_ptr(), stream.as_ptr()) != 0 {
            mlx_sys::mlx_array_free(result);
            bail!(
                "mlx: {name} of arrays of shapes {:?} ({:?}) and {:?} ({:?}) failed: both must be integers, of shapes that broadcast",
                a.shape(),
                a.dtype(),
                b.shape(),
                b.dtype()
            );
        }
        Ok(Array::from_ptr(result))
    }
}

/// `a >> b`, element by element: each value of `a` shifted right by `b` bits.
pub fn right_shift(a: &Array, b: &Array) -> Result<Array> {
    binary("right_shift", mlx_sys::mlx_right_shift, a, b)
}

/// `a & b`, element by element.
pub fn bitwise_and(a: &Array, b: &Array) -> Result<Array> {
    binary("bitwise_and", mlx_sys::mlx_bitwise_and, a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacks_the_nibbles_of_a_word() {
        let word = Array::from_slice(&[0x7654_3210u32, 0xFEDC_BA98], &[2, 1]);
        let shifts: Vec<u32> = (0..8).map(|j| 4 * j).collect();
        let shifts = Array::from_slice(&shifts, &[1, 8]);
        let mask = Array::from_slice(&[0xFu32], &[1]);
        let q = bitwise_and(&right_shift(&word, &shifts).unwrap(), &mask).unwrap();
        let want: Vec<u32> = (0..16).collect();
        assert_eq!(q.as_slice::<u32>(), &want[..]);
    }

    #[test]
    fn a_float_is_refused_with_a_message() {
        let a = Array::from_slice(&[1.5f32], &[1]);
        let e = right_shift(&a, &a).unwrap_err().to_string();
        assert!(e.contains("right_shift") && e.contains("integers"), "{e}");
    }
}
