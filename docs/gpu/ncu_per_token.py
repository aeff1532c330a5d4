"""GPU time per decoded token, by kernel kind, from two ncu runs of `quest fit` that differ
only in the number of decoded tokens: everything else (model making, prefills, the copy
bandwidth probe) is the same in both and cancels in the difference.

usage: ncu_per_token.py SHORT.csv LONG.csv EXTRA_DECODE_STEPS
(ncu --metrics gpu__time_duration.sum --csv --print-units base …)
"""
import collections
import csv
import re
import sys


def kind(name):
    """A kernel's family: its name without template arguments and parameters."""
    name = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    name = re.sub(r"^(void|mlx::core::cu::|cu::)\s*", "", name)
    return name.split("::")[-1][:60] or "?"


def load(path):
    times, counts = collections.Counter(), collections.Counter()
    with open(path) as f:
        rows = csv.DictReader(line for line in f if line.startswith('"'))
        for r in rows:
            if r.get("Metric Name") != "gpu__time_duration.sum":
                continue
            k = kind(r["Kernel Name"])
            times[k] += float(r["Metric Value"].replace(",", ""))  # ns
            counts[k] += 1
    return times, counts


short, long_, steps = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
rows = []
for k in set(long_[0]) | set(short[0]):
    ns = (long_[0][k] - short[0][k]) / steps
    n = (long_[1][k] - short[1][k]) / steps
    if n > 0.01 or abs(ns) > 100:
        rows.append((ns, n, k))
rows.sort(reverse=True)
total = sum(r[0] for r in rows)
print(f"GPU time per decoded token: {total / 1e3:.1f} µs in {sum(r[1] for r in rows):.0f} kernels")
print(f"{'kernel kind':<60} {'µs/token':>9} {'share':>6} {'launches':>9} {'µs each':>8}")
for ns, n, k in rows:
    print(f"{k:<60} {ns / 1e3:>9.1f} {100 * ns / total:>5.1f}% {n:>9.1f} {ns / 1e3 / max(n, 1e-9):>8.2f}")
