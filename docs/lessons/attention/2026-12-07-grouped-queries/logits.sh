#!/usr/bin/env bash
# The grouped-query solution's logits against quest's own model, as run for the lesson
# (from the repository root):
#   bash docs/lessons/attention/2026-12-07-grouped-queries/logits.sh
# quest's pieces (the solution's binary with QUEST_PIECES=quest, MLX's fused attention)
# free-running is the reference; teacher-forced on its tokens, 32 steps on SmolLM2-135M:
#   solution   the lesson's solution: queries grouped by key head, a float32 softmax
#   additive   an additive mask (0 or −∞ added to the scores) and the softmax written out
#   tiled      query head h reading key head h mod 3 (the groups taken the wrong way)
set -euo pipefail
here=docs/lessons/attention/2026-12-07-grouped-queries
out=${OUT:-/tmp/attention-grouped}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sol=solutions/attention/attention.rs
python3 - "$sol" "$out" <<'PY'
import sys
s = open(sys.argv[1]).read()
def edit(text, old, new):
    assert old in text, old
    return text.replace(old, new)
additive = edit(s, "                select(le(&key, &query)?, &scores, hidden)?",
                "                let zero = Array::from_f32(0.0);\n                scores.add(select(le(&key, &query)?, zero, hidden)?)?")
additive = edit(additive, "        let weights = softmax_axis(&scores, -1, true)?.as_dtype(values.dtype())?;",
                "        let shifted = scores.subtract(scores.max_axis(-1, true)?)?.exp()?;\n        let weights = shifted.divide(shifted.sum_axis(-1, true)?)?.as_dtype(values.dtype())?;")
open(f"{sys.argv[2]}/additive.rs", "w").write(additive.replace(", softmax_axis}", "}"))
tiled = edit(s, "queries.reshape(&[b, kv_heads, heads / kv_heads, l, d])", "queries.reshape(&[b, heads / kv_heads, kv_heads, l, d])")
tiled = edit(tiled, "(keys.expand_dims(2)?, values.expand_dims(2)?)", "(keys.expand_dims(1)?, values.expand_dims(1)?)")
open(f"{sys.argv[2]}/tiled.rs", "w").write(tiled)
PY
cp "$sol" "$out/solution.rs"
variants="solution additive tiled"
for v in $variants; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_PIECES=quest QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/solution" > /dev/null
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
for v in $variants; do
  QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v.json QUEST_LOGITS=$out/$v.f32 "$out/$v" > /dev/null
done
python3 docs/lessons/compare_logits.py "$out" $variants | tee $here/logits.txt
