# Every step's logits of each variant against quest's own pieces (reference.f32): the
# largest absolute difference over the vocabulary, the step it is at, the argmax agreement.
import json, struct, sys

out = sys.argv[1]

def load(name):
    steps = len(json.load(open(f"{out}/{name}.json"))["tokens"])
    data = open(f"{out}/{name}.f32", "rb").read()
    values = struct.unpack(f"<{len(data) // 4}f", data)
    vocab = len(values) // steps
    return [values[i * vocab:(i + 1) * vocab] for i in range(steps)]

def argmax(row):
    return max(range(len(row)), key=row.__getitem__)

reference = load("reference")
print("blas (reference):", json.load(open(f"{out}/reference.json"))["blas"])
print("blas (haswell runs):", json.load(open(f"{out}/solution-haswell.json"))["blas"])
pairs = [("reference", v) for v in ["solution", "other_order", "quest_pieces-haswell",
         "solution-haswell", "other_order-haswell", "no_eps", "start"]]
pairs.append(("solution-haswell", "quest_pieces-haswell"))
for a, b in pairs:
    x, y = (reference if a == "reference" else load(a)), load(b)
    per_step = [max(abs(u - w) for u, w in zip(r, s)) for r, s in zip(x, y)]
    agree = sum(argmax(r) == argmax(s) for r, s in zip(x, y))
    worst = max(range(len(per_step)), key=per_step.__getitem__)
    print(f"{a} vs {b}: max abs difference {max(per_step):.3e} at step {worst}, "
          f"step 0 {per_step[0]:.3e}, argmax agrees at {agree}/{len(per_step)} steps")
