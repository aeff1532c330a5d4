#!/usr/bin/env bash
# Interleaved measurement of mapped-lazy's starting code (eager lm::load) and its
# solution (lm::load_lazy), each run a fresh process:
#   docs/lessons/mapped-lazy/measure.sh <rounds> <label>
# The two binaries are built beforehand with quest's lab package:
#   QUEST_LAB_SOURCE=$PWD/exercises/mapped-lazy/decode_loop.rs cargo build --release -p quest-lab
#   cp target/release/quest-lab <bins>/ml-exercises   (and the same for solutions/ -> ml-solutions)
# BINS names that folder (default: target/release).
set -euo pipefail
rounds=$1 label=${2:-runs}
cd "$(dirname "$0")/../../.."
bins=${BINS:-target/release}
out=docs/lessons/mapped-lazy/$label
mkdir -p "$out"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "command: BINS=$bins docs/lessons/mapped-lazy/measure.sh $*"
  echo "QUEST_BLAS_THREADS=${QUEST_BLAS_THREADS:-} QUEST_WEIGHTS=${QUEST_WEIGHTS:-} QUEST_MAX_TOKENS=32"
  echo "load before: $(cut -d" " -f1-3 /proc/loadavg)"
} > "$out/ENV.txt"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="original solution"; else order="solution original"; fi
  for which in $order; do
    case $which in
      original) bin=$bins/ml-exercises ;;
      solution) bin=$bins/ml-solutions ;;
    esac
    QUEST_MAX_TOKENS=32 "$bin" > "$out/round$r-$which.txt"
    echo "round $r $which: $(grep '^load ' "$out/round$r-$which.txt")" >&2
  done
done
echo "load after: $(cut -d" " -f1-3 /proc/loadavg)" >> "$out/ENV.txt"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import re, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
pat = re.compile(r"^load ([\d.]+) ms · TTFT ([\d.]+) ms · decode ([\d.]+) tok/s", re.M)
for which in ("original", "solution"):
    rows = []
    for f in sorted(out.glob(f"round*-{which}.txt")):
        m = pat.search(f.read_text())
        rows.append(tuple(float(x) for x in m.groups()))
    load, ttft, tok = (statistics.median(c) for c in zip(*rows))
    sums = statistics.median(a + b for a, b, _ in rows)
    print(f"{which:9} runs {len(rows)}  median load {load:7.1f} ms  TTFT {ttft:7.1f} ms  "
          f"load+TTFT {sums:7.1f} ms  decode {tok:5.2f} tok/s")
    for r in rows:
        print(f"            load {r[0]:7.1f}  TTFT {r[1]:7.1f}  sum {r[0]+r[1]:7.1f}  decode {r[2]:5.2f}")
PY
