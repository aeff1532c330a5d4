"""Summarize docs/lessons/<lesson>/<label>/round*-*.txt: per run and medians.

Per run (wall clock, and the process CPU time where the run printed it): TTFT, decode tok/s, ms per token (mean of the per-token times after the first
token) and its growth per 100 tokens (least-squares slope of the per-token times against
the token's index, times 100). Writes summary.json beside the runs.
"""
import json, pathlib, re, statistics, sys

out = pathlib.Path(sys.argv[1])
runs = {}
for f in sorted(out.glob("round*-*.txt")):
    m = re.match(r"round(\d+)-(\w+)\.txt", f.name)
    r, which = int(m[1]), m[2]
    rec = None
    for line in f.read_text().splitlines():
        if line.startswith("PER_TOKEN "):
            rec = json.loads(line[len("PER_TOKEN "):])
        elif line.startswith("RESULT ") and rec is None:
            rec = json.loads(line[len("RESULT "):])
    row = {"round": r, "ttft_ms": rec["ttft_ms"], "decode_tok_s": rec["decode_tok_s"],
           "tokens": rec["tokens"], "prompt_tokens": rec["prompt_tokens"]}
    def fit(ms):
        n = len(ms)
        xs = list(range(n))
        mx, my = sum(xs) / n, sum(ms) / n
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ms)) / den if den else 0.0
        return my, slope * 100
    ms = rec.get("per_token_ms")
    if ms:
        mean, growth = fit(ms)
        row.update(ms_per_token=mean, growth_ms_per_100=growth,
                   first_ms=ms[0], last_ms=ms[-1], per_token_ms=ms)
    cpu = rec.get("per_token_cpu_ms")
    if cpu:
        mean, growth = fit(cpu)
        row.update(cpu_ms_per_token=mean, cpu_growth_ms_per_100=growth,
                   first_cpu_ms=cpu[0], last_cpu_ms=cpu[-1], per_token_cpu_ms=cpu)
    runs.setdefault(which, []).append(row)

summary = {}
for which, rows in runs.items():
    s = {"runs": len(rows)}
    for key in ["ttft_ms", "decode_tok_s", "ms_per_token", "growth_ms_per_100", "first_ms", "last_ms",
                "cpu_ms_per_token", "cpu_growth_ms_per_100", "first_cpu_ms", "last_cpu_ms"]:
        vals = [row[key] for row in rows if key in row]
        if vals:
            s[key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    summary[which] = s
toks = {w: rows[0]["tokens"] for w, rows in runs.items()}
same = {w: all(r["tokens"] == rows[0]["tokens"] for r in rows) for w, rows in runs.items()}
if "original" in toks and "solution" in toks:
    a, b = toks["original"], toks["solution"]
    first_diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    summary["tokens"] = {"each_code_repeats": same, "equal": a == b, "first_difference_at": first_diff,
                         "count": [len(a), len(b)]}
(out / "summary.json").write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
for which in ["original", "solution"]:
    if which not in summary: continue
    s = summary[which]
    parts = [f"{which:9}"]
    for key, fmt in [("ttft_ms", "TTFT {:.0f} ms"), ("decode_tok_s", "decode {:.2f} tok/s"),
                     ("ms_per_token", "{:.1f} ms/token"), ("growth_ms_per_100", "growth {:+.1f} ms per 100 tokens"),
                     ("first_ms", "first {:.1f} ms"), ("last_ms", "last {:.1f} ms"),
                     ("cpu_ms_per_token", "CPU {:.1f} ms/token"), ("cpu_growth_ms_per_100", "CPU growth {:+.1f} ms per 100 tokens"),
                     ("first_cpu_ms", "CPU first {:.1f} ms"), ("last_cpu_ms", "CPU last {:.1f} ms")]:
        if key in s:
            parts.append(fmt.format(s[key]["median"]) + " ({:.1f}–{:.1f})".format(s[key]["min"], s[key]["max"]))
    print(" · ".join(parts))
if "tokens" in summary:
    print("tokens:", json.dumps(summary["tokens"]))
