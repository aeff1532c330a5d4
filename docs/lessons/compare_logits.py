# Every step's logits of each variant (argv[2:]) against the reference (reference.f32 in
# argv[1]), as the inside track's measure.sh scripts write them: the largest absolute
# difference over the vocabulary, the step it is at, the first step over the inside
# track's 1e-3, the argmax agreement. (The dequant-matvec and linear-attention results of
# 2026-12-03 were written before it printed step 1 and the first step over 1e-3.)
import json, struct, sys

out, names = sys.argv[1], sys.argv[2:]

def load(name):
    steps = len(json.load(open(f"{out}/{name}.json"))["tokens"])
    data = open(f"{out}/{name}.f32", "rb").read()
    values = struct.unpack(f"<{len(data) // 4}f", data)
    vocab = len(values) // steps
    return [values[i * vocab:(i + 1) * vocab] for i in range(steps)]

def argmax(row):
    return max(range(len(row)), key=row.__getitem__)

reference = load("reference")
print("blas:", json.load(open(f"{out}/reference.json"))["blas"])
for v in names:
    y = load(v)
    per_step = [max(abs(u - w) for u, w in zip(r, s)) for r, s in zip(reference, y)]
    agree = sum(argmax(r) == argmax(s) for r, s in zip(reference, y))
    worst = max(range(len(per_step)), key=per_step.__getitem__)
    first = next((i for i, d in enumerate(per_step) if d > 1e-3), None)
    print(f"reference vs {v}: max abs difference {max(per_step):.3e} at step {worst}, "
          f"step 0 {per_step[0]:.3e}, step 1 {per_step[1]:.3e}, first step over 1e-3: {first}, "
          f"argmax agrees at {agree}/{len(per_step)} steps")
