#!/usr/bin/env bash
# The GPU figures of session 6 (2026-12-01) on the H200: quest's decode attention kernel
# (lm::attend: the heads, the cache write and attention in one node; issue #12's host cost
# per layer), in the last call of docs/gpu/carry.sh's pipeline (inside docs/gpu/device.sh:
# quest's CUDA build on PATH, a course copy as QUEST_ROOT, SmolLM2 carried):
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session6.sh check kernels'
# Parts (each under `timeout`, outputs in $OUT/session6-<parts>.tar.gz):
#   check    docs/gpu/qmv_check.sh on SmolLM2's real weights for each kernel in CHECKS
#            (default "attend qkv matvec"), then mlx-path with QUEST_ATTEND=quest and
#            QUEST_QMV=quest: the text must name Paris
#   kernels  `quest qmv --kernel K --shapes all` for K in KERNELS (default "attend matvec"):
#            speed interleaved in one process, logits compared step by step
#   peer     `quest fit --peer --shapes all` (quest's loop and mlx-lm's generate_step, rounds
#            interleaved in one run) for each setting in SETTINGS (default: quest's
#            attention and matvec kernels on), separated by `;`, each under LIMIT s
#   slope    decode tok/s as the context grows (`quest slope`, SLOPE_SHAPES, CONTEXTS), with
#            MLX's attention and with quest's kernel, alternated processes, REPS times: where
#            quest's one-block-per-head kernel stops paying (lm::attend::MAX_POSITIONS)
#   journey  the journey lessons' exercises (prebuilt) on the real SmolLM2, 16 tokens each,
#            with quest's defaults
set -uo pipefail
T=${TOKENS:-64}
R=${ROUNDS:-3}
o=/tmp/session6
mkdir -p "$o"
tag=$(echo "$@" | tr ' ' '-')
finish() { tar czf "$OUT/session6-$tag.tar.gz" -C /tmp session6; }
trap finish EXIT
step() { echo; echo "== $* ($(date -u +%T))"; }
for part in "$@"; do
  case $part in
    check)
      step check
      for k in ${CHECKS:-attend qkv matvec}; do
        KERNEL=$k OUT=$o timeout 240 bash docs/gpu/qmv_check.sh 2>&1 | tail -12
        echo "qmv_check.sh KERNEL=$k: rc=${PIPESTATUS[0]}"
      done 2>&1 | tee -a "$o/check.txt"
      QUEST_ATTEND=quest QUEST_QMV=quest timeout 60 quest run mlx-path --no-lesson \
        --max-tokens 16 2>&1 | grep -E "^(Output|Model|Decode)" | tee -a "$o/check.txt"
      ;;
    kernels)
      step kernels
      for k in ${KERNELS:-attend matvec}; do
        echo "-- quest qmv --kernel $k"
        timeout 300 quest qmv --kernel "$k" --shapes all --max-tokens "$T" --rounds "$R" 2>&1 | grep -v '^quest:'
        cp target/quest-bench/qmv-$k-cuda.json "$o/" 2>/dev/null
      done 2>&1 | tee -a "$o/kernels.txt"
      ;;
    peer)
      step peer
      IFS=';' read -ra settings <<< "${SETTINGS:-QUEST_ATTEND=quest QUEST_QMV=quest}"
      n=0
      for setting in "${settings[@]}"; do
        n=$((n + 1))
        echo "-- $setting"
        env $setting QUEST_PEER_PYTHON=python3 timeout "${LIMIT:-300}" quest fit --peer --shapes "${SHAPES:-all}" \
          --max-tokens "$T" --rounds "$R" 2>&1 | grep -v '^quest:'
        cp target/quest-bench/fit-cuda.json "$o/fit-peer-$n.json" 2>/dev/null
      done 2>&1 | tee -a "$o/peer.txt"
      ;;
    slope)
      step slope
      for shape in ${SLOPE_SHAPES:-Qwen3-0.6B Qwen3-8B}; do
        for rep in $(seq "${REPS:-2}"); do
          for way in mlx quest; do
            echo "-- $shape rep $rep QUEST_ATTEND=$way"
            QUEST_ATTEND=$way timeout 150 quest slope --shapes "$shape" \
              --contexts "${CONTEXTS:-64,512,1024,2000}" --max-tokens 32 --rounds 3 2>&1 | grep -v '^quest:'
          done
        done
      done 2>&1 | tee -a "$o/slope.txt"
      ;;
    journey)
      step journey
      for lesson in mapped-lazy kv-cache mlx-path lazy-prefill; do
        echo "-- $lesson"
        timeout 120 quest run "$lesson" --no-lesson --max-tokens 16 2>&1 | grep -E "^(Output|TTFT|Decode|Model)|rror"
      done 2>&1 | tee -a "$o/journey.txt"
      ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
