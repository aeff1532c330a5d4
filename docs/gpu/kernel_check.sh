#!/usr/bin/env bash
# The correctness check of one of quest's CUDA kernels (src/kernels/: the 4-bit matvec with
# what it folds in, the decode step's q/k/v heads, the decode step's attention), on the GPU
# device machine, from a course copy with the CUDA quest on PATH (docs/gpu/device.sh run '…'):
#
#   KERNEL=matvec bash docs/gpu/kernel_check.sh
#
# 1. MLX's own ops and quest's kernel each decode the real model correctly: the prompt's
#    answer names Paris.
# 2. On the model's real weights, quest's kernel and MLX's ops pick the same greedy token at
#    every step (teacher-forced, side by side), the pipelined runs of both decode the same
#    tokens, and the logits differ by at most TOL (relative L2, float16) at every step.
# Exit 0 when all hold, 1 otherwise. Outputs go to $OUT (default /tmp/out).
#   KERNEL matvec (default), qkv or attend
#   MODEL  a real 4-bit model quest can load (default smollm2-135m-instruct, from QUEST_CACHE)
#   TOL    the logits tolerance (default 0.02)
set -euo pipefail
KERNEL=${KERNEL:-matvec}
MODEL=${MODEL:-smollm2-135m-instruct}
TOL=${TOL:-0.02}
OUT=${OUT:-/tmp/out}
case $KERNEL in
  matvec) SWITCH=QUEST_QMV ;;
  qkv) SWITCH=QUEST_QKV ;;
  attend) SWITCH=QUEST_ATTEND ;;
  *) echo "kernel_check.sh: KERNEL is matvec, qkv or attend, not $KERNEL" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
for way in mlx quest; do
  env "$SWITCH=$way" quest run mlx-path --no-lesson --model "$MODEL" --max-tokens 16 2>&1 \
    | grep -E "^(Output|Model|Decode)" | tee "$OUT/run-$KERNEL-$way.txt"
done
quest kernel --kernel "$KERNEL" --model "$MODEL" --max-tokens 64 --rounds 3 2>&1 | tee "$OUT/check-$KERNEL.txt"
cp "target/quest-bench/kernel-$KERNEL-cuda.json" "$OUT/check-$KERNEL.json"
python3 - "$OUT/check-$KERNEL.json" "$TOL" "$OUT/run-$KERNEL-mlx.txt" "$OUT/run-$KERNEL-quest.txt" <<'PY'
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
