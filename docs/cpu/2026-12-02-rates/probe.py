"""Which read bounds decode on a CPU: each way of reading memory, timed interleaved.

Run with the venv `quest bench` makes (MLX 0.32.2 on the OpenBLAS quest builds with), one
BLAS thread as quest runs on two vCPUs:
    OPENBLAS_NUM_THREADS=1 ~/.cache/quest/peer-venv-openblas-0.3.34.481.3/bin/python3 probe.py
Each method: the best of 5 tries in a round; 3 rounds, one method after another; the
median of the rounds' bests is printed, and every round's.
"""
import statistics
import time

import mlx.core as mx

mx.set_default_device(mx.cpu)
MiB = 1 << 20


def best_seconds(f, tries=5):
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best


def matrices(rows, cols, total=256 * MiB):
    ws = [mx.random.normal((rows, cols)) for _ in range(-(-total // (4 * rows * cols)))]
    mx.eval(ws)
    return ws


buffer = mx.random.normal(((256 * MiB) // 4,))
mx.eval(buffer)
by_width = {cols: matrices(rows, cols) for rows, cols in [(1536, 576), (2560, 960), (3072, 1024), (6144, 2048)]}
vectors = {cols: mx.ones((1, cols)) for cols in by_width}
big = mx.random.normal((16384, 16384))  # one 1 GiB matrix
big_x = mx.ones((1, 16384))
a, b = mx.random.normal((1024, 1024)), mx.random.normal((1024, 1024))
mx.eval(list(vectors.values()), big, big_x, a, b)


def chain(cols):
    def run():
        mx.eval([vectors[cols] @ w.T for w in by_width[cols]])
    return run


methods = {
    "copy, read + write counted (GB/s)": (lambda: mx.eval(buffer * 1.0), 2 * 256 * MiB / 1e9),
    "MLX sum, read (GB/s)": (lambda: mx.eval(buffer.sum()), 256 * MiB / 1e9),
    **{
        f"matrix-vector through 256 MiB of {len(by_width[c])} matrices × {c} columns (GB/s)": (
            chain(c),
            sum(w.nbytes for w in by_width[c]) / 1e9,
        )
        for c in by_width
    },
    "matrix-vector, one 1 GiB matrix × 16384 columns (GB/s)": (lambda: mx.eval(big_x @ big.T), big.nbytes / 1e9),
    "matrix product 1024³, f32 (G multiply-adds/s)": (lambda: mx.eval(a @ b), 1024**3 / 1e9),
}
rounds = {name: [] for name in methods}
for _ in range(3):
    for name, (f, amount) in methods.items():
        f()  # warm-up
        rounds[name].append(amount / best_seconds(f))
for name, values in rounds.items():
    print(f"{statistics.median(values):8.2f}  {name}   rounds: {', '.join(f'{v:.2f}' for v in values)}")
