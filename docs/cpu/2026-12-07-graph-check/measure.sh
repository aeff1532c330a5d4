#!/usr/bin/env bash
# An exercise's binary before and after its package stopped depending on mlx-sys and
# forbade `unsafe` (lab/Cargo.toml), the rest of quest as in this checkout: the binary's
# size, and the time of the rebuild `quest run` pays after each edit of the exercise
# (the rms-norm solution, a comment changed), the states alternated round by round.
#
#   flock -x /tmp/quest-cpu.lock bash docs/cpu/2026-12-07-graph-check/measure.sh > OUT.txt
#
# Then the walk's cost: walk_cost.rs built as an exercise and run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d)
cp solutions/rms-norm/norm.rs "$work/norm.rs"
cp lab/Cargo.toml "$work/after.toml"
# Before: the package as it was (mlx-sys a dependency, no lint).
python3 - "$work/after.toml" "$work/before.toml" <<'PY'
import sys
s = open(sys.argv[1]).read()
s = s.replace('anyhow.workspace = true\n', 'anyhow.workspace = true\nmlx-sys.workspace = true\n', 1)
s = s[: s.index('\n[lints.rust]')] + '\n'
open(sys.argv[2], 'w').write(s)
PY
build() { QUEST_LAB_SOURCE="$work/norm.rs" cargo build -q -p quest-lab --bin quest-lab 2>&1; }
state() { # before | after
  cp "$work/$1.toml" lab/Cargo.toml
  build # the switch itself, untimed
}
n=0
for round in $(seq "$ROUNDS"); do
  for s in before after; do
    state "$s"
    n=$((n + 1))
    echo "// edit $n" >> "$work/norm.rs"
    start=$(date +%s.%N)
    build
    end=$(date +%s.%N)
    size=$(stat -c %s target/debug/quest-lab)
    echo "$s round $round: rebuild $(echo "$end - $start" | bc) s, binary $size bytes"
  done
done
cp "$work/after.toml" lab/Cargo.toml
build
echo "# stripped (after): $(strip -o "$work/stripped" target/debug/quest-lab && stat -c %s "$work/stripped") bytes"
echo "# sections (after):"
size -A target/debug/quest-lab | sort -k2 -n -r | head -6

echo "# the walk's cost (walk_cost.rs, built as an exercise)"
QUEST_LAB_SOURCE="$PWD/docs/cpu/2026-12-07-graph-check/walk_cost.rs" cargo build -q -p quest-lab --bin quest-lab
target/debug/quest-lab
rm -rf "$work"
