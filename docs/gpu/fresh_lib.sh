# What docs/gpu/fresh.sh, kept.sh and kept2.sh share (sourced, after NAME is set): the
# defaults (MODEL, TOKENS, ROUNDS), the results folder /tmp/$NAME, packed into
# $OUT/$NAME.tar.gz on exit with the progress file; `timed_run NAME ENV…`: one fresh
# `quest run mlx-path` on $MODEL, its wall time from the shell appended to its output ($N
# tokens when set, else $TOKENS); `submit_and_card`: `quest submit` of the exercise as it is,
# then the card with submit's medians and the shows-here answer its ratio gives.
set -uo pipefail
MODEL=${MODEL:-random:qwen3-8b}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-5}
o=/tmp/$NAME
rm -rf "$o"
mkdir -p "$o"
finish() {
  cp -r "$QUEST_HOME" "$o/progress" 2>/dev/null
  if [ -d "${QUEST_CACHE:-}/cuda-kernels" ]; then
    ls -la "$QUEST_CACHE/cuda-kernels" > "$o/cache-listing.txt" 2>&1
  fi
  tar czf "$OUT/$NAME.tar.gz" -C /tmp "$NAME"
}
trap finish EXIT
trap 'exit 143' TERM
step() { echo; echo "== $*"; }
timed_run() {
  local name=$1
  shift
  local start end
  start=$(date +%s.%N)
  env "$@" quest run mlx-path --no-lesson --model "$MODEL" --max-tokens "${N:-$TOKENS}" > "$o/$name.txt" 2>&1
  end=$(date +%s.%N)
  echo "wall_s $(python3 -c "print(round($end - $start, 2))")" >> "$o/$name.txt"
  grep -E 'Decode|Time to first|quest.s own|wall_s|quest:' "$o/$name.txt"
}
submit_and_card() {
  quest submit mlx-path --model "$MODEL" --max-tokens "$TOKENS" --rounds "$ROUNDS" 2>&1 |
    tee "$o/flow-submit.txt" | grep -E 'round|median|✓|✗'
  local card ratio shows
  card=$(grep -o 'quest card mlx-path --before [0-9.]* --after [0-9.]*' "$o/flow-submit.txt" | head -1)
  ratio=$(grep -o '(×[0-9.]*)' "$o/flow-submit.txt" | head -1 | tr -d '(×)')
  shows=$(python3 -c "import sys; print('yes' if float(sys.argv[1] or 0) >= 1.10 else 'no')" "${ratio:-0}")
  echo "$card --answer term=fixed --answer shows-here=$shows"
  $card --answer term=fixed --answer shows-here="$shows" 2>&1 | tee "$o/flow-card.txt"
}
