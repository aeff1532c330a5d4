"""The table of measure.sh `levers`: per QUEST_QMV_LEVERS setting, medians over its passes of
the pipelined loop's tok/s and its share of the copy (`quest fit`'s own lines), the step and
the GPU's busy share, and quest's 4-bit matvec by matrix (µs a call, TB/s) from the step's
CUPTI trace (trace_steps.py's JSON).

usage: levers_table.py FOLDER   (FOLDER holds fit-<setting>-<pass>.txt, steps-<setting>-<pass>.json)
"""
import collections
import glob
import json
import os
import re
import statistics
import sys


def main():
    folder = sys.argv[1]
    fits = collections.defaultdict(list)  # (setting, shape): [(tok/s, MB, copy GB/s)]
    steps = collections.defaultdict(list)  # (setting, shape): [(step µs, busy µs)]
    mats = collections.defaultdict(list)  # (setting, shape, (n, k, g)): [µs a call]
    calls = {}
    order = []
    for path in sorted(glob.glob(os.path.join(folder, "fit-*-*.txt")), key=os.path.getmtime):
        m = re.match(r"fit-(.+)-(\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        setting = m.group(1)
        if setting not in order:
            order.append(setting)
        text = open(path).read()
        bw = re.search(r"bandwidth ([0-9.]+) GB/s", text)
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 5 and f[1] == "quantized":
                fits[(setting, f[0])].append((float(f[4]), float(f[2]), float(bw.group(1)) if bw else 0.0))
        js = path.replace("fit-", "steps-").replace(".txt", ".json")
        if not os.path.exists(js):
            continue
        for run in json.load(open(js)):
            shape, _, loop = run["run"].rpartition(" ")
            if loop != "pipelined":
                continue
            steps[(setting, shape)].append((run["step_us"], run["busy_us"]))
            for name, d in run["by_name"].items():
                mm = re.search(r"qmv4_N(\d+)_K(\d+)_GROUP(\d+)", name)
                if mm:
                    key = tuple(map(int, mm.groups()))
                    mats[(setting, shape, key)].append(d["us_per_call"])
                    calls[(shape, key)] = d["calls_per_step"]
    med = statistics.median
    shapes = list(dict.fromkeys(k[1] for k in fits))
    print("the pipelined loop, medians over passes (tok/s; % of the copy the same process measured;"
          " the step and the GPU's busy µs from the trace)")
    print(f"{'setting':<10} {'shape':<14} {'tok/s':>8} {'% copy':>7} {'step µs':>8} {'busy µs':>8} {'busy':>6}  passes")
    for shape in shapes:
        for setting in order:
            f = fits.get((setting, shape), [])
            if not f:
                continue
            tok = med(x[0] for x in f)
            pct = med(100 * x[0] * x[1] / 1e3 / x[2] for x in f if x[2])
            s = steps.get((setting, shape), [])
            st = med(x[0] for x in s) if s else float("nan")
            bu = med(x[1] for x in s) if s else float("nan")
            print(f"{setting:<10} {shape:<14} {tok:>8.1f} {pct:>6.1f}% {st:>8.1f} {bu:>8.1f} {100 * bu / st:>5.1f}%"
                  f"  {[x[0] for x in f]}")
    print("\nquest's 4-bit matvec by matrix, µs a call (median over passes of each run's mean) and TB/s"
          " (half a byte a weight, a float16 scale and bias a group)")
    keys = sorted({(k[1], k[2]) for k in mats}, key=lambda sk: (shapes.index(sk[0]) if sk[0] in shapes else 0, -sk[1][0] * sk[1][1]))
    print(f"{'shape':<14} {'N × K':<16} {'calls':>5}  " + "  ".join(f"{s:>16}" for s in order))
    for shape, key in keys:
        n, k, g = key
        mb = n * k * (0.5 + 4 / g) / 1e6
        cells = []
        for setting in order:
            v = mats.get((setting, shape, key))
            cells.append(f"{med(v):>6.2f} µs {mb / med(v):>4.2f}" if v else f"{'-':>16}")
        print(f"{shape:<14} {f'{n} × {k}':<16} {calls[(shape, key)]:>5.0f}  " + "  ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
