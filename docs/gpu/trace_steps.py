"""Where a decode step's time goes, from a CUPTI trace of `quest fit` (docs/gpu/cupti_trace.cpp):
per run of decode steps, the GPU's time per step (from one step's argmax to the next), how
much of it the GPU was busy and with what kind of kernel, and how long it waited for the
host; with driver records (QUEST_TRACE_DRIVER=1), the host's CUDA driver and runtime calls
per step, inside the stretch of host time that launched the run's kernels.

Every forward pass ends with one argmax kernel (arg_reduce), so the kernels after one
argmax up to the next are one step. A run is a stretch of at least --min-steps steps that
launch the same number of kernels: a prefill launches another number and ends it. `quest
fit` decodes, per shape and round, the hand loop, the pipelined loop and the pipelined loop
with the host's split (--loops), each after its prompt; its warm-ups decode one step and
are no run.

usage: trace_steps.py TRACE.csv [--shapes A,B,…] [--loops hand,pipelined,split] [--json OUT]
"""
import argparse
import collections
import json
import re
import statistics
import sys

import ncu_per_token  # beside this file


def kind(name):
    """A kernel's family: quest's kernels by what they compute, MLX's by their name
    without template arguments, parameters and namespaces (ncu_per_token.kind)."""
    for key, family in (("qmv4", "quest matvec"), ("quest_attend", "quest attend"),
                        ("quest_qkv", "quest qkv"), ("arg_reduce", "argmax")):
        if key in name:
            return family
    return "mlx " + ncu_per_token.kind(name)[:50]


def read(path):
    kernels, driver = [], []
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split(",", 5)
            if len(parts) < 6:
                continue
            what, start, end, where, corr, name = parts
            row = (int(start), int(end), int(where), int(corr), name)
            if what in ("k", "m"):
                kernels.append(row)
            elif what in ("d", "r"):
                driver.append(row)
    kernels.sort()
    driver.sort()
    return kernels, driver


def steps_of(kernels):
    """[(window start, window end, [kernels])] from one argmax's end to the next's."""
    ends = [i for i, k in enumerate(kernels) if "arg_reduce" in k[4]]
    return [(kernels[a][1], kernels[b][1], kernels[a + 1 : b + 1]) for a, b in zip(ends, ends[1:])]


def runs_of(steps, min_steps):
    runs, current = [], []
    for step in steps:
        if current and len(step[2]) != len(current[-1][2]):
            if len(current) >= min_steps:
                runs.append(current)
            current = []
        current.append(step)
    if len(current) >= min_steps:
        runs.append(current)
    return runs


def busy_ns(start, end, ks):
    """The union of the kernels' intervals inside [start, end]."""
    total, reach = 0, start
    for k_start, k_end, *_ in sorted(ks):
        a, b = max(k_start, reach), min(k_end, end)
        if b > a:
            total += b - a
            reach = b
    return total


