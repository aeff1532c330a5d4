#!/usr/bin/env bash
# The GPU figures of session 5 (2026-12-01) on the H200: quest's decode kernels for the
# host cost per layer (issue #12: lm::qkv, lm::add_norm), in the last call of
# docs/gpu/carry.sh's pipeline (inside docs/gpu/device.sh: quest's CUDA build on PATH, a
# course copy as QUEST_ROOT, SmolLM2 carried):
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session5.sh check kernels'
#   bash .gpu/<N>/device.sh run 'bash docs/gpu/session5.sh alt'
# Parts (each under `timeout`, outputs in $OUT/session5-<parts>.tar.gz):
#   check    each kernel of quest's against MLX's ops on SmolLM2's real weights
#            (docs/gpu/qmv_check.sh with KERNEL=qkv, then addnorm), and mlx-path with all
#            of them on: the text must name Paris
#   kernels  `quest qmv --kernel K --shapes all` for K in KERNELS (default "qkv addnorm"):
#            speed interleaved in one process, logits compared step by step (the Qwen3
#            shapes take the q/k norm path SmolLM2 does not have)
#   alt      per shape (SHAPES, default all six) and round (ROUNDS): one `quest fit` process
#            with MLX's ops, one with quest's kernels (ON, default "QUEST_QKV=quest
#            QUEST_ADDNORM=quest"), one of mlx-lm's generate_step — alternated, so that
#            the three share the machine's state; medians at the end (alt.txt)
#   peer     `quest fit --peer --shapes all`: quest's pipelined loop and mlx-lm's
#            generate_step in one run, rounds interleaved, with QUEST_QMV=mlx then quest
#            (QMVS) and every other kernel as it is by default
#   journey  the journey lessons' exercises (prebuilt) on the real SmolLM2, 16 tokens each
set -uo pipefail
T=${TOKENS:-64}
R=${ROUNDS:-3}
o=/tmp/session5
mkdir -p "$o"
tag=$(echo "$@" | tr ' ' '-')
finish() { tar czf "$OUT/session5-$tag.tar.gz" -C /tmp session5; }
trap finish EXIT
step() { echo; echo "== $* ($(date -u +%T))"; }
for part in "$@"; do
  case $part in
    check)
      step check
      for k in qkv addnorm; do
        KERNEL=$k OUT=$o timeout 200 bash docs/gpu/qmv_check.sh 2>&1 | tail -12
        echo "qmv_check.sh KERNEL=$k: rc=${PIPESTATUS[0]}"
      done 2>&1 | tee "$o/check.txt"
      QUEST_QKV=quest QUEST_ADDNORM=quest QUEST_QMV=quest timeout 60 quest run mlx-path --no-lesson \
        --max-tokens 16 2>&1 | grep -E "^(Output|Model|Decode)" | tee -a "$o/check.txt"
      ;;
    kernels)
      step kernels
      for k in ${KERNELS:-qkv addnorm}; do
        echo "-- quest qmv --kernel $k"
        timeout 280 quest qmv --kernel "$k" --shapes all --max-tokens "$T" --rounds "$R" 2>&1 | grep -v '^quest:'
        cp target/quest-bench/qmv-$k-cuda.json "$o/" 2>/dev/null
      done 2>&1 | tee "$o/kernels.txt"
      ;;
    alt)
      step alt
      quest fit --configs > /tmp/configs.json
      PROMPT=$(python3 -c 'print(",".join(str(1 + (i * 7919) % 1000) for i in range(16)))')
      ON=${ON:-QUEST_QKV=quest QUEST_ADDNORM=quest}
      for shape in ${SHAPES:-SmolLM2-135M SmolLM2-360M Qwen3-0.6B Qwen3-1.7B Qwen3-4B Qwen3-8B}; do
        config=$(python3 -c 'import json, sys; print(json.dumps(json.load(open("/tmp/configs.json"))[sys.argv[1]]))' "$shape")
        for r in $(seq "$R"); do
          for way in mlx quest; do
            if [ $way = quest ]; then env_on=$ON; else env_on=; fi
            line=$(env $env_on timeout 60 quest fit --shapes "$shape" --max-tokens "$T" --rounds 1 2>&1 \
              | awk -v s="$shape" '$1 == s { print }' | tr '\n' ' ')
            echo "$shape round $r $way: $line"
          done
          timeout 60 python3 src/bench/peer.py --config "$config" --prompt-ids "$PROMPT" --max-tokens "$T" \
            --rounds 1 > "$o/py.json" 2>/dev/null
          python3 - "$o/py.json" "$shape" "$r" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["results"]
print(f"{sys.argv[2]} round {sys.argv[3]} mlx-lm: generate {d['generate'][0]['decode_tok_s']:.1f} hand {d['hand'][0]['decode_tok_s']:.1f}")
PY
        done
      done 2>&1 | tee "$o/alt.txt"
      python3 - "$o/alt.txt" <<'PY' | tee "$o/alt-medians.txt"
# Each quest line holds the fit row (… pipelined …) then the host row (… µs/layer): the
# pipelined tok/s is the 5th field of the first, host µs/layer the last of the second.
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) round \d+ (mlx|quest|mlx-lm): (.*)", line)
    if not m:
        continue
    shape, way, rest = m.groups()
    f = rest.split()
    r = rows.setdefault(shape, {})
    if way == "mlx-lm":
        r.setdefault("mlx-lm", []).append(float(f[1]))
    elif len(f) >= 12:
        r.setdefault(way, []).append(float(f[4]))
        r.setdefault(way + " µs", []).append(float(f[-1]))
print(f"{'shape':<14} {'MLX ops':>9} {'quest kernels':>14} {'mlx-lm':>8} {'kernels/ops':>12} {'kernels/mlx-lm':>15} {'µs/layer ops → kernels':>24}")
for shape, r in rows.items():
    med = {k: statistics.median(v) for k, v in r.items() if v}
    if not all(k in med for k in ("mlx", "quest", "mlx-lm")):
        print(shape, "incomplete", {k: len(v) for k, v in r.items()})
        continue
    print(f"{shape:<14} {med['mlx']:>9.1f} {med['quest']:>14.1f} {med['mlx-lm']:>8.1f} "
          f"{'×%.2f' % (med['quest'] / med['mlx']):>12} {'×%.2f' % (med['quest'] / med['mlx-lm']):>15} "
          f"{med.get('mlx µs', 0):>11.1f} → {med.get('quest µs', 0):.1f}")
print(f"medians of {len(next(iter(rows.values()))['mlx'])} alternated rounds per shape; tok/s of the pipelined loop / generate_step")
PY
      ;;
    peer)
      step peer
      for qmv in ${QMVS:-mlx quest}; do
        echo "-- QUEST_QMV=$qmv"
        QUEST_QMV=$qmv QUEST_PEER_PYTHON=python3 timeout 280 quest fit --peer --shapes all \
          --max-tokens "$T" --rounds "$R" 2>&1 | grep -v '^quest:'
        cp target/quest-bench/fit-cuda.json "$o/fit-peer-$qmv.json" 2>/dev/null
      done 2>&1 | tee -a "$o/peer.txt"
      ;;
    journey)
      step journey
      for lesson in mapped-lazy kv-cache mlx-path lazy-prefill; do
        echo "-- $lesson"
        timeout 90 quest run "$lesson" --no-lesson --max-tokens 16 2>&1 | grep -E "^(Output|TTFT|Decode|Model)|rror"
      done 2>&1 | tee "$o/journey.txt"
      ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
