#!/usr/bin/env bash
# A first token held back, on this CPU: mlx-path's solution (`solution`) and the same with
# `timer.first_token(first)` moved below the decode loop, beside the other tokens (`held`),
# under the quest before its clock bounded the decode by the forward calls (BEFORE, a quest
# binary built from the commit before) and this one (AFTER), each `quest run` a fresh
# process, alternated ROUNDS rounds. SmolLM2-135M, 32 tokens. Run from the checkout:
#
#   BEFORE=/tmp/quest-before AFTER=target/debug/quest ROUNDS=3 \
#     flock -x /tmp/quest-cpu.lock bash docs/cpu/2026-12-07-held-back/measure.sh > OUT.txt
#
# With COURSE=<a course root holding the sleepy fixture lesson>, also the line's cost of the
# forward calls' mark: the sleepy fixture's solution (steps that take no time) handing over
# 5,000 tokens, without and with `quest::line::asked()` in each step, on AFTER (a run of
# 100,000 per-token times runs out of memory in the growth's pairwise slope). TRICK=0
# skips the first part.
set -euo pipefail
ROUNDS=${ROUNDS:-3}
ex=exercises/mlx-path/decode_loop.rs
cp "$ex" /tmp/quest-held-keep.rs
trap 'cp /tmp/quest-held-keep.rs "$ex"' EXIT
held() {
  python3 - solutions/mlx-path/decode_loop.rs "$ex" <<'PY'
import sys
s = open(sys.argv[1]).read()
first, done = "        timer.first_token(first);\n", "        timer.done();\n"
assert first in s and done in s
open(sys.argv[2], "w").write(s.replace(first, "").replace(done, first + done))
PY
}
run() { # binary label
  QUEST_HOME=$(mktemp -d) NO_COLOR=1 "$1" run mlx-path --no-lesson 2>/dev/null |
    grep -E "^(Time to first token|Decode):" | sed "s/^/$2 /"
}
for round in $(seq "$ROUNDS"); do
  [ "${TRICK:-1}" = 0 ] && break
  echo "# round $round"
  cp solutions/mlx-path/decode_loop.rs "$ex"
  run "$BEFORE" "before solution"
  run "$AFTER" "after solution"
  held
  run "$BEFORE" "before held"
  run "$AFTER" "after held"
done

if [ -n "${COURSE:-}" ]; then
  sleepy=$COURSE/exercises/sleepy/main.rs
  cp "$COURSE/solutions/sleepy/main.rs" /tmp/quest-sleepy-plain.rs
  sed 's/^        let next = forward/        quest::line::asked();\n        let next = forward/' \
    /tmp/quest-sleepy-plain.rs > /tmp/quest-sleepy-asked.rs
  grep -q 'quest::line::asked();' /tmp/quest-sleepy-asked.rs
  for round in $(seq "$ROUNDS"); do
    echo "# channel round $round"
    for kind in plain asked; do
      cp "/tmp/quest-sleepy-$kind.rs" "$sleepy"
      QUEST_ROOT=$COURSE QUEST_HOME=$(mktemp -d) NO_COLOR=1 "$AFTER" run sleepy --no-lesson \
        --max-tokens 5000 2>/dev/null | grep -E "^Decode:" | sed "s/^/$kind /"
    done
  done
fi
