# What docs/gpu/fresh.sh, kept.sh and kept2.sh share (sourced, after NAME is set): the
# results folder /tmp/$NAME, packed into $OUT/$NAME.tar.gz on exit with the progress file,
# and `timed_run NAME ENV…`: one fresh `quest run mlx-path` on $MODEL, its wall time from
# the shell appended to its output ($N tokens when set, else $TOKENS).
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
