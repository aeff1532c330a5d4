#!/usr/bin/env bash
# mlp's speed measurements, as run for the lesson (from the repository root):
#   bash docs/lessons/mlp/2026-12-03-share/measure.sh
# Builds, as the lab binary (debug, as quest builds exercises here), the lesson's solution
# and mlp_width.rs (measurement only). Then interleaved rounds, each a fresh process
# decoding 64 tokens on the CPU, decode tok/s from each report:
#   quest_pieces  the real SmolLM2-135M, quest's compiled swiglu (QUEST_PIECES=quest)
#   solution      the real model with the lesson's solution as its gate
#   random_1536   random weights in SmolLM2-135M's shape, the MLP as the model's
#   random_32     the same with the MLP 32 wide instead of 1536: its work all but removed
set -euo pipefail
here=docs/lessons/mlp/2026-12-03-share
out=${OUT:-/tmp/mlp-share}
mkdir -p "$out"
QUEST_LAB_SOURCE="$PWD/solutions/mlp/mlp.rs" cargo build -q -p quest-lab
cp target/debug/quest-lab "$out/solution"
QUEST_LAB_SOURCE="$PWD/$here/mlp_width.rs" cargo build -q -p quest-lab
cp target/debug/quest-lab "$out/mlp_width"
export QUEST_PROMPT="What is the capital of France? Answer in one sentence." QUEST_MAX_TOKENS=64
run() { # name, env..., binary
  local name=$1; shift
  env QUEST_REPORT=$out/speed.json "$@" >/dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], round(r['decode_tok_s'], 3), r['weight_bytes_per_token'], r['generated_tokens'], repr(r['blas']))" "$out/speed.json" "$round" "$name"
}
rounds=${ROUNDS:-7}
for round in $(seq 1 $rounds); do
  run quest_pieces QUEST_MODEL=smollm2-135m-instruct QUEST_PIECES=quest "$out/solution"
  run solution QUEST_MODEL=smollm2-135m-instruct "$out/solution"
  run random_1536 QUEST_MODEL=random:smollm2-135m QUEST_MLP_WIDTH=1536 "$out/mlp_width"
  run random_32 QUEST_MODEL=random:smollm2-135m QUEST_MLP_WIDTH=32 "$out/mlp_width"
done > $here/speed-rounds.txt
python3 $here/summarize.py $here/speed-rounds.txt > $here/speed.txt
