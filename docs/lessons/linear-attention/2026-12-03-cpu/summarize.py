# Medians of speed-rounds.txt (round, pieces, decode tok/s, TTFT ms, load ms) and yours
# over quest's: python3 summarize.py speed-rounds.txt
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
medians = {}
for v in ["quest", "yours"]:
    rates = [float(r[2]) for r in rows if r[1] == v]
    medians[v] = statistics.median(rates)
    print(f"{v:<6} pieces: median {medians[v]:.2f} tok/s ({len(rates)} rounds, {min(rates):.2f}-{max(rates):.2f})")
print(f"yours / quest's: ×{medians['yours'] / medians['quest']:.3f}")
