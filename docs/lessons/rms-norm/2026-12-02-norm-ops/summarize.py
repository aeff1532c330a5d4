# Medians of the interleaved speed rounds: decode tok/s and ms per decode step per norm.
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    _, variant, rate = line.split()[:3]
    rates.setdefault(variant, []).append(float(rate))
print("rounds:", len(next(iter(rates.values()))), "interleaved, 64 tokens each, SmolLM2-135M dense f32, CPU")
for variant, values in rates.items():
    m = statistics.median(values)
    print(f"{variant}: median {m:.2f} tok/s = {1000 / m:.1f} ms per step "
          f"(rounds {min(values):.2f}–{max(values):.2f} tok/s)")
base = statistics.median(rates["quest_pieces"])
for variant, values in rates.items():
    print(f"{variant} / quest_pieces: ×{statistics.median(values) / base:.3f}")
