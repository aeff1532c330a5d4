# Per-layer hidden states of two runs (QUEST_LAYERS files) and their logits
# (QUEST_LOGITS files), teacher-forced on the same tokens: for each step and layer, the
# largest difference as a share of the reference's largest value there, against the
# limit `quest submit` uses to name the first layer apart (the lesson's logits tolerance
# over that step's largest logit). Standard library only.
import array, struct, sys

def layers(path):
    b = open(path, "rb").read()
    n_layers, width = struct.unpack("<II", b[:8])
    a = array.array("f"); a.frombytes(b[8:])
    steps = len(a) // (n_layers * width)
    return [[a[(s * n_layers + l) * width:(s * n_layers + l + 1) * width] for l in range(n_layers)]
            for s in range(steps)]

def logits(path, steps):
    a = array.array("f"); a.frombytes(open(path, "rb").read())
    v = len(a) // steps
    return [a[i * v:(i + 1) * v] for i in range(steps)]

ref_dir, other, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])
ref = layers(f"{ref_dir}/layers-reference.f32"); mine = layers(f"{ref_dir}/layers-{other}.f32")
ref_logits = logits(f"{ref_dir}/logits-reference.f32", len(ref))
mine_logits = logits(f"{ref_dir}/logits-{other}.f32", len(ref))
gap = max(max(abs(x - y) for x, y in zip(a, b)) for a, b in zip(ref_logits, mine_logits))
print(f"{other}: {len(ref)} steps, {len(ref[0])} layers; largest logit difference {gap:.3e}")
worst, first = (0.0, None), None
for step in range(len(ref)):
    limit = tolerance / max(abs(v) for v in ref_logits[step])
    for layer in range(len(ref[step])):
        largest = max(abs(v) for v in ref[step][layer])
        by = max(abs(x - y) for x, y in zip(ref[step][layer], mine[step][layer]))
        share = by / largest / limit
        if share > worst[0]:
            worst = (share, (step, layer))
        if first is None and share > 1:
            first = (step, layer, by / largest, limit)
print(f"  worst layer difference: {worst[0]:.3f} of the limit, at (step, layer) {worst[1]}")
print(f"  first over the limit (step, layer, relative, limit): {first}")
