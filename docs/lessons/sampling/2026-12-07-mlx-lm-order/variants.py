"""The sampling lesson's measured variants (mlx-lm's order), each one edit of the solution (python3
variants.py SOLUTION OUT): honest ones that draw another way, wrong ones that draw from
another distribution."""
import sys

solution, out = sys.argv[1], sys.argv[2]
s = open(solution).read()
DRAW = "        Ok(categorical(&z, -1, ShapeOrCount::Count(draws), key)?)"
LOGPROBS = "let mut logprobs = logits.subtract(logsumexp_axis(logits, -1, true)?)?;"
TEMPERED = "let z = logprobs.multiply(Array::from_f32(1.0 / sampling.temperature))?;"
edits = {
    # Honest: the Gumbel-max trick by hand, other tokens from the same key.
    "gumbel-max": (DRAW, """        let noise = mlx_rs::random::gumbel::<f32>(&[rows, draws, vocab][..], key)?;
        let noisy = z.expand_dims(1)?.add(&noise)?;
        Ok(argmax_axis(&noisy, -1, false)?)"""),
    # Wrong: the temperature forgotten.
    "no-temperature": (TEMPERED, "let z = logprobs;"),
    # Wrong: the other order, the temperature first: every filter reads the tempered
    # probabilities (the log-softmax of logits / T).
    "temperature-first": (LOGPROBS, """let tempered = logits.multiply(Array::from_f32(1.0 / sampling.temperature))?;
        let mut logprobs = tempered.subtract(logsumexp_axis(&tempered, -1, true)?)?;"""),
    # Wrong: each filter forgotten.
    "no-top-p": ("if sampling.top_p < 1.0 {", "if false && sampling.top_p < 1.0 {"),
    "no-min-p": ("if sampling.min_p > 0.0 {", "if false && sampling.min_p > 0.0 {"),
    "no-top-k": ("if sampling.top_k > 0 && sampling.top_k < vocab {",
                 "if false && sampling.top_k < vocab {"),
    # Wrong: the mass above a token counted with the token itself: the token that
    # crosses top_p is dropped (and where one token alone passes it, every token is).
    "crossing-dropped": ("let above = cumsum(sorted.exp()?, -1, true, false)?;",
                         "let above = cumsum(sorted.exp()?, -1, true, true)?;"),
    # Wrong: probabilities handed to the draw, which takes logits.
    "probabilities-drawn": (DRAW, "        Ok(categorical(mlx_rs::ops::softmax_axis(&z, -1, true)?, -1, ShapeOrCount::Count(draws), key)?)"),
}
for name, (old, new) in edits.items():
    assert s.count(old) == 1, name
    open(f"{out}/{name}.rs", "w").write(s.replace(old, new))

# Not a sampler but a stopwatch: the solution's sampler alone on one row of 49152 logits
# (a seeded normal row, scaled as a model's), timed over 200 calls after 20 to warm up,
# each call evaluated; and quest's argmax on the same row, for the greedy step's share.
MAIN = s[s.index("fn main() -> Result<()> {"):]
timer = '''fn main() -> Result<()> {
    use mlx_rs::transforms::eval;
    let sampling = Sampling::from_env()?;
    let logits = mlx_rs::random::normal::<f32>(&[1, 49152][..], None, None, &mlx_rs::random::key(1)?)?
        .multiply(Array::from_f32(3.0))?;
    eval([&logits])?;
    let time = |f: &dyn Fn(&Array) -> Result<Array>| -> Result<f64> {
        let mut key = mlx_rs::random::key(2)?;
        let mut run = |n: usize| -> Result<std::time::Duration> {
            let start = std::time::Instant::now();
            for _ in 0..n {
                let (this, next) = mlx_rs::random::split(&key, 2)?;
                key = next;
                eval([&f(&this)?])?;
            }
            Ok(start.elapsed())
        };
        run(20)?;
        Ok(run(200)?.as_secs_f64() * 1000.0 / 200.0)
    };
    let sampled = time(&|key| MySampler.sample(&logits, &sampling, 1, key))?;
    let greedy = time(&|_| Ok(argmax_axis(&logits, -1, true)?))?;
    println!("{sampling}: the sampler {sampled:.3} ms a call, the argmax {greedy:.3} ms, on [1, 49152]");
    Ok(())
}
'''
open(f"{out}/sampler-alone.rs", "w").write(s.replace(MAIN, timer))
