#!/usr/bin/env bash
# The dequant-matvec lesson as a learner walks it on the CPU (docs/lessons/walk.sh); the
# edit is docs/gpu/own_edit.py's (the 4-bit values peeled off the low bits one at a time).
#   bash docs/lessons/dequant-matvec/2026-12-03-cpu/walk.sh > docs/lessons/dequant-matvec/2026-12-03-cpu/walk.txt 2>&1
exec bash "$(dirname "$0")/../../walk.sh" dequant-matvec bytes-per-weight=0.75 shows-here=yes term=bytes
