#!/bin/sh
# The lesson's measurement: the solution (preallocated in steps of 256) and a cache that
# concatenates every step, each submitted as the exercise, each interleaved round by round
# against quest's own cache in the same binary (QUEST_PIECES=quest), on quest's clock.
# Run from the repository root; writes submit-preallocated.txt and submit-concatenating.txt.
set -eu
here=docs/lessons/kv-cache-by-hand/2026-12-07-cache-speed
export QUEST_HOME=$(mktemp -d)
keep=$(mktemp)
cp exercises/kv-cache-by-hand/cache.rs "$keep"
trap 'cp "$keep" exercises/kv-cache-by-hand/cache.rs' EXIT
for variant in preallocated concatenating; do
  cp "$here/$variant.rs" exercises/kv-cache-by-hand/cache.rs
  flock -x /tmp/quest-cpu.lock target/debug/quest submit kv-cache-by-hand \
    --max-tokens 128 --rounds 3 2>&1 | tee "$here/submit-$variant.txt"
done
