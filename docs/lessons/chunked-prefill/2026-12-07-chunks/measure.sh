#!/bin/sh
# The lesson's measurement. First the chunk swept: one `quest run` of the solution a chunk
# (QUEST_PREFILL_CHUNK), the chunks alternated over three passes, each printing the time
# to first token on quest's clock and the prefill's peak as quest's loop read it
# (sweep.txt). Then a learner's prefill (learners.rs) submitted as the exercise at the
# lesson's chunk of 64, interleaved round by round against the same binary prefilling in
# one call (QUEST_PIECES=quest) (submit.txt).
# Run from the repository root; writes the .txt files beside this script.
set -eu
here=docs/lessons/chunked-prefill/2026-12-07-chunks
export QUEST_HOME=$(mktemp -d)
keep=$(mktemp)
cp exercises/chunked-prefill/prefill.rs "$keep"
trap 'cp "$keep" exercises/chunked-prefill/prefill.rs' EXIT
q() { flock -x /tmp/quest-cpu.lock target/debug/quest "$@"; }
cp solutions/chunked-prefill/prefill.rs exercises/chunked-prefill/prefill.rs
: > "$here/sweep.txt"
for pass in 1 2 3; do
  for chunk in 16 32 64 128 256 1024; do
    echo "== pass $pass, chunk $chunk" >> "$here/sweep.txt"
    QUEST_PREFILL_CHUNK=$chunk q run chunked-prefill --no-lesson --max-tokens 2 2>&1 \
      | grep -E "^Prompt|^Time to first token|^Prefill's peak" >> "$here/sweep.txt"
  done
done
cp "$here/learners.rs" exercises/chunked-prefill/prefill.rs
q submit chunked-prefill --rounds 5 2>&1 | tee "$here/submit.txt"
# The model's shape, from its GGUF header (model.txt): the vocabulary the logits span.
python3 "$here/gguf_facts.py" "$HOME/.cache/quest/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf" > "$here/model.txt"
