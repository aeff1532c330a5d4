"""A learner's own edit of a GPU-track lesson's exercise, for the GPU walks
(docs/gpu/measure.sh compile, streams): the device cannot build Rust, so the edit is made
here, in the course copy carry.sh packs (COURSE), and its binary is prebuilt.

    python3 docs/gpu/own_edit.py COURSE [LESSON...]   (default: every lesson below)

- compile: the gate compiled once, written another way than the solution
  (gate / (1 + e^-gate) · up).
- streams: the loop kept inside `with_stream`, handed the default stream (`Stream::new()`)
  instead of a new one; the solution takes the loop out of `with_stream`.
- the inside track and the GPU track's kernels (for docs/gpu/logits.sh and the walks): the
  solution with the honest edit tests/testsuite/all_lessons.rs makes of it, e.g. rope's
  angles through `power(base, -2i/dims)`, attention's mask added as 0 or −∞ and its softmax
  by hand, the gate as gate / (1 + e^-gate), matvec-kernel's weights dequantized one by one.
  Each edit asserts that the solution still holds what it replaces: a stale one stops here.
"""
import sys

course = sys.argv[1]
only = set(sys.argv[2:])


def compile_edit(text):
    start, end = text.index("struct MyGate;"), text.index("fn main()")
    edit = """use std::cell::RefCell;
use mlx_rs::error::Exception;

type Gate = Box<dyn for<'a> FnMut((&'a Array, &'a Array)) -> Result<Array, Exception>>;

thread_local! {
    // One compiled gate per thread, traced on its first call.
    static GATE: RefCell<Gate> = RefCell::new(Box::new(mlx_rs::transforms::compile::compile(
        |(gate, up): (&Array, &Array)| {
            let one = Array::from_f32(1.0);
            gate.divide(one.add(mlx_rs::ops::exp(gate.negative()?)?)?)?.multiply(up)
        },
        true,
    )));
}

struct MyGate;

impl Pieces for MyGate {
    fn swiglu(&self, gate: &Array, up: &Array) -> Result<Array> {
        Ok(GATE.with(|f| (f.borrow_mut())((gate, up)))?)
    }
}

"""
    return text[:start] + edit + text[end:]


