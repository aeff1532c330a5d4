"""A learner's own edit of a GPU-track lesson's exercise, for the GPU walks
(docs/gpu/measure.sh compile, streams): the device cannot build Rust, so the edit is made
here, in the course copy carry.sh packs (COURSE), and its binary is prebuilt.

    python3 docs/gpu/own_edit.py COURSE

- compile: the gate compiled once, written another way than the solution
  (gate / (1 + e^-gate) · up).
- streams: the loop kept inside `with_stream`, handed the default stream (`Stream::new()`)
  instead of a new one; the solution takes the loop out of `with_stream`.
"""
import sys

course = sys.argv[1]


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


for path, edit in [
    ("exercises/compile/gate.rs", compile_edit),
    ("exercises/streams/decode_loop.rs", streams_edit),
]:
    full = f"{course}/{path}"
    text = open(full).read()
    open(full, "w").write(edit(text))
