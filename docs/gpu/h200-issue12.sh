#!/usr/bin/env bash
# Issue #12 on the H200: several quest binaries side by side with mlx-lm's generate_step,
# MLX's CUDA buffer settings swept, and a per-kernel GPU profile (ncu). Like h200.sh, it
# runs on the device machine (no network, no Rust) from the pieces carried in $B:
# part-ab of the packed MLX tree (part-aa was left in /tmp/persist by the call before),
# quest-<name>.xz binaries, and the mlx / mlx-lm wheels. Everything lands in $OUT.
# Made here: the mlx-cuda-13 0.32.2 wheel unpacked, its mlx/lib/libmlx.so stripped
# (strip --strip-unneeded), `tar c mlx | xz -9 | split -b 40M` (part-aa, part-ab: the
# calls' 64 MiB limit), `tar c mlx_cuda_13.libs | xz` as libs.tar.xz (libmlx's LAPACK and
# BLAS), each quest binary (built with MLX_DIR) xz-packed; the folder is ignored by git
# and named in the call's carry.
#   BINS="before after"   binaries to run `quest fit` with, in that order, one after the other
#   SWEEP="20 40 …"       MLX_MAX_OPS_PER_BUFFER values for `quest fit` with the last binary
#   SWEEP_MB="…"          MLX_MAX_MB_PER_BUFFER values (with the default ops) likewise
#   SWEEP_SHAPES, SWEEP_ROUNDS   the sweep's shapes and rounds (fewer than the full fits)
#   NCU_SHAPES="Qwen3-8B Qwen3-0.6B"  shapes profiled per kernel kind with ncu (NCU_TIMEOUT each)
#   STEPS="fits py sweeps profile"   which parts run, in that order (py: the Python peers)
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
xz -dc "$B"/libs.tar.xz | tar x -C "$SITE"
export LD_LIBRARY_PATH="$SITE/mlx/lib" QUEST_ROOT="$PWD"
for bin in $BINS; do xz -dc "$B/quest-$bin.xz" > "/tmp/quest-$bin" && chmod +x "/tmp/quest-$bin"; done
python3 -c 'import mlx.core as mx; print("mlx", mx.__version__, mx.default_device())'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader

fits() {
# 1. Each binary, all six shapes, full rounds, one after the other.
for bin in $BINS; do
  echo "== quest-$bin fit"
  "/tmp/quest-$bin" fit --shapes all --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 | tee "$OUT/fit-$bin.txt"
  cp target/quest-bench/fit-cuda.json "$OUT/fit-$bin.json"
done

}

py() {
# 2. The Python peers on the same shapes and prompt (as h200.sh).
if true; then
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

}

sweeps() {
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

}

profile() {
last=$(echo $BINS | awk '{print $NF}')
# 4. GPU time per kernel kind: ncu over `quest fit --max-tokens 3 --rounds 1`; the kernels
# between two argmax launches are one step, and ncu_per_token.py averages the decode
# steps (ncu serializes kernels: launch gaps are not in it). The 8B shape needs about
# 3 minutes under ncu.
for shape in ${NCU_SHAPES:-}; do
  timeout ${NCU_TIMEOUT:-200} ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "/tmp/quest-$last" fit --shapes "$shape" --max-tokens 3 --rounds 1 \
    > "/tmp/ncu-$shape.csv" 2> "/tmp/ncu-$shape.err"
  echo "ncu $shape: rc=$? $(wc -l < "/tmp/ncu-$shape.csv") lines"
  python3 "$HERE/ncu_per_token.py" "/tmp/ncu-$shape.csv"
done 2>&1 | tee -a "$OUT/ncu.txt"
tar c -C /tmp $(cd /tmp && ls ncu-*.csv) | xz -1 > "$OUT/ncu-csv.tar.xz"
}

for step in ${STEPS:-fits py sweeps profile}; do "$step"; done
