#!/usr/bin/env bash
# The batch lesson's GPU figures, run on the device machine (an NVIDIA H200; no network,
# no Rust): `quest batch` on random 4-bit models of public shapes, batch 1, 2, 4 and 8,
# interleaved. The setup is docs/gpu/h200.sh's (the same carried pieces: .gpu/b/ and
# /tmp/persist/part-aa; docs/benchmarks.md says how they are made); then one command.
#   bash docs/lessons/batch/h200.sh        (OUT defaults to /tmp/out)
set -euo pipefail
SITE=/opt/torch/.venv/lib/python3.12/site-packages
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/batch"

python3 -m pip install -q --no-index --no-deps --no-compile .gpu/b/mlx-0.32.2-*.whl .gpu/b/mlx_lm-0.32.2-*.whl
cat /tmp/persist/part-aa .gpu/b/part-ab | xz -d | tar x -C "$SITE"
xz -dc .gpu/b/quest.xz > /tmp/quest && chmod +x /tmp/quest
export LD_LIBRARY_PATH="$SITE/mlx/lib" QUEST_ROOT="$PWD"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/batch/ENV.txt"
date -u +%FT%TZ >> "$OUT/batch/ENV.txt"

/tmp/quest batch --shapes SmolLM2-135M,Qwen3-0.6B,Qwen3-4B,Qwen3-8B,Qwen3.5-0.8B \
  --batch 1,2,4,8 --max-tokens 64 --rounds 5 --out "$OUT/batch" 2>&1 | tee "$OUT/batch/progress.txt"
