#!/usr/bin/env bash
# quest's CUDA kernels compiled once and kept on disk (lm::precompiled), on the H200, every
# step a fresh process as the learner runs it. Runs inside docs/gpu/device.sh, as the last of
# carry.sh's calls:
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/kept.sh'
# 1. `quest run mlx-path` on the 8B shape, each a fresh process timed from the shell: the
#    first on this machine (MLX compiles its own kernels, quest compiles and keeps its own),
#    again twice (quest's kernels read from the cache), with MLX's ops
#    (QUEST_QMV=mlx QUEST_QKV=mlx QUEST_ATTEND=mlx), with MLX compiling quest's kernels from
#    source (QUEST_KERNEL_CACHE=off); 256 tokens, cached kernels and MLX's ops.
# 2. quest's kernels through the kept path against MLX's ops, logits step by step and speed
#    (`quest qmv`, one process, Qwen3-0.6B and 8B shapes).
# 3. The learner's flow: run, the edit, run, submit (interleaved fresh processes), card.
# 4. One warmed process (`quest fit --peer`): kept kernels, and QUEST_KERNEL_CACHE=off.
# Everything comes back as $OUT/kept.tar.gz.
NAME=kept
# shellcheck source=fresh_lib.sh
source "$(dirname "$0")/fresh_lib.sh"
mlx_ops=(QUEST_QMV=mlx QUEST_QKV=mlx QUEST_ATTEND=mlx)

step "1. fresh processes, $MODEL, $TOKENS tokens"
timed_run run1-first-on-machine TERM=dumb
timed_run run2-kept TERM=dumb
timed_run run3-kept TERM=dumb
timed_run run4-mlx-ops "${mlx_ops[@]}"
timed_run run5-source-compiled QUEST_KERNEL_CACHE=off
timed_run run6-kept TERM=dumb
timed_run run7-mlx-ops "${mlx_ops[@]}"
N=256 timed_run run8-kept-256 TERM=dumb
N=256 timed_run run9-mlx-ops-256 "${mlx_ops[@]}"
N=256 timed_run run10-kept-256 TERM=dumb

step "2. quest qmv: the kept kernels against MLX's ops"
for k in matvec qkv attend; do
  timeout 100 quest qmv --kernel "$k" --shapes Qwen3-0.6B,Qwen3-8B --max-tokens 32 --rounds 2 2>&1 | tee "$o/qmv-$k.txt" | tail -8
done

step "3. the learner's flow"
quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$TOKENS" 2>&1 | tee "$o/flow-run-before.txt" | tail -6
cp solutions/mlx-path/decode_loop.rs exercises/mlx-path/decode_loop.rs
quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$TOKENS" 2>&1 | tee "$o/flow-run-after.txt" | tail -6
submit_and_card

step "4. one warmed process: quest fit --peer, kept kernels, then compiled from source"
QUEST_PEER_PYTHON=python3 timeout 150 quest fit --shapes Qwen3-8B,Qwen3-0.6B --peer \
  --max-tokens "$TOKENS" --rounds 3 2>&1 | tee "$o/fit-peer-kept.txt" | tail -22
QUEST_KERNEL_CACHE=off timeout 90 quest fit --shapes Qwen3-8B,Qwen3-0.6B \
  --max-tokens "$TOKENS" --rounds 3 2>&1 | tee "$o/fit-source.txt" | tail -14
