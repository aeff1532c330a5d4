#!/usr/bin/env bash
# The dequant-matvec lesson as a learner walks it on the CPU, each step a fresh process, in a
# copy of the course with its own progress file; the edit is docs/gpu/own_edit.py's
# (the 4-bit values peeled off the low bits one at a time).
#   bash docs/lessons/dequant-matvec/2026-12-03-cpu/walk.sh > docs/lessons/dequant-matvec/2026-12-03-cpu/walk.txt 2>&1
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
COPY=$(mktemp -d)
trap 'rm -rf "$COPY"' EXIT
git -C "$REPO" archive HEAD | tar x -C "$COPY"
cp -r "$REPO"/lessons "$REPO"/exercises "$REPO"/solutions "$COPY"/
export QUEST_ROOT=$COPY QUEST_HOME=$COPY/.home
quest=$REPO/target/debug/quest
cd "$COPY"
echo "== quest run dequant-matvec (starting code)"; "$quest" run dequant-matvec --no-lesson
python3 "$REPO/docs/gpu/own_edit.py" "$COPY"
echo "== quest run dequant-matvec (the edit)"; "$quest" run dequant-matvec --no-lesson
echo "== quest submit dequant-matvec"
"$quest" submit dequant-matvec --predict bytes-per-weight=0.75 --predict shows-here=yes --predict term=bytes 2>&1 | tee "$COPY/submit.txt"
# This lesson's card takes the answers alone: submit recorded the measured rounds.
echo "== quest card dequant-matvec --answer bytes-per-weight=0.75 --answer shows-here=yes --answer term=bytes"
"$quest" card dequant-matvec --answer bytes-per-weight=0.75 --answer shows-here=yes --answer term=bytes
