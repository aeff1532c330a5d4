#!/usr/bin/env bash
# Each inside-track lesson's honest edit, written unlike the solution (each <lesson>.patch
# turns the lesson's solution into it), through
# `quest run` then `quest submit` (one round, 8 tokens; 4 on the Qwen3.5-shaped model), each a
# fresh process, in a copy of the course with a progress file of its own:
#   bash docs/lessons/pieces/2026-12-06-piece-check/honest/run.sh > docs/lessons/pieces/2026-12-06-piece-check/honest/summary.txt
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../../../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$REPO/lessons" "$REPO/solutions" "$REPO/exercises" "$WORK/"
export QUEST_ROOT=$WORK QUEST_HOME=$WORK/home
Q=${QUEST:-$REPO/target/debug/quest}
for f in rope/rope.rs rms-norm/norm.rs attention/attention.rs mlp/mlp.rs dequant-matvec/matvec.rs linear-attention/delta.rs sampling/sampling.rs; do
  id=${f%%/*}
  patch -s -o "$WORK/exercises/$f" "$REPO/solutions/$f" "$HERE/$id.patch"
  args="--max-tokens 8"
  [ "$id" = linear-attention ] && args="--max-tokens 4"
  (cd "$WORK" && $Q run "$id" --no-lesson $args) > "$WORK/$id.run" 2>&1; rr=$?
  (cd "$WORK" && $Q submit "$id" $args --rounds 1) > "$WORK/$id.submit" 2>&1; rs=$?
  echo "$id run=$rr submit=$rs $(grep -h 'shapes right' "$WORK/$id.run" | head -1) | $(grep -h 'every logit within\|draws:' "$WORK/$id.submit" | head -1 | cut -c1-120)"
done
