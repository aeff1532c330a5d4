#!/usr/bin/env bash
# On the GPU device, from the carried course (docs/gpu/carry.sh with COURSE a copy whose
# mlx-path exercise is the solution with `timer.done()` above the token reads, and whose rope
# exercise is docs/lessons/pieces/2026-12-06-piece-check/honest/rope/rope.rs):
#   bash .gpu2/<N>/device.sh run 'bash docs/gpu/2026-12-06-ttft-split/measure.sh'
# Writes under $OUT: the first run on the machine, then ROUNDS rounds alternating the early
# timer and the solution (each `quest run` a fresh process: load, warm-up and time to first
# token on quest's clock), the honest rope's piece check in float16, and `quest bench`
# (PIECES=0, BENCH=0 leave those out).
set -uo pipefail
cd "$QUEST_ROOT"
M=${MODEL:-random:qwen3-8b}
ROUNDS=${ROUNDS:-5}
early=$(ls exercises/mlx-path/*.rs)
solution=solutions/mlx-path/$(basename "$early")
kept=$(mktemp)
cp "$early" "$kept"
diff -u "$solution" "$early" > "$OUT/early.patch"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
run() { quest run mlx-path --no-lesson --model "$M" --max-tokens 64 2>&1 | grep -E "Load|Time to first|Decode|disagree|timer" ; }
echo "## first run on this machine (the solution)" > "$OUT/runs.txt"
cp "$solution" "$early"; run >> "$OUT/runs.txt"
for r in $(seq 1 "$ROUNDS"); do
  cp "$kept" "$early"; echo "## round $r: timer.done() above the token reads" >> "$OUT/runs.txt"; run >> "$OUT/runs.txt"
  cp "$solution" "$early"; echo "## round $r: the solution" >> "$OUT/runs.txt"; run >> "$OUT/runs.txt"
done
if [ "${PIECES:-1}" = 1 ]; then
  quest run rope --no-lesson --model random:qwen3-0.6b --max-tokens 8 > "$OUT/rope.txt" 2>&1
fi
if [ "${BENCH:-1}" = 1 ]; then
  timeout 240 env QUEST_PEER_PYTHON=python3 quest bench mlx-path --model "$M" --max-tokens 64 --rounds 2 > "$OUT/bench.txt" 2>&1
fi
echo done >> "$OUT/runs.txt"
