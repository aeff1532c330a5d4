#!/usr/bin/env bash
# The GPU figures of session 4 (2026-12-01) on the H200, in the last calls of
# docs/gpu/carry.sh's pipeline (inside docs/gpu/device.sh: quest's CUDA build on PATH,
# prebuilt mlx-path exercises, a course copy as QUEST_ROOT, SmolLM2 carried):
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session4.sh check fits'
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session4.sh py'
# Parts (each under `timeout`, outputs in $OUT/session4-<parts>.tar.gz):
#   check  issue #12's correctness check of quest's matvec on SmolLM2 (docs/gpu/qmv_check.sh),
#          and SmolLM2 with dense float16 weights (the RoPE fix, MLX's kernels only)
#   fits   quest fit on all six shapes with each matvec kernel (KERNELS, default "mlx quest"), one process each
#   journey  the journey lessons' exercises on SmolLM2 (quest run, 16 tokens each)
#   bench  quest bench mlx-path on SmolLM2 with the Python peers (QUEST_PEER_PYTHON=python3)
#   alt    quest fit per shape (SHAPES), one process per shape and kernel, alternated
#   py     mlx-lm's generate_step (and the Python hand loop) on the same six shapes and prompt
set -uo pipefail
T=${TOKENS:-64}
R=${ROUNDS:-3}
o=/tmp/session4
mkdir -p "$o"
tag=$(echo "$@" | tr ' ' '-')
finish() { tar czf "$OUT/session4-$tag.tar.gz" -C /tmp session4; }
trap finish EXIT
step() { echo; echo "== $* ($(date -u +%T))"; }
for part in "$@"; do
  case $part in
    check)
      step check
      OUT=$o timeout 240 bash docs/gpu/qmv_check.sh 2>&1 | tail -30 | tee "$o/check.txt"
      echo "qmv_check.sh: rc=${PIPESTATUS[0]}" | tee -a "$o/check.txt"
      QUEST_WEIGHTS=dense timeout 60 quest run mlx-path --no-lesson --max-tokens 16 2>&1 \
        | grep -E "^(Output|Model)" | tee -a "$o/check.txt"
      ;;
    fits)
      step fits
      for k in ${KERNELS:-mlx quest}; do
        echo "-- QUEST_QMV=$k"
        QUEST_QMV=$k timeout 150 quest fit --shapes all --max-tokens "$T" --rounds "$R" 2>&1 | grep -v '^quest:'
        cp target/quest-bench/fit-cuda.json "$o/fit-$k.json" 2>/dev/null
      done 2>&1 | tee "$o/fits.txt"
      ;;
    alt)
      # One process per shape and kernel, alternated (in one process over all six shapes,
      # quest's kernel measured no faster than MLX's: see docs/benchmarks.md).
      step alt
      for shape in ${SHAPES:-Qwen3-0.6B Qwen3-4B Qwen3-8B}; do
        for k in mlx quest; do
          echo "-- $shape, QUEST_QMV=$k"
          QUEST_QMV=$k timeout 75 quest fit --shapes "$shape" --max-tokens "$T" --rounds "$R" 2>&1 \
            | grep -v '^quest:' | grep -E "^$shape|^fit|host|µs|^shape"
        done
      done 2>&1 | tee "$o/alt.txt"
      ;;
    journey)
      # The journey lessons' exercises (prebuilt) on the real SmolLM2: right text on the GPU?
      step journey
      for lesson in mapped-lazy kv-cache mlx-path lazy-prefill; do
        echo "-- $lesson"
        timeout 90 quest run "$lesson" --no-lesson --max-tokens 16 2>&1 | grep -E "^(Output|TTFT|Decode|Model)|rror"
      done 2>&1 | tee "$o/journey.txt"
      ;;
    bench)
      # The lesson's own comparison on the real model: Rust loops, the exercise, the Python
      # hand loop and mlx-lm's generate_step, interleaved.
      step bench
      QUEST_PEER_PYTHON=python3 timeout 200 quest bench mlx-path --max-tokens "$T" --rounds "$R" 2>&1 \
        | tee "$o/bench.txt"
      cp target/quest-bench/mlx-path.json "$o/bench-mlx-path.json" 2>/dev/null
      ;;
    py)
      step py
      quest fit --configs > /tmp/configs.json
      PROMPT=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
      for shape in $(python3 -c 'import json; print(" ".join(json.load(open("/tmp/configs.json"))))'); do
        config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open("/tmp/configs.json"))[sys.argv[1]]))' "$shape")
        timeout 60 python3 src/bench/peer.py --config "$config" --prompt-ids "$PROMPT" --max-tokens "$T" \
          --rounds "$R" > "$o/py-$shape.json"
        python3 - "$o/py-$shape.json" "$shape" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})
PY
      done 2>&1 | tee "$o/python.txt"
      ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
