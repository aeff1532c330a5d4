#!/bin/sh
# The lesson's measurement: a learner's speculator (learners.rs) submitted as the exercise,
# interleaved round by round against the same binary proposing nothing (QUEST_PIECES=quest),
# on quest's clock, on the lesson's prompt (a passage to copy: lookup pays) and on a
# question whose answer is not in the prompt (lookup does not pay); then one `quest run`
# of each prompt, for the forward calls quest's clock counted.
# Run from the repository root; writes the .txt files beside this script.
set -eu
here=docs/lessons/prompt-lookup/2026-12-07-two-prompts
question="What is the capital of France? Answer in one sentence."
export QUEST_HOME=$(mktemp -d)
keep=$(mktemp)
cp exercises/prompt-lookup/speculate.rs "$keep"
trap 'cp "$keep" exercises/prompt-lookup/speculate.rs' EXIT
cp "$here/learners.rs" exercises/prompt-lookup/speculate.rs
q() { flock -x /tmp/quest-cpu.lock target/debug/quest "$@"; }
q submit prompt-lookup --rounds 5 2>&1 | tee "$here/submit-passage.txt"
q submit prompt-lookup --rounds 5 --prompt "$question" 2>&1 | tee "$here/submit-question.txt"
q run prompt-lookup --no-lesson 2>&1 | tee "$here/run-passage.txt"
q run prompt-lookup --no-lesson --prompt "$question" 2>&1 | tee "$here/run-question.txt"
