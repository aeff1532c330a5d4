"""GPU time per decoded token, by kernel kind, from an ncu run of `quest fit`
(ncu --metrics gpu__time_duration.sum --csv --print-units base …).

Every forward pass ends with one argmax kernel, so the kernels between two argmax
launches are one step. Decode steps all launch the same number of kernels (the most
common step length); prefills and the model's making launch other counts and are left
out. ncu serializes kernels, so this is device time alone: launch gaps are not in it.

usage: ncu_per_token.py RUN.csv
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
    name = re.sub(r"^void\s*", "", name)
    return name.split("::")[-1][:60] or "?"


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(line for line in f if line.startswith('"')):
            if r.get("Metric Name") == "gpu__time_duration.sum":
                rows.append((kind(r["Kernel Name"]), float(r["Metric Value"].replace(",", ""))))
    ends = [i for i, (k, _) in enumerate(rows) if k.startswith("arg_reduce")]
    steps = [rows[a + 1 : b + 1] for a, b in zip(ends, ends[1:])]
    length = collections.Counter(len(s) for s in steps).most_common(1)[0][0]
    decode = [s for s in steps if len(s) == length]
    times, counts = collections.Counter(), collections.Counter()
    for step in decode:
        for k, ns in step:
            times[k] += ns / len(decode)
            counts[k] += 1 / len(decode)
    total = sum(times.values())
    print(f"{len(decode)} decode steps of {length} kernels; GPU time per decoded token: "
          f"{total / 1e3:.1f} µs")
    print(f"{'kernel kind':<60} {'µs/token':>9} {'share':>6} {'launches':>9} {'µs each':>8}")
    for k, ns in times.most_common():
        print(f"{k:<60} {ns / 1e3:>9.1f} {100 * ns / total:>5.1f}% {counts[k]:>9.0f} "
              f"{ns / 1e3 / counts[k]:>8.2f}")


if __name__ == "__main__":
    main()
