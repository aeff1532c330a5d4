#!/usr/bin/env bash
# Issue #12's correctness check of quest's 4-bit matvec (src/lm/qmv.rs), on the GPU device
# machine, from a course copy with the CUDA quest on PATH (docs/gpu/device.sh run '…'):
#
#   bash docs/gpu/qmv_check.sh
#
# 1. MLX's own kernels decode the real model correctly: the prompt's answer names Paris.
# 2. On the model's real weights, quest's kernel and MLX's pick the same greedy token at
#    every step (teacher-forced, side by side), the pipelined runs of both decode the same
#    tokens, and the logits differ by at most TOL (relative L2, float16) at every step.
# Exit 0 when all hold, 1 otherwise. Outputs go to $OUT (default /tmp/out).
#   MODEL  a real 4-bit model quest can load (default smollm2-135m-instruct, from QUEST_CACHE)
#   TOL    the logits tolerance (default 0.02)
set -euo pipefail
MODEL=${MODEL:-smollm2-135m-instruct}
TOL=${TOL:-0.02}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for kernel in mlx quest; do
  QUEST_QMV=$kernel quest run mlx-path --no-lesson --model "$MODEL" --max-tokens 16 2>&1 \
    | grep -E "^(Output|Model|Decode)" | tee "$OUT/run-$kernel.txt"
done
quest qmv --model "$MODEL" --max-tokens 64 --rounds 3 2>&1 | tee "$OUT/qmv-check.txt"
cp target/quest-bench/qmv-cuda.json "$OUT/qmv-check.json"
python3 - "$OUT/qmv-check.json" "$TOL" "$OUT"/run-mlx.txt "$OUT"/run-quest.txt <<'PY'
import json, sys
points, tol = json.load(open(sys.argv[1])), float(sys.argv[2])
ok = True
for path in sys.argv[3:]:
    text = open(path).read()
    print(f"{path}: {'names Paris' if 'Paris' in text else 'does NOT name Paris'}")
    ok &= "Paris" in text
for p in points:
    good = p["same_tokens"] and p["same_argmax"] == p["steps"] and p["max_logits_rel_diff"] <= tol
    print(f"{p['model']}: same greedy tokens {p['same_tokens']}, argmax agree {p['same_argmax']}/{p['steps']}, "
          f"max logits rel diff {p['max_logits_rel_diff']:.2e} (tolerance {tol}): {'PASS' if good else 'FAIL'}")
    ok &= good
sys.exit(0 if ok else 1)
PY
