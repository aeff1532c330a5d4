#!/usr/bin/env bash
# Each decoder's logits against quest's own model (the first NAME, quest_model),
# teacher-forced on its greedy tokens: the largest difference and the step.
#   BINS=DIR bash docs/lessons/your-model/2026-12-06-by-ops/logits.sh quest_model NAME...
set -euo pipefail
export QUEST_MAX_TOKENS=32 QUEST_PROMPT="What is the capital of France? Answer in one sentence."
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
first=$BINS/decoder-$1
QUEST_REPORT="$W/r.json" "$first" > /dev/null 2>&1
tokens=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$W/r.json")
QUEST_FORCE=$tokens QUEST_LOGITS="$W/quest.f32" QUEST_REPORT="$W/r.json" "$first" > /dev/null 2>&1
for v in "$@"; do
  QUEST_FORCE=$tokens QUEST_LOGITS="$W/$v.f32" QUEST_REPORT="$W/r.json" "$BINS/decoder-$v" > /dev/null 2>&1
  python3 - "$W/quest.f32" "$W/$v.f32" "$v" "$(echo "$tokens" | tr ',' '\n' | wc -l)" <<'PY'
import array, sys
def rows(p, n):
    a = array.array("f"); a.frombytes(open(p, "rb").read()); v = len(a) // n
    return [a[i * v:(i + 1) * v] for i in range(n)]
n = int(sys.argv[4]); q = rows(sys.argv[1], n); y = rows(sys.argv[2], n)
gaps = [max(abs(a - b) for a, b in zip(r, s)) for r, s in zip(q, y)]
argmax = lambda r: max(range(len(r)), key=r.__getitem__)
same = sum(argmax(r) == argmax(s) for r, s in zip(q, y))
step = max(range(n), key=gaps.__getitem__)
print(f"{sys.argv[3]:<10} largest difference {gaps[step]:.3e} at step {step}; step 0: {gaps[0]:.3e}; same argmax {same}/{n}")
PY
done
