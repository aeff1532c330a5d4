// What grouping the queries saves against copying each key/value head out to its query
// heads, for one decode step's attention (one query, SmolLM2's 9 query heads on 3
// key/value heads of 64, float32), at several cache lengths. For measuring only: built as
// the lab binary by measure.sh. Per variant and length it prints the bytes MLX allocated
// for the call beyond its inputs (the peak of MLX's allocator, reset before each call) and
// the median time of a call over interleaved repetitions, and checks the two agree.

use anyhow::Result;
use mlx_rs::ops::{broadcast_to, matmul, softmax_axis};
use mlx_rs::{Array, Dtype};

/// The key and value heads copied out to every query head: broadcast_to + reshape.
fn copied(q: &Array, k: &Array, v: &Array, scale: f32) -> Result<Array> {
    let (qs, ks) = (q.shape().to_vec(), k.shape().to_vec());
    let (b, heads, kv, s, d) = (qs[0], qs[1], ks[1], ks[2], ks[3]);
    let wide = |t: &Array| -> Result<Array> {
        let t = broadcast_to(t.expand_dims(2)?, &[b, kv, heads / kv, s, d])?;
        Ok(t.reshape(&[b, heads, s, d])?)
    };
    let (k, v) = (wide(k)?, wide(v)?);
    let scores = matmul(q, k.swap_axes(-1, -2)?)?.multiply(Array::from_f32(scale))?;
    Ok(matmul(softmax_axis(&scores, -1, true)?, &v)?)
}

/// The queries grouped by their key head: no copy of a key or a value.
fn grouped(q: &Array, k: &Array, v: &Array, scale: f32) -> Result<Array> {
    let (qs, ks) = (q.shape().to_vec(), k.shape().to_vec());
    let (b, heads, l, d, kv) = (qs[0], qs[1], qs[2], qs[3], ks[1]);
    let q = q.reshape(&[b, kv, heads / kv, l, d])?;
    let (k, v) = (k.expand_dims(2)?, v.expand_dims(2)?);
    let scores = matmul(&q, k.swap_axes(-1, -2)?)?.multiply(Array::from_f32(scale))?;
    let out = matmul(softmax_axis(&scores, -1, true)?, &v)?;
    Ok(out.reshape(&[b, heads, l, d])?)
}

type Attention = fn(&Array, &Array, &Array, f32) -> Result<Array>;

/// The call's bytes beyond its inputs, and its seconds.
fn once(f: Attention, q: &Array, k: &Array, v: &Array) -> Result<(usize, f64)> {
    mlx_rs::memory::reset_peak_memory()?;
    let before = mlx_rs::memory::active_memory()?;
    let start = std::time::Instant::now();
    let out = f(q, k, v, 0.125)?;
    out.eval()?;
    let seconds = start.elapsed().as_secs_f64();
    Ok((mlx_rs::memory::peak_memory()? - before, seconds))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let reps: usize = std::env::var("REPS").ok().and_then(|r| r.parse().ok()).unwrap_or(41);
    println!("one decode query, 9 query heads on 3 key/value heads of 64, float32; {reps} interleaved calls each");
    println!("S: the cache's keys and values; each variant's bytes beyond its inputs; median time a call; largest difference");
    for s in [256, 1024, 4096, 16384] {
        let normal = |shape: &[i32], i: u64| -> Result<Array> {
            let key = mlx_rs::random::key(3 * s as u64 + i)?;
            Ok(mlx_rs::random::normal::<f32>(shape, None, None, &key)?.as_dtype(Dtype::Float32)?)
        };
        let (q, k, v) = (normal(&[1, 9, 1, 64], 0)?, normal(&[1, 3, s, 64], 1)?, normal(&[1, 3, s, 64], 2)?);
        mlx_rs::transforms::eval([&q, &k, &v])?;
        let (a, b) = (copied(&q, &k, &v, 0.125)?, grouped(&q, &k, &v, 0.125)?);
        let diff = a.subtract(&b)?.abs()?.max(None)?.item_cast::<f32>();
        let (mut bytes, mut times) = ([0usize; 2], [Vec::new(), Vec::new()]);
        for _ in 0..reps {
            for (i, f) in [copied as Attention, grouped as Attention].into_iter().enumerate() {
                let (b, t) = once(f, &q, &k, &v)?;
                bytes[i] = bytes[i].max(b);
                times[i].push(t * 1e3);
            }
        }
        let cache = 2 * k.nbytes();
        let [tc, tg] = times;
        let mb = |b: usize| b as f64 / 1e6;
        println!(
            "S {s}: cache {:.3} MB; copied {:.3} MB, {:.3} ms; grouped {:.3} MB, {:.3} ms; difference {diff:e}",
            mb(cache),
            mb(bytes[0]),
            median(tc),
            mb(bytes[1]),
            median(tg)
        );
    }
    Ok(())
}
