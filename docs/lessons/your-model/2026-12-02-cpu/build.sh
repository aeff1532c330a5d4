#!/usr/bin/env bash
# Builds each variant as the quest-lab binary into BINS=DIR (DIR/decoder-NAME).
#   BINS=DIR bash docs/lessons/your-model/2026-12-02-cpu/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$BINS"
for v in quest_model solution other_order no_cache no_mask no_residual; do
  QUEST_LAB_SOURCE="$here/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$BINS/decoder-$v"
done
