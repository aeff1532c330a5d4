#!/usr/bin/env bash
# The piece check on wrong pieces: each a one-line edit of a lesson's solution, run by
# `quest run` in a copy of the course (QUEST_ROOT), the piece check's rows kept.
#   bash docs/lessons/pieces/2026-12-06-piece-check/wrong.sh > docs/lessons/pieces/2026-12-06-piece-check/wrong.txt
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
COPY=$(mktemp -d)
trap 'rm -rf "$COPY"' EXIT
cp -r "$REPO/lessons" "$REPO/solutions" "$REPO/exercises" "$COPY/"
QUEST=${QUEST:-$REPO/target/debug/quest}
wrong() { # lesson file what sed-expression
  local lesson=$1 file=$2 what=$3 edit=$4
  sed -e "$edit" "$REPO/solutions/$lesson/$file" > "$COPY/exercises/$lesson/$file"
  cmp -s "$REPO/solutions/$lesson/$file" "$COPY/exercises/$lesson/$file" && { echo "$lesson: the edit changed nothing" >&2; exit 1; }
  echo "## $lesson: $what"
  (cd "$COPY" && QUEST_ROOT="$COPY" "$QUEST" run "$lesson" --no-lesson --max-tokens 2 2>/dev/null | grep -E "shapes right|^  [✓✗]" | head -6) || true
  echo
}
wrong rms-norm norm.rs "the weight left out" 's/Ok(x.multiply(&inverse_rms)?.multiply(weight)?)/Ok(x.multiply(\&inverse_rms)?)/'
wrong rope rope.rs "positions from 0 at every call (offset ignored)" 's/arange::<_, f32>(offset, offset + l, None)/arange::<_, f32>(0, l, None)/'
wrong attention attention.rs "the mask one key late" 's/arange::<_, i32>(s - l, s, None)/arange::<_, i32>(s - l + 1, s + 1, None)/'
wrong dequant-matvec matvec.rs "each group's bias left out" 's/\.add(biases.expand_dims(-1)?)?//'
wrong mlp mlp.rs "silu's x forgotten (sigmoid(gate) · up)" 's/let silu = gate.multiply(sigmoid(gate)?)?;/let silu = sigmoid(gate)?;/'
