# Medians of the interleaved speed rounds (speed-rounds.txt: round, variant, tok/s, weight
# bytes a step reads, tokens, BLAS), and the MLP's share of a step: in bytes, from the
# reports' weight bytes, against in time, from the medians.
import statistics, sys
rates, weight_bytes, blas = {}, {}, set()
for line in open(sys.argv[1]):
    _, variant, rate, nbytes, _, lib = line.split(maxsplit=5)
    rates.setdefault(variant, []).append(float(rate))
    weight_bytes[variant] = int(nbytes)
    blas.add(lib.strip())
print("rounds:", len(next(iter(rates.values()))), "interleaved, 64 tokens each, dense f32, CPU,", ", ".join(sorted(blas)))
ms = {}
for variant, values in rates.items():
    m = statistics.median(values)
    ms[variant] = 1000 / m
    print(f"{variant}: median {m:.2f} tok/s = {ms[variant]:.1f} ms per step, "
          f"{weight_bytes[variant]} weight bytes a step (rounds {min(values):.2f}–{max(values):.2f} tok/s)")
base = statistics.median(rates["quest_pieces"])
print(f"solution / quest_pieces: ×{statistics.median(rates['solution']) / base:.3f}")
print(f"random_1536 / quest_pieces: ×{statistics.median(rates['random_1536']) / base:.3f}")
full, narrow = "random_1536", "random_32"
byte_share = (weight_bytes[full] - weight_bytes[narrow]) / weight_bytes[full]
time_share = (ms[full] - ms[narrow]) / ms[full]
saved_bytes = weight_bytes[full] - weight_bytes[narrow]
saved_ms = ms[full] - ms[narrow]
print(f"MLP 1536 -> 32: {saved_bytes} bytes fewer a step = {100 * byte_share:.1f} % of the step's weight bytes")
print(f"MLP 1536 -> 32: {saved_ms:.1f} ms fewer a step = {100 * time_share:.1f} % of the step's time")
print(f"those bytes over that time: {saved_bytes / saved_ms / 1e6:.2f} GB/s")
bw = saved_bytes / saved_ms * 1e3
print(f"fixed term by the two points (time minus bytes over that rate): {ms[full] - weight_bytes[full] / bw * 1e3:.1f} ms")
