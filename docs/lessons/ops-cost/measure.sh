#!/usr/bin/env bash
# The ops-cost lesson's claim, measured: the starting code (RMSNorm in MLX's ops) against
# the solution (the same norm compiled once), each a fresh process as a learner's runs
# are, rounds interleaved. Each run reports the ops of one decode step's graph (counted
# before it runs, `quest::lab::graph_ops`), this backend's µs per op (a chain of cheap
# ops timed at four lengths, the slope: `quest::lab::host_cost_per_op`), their product
# (the host time those ops predict), the host's graph building per step, and decode tok/s.
#   bash docs/lessons/ops-cost/measure.sh OUT_DIR [ROUNDS] [MODEL]
# Binaries: BINS (default: built here from exercises/ops-cost and solutions/ops-cost).
set -euo pipefail
OUT=${1:?usage: measure.sh OUT_DIR [ROUNDS] [MODEL]}
ROUNDS=${2:-5}
MODEL=${3:-smollm2-135m-instruct}
mkdir -p "$OUT"
if [ -z "${BINS:-}" ]; then
  BINS=$(mktemp -d)
  for v in exercises solutions; do
    QUEST_LAB_SOURCE="$PWD/$v/ops-cost/norm.rs" cargo build -q -p quest-lab
    cp target/debug/quest-lab "$BINS/norm-$v"
  done
fi
{
  echo "model $MODEL, $ROUNDS rounds, $(date -u +%FT%TZ), $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for r in $(seq "$ROUNDS"); do
    for v in exercises solutions; do
      QUEST_MODEL=$MODEL QUEST_REPORT="$OUT/r.json" "$BINS/norm-$v" > /dev/null 2> "$OUT/stderr.txt"
      python3 - "$OUT/r.json" "$r" "$v" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
build = statistics.median(r["steps_build_ms"])
print(f"round {sys.argv[2]} {sys.argv[3]:<9} ops {r['ops_per_step']:5d}  us_per_op {r['us_per_op']:6.2f}"
      f"  predicted {r['ops_per_step'] * r['us_per_op'] / 1e3:6.2f} ms  build {build:6.2f} ms/step"
      f"  step {1e3 / r['decode_tok_s']:7.2f} ms  decode {r['decode_tok_s']:6.2f} tok/s  {r['backend']}  {r['text'][:32]!r}")
PY
    done
  done
} | tee "$OUT/rounds.txt"
python3 - "$OUT/rounds.txt" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
rows = {}
pat = (r"round \d+ (\S+)\s+ops\s+(\d+)\s+us_per_op\s+([\d.]+)\s+predicted\s+([\d.]+) ms\s+"
       r"build\s+([\d.]+) ms/step\s+step\s+([\d.]+) ms\s+decode\s+([\d.]+)")
for line in open(sys.argv[1]):
    m = re.match(pat, line)
    if m:
        rows.setdefault(m[1], []).append([float(g) for g in m.groups()[1:]])
names = ["ops", "us_per_op", "predicted_ms", "build_ms", "step_ms", "tok_s"]
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
for k, v in med.items():
    print(f"median {k:<9} " + "  ".join(f"{n} {x:.2f}" for n, x in zip(names, v)))
s, y = med["exercises"], med["solutions"]
print(f"ops fell by {s[0] - y[0]:.0f} (×{s[0] / y[0]:.2f}); at {statistics.median([s[1], y[1]]):.2f} µs per op "
      f"they predict {(s[0] - y[0]) * statistics.median([s[1], y[1]]) / 1e3:.2f} ms less host work per step; "
      f"the step took {s[4] - y[4]:.2f} ms less (median step {s[4]:.2f} → {y[4]:.2f} ms), "
      f"graph building {s[3] - y[3]:.2f} ms less")
PY
rm -f "$OUT/r.json"
