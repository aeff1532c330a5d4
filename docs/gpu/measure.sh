#!/usr/bin/env bash
# quest's GPU measurements, on the device machine. Runs inside docs/gpu/device.sh (quest's
# CUDA build on PATH, the prebuilt exercises, a course copy as QUEST_ROOT and the working
# folder, a fresh progress file, the device's python3 with mlx / mlx-lm 0.32.2), as the
# last of docs/gpu/carry.sh's calls:
#
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/measure.sh SUBCOMMAND [SUBCOMMAND…]'
#
# The subcommands run in the order given, each a measurement; everything they write lies
# in /tmp/measure (emptied first) and comes back as $OUT/measure-<subcommands>.tar.gz, with
# the progress file and a listing of quest's kept CUDA kernels, whatever happens (a
# command stopped by `timeout` too).
#
# The learner's path, every step a fresh process as the learner runs it (MODEL, TOKENS,
# ROUNDS default random:qwen3-8b, 64, 5):
#   flow           quest list; `quest run mlx-path` (the starting hand loop), the edit (the
#                  solution with a line of the learner's own, `learners_own`: carry it as
#                  COURSE's exercise, so that it is prebuilt), run again, `quest submit` (before and
#                  after interleaved), `quest card` with submit's medians; then run and
#                  submit on the real SmolLM2-135M when carried (MODELS=smollm2-135m-instruct
#                  in carry.sh). BENCH=1 (default) adds `quest bench mlx-path` on both models
#                  beside the Python peers (BENCH_ROUNDS, default 3); BENCH=0 leaves it out.
#   fresh          `quest run` timed from the shell: MLX's ops, the first on the machine and
#                  twice again; quest's kernels compiled by MLX in the process
#                  (QUEST_KERNEL_CACHE=off, QUEST_QMV/QKV/ATTEND=quest) twice; 256 tokens
#                  each way. Then the flow (run, edit, run, submit, card) and one warmed
#                  process beside mlx-lm (`quest fit --peer`, Qwen3-8B and Qwen3-0.6B).
#   kept           `quest run` timed from the shell with quest's kernels kept on disk: the
#                  first on the machine, then read from the cache, against MLX's ops
#                  (QUEST_QMV/QKV/ATTEND=mlx) and against QUEST_KERNEL_CACHE=off, 64 and 256
#                  tokens; `quest kernel` for matvec, qkv and attend; the flow; `quest fit
#                  --peer`, then `quest fit` with QUEST_KERNEL_CACHE=off.
#   kept-defaults  the defaults as they are: `quest run` (first, kept, MLX's ops, kept), the
#                  edit, submit and card, `quest fit --peer`.
# In one process after a warm-up (TOKENS 64; ROUNDS 3 unless said):
#   fit            `quest fit --shapes all` (ROUNDS 5), the Python peers on the same shapes
#                  (as `peers`), and `quest slope`.
#   qmv            `quest kernel` (SHAPES, default all; MODELS, real models, default the
#                  carried SmolLM2; ROUNDS 5), then `quest fit` on FIT (default Qwen3-4B,Qwen3-8B; "" skips
#                  it) with QUEST_QMV=mlx and =quest, and the Python peers on FIT.
#   fits           `quest fit --shapes SHAPES` (default all), one process per binary of BINS
#                  (default quest; paths or names on PATH) and per QUEST_QMV value of QMVS
#                  (default "mlx quest"; "" runs each binary once as it is).
#   alt-qmv        QUEST_QMV=mlx and =quest alternated, one `quest fit` process each, per
#                  shape of SHAPES (default "Qwen3-0.6B Qwen3-4B Qwen3-8B"), PASSES times
#                  (default 1).
#   alt            per shape of SHAPES (default all six) and round (ROUNDS): one `quest fit`
#                  process with MLX's ops (OFF), one with quest's kernels (ON, default
#                  "QUEST_QMV=quest QUEST_QKV=quest QUEST_ATTEND=quest"), one of mlx-lm's
#                  generate_step, alternated so that the three share the machine's state;
#                  medians at the end (alt-medians.txt). OFF_BIN and ON_BIN name the
#                  binary of each (default quest; e.g. OFF_BIN=quest-before OFF=" " ON=" ":
#                  two builds, each with its defaults).
#   peer           `quest fit --peer --shapes SHAPES` (default all: quest's loop and mlx-lm's
#                  generate_step, rounds interleaved in one run) for each setting of SETTINGS
#                  (`;`-separated; default " ": quest's defaults), each under LIMIT s (300).
#   peers          mlx-lm's generate_step and the original lesson's Python hand loop on
#                  PEER_SHAPES (default: every shape of `quest fit --configs`), the same
#                  prompt as quest fit's (python.txt, py-<shape>.json, py-all.json).
#   kernels        `quest kernel --kernel K --shapes QMV_SHAPES` (default all) for K in KERNELS
#                  (default "matvec qkv attend"): speed interleaved in one process,
#                  logits compared step by step.
#   check          docs/gpu/kernel_check.sh on SmolLM2's real weights for each kernel of CHECKS
#                  (default "matvec qkv attend"), then `quest run mlx-path` on it with
#                  RUN_ENV (default: quest's defaults): the text must name Paris.
#   journey        the journey lessons' exercises (prebuilt) on the real SmolLM2, 16 tokens.
#   bench          `quest bench mlx-path` on the real SmolLM2, with the Python peers.
#   batch          `quest batch --shapes BATCH_SHAPES --batch BATCH` (defaults
#                  SmolLM2-135M,Qwen3-4B,Qwen3-8B and 1,4), the order reversed every other
#                  round, under LIMIT s (150).
#   bits           `quest fit --bits 4,8,16 --shapes BITS_SHAPES --group-size GROUP`
#                  (defaults Qwen3-1.7B,Qwen3-8B and 64): each shape made 4-bit (group 32),
#                  then requantized to each width, 16 being dense float16; LIMIT s (170).
#   ceiling        the decode-ceiling lesson as a learner walks it, each step a fresh
#                  process: `quest run decode-ceiling` (the starting code), the solution
#                  copied over the exercise, run again, `quest submit` with the quiz
#                  predicted from that run's values, `quest card`; then `quest fit --shapes
#                  all` (ROUNDS 3), which prints both rates and the per-layer fit
#                  (CEILING_FIT=0 leaves it out).
#   compile        the compile lesson as a learner walks it, each step a fresh process, on
#                  MODEL (random:qwen3-8b) and then on the carried SmolLM2: `quest run
#                  compile` (the starting code: a new compiled silu every call), the
#                  learner's own edit (docs/gpu/own_edit.py, made before carry.sh), run
#                  again, `quest submit` with the quiz predicted, `quest card` with
#                  submit's medians. WALK_MODELS (default: MODEL and SmolLM2) picks the models.
#   streams        the same walk for the streams lesson (a stream of its own against the
#                  default stream).
#   rms-norm       the same walk for the rms-norm lesson (the learner's norm in every layer).
#   ops-cost       the same walk for ops-cost (the norm compiled once: the step's op count).
#   custom-kernel  the same walk for custom-kernel (the norm as the learner's CUDA kernel).
#   matvec-kernel  the same walk for matvec-kernel (the 4-bit product as the learner's CUDA
#                  kernel), then `quest kernel --kernel matvec` on MODEL: MLX's product and
#                  quest's kernel, with the bytes a token, on the same card.
#   host-or-device the same walk for host-or-device (the knee of this machine's own fit).
#   rope, attention, mlp, dequant-matvec, sampling, linear-attention, your-model
#                  the same walk for the inside track's other lessons, on the carried
#                  SmolLM2 (linear-attention: random:qwen3.5-0.8b), the edit own_edit.py's.
#   slope          `quest slope --contexts 256,2048,8192` (CONTEXTS; ROUNDS 5).
#   slope-attend   `quest slope` per shape of SLOPE_SHAPES (default "Qwen3-0.6B Qwen3-8B")
#                  with QUEST_ATTEND=mlx then =quest, REPS times (default 2), CONTEXTS
#                  (default 64,512,1024,2000), 32 tokens × 3 rounds.
#   sweep          MLX's CUDA buffer settings with the last binary of BINS: `quest fit` on
#                  SWEEP_SHAPES (default Qwen3-0.6B,Qwen3-4B,Qwen3-8B; SWEEP_ROUNDS 3) for
#                  each MLX_MAX_OPS_PER_BUFFER of SWEEP, MLX_MAX_MB_PER_BUFFER of SWEEP_MB and
#                  assignment of SWEEP_EXTRA.
#   qmv-sweep      the 4-bit matvec alone, outside MLX (docs/gpu/qmv4_sweep.cu, built with
#                  the device's nvcc): launch shapes, prefetch depth, chunk sums, loads and
#                  a split of k across blocks (gathered in global memory or a cluster),
#                  on every matrix of a Qwen3-8B and a Qwen3-0.6B step, against a copy.
#   steps          where a decode step's time goes, on STEPS_SHAPES (default all six), one
#                  build: `quest fit --peer` (ROUNDS 5: quest's pipelined loop beside mlx-lm's
#                  generate_step, the copy bandwidth measured in the same process, the host's
#                  split: building the graph, then async_eval); then `quest fit` traced with
#                  CUPTI (TRACE_LIB: docs/gpu/trace_build.sh's folder; docs/gpu/cupti_trace.cpp),
#                  kernels only, then with the host's CUDA driver calls, each read by
#                  trace_steps.py (GPU busy µs a step by kernel kind, the GPU's idle µs, the
#                  driver's µs a step); then PASSES (default 2) alternated `quest fit`
#                  processes of AB_OFF and AB_ON (default: the defaults before quest kept its
#                  kernels in every process and committed a step's graph once, against the
#                  defaults), medians in ab-medians.txt. Each part under LIMIT s (300);
#                  PARTS (default "peer trace ab") picks the parts.
#   levers         quest's 4-bit matvec's levers (QUEST_QMV_LEVERS), each against the kernel
#                  without them, in the step's own CUPTI trace (TRACE_LIB, as `steps`): per
#                  setting of LEVERS (default "none x1 banks stream all") one `quest fit`
#                  on LEVER_SHAPES (default Qwen3-8B), traced, kernels only, alternated,
#                  PASSES times (default 2); the matvec by matrix and the pipelined tok/s
#                  and its share of the copy per setting, medians (levers-table.txt); first
#                  `quest kernel --kernel matvec` with every lever on and with none on
#                  CHECK_SHAPES (default Qwen3-0.6B,Qwen3-8B; "" skips it): logits compared.
#   profile        GPU time per kernel kind with ncu (NCU_SHAPES, default
#                  "Qwen3-8B Qwen3-0.6B", NCU_TIMEOUT s each, default 200) over `quest fit
#                  --max-tokens 3 --rounds 1` with the last binary of BINS; ncu_per_token.py
#                  averages the decode steps (ncu serializes kernels: no launch gaps in it).
set -uo pipefail
[ $# -gt 0 ] || { sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2; }
subcommands=" flow fresh kept kept-defaults ceiling compile streams ops-cost custom-kernel matvec-kernel host-or-device rms-norm rope attention dequant-matvec
  linear-attention your-model mlp sampling fit qmv fits alt-qmv alt peer peers kernels check journey bench batch
  bits slope slope-attend sweep qmv-sweep steps levers profile "
for sub in "$@"; do
  case $subcommands in
    *[[:space:]]"$sub"[[:space:]]*) ;;
    *) echo "measure.sh: no subcommand $sub (the list: bash docs/gpu/measure.sh)" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=${MODEL:-random:qwen3-8b}
