#!/usr/bin/env bash
# dequant-matvec's measurements, as run for the lesson (from the repository root):
#   bash docs/lessons/dequant-matvec/2026-12-03-cpu/measure.sh
# Builds each variant as the lab binary (debug, as quest builds exercises here).
# The reference is quest's model as `quest submit` loads it (dense f32 on the CPU: the
# rms-norm solution's binary with QUEST_PIECES=quest). Teacher-forced on its tokens:
#   qmm       the 4-bit matrices multiplied by MLX's quantized_matmul (this lesson's
#             solution with QUEST_PIECES=quest: quest's pieces, the weights held quantized)
#   solution  the lesson's solution: unpack, scale · q + bias, matmul
#   honest    the integers peeled off one at a time (variants.py)
#   start     the starting code: each group's bias left out
#   reversed  the values of a word read from the top bits down (variants.py)
# Then ROUNDS (5) interleaved free-running rounds of TOKENS (32) of dense, qmm and
# solution, each its own process; decode tok/s from each report.
set -euo pipefail
here=docs/lessons/dequant-matvec/2026-12-03-cpu
out=${OUT:-/tmp/dequant-measure}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sol=solutions/dequant-matvec/matvec.rs
python3 $here/variants.py "$sol" "$out"
cp "$sol" "$out/solution.rs"; cp exercises/dequant-matvec/matvec.rs "$out/start.rs"
cp solutions/rms-norm/norm.rs "$out/dense.rs"
for v in dense solution honest start reversed; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_PIECES=quest QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/dense" > "$out/reference.txt"
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
run_forced() { # NAME BINARY [ENV…]
  local name=$1 bin=$2; shift 2
  env "$@" QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$name.json QUEST_LOGITS=$out/$name.f32 "$out/$bin" > /dev/null
  env "$@" QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/$name-free.json "$out/$bin" > /dev/null
}
run_forced qmm solution QUEST_PIECES=quest
for v in solution honest start reversed; do run_forced $v $v; done
{
  python3 docs/lessons/compare_logits.py "$out" qmm solution honest start reversed
  for v in reference qmm solution start reversed; do
    f=$out/$v-free.json; [ $v = reference ] && f=$out/reference.json
    echo "--- $v, free-running text: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['text'])" "$f")"
  done
} | tee $here/logits.txt
: > $here/speed-rounds.txt
for r in $(seq 1 "${ROUNDS:-5}"); do
  for v in dense qmm solution; do
    bin=$v env=QUEST_PIECES=yours
    case $v in dense) env=QUEST_PIECES=quest ;; qmm) bin=solution env=QUEST_PIECES=quest ;; esac
    env $env QUEST_MAX_TOKENS=${TOKENS:-32} QUEST_REPORT=$out/speed.json "$out/$bin" > /dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], r['decode_tok_s'], r['weights'], r['weight_bytes_per_token'])" "$out/speed.json" "$r" "$v" | tee -a $here/speed-rounds.txt
  done
done
