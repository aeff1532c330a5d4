#!/usr/bin/env bash
# Issue #12 on the H200: several quest binaries side by side with mlx-lm's generate_step,
# MLX's CUDA buffer settings swept, and a per-kernel GPU profile (ncu). Like h200.sh, it
# runs on the device machine (no network, no Rust) from the pieces carried in $B:
# part-ab of the packed MLX tree (part-aa was left in /tmp/persist by the call before),
# quest-<name>.xz binaries, and the mlx / mlx-lm wheels. Everything lands in $OUT.
#   BINS="before after"   binaries to run `quest fit` with, in that order, one after the other
#   SWEEP="20 40 …"       MLX_MAX_OPS_PER_BUFFER values for `quest fit` with the last binary
#   SWEEP_MB="…"          MLX_MAX_MB_PER_BUFFER values (with the default ops) likewise
#   SWEEP_SHAPES, SWEEP_ROUNDS   the sweep's shapes and rounds (fewer than the full fits)
#   NCU_SHAPES="Qwen3-0.6B Qwen3-8B"  shapes profiled per kernel with ncu
#   PY=1                  the Python peers (the seed's hand loop, mlx-lm generate_step)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SITE=/opt/torch/.venv/lib/python3.12/site-packages
B=${B:-.gpuq/b}
OUT=${OUT:-/tmp/out}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile "$B"/mlx-0.32.2-*.whl "$B"/mlx_lm-0.32.2-*.whl
cat /tmp/persist/part-aa "$B"/part-ab | xz -d | tar x -C "$SITE"
export LD_LIBRARY_PATH="$SITE/mlx/lib" QUEST_ROOT="$PWD"
for bin in $BINS; do xz -dc "$B/quest-$bin.xz" > "/tmp/quest-$bin" && chmod +x "/tmp/quest-$bin"; done
python3 -c 'import mlx.core as mx; print("mlx", mx.__version__, mx.default_device())'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader

# 1. Each binary, all six shapes, full rounds, one after the other.
for bin in $BINS; do
  echo "== quest-$bin fit"
  "/tmp/quest-$bin" fit --shapes all --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 | tee "$OUT/fit-$bin.txt"
  cp target/quest-bench/fit-cuda.json "$OUT/fit-$bin.json"
done

# 2. The Python peers on the same shapes and prompt (as h200.sh).
if [ "${PY:-1}" = 1 ]; then
  PROMPT=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
  last=$(echo $BINS | awk '{print $NF}')
  "/tmp/quest-$last" fit --configs > /tmp/configs.json
  for shape in $(python3 -c 'import json; print(" ".join(json.load(open("/tmp/configs.json"))))'); do
    config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open("/tmp/configs.json"))[sys.argv[1]]))' "$shape")
    python3 "${PEER:-src/bench/peer.py}" --config "$config" --prompt-ids "$PROMPT" \
      --max-tokens "$TOKENS" --rounds "$ROUNDS" > "/tmp/py-$shape.json"
    python3 - "/tmp/py-$shape.json" "$shape" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})
PY
  done 2>&1 | tee "$OUT/python.txt"
  python3 -c 'import json, glob, os; print(json.dumps({os.path.basename(f)[3:-5]: json.load(open(f)) for f in glob.glob("/tmp/py-*.json")}))' > "$OUT/py-all.json"
fi

# 3. MLX's CUDA buffer settings, with the last binary, on fewer shapes and rounds.
last=$(echo $BINS | awk '{print $NF}')
sweep() { # label, then env assignments
  local label=$1; shift
  echo "== sweep $label"
  env "$@" "/tmp/quest-$last" fit --shapes "${SWEEP_SHAPES:-Qwen3-0.6B,Qwen3-4B,Qwen3-8B}" \
    --max-tokens "$TOKENS" --rounds "${SWEEP_ROUNDS:-3}" 2>&1 | grep -v '^quest:' | head -5
}
{
  for ops in ${SWEEP:-}; do sweep "ops=$ops" "MLX_MAX_OPS_PER_BUFFER=$ops"; done
  for mb in ${SWEEP_MB:-}; do sweep "mb=$mb" "MLX_MAX_MB_PER_BUFFER=$mb"; done
  [ -n "${SWEEP_EXTRA:-}" ] && for kv in $SWEEP_EXTRA; do sweep "$kv" "$kv"; done
} 2>&1 | tee "$OUT/sweep.txt"

# 4. GPU time per kernel: ncu over `quest fit` runs of 2 and 6 tokens (one round). A fit
# decodes n - 1 steps in each of its three loops plus 2 warm-up steps, so the two runs
# differ by 12 decode steps and nothing else; the difference per kernel name, over 12, is
# the time per decoded token (ncu serializes kernels: launch gaps are not in it).
for shape in ${NCU_SHAPES:-}; do
  for n in 2 6; do
    timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      "/tmp/quest-$last" fit --shapes "$shape" --max-tokens $n --rounds 1 \
      > "/tmp/ncu-$shape-$n.csv" 2> "/tmp/ncu-$shape-$n.err"
    echo "ncu $shape $n: rc=$? $(wc -l < /tmp/ncu-$shape-$n.csv) lines"
  done
  python3 "$HERE/ncu_per_token.py" "/tmp/ncu-$shape-2.csv" "/tmp/ncu-$shape-6.csv" 12 \
    | tee "$OUT/ncu-$shape.txt"
done 2>&1 | tee -a "$OUT/ncu.log"
