#!/usr/bin/env bash
# Issue #11 on the H200: the learner's own loop on MLX's CUDA backend. Runs inside
# docs/gpu/device.sh (quest's CUDA build on PATH, prebuilt exercises, a course copy as
# QUEST_ROOT, a fresh progress file), as the last of carry.sh's calls:
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/issue11.sh'
# The learner's flow on the 8B shape: `quest run` (the starting hand loop), the edit (the
# solution's idea, copied over the exercise in this course copy), `quest run` again,
# `quest submit` (tokens against the solution, before/after interleaved), `quest card`
# with the medians submit printed. Then `quest run` and `quest submit` on the real
# SmolLM2-135M (when carried), and `quest bench` on both models: the Rust loops beside
# the original lesson's Python hand loop and mlx-lm's generate_step (mlx-lm 0.32.2 on the
# same mlx-cuda-13, the device's python3: QUEST_PEER_PYTHON). All in one run; the outputs
# come back as $OUT/issue11.tar.gz (the device tool brings back at most 8 files).
set -uo pipefail
MODEL=${MODEL:-random:qwen3-8b}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-5}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH=${BENCH:-1}   # 0: the learner's flow alone (run, edit, run, submit, card)
o=/tmp/issue11
rm -rf "$o"
mkdir -p "$o"
# Whatever happens, what ran comes back (a command stopped by `timeout` too: see below).
finish() {
  cp -r "$QUEST_HOME" "$o/progress" 2>/dev/null
  tar czf "$OUT/issue11.tar.gz" -C /tmp issue11
}
trap finish EXIT
trap 'exit 143' TERM
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

[ "$BENCH" = 1 ] || exit 0
export QUEST_PEER_PYTHON=python3
step "quest bench mlx-path --model $MODEL"
quest bench mlx-path --model "$MODEL" --max-tokens "$TOKENS" --rounds "$BENCH_ROUNDS" \
  --out "$o/bench-8b" 2>&1 | tee "$o/bench-8b.txt"
if [ -d "$QUEST_CACHE/models/smollm2-135m-instruct" ]; then
  step "quest bench mlx-path (the real SmolLM2-135M)"
  quest bench mlx-path --max-tokens "$TOKENS" --rounds "$BENCH_ROUNDS" \
    --out "$o/bench-smollm2" 2>&1 | tee "$o/bench-smollm2.txt"
fi
step summary
grep -h -E 'Decode|medians|Medians|×' "$o"/run-*.txt "$o"/submit-*.txt 2>/dev/null
grep -h -E '^(Rust|your|Python|mlx-lm)' "$o"/bench-*.txt 2>/dev/null