T=${TOKENS:-64}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
o=/tmp/measure
rm -rf "$o"
mkdir -p "$o"
tag=$(echo "$@" | tr ' ' '-')
finish() {
  cp -r "${QUEST_HOME:-/nonexistent}" "$o/progress" 2>/dev/null
  if [ -d "${QUEST_CACHE:-}/cuda-kernels" ]; then
    ls -la "$QUEST_CACHE/cuda-kernels" > "$o/cache-listing.txt" 2>&1
  fi
  tar czf "$OUT/measure-$tag.tar.gz" -C /tmp measure
}
trap finish EXIT
trap 'exit 143' TERM
step() { echo; echo "== $* ($(date -u +%T))"; }
rounds() { echo "${ROUNDS:-$1}"; } # ROUNDS, else this subcommand's default
# The learner's edit where a flow measures the solution's arithmetic: the solution with a
# line of the learner's own, since quest refuses the solution copied as it is
# (check::same_as_solution), as the tests' `learners_own` does. $1: <lesson>/<file>.
learners_own() {
  { cat "solutions/$1"; printf '\n// A line of the learner'"'"'s own.\nconst _MINE: () = ();\n'; } > "exercises/$1"
}
last_bin() { echo "${BINS:-quest}" | awk '{print $NF}'; }
mlx_ops=(QUEST_QMV=mlx QUEST_QKV=mlx QUEST_ATTEND=mlx)
smollm2() { [ -d "${QUEST_CACHE:-}/models/smollm2-135m-instruct" ]; }

