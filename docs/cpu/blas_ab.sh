#!/usr/bin/env bash
# For course authors: the CPU figures the lessons quote, on the old and the new OpenBLAS,
# in one interleaved run. The same exercise binaries (mlx-path's starting hand loop and its
# solution, `quest dev prebuild`, the dev profile the README's command builds) run in
# turn on
#   cmeel     cmeel-openblas 0.3.31 (SKYLAKEX only), through LD_LIBRARY_PATH to a copy of
#             the wheel patched as quest's build did before (CMEEL_COPY: its `mlx` folder)
#   scipy     the default build: scipy-openblas32 0.3.34.481.3, kernels chosen for this CPU
#   haswell   the same with OPENBLAS_CORETYPE=Haswell: the kernels an AVX2 CPU gets (here
#             only; tests and CI never set it)
# and QUEST_BLAS_THREADS=2 on scipy (the default on 2 vCPUs is 1). Every run a fresh
# process; medians of TTFT and decode tok/s per arm and binary.
#
#   CMEEL_COPY=/path/mlx-cpu-0.32.2+openblas-0.3.31/mlx bash docs/cpu/blas_ab.sh OUT_DIR [ROUNDS]
set -euo pipefail
OUT=${1:?usage: blas_ab.sh OUT_DIR [ROUNDS]}
ROUNDS=${2:-5}
CMEEL_COPY=${CMEEL_COPY:?set CMEEL_COPY to the mlx folder of a cmeel-patched wheel copy}
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
BINS=$(mktemp -d)
cargo run -q -- dev prebuild mlx-path --out "$BINS" >/dev/null
starting=$(grep 'exercises/mlx-path\|lessons/mlx-path' "$BINS/prebuilt.txt" | head -1 | cut -d' ' -f1)
solution=$(grep 'solutions/mlx-path' "$BINS/prebuilt.txt" | head -1 | cut -d' ' -f1)
: > "$OUT/runs.jsonl"
one() { # arm binary-name key env...
  local arm=$1 name=$2 key=$3
  shift 3
  local report
  report=$(mktemp)
  env "$@" QUEST_MODEL=smollm2-135m-instruct QUEST_MAX_TOKENS=32 QUEST_REPORT="$report" \
    "$BINS/$key" >/dev/null 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({'arm': sys.argv[2], 'loop': sys.argv[3], 'ttft_ms': r['ttft_ms'], 'decode_tok_s': r['decode_tok_s'], 'blas': r.get('blas',''), 'text': r['text']}))" \
    "$report" "$arm" "$name" >> "$OUT/runs.jsonl"
  rm -f "$report"
}
for round in $(seq 0 "$ROUNDS"); do   # round 0: warm-up, not counted
  for loop in starting solution; do
    key=${!loop}
    one cmeel "$loop" "$key" LD_LIBRARY_PATH="$CMEEL_COPY/lib"
    one scipy "$loop" "$key"
    one haswell "$loop" "$key" OPENBLAS_CORETYPE=Haswell
    one scipy-2-threads "$loop" "$key" QUEST_BLAS_THREADS=2
  done
  [ "$round" = 0 ] && : > "$OUT/runs.jsonl"
done
python3 - "$OUT/runs.jsonl" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"# {len(rows)} runs; medians over rounds; SmolLM2-135M-Instruct, 42-token prompt, 32 tokens")
print(f"{'arm':<16} {'loop':<9} {'TTFT ms':>8} {'tok/s':>7}  blas")
base = {}
for arm in ["cmeel", "scipy", "haswell", "scipy-2-threads"]:
    for loop in ["starting", "solution"]:
        r = [x for x in rows if x["arm"] == arm and x["loop"] == loop]
        if not r:
            continue
        t = statistics.median(x["ttft_ms"] for x in r)
        d = statistics.median(x["decode_tok_s"] for x in r)
        base.setdefault(loop, d)
        texts = {x["text"] for x in r}
        print(f"{arm:<16} {loop:<9} {t:8.1f} {d:7.2f}  ×{d / base[loop]:.3f} of cmeel  {r[0]['blas'] or '(cmeel: no kernel name)'}  texts={len(texts)}")
PY
