#!/usr/bin/env bash
# quest's model and the solution, fresh processes, interleaved, 64 tokens a run: each run's
# decode rate and host graph building per layer (the median step's build time / layers).
#   BINS=DIR ROUNDS=3 bash docs/lessons/your-model/2026-12-06-by-ops/speed.sh
set -euo pipefail
export QUEST_MAX_TOKENS=64 QUEST_PROMPT="What is the capital of France? Answer in one sentence."
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for r in $(seq "${ROUNDS:-3}"); do
  for v in quest_model solution; do
    QUEST_REPORT="$W/r.json" "$BINS/decoder-$v" > /dev/null 2>&1
    python3 - "$W/r.json" "$v" "$r" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
build = statistics.median(r["steps_build_ms"]) * 1e3 / r["layers"]
print(f"round {sys.argv[3]} {sys.argv[2]:<12} decode {r['decode_tok_s']:.2f} tok/s  "
      f"build {build:.1f} us/layer  {r['weights']} {r['weight_bytes_per_token']} B/token  {r['text']!r}")
PY
  done
done
