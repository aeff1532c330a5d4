#!/usr/bin/env bash
# kv-cache-by-hand at a long context, run by hand (from the repository root, after
# `cargo build`): the solution (preallocated in steps of 256) and a cache that
# concatenates every step (../2026-12-07-cache-speed/), each one binary run with its own
# cache (QUEST_PIECES=yours) and with quest's (QUEST_PIECES=quest), ROUNDS (3) interleaved
# rounds, each run a new process: a prompt of about 2,000 tokens (a paragraph repeated),
# TOKENS (64) decoded; the decode rate and time to first token from each run's report
# (the exercise's own timer: run by hand, quest's clock is not on the line).
set -euo pipefail
here=docs/lessons/kv-cache-by-hand/2026-12-07-long-context
speed=docs/lessons/kv-cache-by-hand/2026-12-07-cache-speed
out=${OUT:-/tmp/kv-long}
mkdir -p "$out"
for v in preallocated concatenating; do
  QUEST_LAB_SOURCE="$(pwd)/$speed/$v.rs" cargo build -q -p quest-lab
  cp target/debug/quest-lab "$out/$v"
done
paragraph="A cache keeps the keys and values of every position a layer has seen, so that each new token reads them instead of computing them again. "
prompt="Summarize this text in one sentence. $(for _ in $(seq 1 70); do printf '%s' "$paragraph"; done)"
export QUEST_MODEL=smollm2-135m-instruct QUEST_PROMPT="$prompt" QUEST_MAX_TOKENS=${TOKENS:-64}
: > "$here/rounds.txt"
for r in $(seq 1 "${ROUNDS:-3}"); do
  for run in quest:preallocated yours:preallocated yours:concatenating; do
    pieces=${run%%:*} bin=${run#*:}
    name=$bin; [ "$pieces" = quest ] && name=quest-cache
    QUEST_PIECES=$pieces QUEST_REPORT="$out/report.json" flock -x /tmp/quest-cpu.lock "$out/$bin" > /dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], r['decode_tok_s'], r['ttft_ms'], r.get('prompt_tokens'))" \
      "$out/report.json" "$r" "$name" | tee -a "$here/rounds.txt"
  done
done
python3 - "$here/rounds.txt" <<'PY' | tee "$here/medians.txt"
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
rates, ttft = {}, {}
for _, name, tok_s, ttft_ms, _prompt in rows:
    rates.setdefault(name, []).append(float(tok_s))
    ttft.setdefault(name, []).append(float(ttft_ms))
base = statistics.median(rates["quest-cache"])
for name, r in rates.items():
    m = statistics.median(r)
    print(f"{name:<14} decode median {m:6.3f} tok/s ({min(r):.3f}-{max(r):.3f}, {len(r)} rounds)  "
          f"x{m / base:.3f} of quest's cache  time to first token median {statistics.median(ttft[name]):.0f} ms")
PY
