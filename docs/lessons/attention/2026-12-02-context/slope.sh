#!/usr/bin/env bash
# attention's context slope, as run for the lesson (from the repository root):
#   bash docs/lessons/attention/2026-12-02-context/slope.sh > docs/lessons/attention/2026-12-02-context/out.txt
# SmolLM2-135M (dense f32 on the CPU), the lesson's solution with quest's pieces
# (QUEST_PIECES=quest: MLX's fused attention) and with its own, a short prompt and a long
# one (the same sentence repeated), 16 decode steps a run, rounds interleaved. Prints each
# run's prompt length and median ms per decode step, then the slope per 1k positions.
set -euo pipefail
out=${OUT:-/tmp/attention-context}
mkdir -p "$out"
QUEST_LAB_SOURCE="$PWD/solutions/attention/attention.rs" cargo build -q -p quest-lab
cp target/debug/quest-lab "$out/solution"
export QUEST_MODEL=smollm2-135m-instruct QUEST_MAX_TOKENS=16
short="What is the capital of France? Answer in one sentence."
long=$(python3 -c "print(' '.join(['The river runs past the old mill and under the stone bridge to the sea.'] * 60) + ' What is the capital of France?')")
for r in 1 2 3; do
  for len in short long; do
    for pieces in quest yours; do
      prompt=$short; [ $len = long ] && prompt=$long
      QUEST_PIECES=$pieces QUEST_PROMPT="$prompt" QUEST_REPORT=$out/r.json "$out/solution" > /dev/null
      python3 -c "
import json, statistics, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], sys.argv[3], sys.argv[4], r['prompt_tokens'], round(statistics.median(r['token_ms']), 2))
" "$out/r.json" $r $len $pieces
    done
  done
done | tee "$out/rounds.txt"
python3 - "$out/rounds.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for pieces in ["quest", "yours"]:
    at = {}
    for _, length, p, n, ms in rows:
        if p == pieces:
            at.setdefault(length, (int(n), []))[1].append(float(ms))
    (n0, s), (n1, l) = at["short"], at["long"]
    m0, m1 = statistics.median(s), statistics.median(l)
    print(f"{pieces}: {n0} positions {m0:.2f} ms/step, {n1} positions {m1:.2f} ms/step, "
          f"slope {(m1 - m0) / (n1 - n0) * 1000:.2f} ms per 1k positions")
PY
