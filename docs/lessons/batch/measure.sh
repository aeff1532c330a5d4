#!/usr/bin/env bash
# The batch lesson's CPU figures: `quest batch` (the lesson's loop at several batch sizes,
# interleaved round by round, medians), with its environment, into docs/lessons/batch/<label>/.
#   docs/lessons/batch/measure.sh <label> [quest batch options…]
# Built beforehand with: cargo build --release --bin quest
# Run it under the exclusive lock (flock -x /tmp/quest-cpu.lock …) so no build shares the cores.
set -euo pipefail
label=$1
shift
cd "$(dirname "$0")/../../.."
out=docs/lessons/batch/$label
mkdir -p "$out"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "command: docs/lessons/batch/measure.sh $label $*"
  echo "quest: target/release/quest batch $* --out $out"
  echo "QUEST_BLAS_THREADS=${QUEST_BLAS_THREADS:-} QUEST_WEIGHTS=${QUEST_WEIGHTS:-}"
  echo "load before: $(cut -d" " -f1-3 /proc/loadavg)"
} > "$out/ENV.txt"
target/release/quest batch "$@" --out "$out" 2> "$out/progress.txt"
echo "load after: $(cut -d" " -f1-3 /proc/loadavg)" >> "$out/ENV.txt"
