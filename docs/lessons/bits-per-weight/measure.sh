#!/usr/bin/env bash
# Interleaved measurement of SmolLM2-135M in several weight layouts, each run a fresh
# process of one binary (docs/lessons/bits-per-weight/layouts.rs: the lesson's solution
# with the layout read from BITS_LAYOUT):
#   docs/lessons/bits-per-weight/measure.sh <rounds> <label> [layouts…]
# Built beforehand with quest's lab package, in release:
#   QUEST_LAB_SOURCE=$PWD/docs/lessons/bits-per-weight/layouts.rs cargo build --release -p quest-lab
#   cp target/release/quest-lab <bins>/bits-layouts
# BINS names that folder (default: target/release, binary quest-lab).
set -euo pipefail
rounds=$1 label=$2
shift 2
layouts=("${@:-dense q8-g32 q4-g32}")
read -r -a layouts <<< "${layouts[*]}"
cd "$(dirname "$0")/../../.."
bin=${BINS:+$BINS/bits-layouts}
bin=${bin:-target/release/quest-lab}
out=docs/lessons/bits-per-weight/$label
mkdir -p "$out"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "command: BINS=${BINS:-} docs/lessons/bits-per-weight/measure.sh $rounds $label ${layouts[*]}"
  echo "QUEST_BLAS_THREADS=${QUEST_BLAS_THREADS:-} QUEST_WEIGHTS=${QUEST_WEIGHTS:-} QUEST_MAX_TOKENS=32"
  echo "load before: $(cut -d" " -f1-3 /proc/loadavg)"
} > "$out/ENV.txt"
n=${#layouts[@]}
for r in $(seq 1 "$rounds"); do
  # Rotate the order each round, so no layout always runs first.
  for i in $(seq 0 $((n - 1))); do
    layout=${layouts[$(( (i + r - 1) % n ))]}
    BITS_LAYOUT=$layout QUEST_MAX_TOKENS=32 "$bin" > "$out/round$r-$layout.txt"
    echo "round $r $layout: $(grep '^load ' "$out/round$r-$layout.txt")" >&2
  done
done
echo "load after: $(cut -d" " -f1-3 /proc/loadavg)" >> "$out/ENV.txt"
python3 - "$out" "${layouts[@]}" <<'PY' | tee "$out/summary.txt"
import re, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
pat = re.compile(r"^load ([\d.]+) ms · TTFT ([\d.]+) ms · decode ([\d.]+) tok/s · (\S+) weights, (\d+) MB per token", re.M)
rows = {}
for layout in sys.argv[2:]:
    runs = []
    for f in sorted(out.glob(f"round*-{layout}.txt")):
        m = pat.search(f.read_text())
        runs.append(m.groups())
    rows[layout] = runs
base = statistics.median(float(r[2]) for r in rows[sys.argv[2]])
print(f"{'layout':8} {'held as':10} {'MB/token':>8} {'load ms':>8} {'TTFT ms':>8} {'tok/s':>7} {'vs first':>8}  runs (tok/s)")
for layout, runs in rows.items():
    load, ttft, tok = (statistics.median(float(r[i]) for r in runs) for i in range(3))
    print(f"{layout:8} {runs[0][3]:10} {runs[0][4]:>8} {load:8.0f} {ttft:8.0f} {tok:7.2f} {tok / base:7.2f}x  "
          + " ".join(f"{float(r[2]):.2f}" for r in runs))
PY