def summarize(run, driver, label):
    steps = run[1:]  # the first step's window holds the prompt's tail
    n = len(steps)
    spans, busys, by_kind = [], [], collections.defaultdict(list)
    names = collections.defaultdict(lambda: [0, 0])  # name: [ns, calls] over the run
    for start, end, ks in steps:
        spans.append(end - start)
        busys.append(busy_ns(start, end, ks))
        per = collections.Counter()
        for k_start, k_end, _, _, name in ks:
            per[kind(name)] += k_end - k_start
            names[name][0] += k_end - k_start
            names[name][1] += 1
        for family in set(per) | set(by_kind):
            by_kind[family].append(per.get(family, 0))
    med = lambda xs: statistics.median(xs) / 1e3  # µs
    out = {
        "run": label,
        "by_name": {name: {"us_per_call": ns / calls / 1e3, "calls_per_step": calls / n}
                    for name, (ns, calls) in sorted(names.items(), key=lambda kv: -kv[1][0])},
        "steps": n,
        "kernels_per_step": len(run[-1][2]),
        "step_us": med(spans),
        "busy_us": med(busys),
        "idle_us": statistics.median(s - b for s, b in zip(spans, busys)) / 1e3,
        "by_kind_us": {k: med(v) for k, v in sorted(by_kind.items(), key=lambda kv: -statistics.median(kv[1]))},
    }
    if driver:
        # The host's window: from the first launch of the run's kernels to the last's.
        corrs = {k[3] for _, _, ks in steps for k in ks}
        launches = [d for d in driver if d[3] in corrs]
        if launches:
            h0, h1 = launches[0][0], max(d[1] for d in launches)
            calls = collections.Counter()
            count = collections.Counter()
            for d_start, d_end, _, _, name in driver:
                if h0 <= d_start <= h1:
                    calls[name] += d_end - d_start
                    count[name] += 1
            out["host_window_us_per_step"] = (h1 - h0) / 1e3 / n
            out["driver_us_per_step"] = sum(calls.values()) / 1e3 / n
            out["driver_by_call"] = {name: {"us_per_step": ns / 1e3 / n, "calls_per_step": count[name] / n}
                                     for name, ns in calls.most_common()}
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--shapes", default="")
    p.add_argument("--loops", default="hand,pipelined,split")
    p.add_argument("--min-steps", type=int, default=8)
    p.add_argument("--json")
    a = p.parse_args()
    kernels, driver = read(a.trace)
    runs = runs_of(steps_of(kernels), a.min_steps)
    loops = a.loops.split(",")
    shapes = [s for s in a.shapes.split(",") if s]
    # Runs come shape after shape, each shape's rounds in the loops' order.
    per_shape = len(runs) // len(shapes) if shapes and len(runs) % len(shapes) == 0 else 0
    rows = []
    for i, run in enumerate(runs):
        shape = shapes[i // per_shape] if per_shape else f"run {i}"
        rows.append(summarize(run, driver, f"{shape} {loops[i % len(loops)]}"))
    print(f"{len(kernels)} kernels, {len(driver)} driver calls, {len(runs)} runs of decode steps")
    print(f"{'run':<26} {'steps':>5} {'kern':>5} {'step µs':>8} {'busy µs':>8} {'idle µs':>8} {'busy %':>6}"
          + ("  driver µs  host-window µs" if driver else ""))
    for r in rows:
        line = (f"{r['run']:<26} {r['steps']:>5} {r['kernels_per_step']:>5} {r['step_us']:>8.1f} "
                f"{r['busy_us']:>8.1f} {r['idle_us']:>8.1f} {100 * r['busy_us'] / r['step_us']:>5.1f}%")
        if "driver_us_per_step" in r:
            line += f"  {r['driver_us_per_step']:>9.1f}  {r['host_window_us_per_step']:>14.1f}"
        print(line)
    print("\nGPU busy µs a step by kernel kind (median step of each run)")
    for r in rows:
        print(f"{r['run']:<26} " + ", ".join(f"{k} {v:.1f}" for k, v in r["by_kind_us"].items() if v >= 0.05))
    if driver:
        print("\nthe host's CUDA driver and runtime calls, µs a step (calls a step), inside each run's launches")
        for r in rows:
            calls = r.get("driver_by_call", {})
            print(f"{r['run']:<26} " + ", ".join(
                f"{n} {c['us_per_step']:.1f} ({c['calls_per_step']:.1f})" for n, c in list(calls.items())[:6]))
    pipelined = [r for r in rows if r["run"].endswith("pipelined")]
    if pipelined:
        last = pipelined[-1]
        print("\nquest's 4-bit matvec by matrix, the last pipelined run (N rows × K columns, group 32):"
              " µs a call, and its bytes (half a byte a weight, a float16 scale and bias a group) over that time")
        for name, d in last["by_name"].items():
            m = re.search(r"qmv4_N(\d+)_K(\d+)_GROUP(\d+)", name)
            if m:
                n, k, g = map(int, m.groups())
                mb = n * k * (0.5 + 4 / g) / 1e6
                print(f"  {last['run']:<24} {n:>6} × {k:<6} {d['calls_per_step']:>5.0f} calls a step "
                      f"{d['us_per_call']:>8.2f} µs a call {mb:>8.1f} MB {mb / d['us_per_call']:>6.2f} TB/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
