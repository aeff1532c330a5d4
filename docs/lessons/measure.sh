#!/usr/bin/env bash
# Interleaved measurement of a lesson's starting code and its solution, by hand.
#   docs/lessons/measure.sh <lesson> <rounds> <max_tokens> [label]
# Each round runs the starting exercise, then the solution (the order alternates by
# round), with the default model and prompt; every run's stdout is kept under
# docs/lessons/<lesson>/<label>/ and summarized by summarize.py.
set -euo pipefail
lesson=$1 rounds=$2 max_tokens=$3 label=${4:-runs}
cd "$(dirname "$0")/../.."
out=docs/lessons/$lesson/$label
mkdir -p "$out"
# Built beforehand with: cargo build --release -p quest-exercises -p quest-solutions --bins
# (the binaries run directly: a `cargo run` can wait on a lock held by another build).
target=${CARGO_TARGET_DIR:-target}/release
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "command: docs/lessons/measure.sh $*"
  echo "nice: ${NICE:-0}"
  echo "binaries: ${CARGO_TARGET_DIR:-target}/release"
  echo "QUEST_BLAS_THREADS=${QUEST_BLAS_THREADS:-} QUEST_WEIGHTS=${QUEST_WEIGHTS:-}"
  echo "load before: $(cut -d" " -f1-3 /proc/loadavg)"
  echo "QUEST_MAX_TOKENS=$max_tokens"
  echo "QUEST_PROMPT=${QUEST_PROMPT:-(the default: What is the capital of France? Answer in one sentence.)}"
} > "$out/ENV.txt"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="original solution"; else order="solution original"; fi
  for which in $order; do
    case $which in
      original) bin=$lesson-decode-loop ;;
      solution) bin=$lesson-solution ;;
    esac
    echo "round $r: $which" >&2
    QUEST_MAX_TOKENS=$max_tokens nice -n "${NICE:-0}" "$target/$bin" > "$out/round$r-$which.txt"
    tail -1 "$out/round$r-$which.txt" | cut -c1-200 >&2
  done
done
echo "load after: $(cut -d" " -f1-3 /proc/loadavg)" >> "$out/ENV.txt"
python3 docs/lessons/summarize.py "$out" | tee "$out/summary.txt"
