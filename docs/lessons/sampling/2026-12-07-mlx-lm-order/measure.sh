#!/usr/bin/env bash
# sampling's measurements, as run for the lesson (from the repository root):
#   bash docs/lessons/sampling/2026-12-07-mlx-lm-order/measure.sh
# 1. draws.txt: `quest dev draws` on the solution and the variants of
#    variants.py, with the lesson's sampling (QUEST_SAMPLING's default) and, for the
#    solution, two more seeds: each one's mean distance from the exact distribution over
#    the 32 steps (1000 draws a step), honest draws' and the excess.
# 2. repeat.txt: the solution's text twice with seed 0, once with seed 1.
# 3. speed-rounds.txt: ROUNDS (5) interleaved free-running rounds of TOKENS (32) of
#    greedy (quest's model, argmax: the rms-norm solution with QUEST_PIECES=quest),
#    quest's sampler (this solution with QUEST_PIECES=quest) and the solution, each its
#    own process; decode tok/s from each report (speed.txt: medians, by summarize.py).
set -euo pipefail
here=docs/lessons/sampling/2026-12-07-mlx-lm-order
out=${OUT:-/tmp/sampling-measure}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sol=solutions/sampling/sampling.rs
python3 $here/variants.py "$sol" "$out"
cp "$sol" "$out/solution.rs"; cp exercises/sampling/sampling.rs "$out/start.rs"
cargo build -q
quest=target/debug/quest
{
  $quest dev draws sampling "$out/solution.rs" "$out/gumbel-max.rs" \
    "$out"/{no-temperature,temperature-first,no-top-p,no-min-p,no-top-k,crossing-dropped,probabilities-drawn}.rs
  for seed in 1 2; do QUEST_SAMPLING=seed=$seed $quest dev draws sampling "$out/solution.rs"; done
} 2>/dev/null | sed "s|$out/||" | tee $here/draws.txt
for v in solution; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
QUEST_LAB_SOURCE="$(pwd)/solutions/rms-norm/norm.rs" cargo build -q -p quest-lab
cp target/debug/quest-lab "$out/greedy"
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="Tell me a short story about a robot who learns to paint."
text() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['text'])" "$1"; }
{
  for seed in 0 0 1; do
    QUEST_SAMPLING=seed=$seed QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/repeat.json "$out/solution" > /dev/null
    echo "seed $seed: $(text $out/repeat.json)"
  done
} | tee $here/repeat.txt
: > $here/speed-rounds.txt
for r in $(seq 1 "${ROUNDS:-5}"); do
  for v in greedy quest-sampler solution; do
    bin=$v env=QUEST_PIECES=yours
    case $v in greedy) env=QUEST_PIECES=quest ;; quest-sampler) bin=solution env=QUEST_PIECES=quest ;; esac
    env $env QUEST_MAX_TOKENS=${TOKENS:-32} QUEST_REPORT=$out/speed.json "$out/$bin" > /dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], r['decode_tok_s'], r['weights'], r['weight_bytes_per_token'])" "$out/speed.json" "$r" "$v" | tee -a $here/speed-rounds.txt
  done
done
python3 $here/summarize.py $here/speed-rounds.txt | tee $here/speed.txt
# 4. sampler-alone.txt: the solution's sampler alone on one row of 49152 logits, ms a call
#    (variants.py's stopwatch), with the lesson's sampling, then without top-p, without
#    any filter, and with top-p alone.
QUEST_LAB_SOURCE="$out/sampler-alone.rs" cargo build -q -p quest-lab
for s in "" "top_p=1" "top_p=1,min_p=0,top_k=0" "min_p=0,top_k=0"; do
  QUEST_SAMPLING=$s target/debug/quest-lab
done | tee $here/sampler-alone.txt
