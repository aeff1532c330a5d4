#!/usr/bin/env bash
# The compile lesson's claim, measured: the starting code (mlx-rs's `nn::silu`, a compiled
# function made anew on every call) against the solution (one compiled SwiGLU per
# thread) and quest's own pieces, each a fresh process as a learner's runs are, rounds
# interleaved. Prints each run's graph-building µs per layer (the median decode step's
# forward call over the layers) and decode tok/s, then the medians.
#   bash docs/lessons/compile/measure.sh OUT_DIR [ROUNDS] [MODEL]
# Binaries: BINS (default: built here from exercises/compile and solutions/compile).
set -euo pipefail
OUT=${1:?usage: measure.sh OUT_DIR [ROUNDS] [MODEL]}
ROUNDS=${2:-5}
MODEL=${3:-smollm2-135m-instruct}
mkdir -p "$OUT"
if [ -z "${BINS:-}" ]; then
  BINS=$(mktemp -d)
  for v in exercises solutions; do
    QUEST_LAB_SOURCE="$PWD/$v/compile/gate.rs" cargo build -q -p quest-lab
    cp target/debug/quest-lab "$BINS/gate-$v"
  done
fi
{
  echo "model $MODEL, $ROUNDS rounds, $(date -u +%FT%TZ), $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for r in $(seq "$ROUNDS"); do
    for v in exercises solutions quest; do
      bin=$BINS/gate-${v/quest/exercises}
      pieces=yours; [ "$v" = quest ] && pieces=quest
      QUEST_MODEL=$MODEL QUEST_PIECES=$pieces QUEST_REPORT="$OUT/r.json" "$bin" > /dev/null 2> "$OUT/stderr.txt"
      python3 - "$OUT/r.json" "$r" "$v" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
b = r["steps_build_ms"]
print(f"round {sys.argv[2]} {sys.argv[3]:<9} build {statistics.median(b) * 1e3 / r['layers']:7.1f} µs/layer"
      f"  decode {r['decode_tok_s']:8.2f} tok/s  {r['backend']}  {r['text'][:40]!r}")
PY
    done
  done
} | tee "$OUT/rounds.txt"
python3 - "$OUT/rounds.txt" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (\S+)\s+build\s+([\d.]+) µs/layer\s+decode\s+([\d.]+)", line)
    if m:
        rows.setdefault(m[1], []).append((float(m[2]), float(m[3])))
med = {k: (statistics.median(b for b, _ in v), statistics.median(t for _, t in v)) for k, v in rows.items()}
for k, (b, t) in med.items():
    print(f"median {k:<9} build {b:7.1f} µs/layer  decode {t:8.2f} tok/s")
s, y = med["exercises"], med["solutions"]
print(f"starting / solution: build ×{s[0] / y[0]:.2f} fewer µs, decode ×{y[1] / s[1]:.2f}")
PY
rm -f "$OUT/r.json"
