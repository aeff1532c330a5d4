#!/usr/bin/env bash
# The ops-cost lesson on an NVIDIA H200: the same measurement as the CPU's
# (docs/lessons/ops-cost/measure.sh), on quest's CUDA build, where the fixed term is
# expected to bind. Run on the device machine inside docs/gpu/device.sh (quest's CUDA
# build on PATH, the prebuilt exercises, a course copy as QUEST_ROOT), e.g.
#   bash .gpu/<N>/device.sh run 'bash docs/lessons/ops-cost/gpu.sh /tmp/measure/ops-cost'
# BINS: a folder holding norm-exercises, norm-solutions and norm-fused, the quest-lab
# binaries of exercises/ops-cost/norm.rs, solutions/ops-cost/norm.rs and
# docs/lessons/ops-cost/fused.rs, built for CUDA (`quest dev prebuild`, or
# `QUEST_LAB_SOURCE=… cargo build --release -p quest-lab` with the CUDA feature); without
# BINS, measure.sh builds them here with cargo.
# What to read: ops per step (the fused norm should be fewer ops than the by-ops norm
# here, unlike on the CPU), us_per_op (µs per op on CUDA), host_ms_predicted against the
# step's ms, and whether the step time falls with the count.
set -euo pipefail
OUT=${1:-/tmp/measure/ops-cost}
ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" || true
for model in random:qwen3-8b smollm2-135m-instruct; do
  bash docs/lessons/ops-cost/measure.sh "$OUT/${model//[:\/]/-}" "$ROUNDS" "$model"
  # The fused norm's count (one op per norm where the backend runs MLX's fused kernel).
  if [ -n "${BINS:-}" ] && [ -x "$BINS/norm-fused" ]; then
    QUEST_MODEL=$model QUEST_MAX_TOKENS=8 "$BINS/norm-fused" > "$OUT/${model//[:\/]/-}/fused.txt" 2>&1 || true
  fi
done
# The lesson's flow as a learner runs it, on the 8B shape.
quest run ops-cost --model random:qwen3-8b > "$OUT/run.txt" 2>&1 || true
quest submit ops-cost --model random:qwen3-8b > "$OUT/submit.txt" 2>&1 || true
