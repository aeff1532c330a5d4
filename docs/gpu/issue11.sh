#!/usr/bin/env bash
# Issue #11 on the H200: the learner's own loop on MLX's CUDA backend. Runs inside
# docs/gpu/device.sh (quest's CUDA build on PATH, prebuilt exercises, a course copy as
# QUEST_ROOT, a fresh progress file), as the last of carry.sh's calls:
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/issue11.sh'
# The learner's flow on the 8B shape: `quest run` (the starting hand loop), the edit (the
# solution's idea, copied over the exercise in this course copy), `quest run` again,
# `quest submit` (tokens against the solution, before/after interleaved), `quest card`
# with the medians submit printed. Then the same submit on the real SmolLM2-135M (when
# carried), and mlx-lm's generate_step and the original lesson's Python hand loop
# (src/bench/peer.py) on the same two models, in the same run. Everything lands in $OUT.
set -uo pipefail
MODEL=${MODEL:-random:qwen3-8b}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-5}
o=$OUT
step() { echo; echo "== $*"; }

step quest list
quest list 2>&1 | tee "$o/list.txt"
step "quest run mlx-path --model $MODEL (the starting hand loop)"
quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$TOKENS" 2>&1 | tee "$o/run-before.txt"
step "the learner's edit"
cp solutions/mlx-path/decode_loop.rs exercises/mlx-path/decode_loop.rs
quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$TOKENS" 2>&1 | tee "$o/run-after.txt"
step "quest submit mlx-path --model $MODEL"
quest submit mlx-path --model "$MODEL" --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 | tee "$o/submit-8b.txt"
card=$(grep -o 'quest card mlx-path --before [0-9.]* --after [0-9.]*' "$o/submit-8b.txt" | head -1)
ratio=$(grep -o '(×[0-9.]*)' "$o/submit-8b.txt" | head -1 | tr -d '(×)')
shows=$(python3 -c "import sys; print('yes' if float(sys.argv[1] or 0) >= 1.10 else 'no')" "${ratio:-0}")
step "$card --answer term=fixed --answer shows-here=$shows"
$card --answer term=fixed --answer shows-here="$shows" 2>&1 | tee "$o/card.txt"
quest status 2>&1 | tee -a "$o/card.txt"

if [ -d "$QUEST_CACHE/models/smollm2-135m-instruct" ]; then
  step "quest run mlx-path (the real SmolLM2-135M, the edited loop)"
  quest run mlx-path --no-lesson --max-tokens "$TOKENS" 2>&1 | tee "$o/run-smollm2.txt"
  step "quest submit mlx-path (the real SmolLM2-135M)"
  quest submit mlx-path --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 | tee "$o/submit-smollm2.txt"
fi

# mlx-lm beside them: the Python peer (mlx-lm 0.32.2 on the same MLX), same prompt length
# and token count. The 8B shape's config is the one quest builds; prompt ids as quest fit's.
step "mlx-lm"
n=$(grep -o 'Prompt: [0-9]*' "$o/run-before.txt" | head -1 | grep -o '[0-9]*')
ids=$(python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(1 + (i * 7919) % 1000) for i in range(n)))" "${n:-12}")
shape=$(python3 -c "import sys; print(sys.argv[1].split(':')[1].split('@')[0])" "$MODEL")
quest fit --configs > /tmp/configs.json
config=$(python3 -c "import json, sys; c = json.load(open('/tmp/configs.json')); print(json.dumps(next(v for k, v in c.items() if k.lower() == sys.argv[1].lower())))" "$shape")
python3 src/bench/peer.py --config "$config" --prompt-ids "$ids" --max-tokens "$TOKENS" --rounds "$ROUNDS" > "$o/peer-8b.json"
gguf=$(ls "$QUEST_CACHE"/models/smollm2-135m-instruct/*.gguf 2>/dev/null | head -1)
if [ -n "$gguf" ]; then
  n=$(grep -o 'Prompt: [0-9]*' "$o/run-smollm2.txt" 2>/dev/null | head -1 | grep -o '[0-9]*')
  ids=$(python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(1 + (i * 7919) % 1000) for i in range(n)))" "${n:-40}")
  python3 src/bench/peer.py --gguf "$gguf" --prompt-ids "$ids" --max-tokens "$TOKENS" --rounds "$ROUNDS" > "$o/peer-smollm2.json"
fi
for f in "$o"/peer-*.json; do
  python3 - "$f" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))["results"]
print(sys.argv[1].rsplit("/", 1)[-1], {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})
PY
done 2>&1 | tee "$o/peer.txt"
step summary
grep -h -E 'Decode|Medians|Time to first|×' "$o"/run-*.txt "$o"/submit-*.txt 2>/dev/null
cat "$o/peer.txt"
