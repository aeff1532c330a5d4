#!/usr/bin/env bash
# linear-attention's measurements, as run for the lesson (from the repository root):
#   bash docs/lessons/linear-attention/2026-12-03-cpu/measure.sh
# Builds each variant as the lab binary (debug, as quest builds exercises here), on the
# lesson's model (random:qwen3.5-0.8b: seeded random weights in Qwen3.5-0.8B's shape, 18
# gated delta layers and 6 of full attention). quest's pieces (the solution's binary with
# QUEST_PIECES=quest) free-running is the reference; teacher-forced on its tokens:
#   solution    the lesson's solution
#   honest      S k and S q as matrix products (variants.py)
#   start       the starting code: the state never forgets (g left out)
#   read-first  the query reads the state before the token is written (variants.py)
# Then ROUNDS (3) interleaved free-running rounds of TOKENS (32) of quest's pieces and
# the solution, each its own process; decode tok/s from each report.
set -euo pipefail
here=docs/lessons/linear-attention/2026-12-03-cpu
out=${OUT:-/tmp/linear-attention-measure}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sol=solutions/linear-attention/delta.rs
python3 $here/variants.py "$sol" "$out"
cp "$sol" "$out/solution.rs"; cp exercises/linear-attention/delta.rs "$out/start.rs"
for v in solution honest start read-first; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
export QUEST_MODEL=random:qwen3.5-0.8b QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_PIECES=quest QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/solution" > "$out/reference.txt"
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
for v in solution honest start read-first; do
  QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v.json QUEST_LOGITS=$out/$v.f32 "$out/$v" > /dev/null
done
python3 docs/lessons/compare_logits.py "$out" solution honest start read-first | tee $here/logits.txt
: > $here/speed-rounds.txt
for r in $(seq 1 "${ROUNDS:-3}"); do
  for v in quest yours; do
    QUEST_PIECES=$v QUEST_MAX_TOKENS=${TOKENS:-32} QUEST_REPORT=$out/speed.json "$out/solution" > /dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], r['decode_tok_s'], r['ttft_ms'], r['load_ms'])" "$out/speed.json" "$r" "$v" | tee -a $here/speed-rounds.txt
  done
done
