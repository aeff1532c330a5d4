#!/usr/bin/env bash
# `quest bench mlx-path` on random:qwen3-8b, the build before (quest-before, with the
# exercise binaries prebuilt from the same commit) and the build after (quest, with its
# own), one process each, alternated ROUNDS times (default 3), TOKENS tokens (64), on the
# device machine inside docs/gpu/device.sh:
#
#   bash .gpu/<N>/device.sh run 'PREBUILT_BEFORE=… bash docs/gpu/2026-12-06-qmv-applied/ab.sh'
#
# Each bench runs the lesson's loops (the starting code, the solution, the exercise as it
# is, the exercise on MLX's kernels) and mlx-lm's hand loop and generate_step, after a
# warm-up. Rounds FIRST (default 1) to FIRST + ROUNDS - 1: a later call on the same warm
# machine goes on where the last stopped. Outputs: /tmp/ab/{before,after}-<round>.txt and
# their JSON folders, ab.txt, ab-medians.txt (the medians of every round there so far),
# copied to $OUT/ab.
set -uo pipefail
R=${ROUNDS:-3}
FIRST=${FIRST:-1}
T=${TOKENS:-64}
O=/tmp/ab
mkdir -p "$O"
for i in $(seq "$FIRST" $((FIRST + R - 1))); do
  for way in before after; do
    if [ $way = before ]; then bin=quest-before pb=${PREBUILT_BEFORE:?}; else bin=quest pb=$QUEST_PREBUILT; fi
    start=$(date +%s)
    QUEST_PREBUILT=$pb QUEST_PEER_PYTHON=python3 timeout "${LIMIT:-240}" "$bin" bench mlx-path \
      --model random:qwen3-8b --max-tokens "$T" --rounds 1 --out "$O/$way-$i" > "$O/$way-$i.txt" 2>&1
    echo "-- round $i $way ($bin, rc $?, $(( $(date +%s) - start )) s)"
    grep -E "solution|generate_step|bandwidth" "$O/$way-$i.txt"
  done
done 2>&1 | tee -a "$O/ab.txt"
python3 - "$O" <<'PY' | tee "$O/ab-medians.txt"
import glob, re, statistics, sys
o = sys.argv[1]
rows = {}
for way in ("before", "after"):
    for path in sorted(glob.glob(f"{o}/{way}-*.txt")):
        text = open(path).read()
        r = rows.setdefault(way, {"quest": [], "mlx-lm": [], "bw": [], "mb": []})
        m = re.search(r"^Rust: the lesson's solution\s+([\d.]+)", text, re.M)
        g = re.search(r"^mlx-lm generate_step\s+([\d.]+)", text, re.M)
        b = re.search(r"bytes per token: ([\d.]+) MB weights \+ ([\d.]+) MB KV .*bandwidth ([\d.]+) GB/s", text)
        if m and g and b:
            r["quest"].append(float(m.group(1)))
            r["mlx-lm"].append(float(g.group(1)))
            r["mb"].append(float(b.group(1)))
            r["bw"].append(float(b.group(3)))
med = lambda v: statistics.median(v) if v else float("nan")
print(f"{'build':<8} {'rounds':>6} {'quest tok/s':>12} {'min-max':>15} {'mlx-lm tok/s':>13} {'x mlx-lm':>9} {'copy GB/s':>10} {'MB/token':>9} {'% of copy':>10}")
for way, r in rows.items():
    q, g, bw, mb = med(r["quest"]), med(r["mlx-lm"]), med(r["bw"]), med(r["mb"])
    span = f"{min(r['quest']):.2f}-{max(r['quest']):.2f}" if r["quest"] else "-"
    print(f"{way:<8} {len(r['quest']):>6} {q:>12.2f} {span:>15} {g:>13.2f} {q / g:>9.2f} {bw:>10.1f} {mb:>9.1f} {100 * q * mb / 1e3 / bw:>10.1f}")
if all(rows.get(w, {}).get("quest") for w in ("before", "after")):
    print(f"after / before: x{med(rows['after']['quest']) / med(rows['before']['quest']):.3f}")
print("quest tok/s: the lesson's solution (the pipelined loop); mlx-lm: generate_step, in the same process's rounds")
print("% of copy: tok/s x the weights' bytes / the copy bandwidth quest measured in that process (median), as the targets count it")
PY
mkdir -p "$OUT/ab" && cp -r "$O"/. "$OUT/ab/"
