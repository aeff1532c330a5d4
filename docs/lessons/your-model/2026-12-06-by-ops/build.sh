#!/usr/bin/env bash
# Builds each variant as the quest-lab binary into BINS=DIR (DIR/decoder-NAME).
#   BINS=DIR bash docs/lessons/your-model/2026-12-06-by-ops/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$BINS"
# The solution is the lesson's own file; quest_model.rs is quest's model through the same
# loop; each other variant is its patch applied to the solution.
solution="$here/../../../../solutions/your-model/decoder.rs"
build() { QUEST_LAB_SOURCE="$2" cargo build -q -p quest-lab && cp target/debug/quest-lab "$BINS/decoder-$1"; }
build solution "$solution"
build quest_model "$here/quest_model.rs"
variants=$(mktemp -d)
trap 'rm -rf "$variants"' EXIT
for v in honest_softmax honest_heads no_cache no_mask no_residual; do
  patch -s -o "$variants/$v.rs" "$solution" "$here/$v.patch"
  build "$v" "$variants/$v.rs"
done
