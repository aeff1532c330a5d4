#!/usr/bin/env bash
# mlp's logits with the whole MLP as the learner's piece, as run for the lesson (from the
# repository root):
#   bash docs/lessons/mlp/2026-12-07-whole-mlp/measure.sh
# Builds each variant as the lab binary (debug, as quest builds exercises here): quest's
# pieces (QUEST_PIECES=quest: quest's stacked gate/up matmul, its compiled gate, down)
# free-running is the reference; every other variant is teacher-forced on its tokens, each
# step's logits written (QUEST_FORCE, QUEST_LOGITS), and run free to show its text.
# Variants, edits of solutions/mlp/mlp.rs:
#   solution  the lesson's solution: silu(g) = g · (1 / (1 + e^(−g))), times up, down
#   divided   silu as g / (1 + e^(−g))
#   sigmoid   silu as g · sigmoid(g), MLX's sigmoid
#   no_x      sigmoid(gate) · up: silu's own factor g forgotten
#   swapped   silu(up) · gate: the two projections swapped
set -euo pipefail
here=docs/lessons/mlp/2026-12-07-whole-mlp
out=${OUT:-/tmp/mlp-whole}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sol=solutions/mlp/mlp.rs
python3 - "$sol" "$out" <<'PY'
import sys
s = open(sys.argv[1]).read()
def edit(old, new):
    assert old in s, old
    return s.replace(old, new)
two = "        let sigmoid = one.divide(one.add(&decay)?)?;\n        let silu = gate.multiply(&sigmoid)?;"
variants = {
    "divided": edit(two, "        let silu = gate.divide(one.add(&decay)?)?;"),
    "sigmoid": edit(two, "        let silu = gate.multiply(mlx_rs::ops::sigmoid(&gate)?)?;\n        let _ = (one, decay);"),
    "no_x": edit("let silu = gate.multiply(&sigmoid)?;", "let silu = sigmoid;"),
    "swapped": edit("let gate = layers.gate_proj(x)?;\n        let up = layers.up_proj(x)?;",
                    "let gate = layers.up_proj(x)?;\n        let up = layers.gate_proj(x)?;"),
}
for name, text in variants.items():
    open(f"{sys.argv[2]}/{name}.rs", "w").write(text)
PY
cp "$sol" "$out/solution.rs"
variants="solution divided sigmoid no_x swapped"
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
cat $here/logits.txt
