#!/usr/bin/env bash
# Grouped queries against copied key/value heads, as run for the lesson (from the
# repository root):
#   bash docs/lessons/attention/2026-12-07-grouped-queries/measure.sh
# Builds bytes.rs as the lab binary (debug, as quest builds exercises here) and runs it:
# one decode step's attention at 256 to 16384 cached positions, each variant's bytes
# beyond its inputs (MLX's allocator peak) and its median time per call.
set -euo pipefail
here=docs/lessons/attention/2026-12-07-grouped-queries
QUEST_LAB_SOURCE="$PWD/$here/bytes.rs" cargo build -q -p quest-lab
# The bytes do not depend on what else the machine runs; the times do (take
# `flock -x /tmp/quest-cpu.lock` on a shared machine to time them alone).
{ echo "# $(date -u +%F) $(uname -m), $(nproc) cores; MLX CPU; run under a shared lock: other work ran beside it, so the times are not a measurement, the bytes are"; REPS=${REPS:-15} target/debug/quest-lab; } | tee $here/bytes.txt
