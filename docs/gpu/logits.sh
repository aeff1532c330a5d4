#!/usr/bin/env bash
# The inside track's logits check on the GPU: for each LESSON:FILE, quest's own pieces
# (the solution's binary with QUEST_PIECES=quest) free-running, then the solution, the
# course copy's exercise (an honest edit, made before carry.sh) and the lesson's starting
# code teacher-forced on its tokens, each step's logits written; the largest difference of
# each from quest's, per step (docs/lessons/rms-norm/2026-12-02-norm-ops/compare.py's
# format). Runs inside device.sh:
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/logits.sh compile:gate.rs rms-norm:norm.rs'
# MODELS (default: smollm2-135m-instruct random:qwen3-8b), TOKENS (32).
set -uo pipefail
OUT=${OUT:-/tmp/out}
o=/tmp/logits
rm -rf "$o"
mkdir -p "$o" "$OUT"
trap 'tar czf "$OUT/logits.tar.gz" -C /tmp logits' EXIT
key() { echo "$QUEST_PREBUILT/$(sha256sum "$1" | cut -c1-16)"; }
export QUEST_PROMPT="What is the capital of France? Answer in one sentence."
export QUEST_MAX_TOKENS=${TOKENS:-32}
for pair in "$@"; do
  lesson=${pair%%:*} file=${pair#*:}
  cp "exercises/$lesson/$file" "/tmp/honest-$lesson.rs"
  quest reset "$lesson" --yes > /dev/null
  declare -A bin=([solution]=$(key "solutions/$lesson/$file") [honest]=$(key "/tmp/honest-$lesson.rs")
    [start]=$(key "exercises/$lesson/$file"))
  for model in ${MODELS:-smollm2-135m-instruct random:qwen3-8b}; do
    d=$o/$lesson-${model//[:\/]/-}
    mkdir -p "$d"
    QUEST_MODEL=$model QUEST_PIECES=quest QUEST_REPORT=$d/reference.json QUEST_LOGITS=$d/reference.f32 \
      "${bin[solution]}" > "$d/reference.txt" 2>&1
    forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$d/reference.json")
    for v in solution honest start; do
      QUEST_MODEL=$model QUEST_FORCE=$forced QUEST_REPORT=$d/$v.json QUEST_LOGITS=$d/$v.f32 \
        "${bin[$v]}" > "$d/$v.txt" 2>&1
    done
    python3 - "$d" <<'PY' | tee "$d/logits.txt"
import json, struct, sys
d = sys.argv[1]
def load(name):
    steps = len(json.load(open(f"{d}/{name}.json"))["tokens"])
    data = open(f"{d}/{name}.f32", "rb").read()
    values = struct.unpack(f"<{len(data) // 4}f", data)
    vocab = len(values) // steps
    return [values[i * vocab:(i + 1) * vocab] for i in range(steps)]
argmax = lambda row: max(range(len(row)), key=row.__getitem__)
ref = load("reference")
print(d.rsplit("/", 1)[1], "largest logit", round(max(max(abs(x) for x in r) for r in ref), 3))
for v in ["solution", "honest", "start"]:
    y = load(v)
    gaps = [max(abs(a - b) for a, b in zip(r, s)) for r, s in zip(ref, y)]
    step = max(range(len(gaps)), key=gaps.__getitem__)
    same = sum(argmax(r) == argmax(s) for r, s in zip(ref, y))
    print(f"{v:<9} largest difference {gaps[step]:.3e} at step {step}; step 0: {gaps[0]:.3e}; same argmax {same}/{len(ref)}")
PY
  done
  unset bin
done
