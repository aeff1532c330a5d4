#!/usr/bin/env bash
# The committed defaults on the H200, after docs/gpu/kept.sh: an exercise hands MLX the
# kernels quest compiled and kept; a warmed benchmark (`quest fit`) lets MLX compile them
# from source once. Fresh processes of `quest run` (first, then cached), MLX's ops for
# contrast, the learner's flow (run, edit, submit, card), and `quest fit --peer`.
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/kept2.sh'
NAME=kept2
# shellcheck source=fresh_lib.sh
source "$(dirname "$0")/fresh_lib.sh"
step "1. fresh processes, $MODEL, $TOKENS tokens"
timed_run run1-first-on-machine TERM=dumb
timed_run run2-kept TERM=dumb
timed_run run3-mlx-ops QUEST_QMV=mlx QUEST_QKV=mlx QUEST_ATTEND=mlx
timed_run run4-kept TERM=dumb
step "2. the learner's flow"
cp solutions/mlx-path/decode_loop.rs exercises/mlx-path/decode_loop.rs
submit_and_card
step "3. one warmed process: quest fit --peer (MLX compiles quest's kernels from source once)"
QUEST_PEER_PYTHON=python3 timeout 150 quest fit --shapes Qwen3-8B,Qwen3-0.6B --peer \
  --max-tokens "$TOKENS" --rounds 3 2>&1 | tee "$o/fit-peer.txt" | tail -22
