#!/usr/bin/env bash
# One run of a physics lesson's solution, as quest runs it, with its raw report kept.
#   docs/lessons/physics-measure.sh <lesson> <label>
# Environment: QUEST_MODEL (the shapes; default the lesson's), QUEST_MAX_TOKENS (default
# the lesson's), QUEST_CONTEXTS (context-slope), BIN (a quest-lab binary built from the
# solution: QUEST_LAB_SOURCE=$PWD/solutions/<lesson>/<file>.rs cargo build -p quest-lab).
# Writes docs/lessons/<lesson>/<label>/: ENV.txt, report.json (the inputs quest measured
# and the values the solution computed, which `quest submit` checks against its own),
# progress.txt (the exercise's stderr).
set -euo pipefail
lesson=$1 label=$2
cd "$(dirname "$0")/../.."
out=docs/lessons/$lesson/$label
mkdir -p "$out"
field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" "lessons/$lesson/lesson.yaml"; }
model=${QUEST_MODEL:-$(field model)}
tokens=${QUEST_MAX_TOKENS:-$(field max_tokens)}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "command: QUEST_MODEL=$model QUEST_MAX_TOKENS=$tokens QUEST_CONTEXTS=${QUEST_CONTEXTS:-} docs/lessons/physics-measure.sh $*"
  echo "binary: ${BIN} (debug profile, as \`cargo run -- run\` builds it)"
  echo "MLX: mlx-cpu 0.32.2 wheel, CPU backend, OpenBLAS as quest builds it (scipy-openblas32 0.3.34); QUEST_BLAS_THREADS=${QUEST_BLAS_THREADS:-} QUEST_WEIGHTS=${QUEST_WEIGHTS:-}"
  echo "load before: $(cut -d" " -f1-3 /proc/loadavg)"
} > "$out/ENV.txt"
start=$(date +%s)
QUEST_MODEL=$model QUEST_MAX_TOKENS=$tokens QUEST_REPORT=$PWD/$out/report.json "$BIN" 2> "$out/progress.txt"
echo "seconds: $(( $(date +%s) - start ))" >> "$out/ENV.txt"
echo "load after: $(cut -d" " -f1-3 /proc/loadavg)" >> "$out/ENV.txt"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["text"]); [print(k, "=", v) for k,v in r["values"].items()]' "$out/report.json" | tee "$out/summary.txt"
