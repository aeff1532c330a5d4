#!/usr/bin/env bash
# mlx-path's starting loop, 8 tokens, alternated: `quest run` (quest's clock, a warm-up
# forward before the prompt) and the same built exercise run by hand (its own timer, no
# warm-up: the process's first forward is inside its TTFT). From the repository root:
#   bash docs/cpu/2026-12-06-warm-up/measure.sh > docs/cpu/2026-12-06-warm-up/runs.txt
set -u
for round in 1 2 3 4 5; do
  stamp=$(mktemp); sleep 0.01
  echo "# round $round: quest run mlx-path --no-lesson --max-tokens 8 (warm-up)"
  target/debug/quest run mlx-path --no-lesson --max-tokens 8 2>&1 | grep -E "^(Output|Load|Time to first|Decode)"
  bin=$(find target/debug/quest-lab-builds -maxdepth 1 -type f -newer "$stamp" -printf '%T@ %p\n' | sort -n | head -1 | cut -d' ' -f2)
  rm -f "$stamp"
  echo "# round $round: the same exercise by hand, QUEST_MAX_TOKENS=8 (no warm-up)"
  QUEST_MAX_TOKENS=8 "$bin" 2>&1 | grep -E "Paris|^load"
done
