#!/bin/sh
# rms-norm's measurements, as run for the lesson (from the repository root):
#   sh docs/lessons/rms-norm/2026-12-02-norm-ops/measure.sh
# Builds each variant as the lab binary (the profile quest builds exercises with here:
# debug), then (1) logits: quest's pieces free-running, every other variant teacher-forced
# on its tokens, each step's logits written (QUEST_FORCE, QUEST_LOGITS), under this CPU's
# OpenBLAS kernels and under Haswell's (OPENBLAS_CORETYPE); (2) speed: a decode of 64
# tokens with each norm, interleaved rounds, decode tok/s from each report.
set -e
here=docs/lessons/rms-norm/2026-12-02-norm-ops
out=${OUT:-/tmp/rms-norm-measure}
mkdir -p "$out"
build() { QUEST_LAB_SOURCE="$PWD/$2" cargo build -q -p quest-lab && cp target/debug/quest-lab "$out/$1"; }
build solution solutions/rms-norm/norm.rs
build start exercises/rms-norm/norm.rs
for v in quest_pieces quest_default other_order no_eps; do build $v $here/$v.rs; done
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="What is the capital of France? Answer in one sentence."
QUEST_MAX_TOKENS=32 QUEST_REPORT=$out/reference.json QUEST_LOGITS=$out/reference.f32 "$out/quest_pieces" >/dev/null
forced=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$out/reference.json")
for v in solution other_order no_eps start; do
  QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v.json QUEST_LOGITS=$out/$v.f32 "$out/$v" >/dev/null
done
for v in quest_pieces solution other_order; do
  OPENBLAS_CORETYPE=Haswell QUEST_MAX_TOKENS=32 QUEST_FORCE=$forced QUEST_REPORT=$out/$v-haswell.json QUEST_LOGITS=$out/$v-haswell.f32 "$out/$v" >/dev/null
done
python3 $here/compare.py "$out" > $here/logits.txt
rounds=${ROUNDS:-7}
for r in $(seq 1 $rounds); do
  for v in quest_default quest_pieces solution; do
    QUEST_MAX_TOKENS=64 QUEST_REPORT=$out/speed.json "$out/$v" >/dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], round(r['decode_tok_s'], 3), r['blas'])" "$out/speed.json" $r $v
  done
done > $here/speed-rounds.txt
python3 $here/summarize.py $here/speed-rounds.txt > $here/speed.txt
