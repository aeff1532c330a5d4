#!/usr/bin/env bash
# The learner's path on the H200, every step a fresh process as the learner runs it. Runs
# inside docs/gpu/device.sh (quest's CUDA build on PATH, prebuilt exercises, a course
# copy as QUEST_ROOT, a fresh progress file), as the last of carry.sh's calls:
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/fresh.sh'
# 1. Fresh processes of `quest run mlx-path` on the 8B shape, each timed from the shell
#    (wall seconds beside quest's own TTFT and decode): the first on this machine (MLX
#    compiles its own kernels and keeps them on disk), again, with quest's CUDA kernels
#    turned on (MLX compiles them again in every process), and 256 tokens with them.
# 2. The learner's flow: run (the starting loop), the edit (the solution copied over the
#    exercise), run, submit (interleaved fresh processes), card with submit's medians.
# 3. For contrast, quest's loop in one warmed process (`quest fit`, its kernels on) beside
#    mlx-lm's generate_step (--peer, the device's python3).
# Everything comes back as $OUT/fresh.tar.gz.
NAME=fresh
# shellcheck source=fresh_lib.sh
source "$(dirname "$0")/fresh_lib.sh"
kernels_on=(QUEST_QMV=quest QUEST_QKV=quest QUEST_ATTEND=quest)

step "1. fresh processes, $MODEL, $TOKENS tokens"
timed_run run1-defaults-first-on-machine TERM=dumb
timed_run run2-defaults TERM=dumb
timed_run run3-defaults TERM=dumb
timed_run run4-quest-kernels "${kernels_on[@]}"
timed_run run5-quest-kernels "${kernels_on[@]}"
N=256 timed_run run6-quest-kernels-256 "${kernels_on[@]}"
N=256 timed_run run7-defaults-256 TERM=dumb

step "2. the learner's flow"
quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$TOKENS" 2>&1 | tee "$o/flow-run-before.txt"
cp solutions/mlx-path/decode_loop.rs exercises/mlx-path/decode_loop.rs
quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$TOKENS" 2>&1 | tee "$o/flow-run-after.txt"
submit_and_card
quest status 2>&1 | tee -a "$o/flow-card.txt"

step "3. one warmed process: quest fit (its kernels on) beside mlx-lm"
QUEST_PEER_PYTHON=python3 timeout 240 quest fit --shapes Qwen3-8B,Qwen3-0.6B --peer \
  --max-tokens "$TOKENS" --rounds 3 2>&1 | tee "$o/fit-peer.txt"
cp "$QUEST_ROOT"/target/quest-bench/fit-cuda.json "$o/" 2>/dev/null

step summary
grep -H -E '^(Decode|Time to first|quest.s own|wall_s)' "$o"/run*.txt
grep -h -E 'median|×' "$o"/flow-submit.txt
