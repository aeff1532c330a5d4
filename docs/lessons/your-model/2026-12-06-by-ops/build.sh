#!/usr/bin/env bash
# Builds each variant as the quest-lab binary into BINS=DIR (DIR/decoder-NAME).
#   BINS=DIR bash docs/lessons/your-model/2026-12-06-by-ops/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$BINS"
# The solution is the lesson's own file; the others are the variants measured beside it.
build() { QUEST_LAB_SOURCE="$2" cargo build -q -p quest-lab && cp target/debug/quest-lab "$BINS/decoder-$1"; }
build solution "$here/../../../../solutions/your-model/decoder.rs"
for v in quest_model honest_softmax honest_heads no_cache no_mask no_residual; do
  build "$v" "$here/$v.rs"
done
