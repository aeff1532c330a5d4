#!/usr/bin/env bash
# host-or-device's CPU measurement, as run for the lesson (from the repository root):
#   bash docs/lessons/host-or-device/2026-12-03-cpu/measure.sh
# The solution built as the lab binary and run as `quest run` runs it, on the lesson's
# three shapes (random weights, dense float32 on the CPU), 8 tokens a round: its report
# (report.json: quest's measured inputs and the solution's values) and what it printed
# (run.txt). ROUNDS (3) such runs, each a fresh process, for the spread of the knee.
set -euo pipefail
here=docs/lessons/host-or-device/2026-12-03-cpu
QUEST_LAB_SOURCE="$(pwd)/solutions/host-or-device/knee.rs" cargo build -q -p quest-lab
: > $here/run.txt
for r in $(seq 1 "${ROUNDS:-3}"); do
  QUEST_MODEL=SmolLM2-135M,SmolLM2-360M,Qwen3-0.6B QUEST_MAX_TOKENS=8 QUEST_REPORT=$here/report-$r.json \
    target/debug/quest-lab 2>&1 | grep -v "making random" | sed "s/^/run $r: /" | tee -a $here/run.txt
  python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
v = r['values']
for p in r['inputs']['points']:
    n = p['shape']['name']
    print(f\"run {sys.argv[2]}: {n:<13} {v['bytes_per_token['+n+']'] / 1e6:8.1f} MB  {p['ms_per_token']:7.2f} ms/token  fixed share {v['fixed_share['+n+']']:.3f}\")
pts = [(v['bytes_per_token['+p['shape']['name']+']'], p['ms_per_token']) for p in r['inputs']['points']]
n = len(pts); mx = sum(x for x, _ in pts) / n; my = sum(y for _, y in pts) / n
b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
print(f\"run {sys.argv[2]}: line {my - b * mx:.2f} ms + bytes / {1e-6 / b:.2f} GB/s; knee {v['knee_mb']:.1f} MB; measured bandwidth {r['inputs']['bandwidth_gb_s']:.2f} GB/s\")
" $here/report-$r.json $r | tee -a $here/run.txt
done