def streams_edit(text):
    for old, new in [
        ("use mlx_rs::{Device, Stream};", "use mlx_rs::Stream;"),
        (
            "    // TODO: a stream of its own. Run the loop on the default stream instead.\n"
            "    let stream = Stream::new_with_device(&Device::try_default()?);",
            "    // `Stream::new()` is the default stream: the model's cache and kernels are on it.\n"
            "    let stream = Stream::new();",
        ),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    return text


def replaced(*pairs):
    """An edit of the lesson's solution: each `old` must be there."""

    def edit(_exercise, solution):
        for old, new in pairs:
            assert old in solution, old
            solution = solution.replace(old, new)
        return solution

    return edit


ROPE = replaced(
    (
        "let freq = pair.multiply(Array::from_f32(base.ln()))?.exp()?;",
        "let freq = power(Array::from_f32(base), &pair)?;",
    ),
    ("cos, sin, split_at_indices", "cos, power, sin, split_at_indices"),
)
ATTENTION = replaced(
    (
        "                select(le(&key, &query)?, &scores, hidden)?",
        "                let zero = Array::from_f32(0.0);\n"
        "                scores.add(select(le(&key, &query)?, zero, hidden)?)?",
    ),
    (
        "        let weights = softmax_axis(&scores, -1, true)?.as_dtype(values.dtype())?;",
        "        let shifted = scores.subtract(scores.max_axis(-1, true)?)?.exp()?;\n"
        "        let weights = shifted.divide(shifted.sum_axis(-1, true)?)?.as_dtype(values.dtype())?;",
    ),
    (", softmax_axis}", "}"),
)
YOUR_MODEL = replaced(
    (
        "let silu = gate.multiply(sigmoid(&gate)?)?;",
        "let one = Array::from_f32(1.0);\n"
        "        let silu = gate.divide(mlx_rs::ops::exp(gate.negative()?)?.add(one)?)?;",
    ),
    ("quantized_matmul, sigmoid, sin}", "quantized_matmul, sin}"),
)

DEQUANT = replaced(
    (
        "        let places: Vec<u32> = (0..per_word).map(|j| 1u32 << (bits * j)).collect();\n"
        "        let places = Array::from_slice(&places, &[1, 1, per_word]);\n"
        "        let levels = Array::from_slice(&[1u32 << bits], &[1]);\n"
        "        let q = remainder(floor_divide(weight.expand_dims(-1)?, &places)?, &levels)?;\n",
        "        let levels = Array::from_slice(&[1u32 << bits], &[1]);\n"
        "        let mut rest = weight.clone();\n"
        "        let mut values = Vec::new();\n"
        "        for _ in 0..per_word {\n"
        "            values.push(remainder(&rest, &levels)?);\n"
        "            rest = floor_divide(&rest, &levels)?;\n"
        "        }\n"
        "        let q = mlx_rs::ops::stack(&values, -1)?;\n",
    ),
)

MLP = replaced(
    (
        "        let sigmoid = one.divide(one.add(&decay)?)?;\n        let silu = gate.multiply(&sigmoid)?;",
        "        let silu = gate.divide(one.add(&decay)?)?;",
    ),
)
LINEAR_ATTENTION = replaced(
    (
        "            let recalled = state.multiply(&k_row)?.sum_axis(-1, None)?; // S k: [B, H, Dv]",
        "            let recalled = matmul(&state, k_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?;",
    ),
    (
        "            let y = state.multiply(q_t.expand_dims(-2)?)?.sum_axis(-1, None)?; // S q",
        "            let y = matmul(&state, q_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?;",
    ),
    ("{broadcast_to, stack}", "{broadcast_to, matmul, stack}"),
)
SAMPLING = replaced(
    (
        "        Ok(categorical(&z, -1, ShapeOrCount::Count(draws), key)?)",
        "        let noise = mlx_rs::random::gumbel::<f32>(&[rows, draws, vocab][..], key)?;\n"
        "        Ok(argmax_axis(&z.expand_dims(1)?.add(&noise)?, -1, false)?)",
    ),
)
HOST_OR_DEVICE = replaced(
    (
        "let knee_mb = fixed_ms / ms_per_byte / 1e6;",
        "let gb_s = 1e-6 / ms_per_byte;\n    let knee_mb = fixed_ms * gb_s;",
    ),
)

# custom-kernel: the warp's sum gathered into lane 0 instead of spread to every lane.
CUSTOM_KERNEL = replaced(("__shfl_xor_sync", "__shfl_down_sync"))

# ops-cost: the square inside the compiled norm as x · x, the same ops compiled.
OPS_COST = replaced(("x.square()?", "x.multiply(x)?"))

# matvec-kernel: each weight dequantized (scale · q + bias) before its multiply, where the
# solution adds the bias once a group through the sum of x.
MATVEC_KERNEL = replaced(
    (
        "    float dot = 0.0f;\n    float x_sum = 0.0f;",
        "    const int g = c * 32 / GROUP;\n    const float scale = __half2float(scale_row[g]);\n"
        "    const float bias = __half2float(bias_row[g]);\n    float dot = 0.0f;",
    ),
    (
        "        dot += (float)((words[i] >> (4 * j)) & 15u) * v;\n        x_sum += v;",
        "        dot += (scale * (float)((words[i] >> (4 * j)) & 15u) + bias) * v;",
    ),
    (
        "    const int g = c * 32 / GROUP;\n"
        "    sum += __half2float(scale_row[g]) * dot + __half2float(bias_row[g]) * x_sum;",
        "    sum += dot;",
    ),
)

for lesson, file, edit in [
    ("compile", "gate.rs", lambda text, _: compile_edit(text)),
    ("streams", "decode_loop.rs", lambda text, _: streams_edit(text)),
    ("rope", "rope.rs", ROPE),
    ("attention", "attention.rs", ATTENTION),
    ("your-model", "decoder.rs", YOUR_MODEL),
    ("dequant-matvec", "matvec.rs", DEQUANT),
    ("mlp", "mlp.rs", MLP),
    ("linear-attention", "delta.rs", LINEAR_ATTENTION),
    ("sampling", "sampling.rs", SAMPLING),
    ("host-or-device", "knee.rs", HOST_OR_DEVICE),
    ("ops-cost", "norm.rs", OPS_COST),
    ("custom-kernel", "norm_kernel.rs", CUSTOM_KERNEL),
    ("matvec-kernel", "matvec_kernel.rs", MATVEC_KERNEL),
]:
    if only and lesson not in only:
        continue
    full = f"{course}/exercises/{lesson}/{file}"
    solution = open(f"{course}/solutions/{lesson}/{file}").read()
    edited = edit(open(full).read(), solution)
    open(full, "w").write(edited)
