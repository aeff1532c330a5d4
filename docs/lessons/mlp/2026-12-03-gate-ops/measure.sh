#!/usr/bin/env bash
# mlp's logits, as run for the lesson (from the repository root):
#   bash docs/lessons/mlp/2026-12-03-gate-ops/measure.sh
# Builds each variant as the lab binary (debug, as quest builds exercises here): quest's
# pieces (QUEST_PIECES=quest, quest's compiled swiglu) free-running is the reference; every
# other variant is teacher-forced on its tokens, each step's logits written (QUEST_FORCE,
# QUEST_LOGITS), and run free to show its text. Variants, edits of solutions/mlp/mlp.rs:
#   solution  the lesson's solution: gate · sigmoid(gate) · up
#   honest    another honest ordering: gate / (1 + exp(-gate)) · up
#   no_x      sigmoid(gate) · up: silu's own factor x forgotten
#   swapped   silu(up) · gate: gate and up swapped
#   start     the starting code: gate · up, no silu
set -euo pipefail
here=docs/lessons/mlp/2026-12-03-gate-ops
out=${OUT:-/tmp/mlp-measure}
mkdir -p "$out"
sol=solutions/mlp/mlp.rs
python3 - "$sol" "$out" <<'PY'
import sys
s = open(sys.argv[1]).read()
def edit(old, new):
    assert old in s, old
    return s.replace(old, new)
line = "let silu = gate.multiply(sigmoid(gate)?)?;"
variants = {
    "honest": edit(line, "let one = Array::from_f32(1.0);\n        let silu = gate.divide(one.add(gate.negative()?.exp()?)?)?;"),
    "no_x": edit(line, "let silu = sigmoid(gate)?;"),
    "swapped": edit("let silu = gate.multiply(sigmoid(gate)?)?;\n        Ok(silu.multiply(up)?)",
                    "let silu = up.multiply(sigmoid(up)?)?;\n        Ok(silu.multiply(gate)?)"),
}
for name, text in variants.items():
    open(f"{sys.argv[2]}/{name}.rs", "w").write(text)
PY
cp "$sol" "$out/solution.rs"; cp exercises/mlp/mlp.rs "$out/start.rs"
variants="solution honest no_x swapped start"
for v in $variants; do
  QUEST_LAB_SOURCE="$out/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_PIECES=quest QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/solution" > /dev/null
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
for v in $variants; do
  QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v.json QUEST_LOGITS=$out/$v.f32 "$out/$v" >/dev/null
  QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/$v-free.json "$out/$v" > /dev/null
done
{
  python3 docs/lessons/compare_logits.py "$out" $variants
  for v in reference $variants; do
    f=$out/$v-free.json; [ $v = reference ] && f=$out/reference.json
    echo "--- $v, free-running text: $(python3 -c "import json,sys; print(repr(json.load(open(sys.argv[1])).get('text')))" "$f")"
  done
} > $here/logits.txt
