#!/usr/bin/env bash
# An honest attention whose logits are not quest's to the bit, as run for the lesson (from
# the repository root):
#   bash docs/lessons/attention/2026-12-03-softmax/measure.sh
# quest's pieces (the solution's binary with QUEST_PIECES=quest) free-running is the
# reference; teacher-forced on its tokens:
#   solution    the lesson's solution (MLX's softmax_axis, precise)
#   by-hand     the softmax written out: exp(scores − max) over its sum
# 32 steps on SmolLM2-135M, the lesson's prompt; docs/lessons/compare_logits.py compares.
set -euo pipefail
here=docs/lessons/attention/2026-12-03-softmax
out=${OUT:-/tmp/attention-softmax}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sol=solutions/attention/attention.rs
python3 - "$sol" "$out" <<'PY'
import sys
s = open(sys.argv[1]).read()
old = "        let weights = softmax_axis(&scores, -1, true)?;"
assert old in s
by_hand = s.replace(old, """        let shifted = scores.subtract(scores.max_axis(-1, true)?)?.exp()?;
        let weights = shifted.divide(shifted.sum_axis(-1, true)?)?;""")
open(f"{sys.argv[2]}/by-hand.rs", "w").write(by_hand.replace(", softmax_axis}", "}"))
PY
cp "$sol" "$out/solution.rs"
for v in solution by-hand; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_PIECES=quest QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/solution" > /dev/null
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
for v in solution by-hand; do
  QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v.json QUEST_LOGITS=$out/$v.f32 "$out/$v" > /dev/null
done
python3 docs/lessons/compare_logits.py "$out" solution by-hand | tee $here/logits.txt
