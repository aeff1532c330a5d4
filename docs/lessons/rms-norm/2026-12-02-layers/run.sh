#!/usr/bin/env bash
# The rms-norm solution (quest's to the bit on the CPU), an honest reordering, and eps left
# out, each teacher-forced on the solution's greedy tokens with every layer's output
# written (QUEST_LAYERS): how far apart the layers are, against the limit quest submit
# uses to name the first layer apart. From the checkout's root:
#   bash docs/lessons/rms-norm/2026-12-02-layers/run.sh > docs/lessons/rms-norm/2026-12-02-layers/out.txt
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
sol=solutions/rms-norm/norm.rs
python3 - "$sol" "$W" <<'PY'
import sys
s = open(sys.argv[1]).read()
honest = s.replace(
    "        let mean_square = x.square()?.mean_axis(-1, true)?;\n        let inverse_rms = mean_square.add(Array::from_f32(eps))?.rsqrt()?;\n        Ok(x.multiply(&inverse_rms)?.multiply(weight)?)",
    "        let n = *x.shape().last().unwrap() as f32;\n        let mean_square = x.multiply(x)?.sum_axis(-1, true)?.divide(Array::from_f32(n))?;\n        let rms = mean_square.add(Array::from_f32(eps))?.sqrt()?;\n        Ok(x.divide(&rms)?.multiply(weight)?)")
no_eps = s.replace("mean_square.add(Array::from_f32(eps))?.rsqrt()?",
                   "{\n            let _ = eps;\n            mean_square.rsqrt()?\n        }")
assert honest != s and no_eps != s
open(f"{sys.argv[2]}/honest.rs", "w").write(honest)
open(f"{sys.argv[2]}/no-eps.rs", "w").write(no_eps)
PY
cp "$sol" "$W/reference.rs"
for v in reference honest no-eps; do
  QUEST_LAB_SOURCE="$W/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$W/$v"
done
QUEST_REPORT="$W/r.json" "$W/reference" > /dev/null
tokens=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$W/r.json")
for v in reference honest no-eps; do
  QUEST_FORCE=$tokens QUEST_LAYERS="$W/layers-$v.f32" QUEST_LOGITS="$W/logits-$v.f32" \
    QUEST_REPORT="$W/r-$v.json" "$W/$v" > /dev/null
done
echo "tolerance 1e-3 (lesson.yaml), SmolLM2-135M, $(date -u +%F)"
for v in honest no-eps; do python3 "$HERE/compare.py" "$W" "$v" 1e-3; done
