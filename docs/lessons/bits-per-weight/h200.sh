#!/usr/bin/env bash
# bits-per-weight on the GPU: random-weights models of public shapes at 4, 8 and 16 bits
# (`quest fit --bits`), on the device machine (an NVIDIA H200, CUDA 13 runtime wheels in
# /opt/torch's venv, no network, no Rust). The pieces are made and carried as for
# docs/gpu/h200.sh (docs/benchmarks.md, *GPU*): the first call leaves part-aa in
# /tmp/persist; this one brings .gpu/b/{part-ab,quest.xz}. Writes to $OUT.
set -euo pipefail
SITE=/opt/torch/.venv/lib/python3.12/site-packages
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cat /tmp/persist/part-aa .gpu/b/part-ab | xz -d | tar x -C "$SITE"
xz -dc .gpu/b/quest.xz > /tmp/quest && chmod +x /tmp/quest
export LD_LIBRARY_PATH="$SITE/mlx/lib" QUEST_ROOT="$PWD"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# Each shape made 4-bit (group 32, as `quest fit` always does), then requantized to
# each width: q4 and q8 in groups of GROUP, 16 = dense float16. Interleaving is per
# shape and width (hand and pipelined loops round by round), not across widths.
/tmp/quest fit --shapes "${SHAPES:-SmolLM2-135M,Qwen3-1.7B,Qwen3-4B,Qwen3-8B}" \
  --bits 4,8,16 --group-size "${GROUP:-64}" \
  --max-tokens "${TOKENS:-64}" --rounds "${ROUNDS:-3}" 2>&1 | tee "$OUT/fit-bits.txt"
cp target/quest-bench/fit-cuda.json "$OUT/fit-bits.json"
