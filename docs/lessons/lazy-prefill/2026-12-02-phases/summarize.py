"""Medians of rounds.jsonl: the first prefill of each fresh process (what TTFT measures)
and the warmed ones after it, phase by phase.  python3 summarize.py > summary.txt"""
import json
import statistics

rows = [json.loads(line) for line in open("rounds.jsonl")]


def med(mode, key, first):
    values = [r[key] for r in rows if r["mode"] == mode and "attempt" in r and (r["attempt"] == 0) == first]
    return statistics.median(values), min(values), max(values)


def show(label, value):
    m, lo, hi = value
    print(f"  {label:<44} {m:8.1f} ms   ({lo:.1f}–{hi:.1f})")


for first, title in [(True, "first prefill of a fresh process (5 processes each)"), (False, "warmed: attempts 2–4 of each process (15 each)")]:
    print(title)
    show("one call: record the graph", med("one", "record_ms", first))
    show("one call: evaluate, argmax, first token", med("one", "eval_ms", first))
    show("one call: total", med("one", "total_ms", first))
    show("split: record 41 positions", med("split", "record_ms", first))
    show("split: evaluate the caches", med("split", "caches_ms", first))
    show("split: last position, head, first token", med("split", "last_ms", first))
    show("split: total", med("split", "total_ms", first))
    one, split = med("one", "total_ms", first)[0], med("split", "total_ms", first)[0]
    print(f"  split − one call: {split - one:+.1f} ms\n")
steps = [r["decode_step_ms"] for r in rows if "decode_step_ms" in r]
print(f"one decode step after the prefill (every process): median {statistics.median(steps):.1f} ms ({min(steps):.1f}–{max(steps):.1f})")
tokens = {r["token"] for r in rows if "token" in r}
print(f"first token in every run: {sorted(tokens)}")