# One fresh `quest run mlx-path` on $MODEL into $o/NAME.txt, its wall time from the shell
# appended ($N tokens when set, else TOKENS); ENV… set for that process only.
timed_run() {
  local name=$1
  shift
  local start end
  start=$(date +%s.%N)
  env "$@" quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "${N:-$T}" > "$o/$name.txt" 2>&1
  end=$(date +%s.%N)
  echo "wall_s $(python3 -c "print(round($end - $start, 2))")" >> "$o/$name.txt"
  grep -E 'Decode|Time to first|quest.s own|wall_s|quest:' "$o/$name.txt"
}

# `quest submit mlx-path` of the exercise as it is (into $o/SUBMIT), then the card with
# submit's medians and the shows-here answer its ratio gives (into $o/CARD).
submit_and_card() {
  local submit=$o/$1 cardfile=$o/$2 r=$3 card ratio shows
  quest submit mlx-path --model "$MODEL" --max-tokens "$T" --rounds "$r" 2>&1 |
    tee "$submit" | grep -E 'round|median|✓|✗'
  card=$(grep -o 'quest card mlx-path --before [0-9.]* --after [0-9.]*' "$submit" | head -1)
  ratio=$(grep -o '(×[0-9.]*)' "$submit" | head -1 | tr -d '(×)')
  shows=$(python3 -c "import sys; print('yes' if float(sys.argv[1] or 0) >= 1.10 else 'no')" "${ratio:-0}")
  echo "$card --answer term=fixed --answer shows-here=$shows"
  $card --answer term=fixed --answer shows-here="$shows" 2>&1 | tee "$cardfile"
}

# The learner's flow: run (the starting loop), the edit, run, submit, card.
learner_flow() {
  local r=$1
  quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$T" 2>&1 | tee "$o/flow-run-before.txt" | tail -6
  learners_own mlx-path/decode_loop.rs
  quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$T" 2>&1 | tee "$o/flow-run-after.txt" | tail -6
  submit_and_card flow-submit.txt flow-card.txt "$r"
}

# One warmed process: quest's loop beside mlx-lm's generate_step on the 8B and 0.6B shapes.
fit_peer() {
  local file=$1 r=$2
  shift 2
  env "$@" QUEST_PEER_PYTHON=python3 timeout 240 quest fit --shapes Qwen3-8B,Qwen3-0.6B --peer \
    --max-tokens "$T" --rounds "$r" 2>&1 | tee "$o/$file" | tail -22
}

# The Python peers (mlx-lm's generate_step, the original lesson's hand loop) on SHAPES…
# (default: every shape quest fit knows), the prompt quest fit uses.
python_peers() {
  local r=$1
  shift
  local prompt shapes config
  "$(last_bin)" fit --configs > "$o/configs.json"
  prompt=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
  shapes=${*:-$(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))))' "$o/configs.json")}
  for shape in $shapes; do
    config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$o/configs.json" "$shape")
    timeout "${PEER_TIMEOUT:-120}" python3 src/bench/peer.py --config "$config" --prompt-ids "$prompt" --max-tokens "$T" \
      --rounds "$r" > "$o/py-$shape.json"
    python3 - "$o/py-$shape.json" "$shape" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], {k: round(statistics.median(r["decode_tok_s"] for r in v), 1) for k, v in d.items()})
PY
  done 2>&1 | tee "$o/python.txt"
  python3 - "$o" > "$o/py-all.tmp" <<'PY' && mv "$o/py-all.tmp" "$o/py-all.json"
import glob, json, os, sys
print(json.dumps({os.path.basename(f)[3:-5]: json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/py-*.json"))
                  if not f.endswith("/py-all.json")}))
PY
}

