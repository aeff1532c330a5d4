#!/usr/bin/env bash
# The streams lesson as a learner walks it on the CPU, each step a fresh process, in a
# copy of the course with its own progress file; the edit is docs/gpu/own_edit.py's
# (the loop handed the default stream, `Stream::new()`).
#   bash docs/lessons/streams/2026-12-02-cpu/walk.sh > docs/lessons/streams/2026-12-02-cpu/walk.txt 2>&1
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
COPY=$(mktemp -d)
trap 'rm -rf "$COPY"' EXIT
git -C "$REPO" archive HEAD | tar x -C "$COPY"
cp -r "$REPO"/lessons "$REPO"/exercises "$REPO"/solutions "$COPY"/
export QUEST_ROOT=$COPY QUEST_HOME=$COPY/.home
quest=$REPO/target/debug/quest
cd "$COPY"
echo "== quest run streams (starting code)"; "$quest" run streams --no-lesson
python3 "$REPO/docs/gpu/own_edit.py" "$COPY"
echo "== quest run streams (the edit)"; "$quest" run streams --no-lesson
echo "== quest submit streams"
"$quest" submit streams --predict shows-here=no --predict why=fences 2>&1 | tee "$COPY/submit.txt"
card=$(grep -o 'quest card streams --before [0-9.]* --after [0-9.]*' "$COPY/submit.txt" | head -1)
echo "== $card --answer shows-here=no --answer why=fences"
# shellcheck disable=SC2086 # the card command as submit printed it
"$quest" ${card#quest } --answer shows-here=no --answer why=fences
