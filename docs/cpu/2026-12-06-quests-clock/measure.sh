#!/usr/bin/env bash
# quest's clock against the exercise's own timer, and against the quest before it (whose
# numbers were the exercise's own timer's), on this CPU: mlx-path's solution, 32 tokens,
# SmolLM2-135M, each run a fresh `quest run` process, BEFORE and AFTER alternated.
#
#   BEFORE=/path/to/old/checkout AFTER=/path/to/this/checkout ROUNDS=5 \
#     bash docs/cpu/2026-12-06-quests-clock/measure.sh > OUT.txt
#
# Each checkout runs its own solution (the API changed: `run.prompt()?`,
# `timer.first_token(first)`), copied over its exercise and put back after.
set -euo pipefail
ROUNDS=${ROUNDS:-5}
run() { # checkout label
  local dir=$1 label=$2 ex=$1/exercises/mlx-path/decode_loop.rs
  cp "$ex" /tmp/quest-clock-keep.rs
  cp "$dir/solutions/mlx-path/decode_loop.rs" "$ex"
  (cd "$dir" && QUEST_HOME=$(mktemp -d) NO_COLOR=1 target/debug/quest run mlx-path --no-lesson 2>/dev/null) |
    grep -E "^(Time to first token|Decode):" | sed "s/^/$label /"
  cp /tmp/quest-clock-keep.rs "$ex"
}
for round in $(seq "$ROUNDS"); do
  echo "# round $round"
  run "$BEFORE" before
  run "$AFTER" after
done

# The same solution with `timer.done()` moved above the token reads (EARLY=1), on AFTER
# alone: quest's clock against the learner's early timer.
if [ -n "${EARLY:-}" ]; then
  ex=$AFTER/exercises/mlx-path/decode_loop.rs
  cp "$ex" /tmp/quest-clock-keep.rs
  python3 - "$AFTER/solutions/mlx-path/decode_loop.rs" "$ex" <<'PY'
import sys
s = open(sys.argv[1]).read()
read = "        let mut tokens = vec![first];\n"
assert read in s and "        timer.done();\n" in s
s = s.replace("        timer.done();\n", "").replace(read, "        timer.done(); // early: before the tokens are read\n" + read)
open(sys.argv[2], "w").write(s)
PY
  for round in $(seq "$ROUNDS"); do
    echo "# early done, round $round"
    (cd "$AFTER" && QUEST_HOME=$(mktemp -d) NO_COLOR=1 target/debug/quest run mlx-path --no-lesson 2>/dev/null) |
      grep -E "^(Time to first token|Decode):|came before" | cut -c1-160
  done
  cp /tmp/quest-clock-keep.rs "$ex"
fi
