#!/usr/bin/env bash
# The lazy-prefill phases, interleaved: ROUNDS rounds (default 5), each a fresh process of
# the one-call prefill then one of the split, as a learner's `quest run` is a fresh process.
#   QUEST_LAB_SOURCE=$PWD/docs/lessons/lazy-prefill/2026-12-02-phases/phases.rs cargo build -p quest-lab
#   cp target/debug/quest-lab /tmp/bins/phases
#   BIN=/tmp/bins/phases bash docs/lessons/lazy-prefill/2026-12-02-phases/run.sh > docs/lessons/lazy-prefill/2026-12-02-phases/rounds.jsonl
set -euo pipefail
for round in $(seq 1 "${ROUNDS:-5}"); do
  for mode in one split; do
    QUEST_PHASES=$mode "$BIN" 2>/dev/null | sed "s/^{/{\"round\":$round,/"
  done
done
