#!/usr/bin/env bash
# The GPU figures of session 3 (2026-12-01) on the H200, in the two last calls of
# docs/gpu/carry.sh's pipeline (inside docs/gpu/device.sh: quest's CUDA build on PATH,
# prebuilt mlx-path exercises, a course copy as QUEST_ROOT, SmolLM2 carried):
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session3.sh flow qmv'
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session3.sh batch bits slope fits'
# Parts (each under `timeout`, outputs in $OUT/session3-<parts>.tar.gz):
#   flow   issue #11: the learner's flow on random:qwen3-8b and SmolLM2 (docs/gpu/issue11.sh, BENCH=0)
#   qmv    issue #12: quest's 4-bit matvec against MLX's (quest qmv), SmolLM2 and the 4B/8B shapes
#   batch  the batch lesson: quest batch on three shapes, batch 1 and 4
#   bits   the bits-per-weight lesson: quest fit --bits 4,8,16 on two shapes
#   slope  the context-slope lesson: quest slope, 64 tokens x 5 rounds per point
#   fits   issue #12: quest fit on Qwen3-8B with each matvec kernel, processes alternated,
#          and mlx-lm's generate_step on the same shape
set -uo pipefail
T=${TOKENS:-64}
o=/tmp/session3
mkdir -p "$o"
tag=$(echo "$@" | tr ' ' '-')
finish() { tar czf "$OUT/session3-$tag.tar.gz" -C /tmp session3; }
trap finish EXIT
step() { echo; echo "== $* ($(date -u +%T))"; }
for part in "$@"; do
  case $part in
    flow)
      step flow
      BENCH=0 ROUNDS=3 TOKENS=$T timeout 330 bash docs/gpu/issue11.sh 2>&1 | tail -40 > "$o/flow.txt"
      cp /tmp/issue11/*.txt "$o/" 2>/dev/null
      ;;
    qmv)
      step qmv
      timeout 200 quest qmv --shapes Qwen3-4B,Qwen3-8B --model smollm2-135m-instruct \
        --max-tokens "$T" --rounds 3 2>&1 | tee "$o/qmv.txt"
      cp target/quest-bench/qmv-cuda.json "$o/" 2>/dev/null
      ;;
    batch)
      step batch
      timeout 150 quest batch --shapes SmolLM2-135M,Qwen3-4B,Qwen3-8B --batch 1,4 \
        --max-tokens "$T" --rounds 3 --out "$o/batch" 2>&1 | tee "$o/batch.txt"
      ;;
    bits)
      step bits
      timeout 170 quest fit --shapes Qwen3-1.7B,Qwen3-8B --bits 4,8,16 --group-size 64 \
        --max-tokens "$T" --rounds 3 2>&1 | tee "$o/bits.txt"
      cp target/quest-bench/fit-cuda.json "$o/fit-bits.json" 2>/dev/null
      ;;
    slope)
      step slope
      timeout 170 quest slope --max-tokens "$T" --rounds 5 --contexts 256,2048,8192 2>&1 | tee "$o/slope.txt"
      cp target/quest-bench/slope-cuda.json "$o/" 2>/dev/null
      ;;
    fits)
      step fits
      for i in 1 2; do
        for k in mlx quest; do
          echo "-- QUEST_QMV=$k, pass $i"
          QUEST_QMV=$k timeout 60 quest fit --shapes Qwen3-8B --max-tokens "$T" --rounds 3 2>&1 | grep -v '^quest:'
        done
      done 2>&1 | tee "$o/fits.txt"
      quest fit --configs > /tmp/configs.json
      PROMPT=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
      config=$(python3 -c 'import json; print(json.dumps(json.load(open("/tmp/configs.json"))["Qwen3-8B"]))')
      timeout 90 python3 src/bench/peer.py --config "$config" --prompt-ids "$PROMPT" --max-tokens "$T" --rounds 3 \
        > "$o/py-8b.json"
      python3 -c 'import json, statistics; d = json.load(open("/tmp/session3/py-8b.json"))["results"]; print("Qwen3-8B", {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})' \
        | tee -a "$o/fits.txt"
      ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
