# Medians of speed-rounds.txt (round, variant, decode tok/s, weights, bytes a step) and
# each variant's ratio to greedy's and to quest's sampler's: python3 summarize.py speed-rounds.txt
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
rates = {}
for _, v, tok_s, held, nbytes in rows:
    rates.setdefault(v, (held, int(nbytes), []))[2].append(float(tok_s))
greedy = statistics.median(rates["greedy"][2])
quest = statistics.median(rates["quest-sampler"][2])
for v, (held, nbytes, r) in rates.items():
    m = statistics.median(r)
    print(f"{v:<13} {held:<8} {nbytes / 1e6:7.1f} MB of weights a step  median {m:6.2f} tok/s "
          f"({len(r)} rounds, {min(r):.2f}-{max(r):.2f})  ×{m / greedy:.3f} greedy  ×{m / quest:.3f} quest's sampler")
