#!/usr/bin/env bash
# Issue #12, item 3, on the H200: quest's 4-bit matvec (src/lm/qmv.rs) against MLX's own,
# with `quest qmv` (decode speed interleaved round by round, logits compared step by step),
# then `quest fit` with each kernel and mlx-lm's generate_step on the same shapes.
# Runs on the device machine (no network, no Rust) from pieces made here (see
# h200-issue12.sh for how): three calls back to back, each under the 64 MiB a call carries.
# The first two copy .gpuq/a and .gpuq/b into /tmp/persist (part-aa and part-ab of the
# packed MLX tree, g1 and g2 of SmolLM2-135M-Instruct.Q4_1.gguf); this script runs in the
# third with $B=.gpuq/c: g3, libs.tar.xz, quest.xz (built with MLX_DIR=<mlx-cuda-13
# wheel>/mlx), the mlx / mlx-lm wheels. Everything lands in $OUT.
#   SHAPES   shapes for `quest qmv` (default all); MODELS   real models (default: the SmolLM2 GGUF)
#   TOKENS, ROUNDS   per round (default 64, 5); FIT   shapes for the two fits ("" skips them)
set -uo pipefail
SITE=/opt/torch/.venv/lib/python3.12/site-packages
B=${B:-.gpuq/c}
OUT=${OUT:-/tmp/out}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile "$B"/mlx-0.32.2-*.whl "$B"/mlx_lm-0.32.2-*.whl
cat /tmp/persist/part-aa /tmp/persist/part-ab | xz -d | tar x -C "$SITE"
cat /tmp/persist/g1 /tmp/persist/g2 "$B"/g3 > /tmp/smollm2-135m-instruct.gguf
xz -dc "$B"/libs.tar.xz | tar x -C "$SITE"
export LD_LIBRARY_PATH="$SITE/mlx/lib" QUEST_ROOT="$PWD"
xz -dc "$B/quest.xz" > /tmp/quest && chmod +x /tmp/quest
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

models=()
for m in ${MODELS-/tmp/smollm2-135m-instruct.gguf}; do models+=(--model "$m"); done
/tmp/quest qmv --shapes "${SHAPES:-all}" "${models[@]}" --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 | tee "$OUT/qmv.txt"
cp target/quest-bench/qmv-cuda.json "$OUT/" 2>/dev/null

# The fits, one kernel after the other, and mlx-lm's generate_step on the same shapes and prompt.
if [ -n "${FIT:-Qwen3-4B,Qwen3-8B}" ]; then
  for k in mlx quest; do
    QUEST_QMV=$k /tmp/quest fit --shapes "${FIT:-Qwen3-4B,Qwen3-8B}" --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 \
      | grep -v '^quest:' | tee "$OUT/fit-$k.txt"
  done
  PROMPT=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
  /tmp/quest fit --configs > /tmp/configs.json
  for shape in $(echo "${FIT:-Qwen3-4B,Qwen3-8B}" | tr , ' '); do
    config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open("/tmp/configs.json"))[sys.argv[1]]))' "$shape")
    python3 src/bench/peer.py --config "$config" --prompt-ids "$PROMPT" --max-tokens "$TOKENS" --rounds "$ROUNDS" \
      > "/tmp/py-$shape.json"
    python3 - "/tmp/py-$shape.json" "$shape" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})
PY
  done 2>&1 | tee "$OUT/python.txt"
fi
