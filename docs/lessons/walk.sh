#!/usr/bin/env bash
# A lesson as a learner walks it on the CPU, each step a fresh process, in a copy of the
# course with its own progress file: `quest run` of the starting code, the learner's edit
# (docs/gpu/own_edit.py's), run again, `quest submit` with the quiz predicted, `quest card`
# with its answers (and submit's medians where its card takes them).
#   bash docs/lessons/walk.sh LESSON QUESTION=ANSWER…
set -euo pipefail
lesson=${1:?usage: walk.sh LESSON QUESTION=ANSWER…}
shift
REPO=$(cd "$(dirname "$0")/../.." && pwd)
COPY=$(mktemp -d)
trap 'rm -rf "$COPY"' EXIT
git -C "$REPO" archive HEAD | tar x -C "$COPY"
cp -r "$REPO"/lessons "$REPO"/exercises "$REPO"/solutions "$COPY"/
export QUEST_ROOT=$COPY QUEST_HOME=$COPY/.home
quest=$REPO/target/debug/quest
predicts=() answers=()
for qa in "$@"; do predicts+=(--predict "$qa"); answers+=(--answer "$qa"); done
cd "$COPY"
echo "== quest run $lesson (starting code)"; "$quest" run "$lesson" --no-lesson
python3 "$REPO/docs/gpu/own_edit.py" "$COPY"
echo "== quest run $lesson (the edit)"; "$quest" run "$lesson" --no-lesson
echo "== quest submit $lesson"
"$quest" submit "$lesson" "${predicts[@]}" 2>&1 | tee "$COPY/submit.txt"
card=$(grep -o "quest card $lesson --before [0-9.]* --after [0-9.]*" "$COPY/submit.txt" | head -1 || true)
# A lesson measured against quest's pieces records its rounds at submit: its card takes
# the answers alone.
card=${card:-quest card $lesson}
echo "== $card ${answers[*]}"
# shellcheck disable=SC2086 # the card command as submit printed it
"$quest" ${card#quest } "${answers[@]}"
