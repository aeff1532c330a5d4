#!/usr/bin/env bash
# attention's logits, as run for the lesson (from the repository root):
#   bash docs/lessons/attention/2026-12-02-attention-ops/measure.sh
# Builds each variant as the lab binary (debug, as quest builds exercises here): quest's
# pieces (QUEST_PIECES=quest) free-running is the reference; every other variant is
# teacher-forced on its tokens, each step's logits written (QUEST_FORCE, QUEST_LOGITS), and
# run free to show its text. Variants, all edits of solutions/attention/attention.rs:
#   solution     the lesson's solution
#   honest       the scale applied to the scores instead of the queries
#   off_by_one   the mask one key late: each prompt query also sees the next one
#   grouped_wrong  query head h given key head h mod KV (tiled) instead of h / (H/KV)
#   start        the starting code: no mask in the prompt
set -euo pipefail
here=docs/lessons/attention/2026-12-02-attention-ops
out=${OUT:-/tmp/attention-measure}
mkdir -p "$out"
sol=solutions/attention/attention.rs
python3 - "$sol" "$out" <<'PY'
import sys
s = open(sys.argv[1]).read()
def edit(old, new):
    assert old in s, old
    return s.replace(old, new)
variants = {
    "honest": edit("""        let scores = matmul(
            queries.multiply(Array::from_f32(scale))?,
            keys.swap_axes(-1, -2)?,
        )?;""", """        let scores = matmul(queries, keys.swap_axes(-1, -2)?)?.multiply(Array::from_f32(scale))?;"""),
    "off_by_one": edit("arange::<_, i32>(s - l, s, None)", "arange::<_, i32>(s - l + 1, s + 1, None)"),
    "grouped_wrong": edit("broadcast_to(t.expand_dims(2)?, &[b, kv_heads, heads / kv_heads, s, d])",
                          "broadcast_to(t.expand_dims(1)?, &[b, heads / kv_heads, kv_heads, s, d])"),
}
for name, text in variants.items():
    open(f"{sys.argv[2]}/{name}.rs", "w").write(text)
PY
cp "$sol" "$out/solution.rs"; cp exercises/attention/attention.rs "$out/start.rs"
variants="solution honest off_by_one grouped_wrong start"
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