# `quest fit` on SHAPES with BIN, once per QUEST_QMV value of QMVS ("": once as it is), into
# fit-<label>.txt/json: label the QUEST_QMV value, led by the binary's name when BINS is set.
fits_by_qmv() {
  local shapes=$1 r=$2 qmvs=$3 bin=$4 label
  for k in ${qmvs:-as-is}; do
    label=${BINS:+${bin##*/}}
    if [ "$k" = as-is ]; then set --; else set -- "QUEST_QMV=$k"; label=${label:+$label-}$k; fi
    label=${label:-as-is}
    echo "-- $bin fit $*"
    env "$@" timeout 300 "$bin" fit --shapes "$shapes" --max-tokens "$T" --rounds "$r" 2>&1 | grep -v '^quest:' |
      tee "$o/fit-$label.txt"
    cp target/quest-bench/fit-cuda.json "$o/fit-$label.json" 2>/dev/null
  done
}

flow() {
  local r
  r=$(rounds 5)
  step quest list
  quest list 2>&1 | tee "$o/list.txt"
  step "quest run mlx-path --model $MODEL (the starting hand loop)"
  quest reset mlx-path --yes > /dev/null
  quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$T" 2>&1 | tee "$o/run-before.txt"
  step "the learner's edit"
  learners_own mlx-path/decode_loop.rs
  quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "$T" 2>&1 | tee "$o/run-after.txt"
  step "quest submit mlx-path --model $MODEL, then quest card"
  submit_and_card submit-8b.txt card.txt "$r"
  quest status 2>&1 | tee -a "$o/card.txt"
  if smollm2; then
    step "quest run mlx-path (the real SmolLM2-135M, the edited loop)"
    quest run mlx-path --no-lesson --max-tokens "$T" 2>&1 | tee "$o/run-smollm2.txt"
    step "quest submit mlx-path (the real SmolLM2-135M)"
    quest submit mlx-path --max-tokens "$T" --rounds "$r" 2>&1 | tee "$o/submit-smollm2.txt"
  fi
  [ "${BENCH:-1}" = 1 ] || return 0
  step "quest bench mlx-path --model $MODEL"
  QUEST_PEER_PYTHON=python3 quest bench mlx-path --model "$MODEL" --max-tokens "$T" \
    --rounds "${BENCH_ROUNDS:-3}" --out "$o/bench-8b" 2>&1 | tee "$o/bench-8b.txt"
  if smollm2; then
    step "quest bench mlx-path (the real SmolLM2-135M)"
    QUEST_PEER_PYTHON=python3 quest bench mlx-path --max-tokens "$T" --rounds "${BENCH_ROUNDS:-3}" \
      --out "$o/bench-smollm2" 2>&1 | tee "$o/bench-smollm2.txt"
  fi
}

fresh() {
  local r on=(QUEST_KERNEL_CACHE=off QUEST_QMV=quest QUEST_QKV=quest QUEST_ATTEND=quest)
  r=$(rounds 5)
  step "fresh processes, $MODEL, $T tokens: MLX's ops, then quest's kernels compiled in the process"
  timed_run run1-mlx-ops-first-on-machine "${mlx_ops[@]}"
  timed_run run2-mlx-ops "${mlx_ops[@]}"
  timed_run run3-mlx-ops "${mlx_ops[@]}"
  timed_run run4-quest-kernels "${on[@]}"
  timed_run run5-quest-kernels "${on[@]}"
  N=256 timed_run run6-quest-kernels-256 "${on[@]}"
  N=256 timed_run run7-mlx-ops-256 "${mlx_ops[@]}"
  step "the learner's flow"
  learner_flow "$r"
  quest status 2>&1 | tee -a "$o/flow-card.txt"
  step "one warmed process: quest fit (its kernels on) beside mlx-lm"
  fit_peer fit-peer.txt 3
  cp target/quest-bench/fit-cuda.json "$o/" 2>/dev/null
}

kept() {
  local r
  r=$(rounds 5)
  step "fresh processes, $MODEL, $T tokens: quest's kernels kept, MLX's ops"
  timed_run run1-first-on-machine TERM=dumb
  timed_run run2-kept TERM=dumb
  timed_run run3-kept TERM=dumb
  timed_run run4-mlx-ops "${mlx_ops[@]}"
  timed_run run5-source-compiled QUEST_KERNEL_CACHE=off
  timed_run run6-kept TERM=dumb
  timed_run run7-mlx-ops "${mlx_ops[@]}"
  N=256 timed_run run8-kept-256 TERM=dumb
  N=256 timed_run run9-mlx-ops-256 "${mlx_ops[@]}"
  N=256 timed_run run10-kept-256 TERM=dumb
  step "quest kernel: the kept kernels against MLX's ops"
  for k in matvec qkv attend; do
    timeout 100 quest kernel --kernel "$k" --shapes Qwen3-0.6B,Qwen3-8B --max-tokens 32 --rounds 2 2>&1 |
      tee "$o/qmv-$k.txt" | tail -8
  done
  step "the learner's flow"
  learner_flow "$r"
  step "one warmed process: quest fit --peer, then quest fit with the kernels compiled from source"
  fit_peer fit-peer-kept.txt 3
  QUEST_KERNEL_CACHE=off timeout 90 quest fit --shapes Qwen3-8B,Qwen3-0.6B \
    --max-tokens "$T" --rounds 3 2>&1 | tee "$o/fit-source.txt" | tail -14
}

kept-defaults() {
  local r
  r=$(rounds 5)
  step "fresh processes, $MODEL, $T tokens"
  timed_run run1-first-on-machine TERM=dumb
  timed_run run2-kept TERM=dumb
  timed_run run3-mlx-ops "${mlx_ops[@]}"
  timed_run run4-kept TERM=dumb
  step "the learner's flow"
  learners_own mlx-path/decode_loop.rs
  submit_and_card flow-submit.txt flow-card.txt "$r"
  step "one warmed process: quest fit --peer (MLX compiles quest's kernels from source once)"
  fit_peer fit-peer.txt 3
}

fit() {
  local r
  r=$(rounds 5)
  step "quest fit --shapes all"
  quest fit --shapes all --max-tokens "$T" --rounds "$r" 2>&1 | tee "$o/rust-fit.txt"
  cp target/quest-bench/fit-cuda.json "$o/" 2>/dev/null
  step "the Python peers, the same shapes"
  python_peers "$r"
  step "quest slope"
  quest slope 2>&1 | tee "$o/rust-slope.txt"
  cp target/quest-bench/slope-cuda.json "$o/" 2>/dev/null
}

qmv() {
  local r models=() fit_shapes=${FIT-Qwen3-4B,Qwen3-8B} real=
  r=$(rounds 5)
  if smollm2; then real=smollm2-135m-instruct; fi
  for m in ${MODELS-$real}; do models+=(--model "$m"); done
  step "quest kernel: quest's matvec against MLX's"
  timeout 300 quest kernel --shapes "${SHAPES:-all}" "${models[@]}" --max-tokens "$T" --rounds "$r" 2>&1 |
    tee "$o/qmv.txt"
  cp target/quest-bench/kernel-matvec-cuda.json "$o/" 2>/dev/null
  [ -n "$fit_shapes" ] || return 0
  step "quest fit with each matvec, then the Python peers"
  fits_by_qmv "$fit_shapes" "$r" "mlx quest" quest
  # shellcheck disable=SC2086 # the shapes, one word each
  python_peers "$r" ${fit_shapes//,/ }
}

fits() {
  local r
  r=$(rounds 3)
  step "quest fit --shapes ${SHAPES:-all}, per binary and QUEST_QMV"
  for bin in ${BINS:-quest}; do
    fits_by_qmv "${SHAPES:-all}" "$r" "${QMVS-mlx quest}" "$bin"
  done 2>&1 | tee "$o/fits.txt"
}

alt-qmv() {
  local r
  r=$(rounds 3)
  step "QUEST_QMV=mlx and =quest, one process each, alternated"
  for pass in $(seq "${PASSES:-1}"); do
    for shape in ${SHAPES:-Qwen3-0.6B Qwen3-4B Qwen3-8B}; do
      for k in mlx quest; do
        echo "-- $shape, QUEST_QMV=$k, pass $pass"
        QUEST_QMV=$k timeout 75 quest fit --shapes "$shape" --max-tokens "$T" --rounds "$r" 2>&1 | grep -v '^quest:'
      done
    done
  done 2>&1 | tee "$o/alt-qmv.txt"
}

alt() {
  local r prompt config line setting bin
  r=$(rounds 3)
  step "MLX's ops, quest's kernels and mlx-lm, one process each, alternated"
  quest fit --configs > "$o/configs.json"
  prompt=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
  local with=${ON:-QUEST_QMV=quest QUEST_QKV=quest QUEST_ATTEND=quest} without=${OFF:-${mlx_ops[*]}}
  for shape in ${SHAPES:-SmolLM2-135M SmolLM2-360M Qwen3-0.6B Qwen3-1.7B Qwen3-4B Qwen3-8B}; do
    config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$o/configs.json" "$shape")
    for i in $(seq "$r"); do
      for way in mlx quest; do
        if [ $way = quest ]; then setting=$with bin=${ON_BIN:-quest}; else setting=$without bin=${OFF_BIN:-quest}; fi
        # shellcheck disable=SC2086 # a setting is several assignments
        line=$(env $setting timeout 60 "$bin" fit --shapes "$shape" --max-tokens "$T" --rounds 1 2>&1 |
          awk -v s="$shape" '$1 == s { print }' | tr '\n' ' ')
        echo "$shape round $i $way: $line"
      done
      timeout 60 python3 src/bench/peer.py --config "$config" --prompt-ids "$prompt" --max-tokens "$T" \
        --rounds 1 > "$o/py.json" 2>/dev/null
      python3 - "$o/py.json" "$shape" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["results"]
print(f"{sys.argv[2]} round {sys.argv[3]} mlx-lm: generate {d['generate'][0]['decode_tok_s']:.1f} hand {d['hand'][0]['decode_tok_s']:.1f}")
PY
    done
  done 2>&1 | tee "$o/alt.txt"
  python3 - "$o/alt.txt" "${OFF_BIN:-quest} $without" "${ON_BIN:-quest} $with" <<'PY' | tee "$o/alt-medians.txt"
# Each quest line holds the fit row (… pipelined …) then the host row (… µs/layer): the
# pipelined tok/s is the 5th field of the first, host µs/layer the last of the second.
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) round \d+ (mlx|quest|mlx-lm): (.*)", line)
    if not m:
        continue
    shape, way, rest = m.groups()
    f = rest.split()
    r = rows.setdefault(shape, {})
    if way == "mlx-lm":
        r.setdefault("mlx-lm", []).append(float(f[1]))
    elif len(f) >= 12:
        r.setdefault(way, []).append(float(f[4]))
        r.setdefault(way + " µs", []).append(float(f[-1]))
if not rows:
    sys.exit("alt: no rows")
print(f"{'shape':<14} {'MLX ops':>9} {'quest kernels':>14} {'mlx-lm':>8} {'kernels/ops':>12} {'kernels/mlx-lm':>15} {'µs/layer ops → kernels':>24}")
for shape, r in rows.items():
    med = {k: statistics.median(v) for k, v in r.items() if v}
    if not all(k in med for k in ("mlx", "quest", "mlx-lm")):
        print(shape, "incomplete", {k: len(v) for k, v in r.items()})
        continue
    print(f"{shape:<14} {med['mlx']:>9.1f} {med['quest']:>14.1f} {med['mlx-lm']:>8.1f} "
          f"{'×%.2f' % (med['quest'] / med['mlx']):>12} {'×%.2f' % (med['quest'] / med['mlx-lm']):>15} "
          f"{med.get('mlx µs', 0):>11.1f} → {med.get('quest µs', 0):.1f}")
print(f"medians of {len(next(iter(rows.values())).get('mlx', []))} alternated rounds per shape; tok/s of the pipelined loop / generate_step")
print(f"columns: `MLX ops` ran `{sys.argv[2].strip()}`, `quest kernels` ran `{sys.argv[3].strip()}`")
PY
}

peer() {
  local r n=0 settings
  r=$(rounds 3)
  step "quest fit --peer, per setting"
  IFS=';' read -ra settings <<< "${SETTINGS:- }"
  for setting in "${settings[@]}"; do
    n=$((n + 1))
    echo "-- $setting"
    # shellcheck disable=SC2086 # a setting is several assignments
    env $setting QUEST_PEER_PYTHON=python3 timeout "${LIMIT:-300}" quest fit --peer --shapes "${SHAPES:-all}" \
      --max-tokens "$T" --rounds "$r" 2>&1 | grep -v '^quest:'
    cp target/quest-bench/fit-cuda.json "$o/fit-peer-$n.json" 2>/dev/null
  done 2>&1 | tee -a "$o/peer.txt"
}

peers() {
  step "the Python peers"
  # shellcheck disable=SC2086 # a list of shapes
  python_peers "$(rounds 3)" ${PEER_SHAPES:-}
}

kernels() {
  local r
  r=$(rounds 3)
  step "quest kernel per kernel"
  for k in ${KERNELS:-matvec qkv attend}; do
    echo "-- quest kernel --kernel $k"
    timeout 300 quest kernel --kernel "$k" --shapes "${QMV_SHAPES:-all}" --max-tokens "$T" --rounds "$r" 2>&1 |
      grep -v '^quest:' | tee "$o/qmv-$k.txt"
    cp "target/quest-bench/kernel-$k-cuda.json" "$o/" 2>/dev/null
  done 2>&1 | tee -a "$o/kernels.txt"
}

check() {
  step check
  for k in ${CHECKS:-matvec qkv attend}; do
    KERNEL=$k OUT=$o timeout 240 bash "$HERE/kernel_check.sh" 2>&1 | tail -12
    echo "kernel_check.sh KERNEL=$k: rc=${PIPESTATUS[0]}"
  done 2>&1 | tee -a "$o/check.txt"
  # shellcheck disable=SC2086 # RUN_ENV is several assignments
  env ${RUN_ENV:-} timeout 60 quest run mlx-path --no-lesson --max-tokens 16 2>&1 |
    grep -E "^(Output|Model|Decode)" | tee -a "$o/check.txt"
}

journey() {
  step journey
  for lesson in mapped-lazy kv-cache mlx-path lazy-prefill; do
    echo "-- $lesson"
    timeout 120 quest run "$lesson" --no-lesson --max-tokens 16 2>&1 | grep -E "^(Output|TTFT|Decode|Model)|rror"
  done 2>&1 | tee -a "$o/journey.txt"
}

bench() {
  step "quest bench mlx-path (the real SmolLM2-135M)"
  QUEST_PEER_PYTHON=python3 timeout 200 quest bench mlx-path --max-tokens "$T" --rounds "$(rounds 3)" 2>&1 |
    tee "$o/bench.txt"
  cp target/quest-bench/mlx-path.json "$o/bench-mlx-path.json" 2>/dev/null
}

batch() {
  step batch
  timeout "${LIMIT:-150}" quest batch --shapes "${BATCH_SHAPES:-SmolLM2-135M,Qwen3-4B,Qwen3-8B}" \
    --batch "${BATCH:-1,4}" --max-tokens "$T" --rounds "$(rounds 3)" --out "$o/batch" 2>&1 | tee "$o/batch.txt"
}

bits() {
  step bits
  timeout "${LIMIT:-170}" quest fit --shapes "${BITS_SHAPES:-Qwen3-1.7B,Qwen3-8B}" --bits 4,8,16 \
    --group-size "${GROUP:-64}" --max-tokens "$T" --rounds "$(rounds 3)" 2>&1 | tee "$o/bits.txt"
  cp target/quest-bench/fit-cuda.json "$o/fit-bits.json" 2>/dev/null
}

slope() {
  step slope
  timeout 170 quest slope --max-tokens "$T" --rounds "$(rounds 5)" --contexts "${CONTEXTS:-256,2048,8192}" 2>&1 |
    tee "$o/slope.txt"
  cp target/quest-bench/slope-cuda.json "$o/" 2>/dev/null
}

slope-attend() {
  step "quest slope, MLX's attention and quest's, alternated"
  for shape in ${SLOPE_SHAPES:-Qwen3-0.6B Qwen3-8B}; do
    for rep in $(seq "${REPS:-2}"); do
      for way in mlx quest; do
        echo "-- $shape rep $rep QUEST_ATTEND=$way"
        QUEST_ATTEND=$way timeout 150 quest slope --shapes "$shape" \
          --contexts "${CONTEXTS:-64,512,1024,2000}" --max-tokens 32 --rounds 3 2>&1 | grep -v '^quest:'
      done
    done
  done 2>&1 | tee -a "$o/slope-attend.txt"
}

sweep() {
  local bin
  bin=$(last_bin)
  step "MLX's CUDA buffer settings, $bin"
  one() { # label, then env assignments
    local label=$1
    shift
    echo "== sweep $label"
    env "$@" "$bin" fit --shapes "${SWEEP_SHAPES:-Qwen3-0.6B,Qwen3-4B,Qwen3-8B}" \
      --max-tokens "$T" --rounds "${SWEEP_ROUNDS:-3}" 2>&1 | grep -v '^quest:' | head -5
  }
  {
    for ops in ${SWEEP:-}; do one "ops=$ops" "MLX_MAX_OPS_PER_BUFFER=$ops"; done
    for mb in ${SWEEP_MB:-}; do one "mb=$mb" "MLX_MAX_MB_PER_BUFFER=$mb"; done
    for kv in ${SWEEP_EXTRA:-}; do one "$kv" "$kv"; done
  } 2>&1 | tee "$o/sweep.txt"
}

# Which choice of a `largest` quiz a run's printed values give: the name of the larger.
larger() { # file, value for choice A, choice A, value for choice B, choice B
  python3 - "$@" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def value(name):
    m = re.findall(rf"{name}\S*\s*=?\s*([-0-9.e+]+)", text)
    return float(m[-1]) if m else float("nan")
a, b = value(sys.argv[2]), value(sys.argv[4])
print(sys.argv[3] if a >= b else sys.argv[5])
PY
}

ceiling() {
  step "decode-ceiling, the learner's path"
  quest run decode-ceiling --no-lesson 2>&1 | tee "$o/ceiling-run-before.txt" | tail -14
  learners_own decode-ceiling/ceiling.rs
  quest run decode-ceiling --no-lesson 2>&1 | tee "$o/ceiling-run-after.txt" | tail -16
  local term binds
  term=$(larger "$o/ceiling-run-after.txt" fixed_term_ms fixed bytes_term_ms bytes)
  binds=$(larger "$o/ceiling-run-after.txt" ceiling_bytes_ms bytes ceiling_operations_ms operations)
  quest submit decode-ceiling --predict larger-term="$term" --predict ceiling-term="$binds" \
    --predict ceiling-is=bound 2>&1 | tee "$o/ceiling-submit.txt" | tail -16
  quest card decode-ceiling --answer larger-term="$term" --answer ceiling-term="$binds" \
    --answer ceiling-is=bound 2>&1 | tee "$o/ceiling-card.txt"
  [ "${CEILING_FIT:-1}" = 1 ] || return 0
  step "quest fit --shapes all"
  timeout 300 quest fit --shapes all --max-tokens "$T" --rounds "$(rounds 3)" 2>&1 |
    tee "$o/fit.txt" | grep -v '^quest:'
}

# A GPU-track lesson as the learner walks it, on MODEL (random:qwen3-8b) and then on the
# carried SmolLM2, each step a fresh process: `quest run` of the starting code, the
# learner's own edit, run again, `quest submit` with the quiz predicted, `quest card` with
# submit's medians. The device cannot build Rust, so the edit is made HERE before carry.sh
# (`python3 docs/gpu/own_edit.py COURSE`, COURSE=that copy): the course copy arrives
# edited, its binary prebuilt; `quest reset` puts the starting code back for the first run.
#   walk LESSON FILE ANSWER…   (ANSWER: the quiz's answers but shows-here, as Q=A)
walk() {
  local lesson=$1 file=$2 model card shows tag own shows_q shows_a
  shift 2
  own=/tmp/own-$lesson.rs
  [ -f "$own" ] || cp "exercises/$lesson/$file" "$own"
  local predicts=() answers=()
  for qa in "$@"; do predicts+=(--predict "$qa"); answers+=(--answer "$qa"); done
  for model in ${WALK_MODELS:-$MODEL smollm2-135m-instruct}; do
    [ "$model" != smollm2-135m-instruct ] || smollm2 || continue
    tag=$lesson-${model//[:\/]/-}
    step "$lesson, the learner's path on $model"
    quest reset "$lesson" --yes > /dev/null
    quest run "$lesson" --no-lesson --model "$model" --max-tokens "$T" 2>&1 | tee "$o/$tag-run-before.txt" | tail -8
    cp "$own" "exercises/$lesson/$file"
    quest run "$lesson" --no-lesson --model "$model" --max-tokens "$T" 2>&1 | tee "$o/$tag-run-after.txt" | tail -8
    # Only a lesson that asks shows-here is told it (rope, attention, mlp, sampling do not).
    shows_q=()
    if grep -q '^  - id: shows-here$' "lessons/$lesson/lesson.yaml"; then shows_q=(--predict shows-here=yes); fi
    quest submit "$lesson" --model "$model" --max-tokens "$T" --rounds "$(rounds 3)" "${shows_q[@]}" \
      "${predicts[@]}" 2>&1 | tee "$o/$tag-submit.txt" | tail -20
    card=$(grep -o "quest card $lesson --before [0-9.]* --after [0-9.]*" "$o/$tag-submit.txt" | head -1)
    # A lesson measured against quest's pieces records its rounds at submit: its card
    # takes the answers alone.
    if [ -z "$card" ] && grep -q "quest card $lesson --answer" "$o/$tag-submit.txt"; then card="quest card $lesson"; fi
    ratio=$(grep -o '(×[0-9.]*)' "$o/$tag-submit.txt" | head -1 | tr -d '(×)')
    # The card's shows-here is what submit measured: 10 % or more in the lesson's direction.
    shows=$(python3 -c "import sys; r = float(sys.argv[1] or 0); print('yes' if r >= 1.10 or (0 < r <= 1 / 1.10) else 'no')" "${ratio:-0}")
    shows_a=()
    [ ${#shows_q[@]} -eq 0 ] || shows_a=(--answer shows-here="$shows")
    echo "$card ${shows_a[*]} ${answers[*]}"
    ${card:-false} "${shows_a[@]}" "${answers[@]}" 2>&1 | tee "$o/$tag-card.txt"
  done
}
compile() { walk compile gate.rs term=fixed; }
streams() { walk streams decode_loop.rs why=fences; }
rms-norm() { walk rms-norm norm.rs term=fixed; }
ops-cost() { walk ops-cost norm.rs term=fixed fused-here=its-ops; }
custom-kernel() { walk custom-kernel norm_kernel.rs term=fixed two-ops=no-faster; }
matvec-kernel() {
  walk matvec-kernel matvec_kernel.rs term=bytes smallest=smallest
  step "quest kernel --kernel matvec on Qwen3-8B, then quest fit there (the copy)"
  timeout 300 quest kernel --kernel matvec --shapes Qwen3-8B --max-tokens "$T" --rounds "$(rounds 3)" 2>&1 |
    tee "$o/matvec-kernel-quest-kernel.txt" | tail -12
  timeout 300 quest fit --shapes Qwen3-8B --max-tokens "$T" --rounds "$(rounds 3)" 2>&1 |
    tee "$o/matvec-kernel-fit.txt" | tail -12
}
# A values lesson on the six shapes of `quest fit` (16 tokens a round): smallest-here is
# the larger term of the smallest shape on this machine's line; on the H200 the fixed one
# (docs/gpu/2026-12-02-roofline/fit.txt), and the card refuses it if this run says otherwise.
host-or-device() {
  local T=${HOD_TOKENS:-16}
  WALK_MODELS=${WALK_MODELS:-SmolLM2-135M,SmolLM2-360M,Qwen3-0.6B,Qwen3-1.7B,Qwen3-4B,Qwen3-8B} \
    walk host-or-device knee.rs smallest-here=fixed knee-h200=beyond-8b halve-bytes=about-the-same
}
# The inside track's other lessons, on the real SmolLM2 unless WALK_MODELS says otherwise
# (linear-attention: its own random Qwen3.5 shape).
rope() { WALK_MODELS=${WALK_MODELS:-smollm2-135m-instruct} walk rope rope.rs layout=split-half restart=step-1; }
attention() { WALK_MODELS=${WALK_MODELS:-smollm2-135m-instruct} walk attention attention.rs mask-step=step-0 term=bytes; }
dequant-matvec() {
  WALK_MODELS=${WALK_MODELS:-smollm2-135m-instruct} walk dequant-matvec matvec.rs bytes-per-weight=0.75 term=bytes
}
linear-attention() {
  WALK_MODELS=${WALK_MODELS:-random:qwen3.5-0.8b} walk linear-attention delta.rs state-bytes=1-mib at-4096=same
}
your-model() { WALK_MODELS=${WALK_MODELS:-smollm2-135m-instruct} walk your-model decoder.rs term=fixed; }
mlp() { WALK_MODELS=${WALK_MODELS:-smollm2-135m-instruct} walk mlp mlp.rs share=three-fifths term=bytes; }
# The sampler's check is by its draws from the logits the run itself computed: the same on
# any backend, float16 or not.
sampling() {
  WALK_MODELS=${WALK_MODELS:-smollm2-135m-instruct} walk sampling sampling.rs at-most=20 same-seed=same same-tokens=same-draw
}

qmv-sweep() {
  step "quest's 4-bit matvec alone, swept (nvcc $(nvcc --version | grep -o 'release [0-9.]*'))"
  nvcc -O3 -std=c++17 -arch=sm_90 -o "$o/qmv4_sweep" "$HERE/qmv4_sweep.cu" 2>&1 | tee "$o/qmv-sweep-build.txt" &&
    "$o/qmv4_sweep" 2>&1 | tee "$o/qmv-sweep.txt"
  rm -f "$o/qmv4_sweep"
}

steps() {
  local r shapes lib n setting
  r=$(rounds 5)
  shapes=${STEPS_SHAPES:-SmolLM2-135M,SmolLM2-360M,Qwen3-0.6B,Qwen3-1.7B,Qwen3-4B,Qwen3-8B}
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$o/gpu.txt" 2>&1
  local parts=" ${PARTS:-peer trace ab} "
  if [[ $parts == *" peer "* ]]; then
    step "quest fit --peer --shapes $shapes ($r rounds)"
    QUEST_PEER_PYTHON=python3 timeout "${LIMIT:-300}" quest fit --peer --shapes "$shapes" --max-tokens "$T" \
      --rounds "$r" 2>&1 | grep -v '^quest:' | tee "$o/fit-peer.txt"
    cp target/quest-bench/fit-cuda.json "$o/fit-peer.json" 2>/dev/null
  fi
  if [[ $parts == *" trace "* ]]; then
    lib=$(realpath "${TRACE_LIB:?TRACE_LIB: the folder docs/gpu/trace_build.sh made, carried}")/libcupti_trace.so
    for traced in kernels driver; do
      step "quest fit traced by CUPTI ($traced)"
      # shellcheck disable=SC2046 # QUEST_TRACE_DRIVER=1, or nothing
      env CUDA_INJECTION64_PATH="$lib" QUEST_TRACE_OUT="$o/trace-$traced.csv" \
        $([ $traced = driver ] && echo QUEST_TRACE_DRIVER=1) timeout "${LIMIT:-300}" \
        quest fit --shapes "$shapes" --max-tokens "$T" --rounds 1 2>&1 | grep -v '^quest:' | tee "$o/fit-$traced.txt"
      python3 "$HERE/trace_steps.py" "$o/trace-$traced.csv" --shapes "$shapes" --json "$o/steps-$traced.json" |
        tee "$o/steps-$traced.txt"
      gzip -f "$o/trace-$traced.csv"
    done
  fi
  [[ $parts == *" ab "* ]] || return 0
  local off=${AB_OFF:-QUEST_KERNEL_CACHE=fresh QUEST_GRAPH_COMMIT=mlx} on=${AB_ON:- }
  step "A/B, alternated: OFF \`$off\`, ON \`$on\`, ${PASSES:-2} passes"
  for pass in $(seq "${PASSES:-2}"); do
    n=0
    for setting in "$off" "$on"; do
      n=$((n + 1))
      echo "-- pass $pass $([ $n = 1 ] && echo OFF || echo ON): $setting"
      # shellcheck disable=SC2086 # a setting is several assignments
      env $setting timeout "${LIMIT:-300}" quest fit --shapes "$shapes" --max-tokens "$T" --rounds 1 2>&1 |
        grep -v '^quest:'
    done
  done 2>&1 | tee "$o/ab.txt"
  python3 - "$o/ab.txt" "$off" "$on" <<'PY' | tee "$o/ab-medians.txt"
# A fit table's row: shape, layout, MB/token, hand, pipelined, …; the host table's row:
# shape, build, eval, host, wall, µs/layer (six fields, the first a shape).
import re, statistics, sys
side, tok, host = None, {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"-- pass \d+ (OFF|ON)", line)
    if m:
        side = m.group(1)
        continue
    f = line.split()
    if side and len(f) >= 9 and f[1] == "quantized":
        tok.setdefault((f[0], side), []).append(float(f[4]))
    elif side and len(f) == 6 and re.match(r"(SmolLM|Qwen)", f[0]):
        host.setdefault((f[0], side), []).append(float(f[5]))
shapes = list(dict.fromkeys(k[0] for k in tok))
print(f"{'shape':<14} {'OFF tok/s':>10} {'ON tok/s':>10} {'ON/OFF':>7} {'OFF µs/layer':>13} {'ON µs/layer':>12}  rounds")
for s in shapes:
    a, b = tok.get((s, "OFF"), []), tok.get((s, "ON"), [])
    if not a or not b:
        print(s, "incomplete")
        continue
    ha, hb = host.get((s, "OFF"), [0]), host.get((s, "ON"), [0])
    print(f"{s:<14} {statistics.median(a):>10.1f} {statistics.median(b):>10.1f} "
          f"{'×%.3f' % (statistics.median(b) / statistics.median(a)):>7} {statistics.median(ha):>13.1f} "
          f"{statistics.median(hb):>12.1f}  {len(a)}/{len(b)}: OFF {a} ON {b}")
print(f"OFF ran `{sys.argv[2].strip()}`, ON `{sys.argv[3].strip() or 'the defaults'}`; medians of the pipelined loop's tok/s and of the host's µs a layer")
PY
}

levers() {
  local lib shapes=${LEVER_SHAPES:-Qwen3-8B} setting pass check=${CHECK_SHAPES-Qwen3-0.6B,Qwen3-8B}
  lib=$(realpath "${TRACE_LIB:?TRACE_LIB: the folder docs/gpu/trace_build.sh made, carried}")/libcupti_trace.so
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$o/gpu.txt" 2>&1
  if [ -n "$check" ]; then
    for setting in all none; do
      step "quest kernel --kernel matvec, QUEST_QMV_LEVERS=$setting"
      QUEST_QMV_LEVERS=$setting timeout "${LIMIT:-300}" quest kernel --kernel matvec --shapes "$check" \
        --max-tokens 32 --rounds 1 2>&1 | grep -v '^quest:' | tee "$o/kernel-$setting.txt"
    done
  fi
  for pass in $(seq "${PASSES:-2}"); do
    for setting in ${LEVERS:-none x1 banks stream all}; do
      step "pass $pass: quest fit traced, QUEST_QMV_LEVERS=$setting"
      env CUDA_INJECTION64_PATH="$lib" QUEST_TRACE_OUT="$o/trace.csv" QUEST_QMV_LEVERS="$setting" \
        timeout "${LIMIT:-300}" quest fit --shapes "$shapes" --max-tokens "$T" --rounds 1 2>&1 |
        grep -v '^quest:' > "$o/fit-$setting-$pass.txt"
      grep -E 'quantized|bandwidth' "$o/fit-$setting-$pass.txt"
      python3 "$HERE/trace_steps.py" "$o/trace.csv" --shapes "$shapes" --json "$o/steps-$setting-$pass.json" \
        > "$o/steps-$setting-$pass.txt"
      grep -E 'pipelined|TB/s' "$o/steps-$setting-$pass.txt"
      rm -f "$o/trace.csv"
    done
  done
  python3 "$HERE/levers_table.py" "$o" | tee "$o/levers-table.txt"
}

profile() {
  local bin
  bin=$(last_bin)
  step "ncu, $bin"
  for shape in ${NCU_SHAPES:-Qwen3-8B Qwen3-0.6B}; do
    timeout "${NCU_TIMEOUT:-200}" ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      "$bin" fit --shapes "$shape" --max-tokens 3 --rounds 1 > "$o/ncu-$shape.csv" 2> "$o/ncu-$shape.err"
    echo "ncu $shape: rc=$? $(wc -l < "$o/ncu-$shape.csv") lines"
    python3 "$HERE/ncu_per_token.py" "$o/ncu-$shape.csv" | tee "$o/ncu-$shape.txt"
  done 2>&1 | tee -a "$o/ncu.txt"
}

for sub in "$@"; do "$sub"; done
