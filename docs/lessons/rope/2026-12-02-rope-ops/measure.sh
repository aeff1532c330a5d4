#!/usr/bin/env bash
# rope's measurements, as run for the lesson (from the repository root):
#   bash docs/lessons/rope/2026-12-02-rope-ops/measure.sh
# Builds each variant as the lab binary (debug, as quest builds exercises here): quest's
# pieces (QUEST_PIECES=quest) free-running is the reference; every other variant is
# teacher-forced on its tokens, each step's logits written (QUEST_FORCE, QUEST_LOGITS), and
# also run free to show its text. Variants, all edits of solutions/rope/rope.rs:
#   solution     the lesson's solution
#   honest       the angle as p · power(base, -2i/dims), another ordering of the same math
#   traditional  the other layout: pairs (2i, 2i+1) where the model's are (i, i + dims/2)
#   start        the starting code: positions restart at 0 every call (offset ignored)
set -euo pipefail
here=docs/lessons/rope/2026-12-02-rope-ops
out=${OUT:-/tmp/rope-measure}
mkdir -p "$out"
sol=solutions/rope/rope.rs
python3 - "$sol" "$out" <<'PY'
import sys
s = open(sys.argv[1]).read()
honest = s.replace(
    "let freq = pair.multiply(Array::from_f32(base.ln()))?.exp()?;",
    "let freq = power(Array::from_f32(base), &pair)?;"
).replace("{arange, concatenate, cos, sin,", "{arange, concatenate, cos, power, sin,")
flipped = s.replace("if traditional {", "if !traditional {")
assert honest != s and flipped != s
open(f"{sys.argv[2]}/honest.rs", "w").write(honest)
open(f"{sys.argv[2]}/traditional.rs", "w").write(flipped)
PY
cp "$sol" "$out/solution.rs"; cp exercises/rope/rope.rs "$out/start.rs"
for v in solution honest traditional start; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_PIECES=quest QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/solution" > "$out/reference.txt"
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
for v in solution honest traditional start; do
  QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v.json QUEST_LOGITS=$out/$v.f32 "$out/$v" >/dev/null
  QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/$v-free.json "$out/$v" > "$out/$v-free.txt"
done
{
  python3 docs/lessons/compare_logits.py "$out" solution honest traditional start
  for v in reference solution traditional start; do
    f=$out/$v-free.txt; [ $v = reference ] && f=$out/reference.txt
    echo "--- $v, free-running text:"; python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['text'])" "$out/$v$([ $v = reference ] || echo -free).json" 2>/dev/null || cat "$f"
  done
} > $here/logits.txt
